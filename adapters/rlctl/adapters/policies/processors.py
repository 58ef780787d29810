"""Policy pre/post-processing pipelines: the torch steps, the default pair, and their files.

LeRobot saves a policy's processors as `policy_preprocessor.json` / `policy_postprocessor.json`,
each an ordered list of `{"registry_name", "config", "state_file"?}` entries, with each stateful
step's arrays in `<pipeline>_step_<i>_<registry_name>.safetensors` beside it. The framework-free
steps it writes (rename, to-batch, normalise, unnormalise, relative actions) are registered under
the same names by `rlctl.domain.processors`; this module adds the torch-bound one
(`device_processor`), builds LeRobot's default pair for a policy config, and reads and writes
the files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch
from safetensors.numpy import save_file

from rlctl.adapters.policies.errors import CheckpointError
from rlctl.adapters.policies.files import (
    inside_checkpoint,
    named_file,
    read_arrays,
    read_checkpoint_json,
)
from rlctl.adapters.policies.implementations import implementation_of
from rlctl.adapters.policies.vla import tokenizer as _tokenizer  # noqa: F401 (registers the step)
from rlctl.application.relative_actions import relative_actions_config
from rlctl.domain.errors import ConfigError, RlctlError
from rlctl.domain.frames import Transition
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.processors import (
    AbsoluteActions,
    AddBatchDimension,
    NormalizedFeature,
    Normalizer,
    NormalizerConfig,
    ProcessorPipeline,
    ProcessorStep,
    RelativeActions,
    RelativeActionsConfig,
    RenameConfig,
    RenameObservations,
    Step,
    Unnormalizer,
    register_step,
    state_key,
)

PREPROCESSOR_NAME = "policy_preprocessor"
POSTPROCESSOR_NAME = "policy_postprocessor"
DEVICE_STEP = "device_processor"

FLOAT_DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "half": torch.float16,
    "float": torch.float32,
    "double": torch.float64,
}


def _float_dtype(value: str | None) -> str | None:
    if value is not None and value not in FLOAT_DTYPES:
        raise ConfigError(
            f"unknown float_dtype {value!r}; known: {', '.join(FLOAT_DTYPES)}",
            where=DEVICE_STEP,
        )
    return value


def _device(value: Any) -> str:
    """A torch device string (`cpu`, `cuda`, `cuda:1`, `mps`...); anything else is refused."""
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, str):
        try:
            torch.device(value)
        except (RuntimeError, ValueError):
            pass
        else:
            return value
    raise ConfigError(
        f"device must be a torch device such as 'cpu', 'cuda' or 'cuda:0', found {value!r}"[:200],
        where=f"{DEVICE_STEP}.device",
        hint="the processor file is damaged or was edited: set its device_processor's device "
        "to 'cpu' or 'cuda', or save the checkpoint again",
    )


@attrs.frozen
class DeviceConfig:
    """LeRobot's `DeviceProcessorStep` config: where tensors go, and an optional float dtype."""

    device: str = attrs.field(default="cpu", converter=_device)
    float_dtype: str | None = attrs.field(default=None, converter=_float_dtype)


@register_step(DEVICE_STEP)
class DeviceStep(Step[DeviceConfig]):
    """Moves every tensor of the transition to `device` (casting floats to `float_dtype`).

    Numeric numpy arrays become tensors first, so raw observations from a simulator or a robot
    can enter a policy pipeline directly. A tensor already on a GPU stays on its GPU when the
    target is "cuda" (what a multi-GPU launcher placed is kept, as in LeRobot).
    """

    config_class = DeviceConfig

    def __init__(self, config: DeviceConfig | None = None) -> None:
        super().__init__(config)
        self.device = torch.device(self.config.device)
        dtype_name = self.config.float_dtype
        self.float_dtype = FLOAT_DTYPES[dtype_name] if dtype_name is not None else None

    def move(self, value: Any) -> Any:
        if isinstance(value, np.ndarray) and value.dtype.kind in "biufc":
            value = torch.from_numpy(value)
        if not isinstance(value, torch.Tensor):
            return value
        keep_gpu = value.is_cuda and self.device.type == "cuda"
        if not keep_gpu and value.device != self.device:
            value = value.to(self.device, non_blocking=self.device.type == "cuda")
        if self.float_dtype is not None and value.is_floating_point():
            value = value.to(self.float_dtype)
        return value

    def __call__(self, transition: Transition) -> Transition:
        return transition.evolve(
            observation={k: self.move(v) for k, v in transition.observation.items()},
            action=self.move(transition.action),
            reward=self.move(transition.reward),
            done=self.move(transition.done),
            truncated=self.move(transition.truncated),
            complementary_data={k: self.move(v) for k, v in transition.complementary_data.items()},
        )


Stats = Mapping[str, Mapping[str, Any]]


