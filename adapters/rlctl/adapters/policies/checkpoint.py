"""Read and write LeRobot's `pretrained_model` folder: the checkpoint format both tools share.

    config.json                      the policy config, `{"type": "act", ...}`
    model.safetensors                the model's state dict (LeRobot's key names)
    policy_preprocessor.json         the processors, with their state files beside them
    policy_postprocessor.json

Weights are read with safetensors only: a checkpoint never runs code (no pickle, no
`torch.load`), and reads nothing outside its folder (`files.named_file`). Every failure is a
`CheckpointError` whose `where` is the file at fault.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import structlog
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from rlctl.adapters.policies.base import PolicyModel, policy_class
from rlctl.adapters.policies.config_file import read_config_data, structure_config
from rlctl.adapters.policies.errors import (
    CheckpointError,
    CheckpointMismatch,
    CheckpointNotFound,
    UnknownPolicyType,
)
from rlctl.adapters.policies.files import inside_checkpoint
from rlctl.adapters.policies.processors import (
    POSTPROCESSOR_NAME,
    PREPROCESSOR_NAME,
    read_pipeline,
    write_pipeline,
)
from rlctl.adapters.policies.vla.compute_dtype import use_compute_dtype
from rlctl.adapters.policies.vla.loading import AssignsOnMeta
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import PolicyConfig, lerobot_config_data
from rlctl.domain.processors import (
    ProcessorPipeline,
    RenameObservations,
    pair_absolute_with_relative,
)
from rlctl.domain.run_layout import MODEL_FILE, POLICY_CONFIG_FILE, policy_folder_candidates

CONFIG_FILE = POLICY_CONFIG_FILE
# Bookkeeping of BatchNorm in training; harmless to lack in a checkpoint.
_OPTIONAL_KEY_SUFFIXES = ("num_batches_tracked",)
_LISTED_KEYS = 8

log = structlog.get_logger(__name__)


def checkpoint_folder(location: str | os.PathLike[str]) -> Path:
    """The folder holding `config.json`; a training checkpoint's `pretrained_model/` and a
    run's last checkpoint are found."""
    folder = Path(location).expanduser()
    if not folder.is_dir():
        raise CheckpointNotFound(
            "no policy checkpoint folder here",
            where=str(folder),
            hint="give the folder that holds config.json and model.safetensors "
            "(for a training run: <output_dir>/checkpoints/last/pretrained_model)",
        )
    for candidate in policy_folder_candidates(folder):
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    return folder


def read_config(folder: Path) -> PolicyConfig:
    inside_checkpoint(folder, folder / CONFIG_FILE, where=str(folder / CONFIG_FILE))
    return structure_config(read_config_data(folder), folder / CONFIG_FILE)


def write_config(config: PolicyConfig, folder: Path) -> Path:
    path = folder / CONFIG_FILE
    path.write_text(json.dumps(lerobot_config_data(config), indent=4) + "\n", encoding="utf-8")
    return path


def read_model(
    folder: Path,
    config: PolicyConfig,
    device: str | torch.device = "cpu",
    *,
    compute_dtype: str | None = None,
) -> PolicyModel:
    """The model `config` describes, with the weights of `model.safetensors`, in eval mode, on
    `device`, computing in the dtype `compute_dtype` gives there (None: the config's own; see
    `vla.compute_dtype`)."""
    try:
        cls = policy_class(config)
    except ConfigError as err:
        raise UnknownPolicyType(
            err.message, where=str(folder / CONFIG_FILE), hint=err.hint
        ) from err
    weights = inside_checkpoint(folder, folder / MODEL_FILE, where=str(folder / MODEL_FILE))
    # Built on the meta device first (shapes, no memory), the model is checked against the
    # weights file's header: a config.json whose sizes do not match the weights (an edited
    # chunk_size of 10**7) is refused before a byte is allocated for it.
    if issubclass(cls, AssignsOnMeta):  # built on the meta device already, assigned the file's
        model = _build(cls, config, folder)
    else:
        empty = _build(cls, config, folder, on_meta=True)
        if empty is not None:
            check_weights_file(empty, weights)
            del empty
        model = _build(cls, config, folder)
    assert model is not None
    load_weights(model, weights)
    model = model.to(device).eval()
    use_compute_dtype(model, compute_dtype or config.compute_dtype, device)
    return model