def make_pre_post_processors(
    config: PolicyConfig,
    dataset_stats: Stats | None = None,
    *,
    rename_map: Mapping[str, str] | None = None,
    device: str | None = None,
    relative_actions: RelativeActionsConfig | None = None,
) -> tuple[ProcessorPipeline, ProcessorPipeline]:
    """LeRobot's default pair for a policy: rename -> batch -> device -> normalise, and
    unnormalise -> cpu. `dataset_stats` maps feature keys to `{"mean": ..., "std": ..., ...}`.
    A policy's own steps (its implementation's `preprocessor_steps`, e.g. SmolVLA's task newline
    and tokenizer) come after batching, where LeRobot's policy-specific factories put them; its
    `arrange_processors` then reorders both lists if it must (π0.5 normalises before tokenising).

    With relative actions (`config.use_relative_actions`, or `relative_actions` given), actions
    are learned relative to the state, in the order LeRobot's pi0 uses: ... -> device ->
    relative -> normalise, and unnormalise -> absolute -> cpu; the action statistics must then
    describe the relative actions.
    """
    norm_map = config.normalization_mapping
    if relative_actions is None:
        relative_actions = relative_actions_config(config)

    def normalizer_config(features: Mapping[str, Any]) -> NormalizerConfig:
        return NormalizerConfig(
            features={k: NormalizedFeature(f.policy_type, f.shape) for k, f in features.items()},
            norm_map=norm_map,
        )

    stats = _numpy_stats(dataset_stats or {})
    all_features = {**config.input_features, **config.output_features}
    pre_steps: list[ProcessorStep] = [
        RenameObservations(RenameConfig(dict(rename_map or {}))),
        AddBatchDimension(),
        *policy_preprocessor_steps(config),
        DeviceStep(DeviceConfig(device or config.device or "cpu")),
    ]
    post_steps: list[ProcessorStep] = [
        Unnormalizer(normalizer_config(config.output_features), stats)
    ]
    if relative_actions is not None:
        pre_steps.append(RelativeActions(relative_actions))
        post_steps.append(AbsoluteActions(relative_actions))
    pre_steps.append(Normalizer(normalizer_config(all_features), stats))
    post_steps.append(DeviceStep(DeviceConfig("cpu")))
    pre_steps, post_steps = implementation_of(type(config)).arrange_processors(
        config, pre_steps, post_steps
    )
    return (
        ProcessorPipeline(pre_steps, name=PREPROCESSOR_NAME),
        ProcessorPipeline(post_steps, name=POSTPROCESSOR_NAME),
    )


def policy_preprocessor_steps(config: PolicyConfig) -> list[ProcessorStep]:
    """The steps `config`'s model class adds to its pre-processor (none for most policies)."""
    return implementation_of(type(config)).preprocessor_steps(config)


def _numpy_stats(stats: Stats) -> dict[str, dict[str, np.ndarray]]:
    def as_numpy(value: Any) -> np.ndarray:
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
        return np.asarray(value, dtype=np.float32)

    return {key: {name: as_numpy(v) for name, v in per.items()} for key, per in stats.items()}


def sanitized_name(name: str) -> str:
    """The pipeline name as LeRobot puts it in file names."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name.lower())


def read_pipeline(
    folder: Path, name: str, *, device: str | None = None, keep_cpu: bool = False
) -> ProcessorPipeline:
    """Rebuild the pipeline saved as `<folder>/<name>.json` (and its state files).

    `device`, when given, replaces the device of the pipeline's device steps, so a checkpoint
    trained on a GPU can run on a CPU; with `keep_cpu`, a step saved with "cpu" keeps it (a
    post-processor's, which hands the actions back on the CPU as LeRobot's does).
    """
    path = inside_checkpoint(folder, folder / f"{name}.json", where=str(folder / f"{name}.json"))
    data = read_checkpoint_json(path)
    state: dict[str, dict[str, np.ndarray]] = {}
    steps = data.get("steps") if isinstance(data, dict) else None
    for index, entry in enumerate(steps if isinstance(steps, list) else []):
        if not isinstance(entry, dict):
            continue
        config = entry.get("config")
        if config is not None and not isinstance(config, dict):
            raise CheckpointError(
                f"a step's config must be a JSON object, found {type(config).__name__} "
                f"{json.dumps(config)[:80]}",
                where=f"{path}: steps[{index}].config",
                hint="the file is damaged or was edited: save or download the checkpoint again",
            )
        saved_device = (config or {}).get("device")
        if entry.get("registry_name") == DEVICE_STEP and saved_device is not None:
            try:  # a damaged value is refused even where `device` replaces it
                _device(saved_device)
            except ConfigError as err:
                where = f"{path}: steps[{index}].config.device"
                raise CheckpointError(err.message, where=where, hint=err.hint) from err
        keeps_cpu = keep_cpu and saved_device == "cpu"
        if device is not None and entry.get("registry_name") == DEVICE_STEP and not keeps_cpu:
            entry["config"] = {**(config or {}), "device": device}
        if entry.get("state_file") is not None:
            state_file = named_file(
                folder, entry["state_file"], referenced_by=path, key=f"steps[{index}].state_file"
            )
            key = state_key(index, str(entry.get("registry_name")))
            state[key] = read_arrays(state_file, referenced_by=path)
    try:
        return ProcessorPipeline.from_data(data, state)
    except RlctlError as err:
        where = f"{path}: {err.where}" if err.where else str(path)
        raise CheckpointError(err.message, where=where, hint=err.hint) from err


def write_pipeline(pipeline: ProcessorPipeline, folder: Path) -> list[Path]:
    """Write `<name>.json` and one safetensors file per stateful step, as LeRobot names them."""
    name = sanitized_name(pipeline.name)
    data = pipeline.to_data()
    state = pipeline.state()
    written: list[Path] = []
    for index, entry in enumerate(data["steps"]):
        key = state_key(index, entry["registry_name"])
        if key in state:
            filename = f"{name}_{key}.safetensors"
            arrays = {k: np.ascontiguousarray(v) for k, v in state[key].items()}
            save_file(arrays, str(folder / filename))
            entry["state_file"] = filename
            written.append(folder / filename)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    written.append(path)
    return written