def _build(
    cls: type[PolicyModel], config: PolicyConfig, folder: Path, *, on_meta: bool = False
) -> PolicyModel | None:
    """The model `config` describes (without backbone weights): on the meta device with
    `on_meta`, None there for a type that computes with its weights while it is built. A
    config it cannot be built from is a `CheckpointError` naming config.json."""
    where = folder / CONFIG_FILE
    try:
        if not on_meta:
            return cls(config, load_backbone_weights=False)
        with torch.device("meta"):
            return cls(config, load_backbone_weights=False)
    except ConfigError as err:
        raise CheckpointError(
            err.message, where=f"{where}: {err.where or ''}", hint=err.hint
        ) from err
    except (RuntimeError, NotImplementedError) as err:
        if on_meta:  # a computation on the meta device: built whole, checked as it loads
            return None
        raise _unbuildable(where, err) from err
    except (MemoryError, ValueError, TypeError, OverflowError, SystemError) as err:
        raise _unbuildable(where, err) from err


def _unbuildable(where: Path, err: BaseException) -> CheckpointError:
    return CheckpointError(
        f"the model config.json describes cannot be built: {type(err).__name__}: "
        f"{str(err).splitlines()[0][:200] if str(err) else ''}",
        where=str(where),
        hint="a size or rate in config.json is out of range (edited or damaged): use the "
        "config.json saved with model.safetensors, or download the checkpoint again",
    )


def load_weights(model: PolicyModel, path: Path) -> None:
    """Load a safetensors state dict, refusing (with the keys named) anything that does not fit."""
    _check_present(path)
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise _unreadable(path, err) from err
    _check_fits(_shapes(untied_state(model, keep=set(state))), _shapes(state), path)
    model.load_state_dict(state, strict=False)


def check_weights_file(model: nn.Module, path: Path) -> None:
    """Refuse, as `load_weights` does, a weights file whose keys or shapes do not fit `model`,
    from the file's header alone (no tensor read; `model` may be on the meta device)."""
    _check_present(path)
    try:
        with safe_open(str(path), framework="pt", device="cpu") as file:
            names = file.keys()
            found = {name: tuple(file.get_slice(name).get_shape()) for name in names}
    except (SafetensorError, OSError, ValueError) as err:
        raise _unreadable(path, err) from err
    _check_fits(_shapes(untied_state(model, keep=set(found))), found, path)


def _check_present(path: Path) -> None:
    if not path.is_file():
        raise CheckpointNotFound(
            "the model weights are missing",
            where=str(path),
            hint="copy the whole checkpoint folder; model.safetensors sits beside config.json",
        )


def _unreadable(path: Path, err: Exception) -> CheckpointError:
    return CheckpointError(
        f"cannot read the weights: {err}",
        where=str(path),
        hint="the file is damaged or not safetensors: save or download the checkpoint again",
    )


def _shapes(state: Mapping[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(tensor.shape) for name, tensor in state.items()}


def untied_state(model: nn.Module, keep: set[str] | None = None) -> dict[str, torch.Tensor]:
    """The state dict with each tied tensor (one parameter under several names, such as a shared
    token embedding) once, as safetensors' `save_model` writes it for LeRobot: under the name
    that sorts first, or the one of `keep` (the names a file holds) when it has one."""
    state = model.state_dict(keep_vars=True)
    names: dict[int, list[str]] = {}
    for name, tensor in state.items():
        names.setdefault(id(tensor), []).append(name)
    out: dict[str, torch.Tensor] = {}
    for group in names.values():
        chosen = sorted(group)[0]
        if keep is not None:
            chosen = next((n for n in sorted(group) if n in keep), chosen)
        out[chosen] = state[chosen]
    return {name: out[name] for name in state if name in out}


def _check_fits(
    expected: Mapping[str, Sequence[int]], found: Mapping[str, Sequence[int]], path: Path
) -> None:
    missing = [k for k in expected if k not in found and not k.endswith(_OPTIONAL_KEY_SUFFIXES)]
    unexpected = [k for k in found if k not in expected]
    mismatched = [
        f"{k} (model {list(expected[k])}, file {list(found[k])})"
        for k in expected
        if k in found and tuple(expected[k]) != tuple(found[k])
    ]
    problems = []
    for label, keys in (
        ("shape mismatches", mismatched),
        ("keys missing from the file", missing),
        ("unexpected keys in the file", unexpected),
    ):
        if keys:
            shown = ", ".join(keys[:_LISTED_KEYS])
            more = f" and {len(keys) - _LISTED_KEYS} more" if len(keys) > _LISTED_KEYS else ""
            problems.append(f"{len(keys)} {label}: {shown}{more}")
    if problems:
        raise CheckpointMismatch(
            "the weights do not fit the model config.json describes: " + "; ".join(problems),
            where=str(path),
            hint="config.json and model.safetensors must come from the same training run; "
            "check that neither was replaced or edited",
        )


def read_processors(
    folder: Path, *, device: str | None = None, config: PolicyConfig | None = None
) -> tuple[ProcessorPipeline, ProcessorPipeline]:
    """The (pre, post) pipelines; `device` replaces the pre-processor's device, and the
    post-processor's unless that is "cpu" (where LeRobot's hands the actions back).

    The pre-processor's renames must leave every input the policy (`config`, else the folder's
    `config.json`) reads reachable: one renamed away, which no other input becomes, is refused.
    """
    preprocessor = read_pipeline(folder, PREPROCESSOR_NAME, device=device)
    postprocessor = read_pipeline(folder, POSTPROCESSOR_NAME, device=device, keep_cpu=True)
    if config is None and (folder / CONFIG_FILE).is_file():
        config = read_config(folder)
    if config is not None:
        _check_renames(preprocessor, config, folder / f"{PREPROCESSOR_NAME}.json")
    return preprocessor, pair_absolute_with_relative(preprocessor, postprocessor)


def _check_renames(pipeline: ProcessorPipeline, config: PolicyConfig, path: Path) -> None:
    """Refuse renames after which an input `config` reads can come from no observation key."""
    renames = [
        (index, step.config.rename_map)
        for index, step in enumerate(pipeline)
        if isinstance(step, RenameObservations)
    ]
    for key in config.input_features:
        sources = {key}  # the keys that become `key` after the later renames
        for index, rename_map in reversed(renames):
            needed = sources
            sources = {
                *(old for old, new in rename_map.items() if new in needed),
                *(k for k in needed if k not in rename_map),
            }
            if not sources:
                renamed = ", ".join(f"{k!r} to {rename_map[k]!r}" for k in sorted(needed))
                raise CheckpointError(
                    f"the rename_map renames {renamed}, and no observation becomes {key!r}, "
                    "an input the policy reads: the policy could never read it",
                    where=f"{path}: steps[{index}].config.rename_map",
                    hint=f"remove {key!r} from the rename_map, or map the observation that "
                    f"should feed it to {key!r} (config.json's input_features: "
                    f"{', '.join(config.input_features)})",
                )


def save_pretrained(
    folder: str | os.PathLike[str],
    model: PolicyModel,
    preprocessor: ProcessorPipeline,
    postprocessor: ProcessorPipeline,
) -> Path:
    """Write the folder LeRobot's `from_pretrained` reads; it appears whole or not at all."""
    target = Path(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{os.getpid()}.rlctl-tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        write_config(model.config, staging)
        save_file(saved_state(model), str(staging / MODEL_FILE), metadata={"format": "pt"})
        write_pipeline(preprocessor, staging)
        write_pipeline(postprocessor, staging)
        _publish(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def saved_state(model: PolicyModel) -> dict[str, torch.Tensor]:
    """The tensors `model.safetensors` holds, on the CPU: each in the dtype the checkpoint had
    (a bfloat16 model computing in float32 on a CPU without bfloat16 is saved in bfloat16)."""
    dtypes = getattr(model, "checkpoint_dtypes", {})
    return {
        name: tensor.detach().to("cpu", dtypes.get(name, tensor.dtype)).contiguous()
        for name, tensor in untied_state(model).items()
    }


def _publish(staging: Path, target: Path) -> None:
    # A folder cannot be renamed over a non-empty one: move the old one aside first.
    if not target.exists():
        staging.rename(target)
        return
    old = target.with_name(f".{target.name}.{os.getpid()}.rlctl-old")
    shutil.rmtree(old, ignore_errors=True)
    target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)
