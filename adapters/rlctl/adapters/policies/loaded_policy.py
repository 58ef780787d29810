"""A policy ready for inference: the model between its pre- and post-processor.

`load_policy_folder(path)` reads a LeRobot `pretrained_model` folder (or one rlctl saved) and
returns a `LoadedPolicy`, which serves the application's `Policy` port: raw observations in, raw
actions out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import structlog
import torch
from torch import Tensor

from rlctl.adapters.policies.base import PolicyModel, build_policy
from rlctl.adapters.policies.checkpoint import (
    checkpoint_folder,
    read_config,
    read_model,
    read_processors,
    save_pretrained,
)
from rlctl.adapters.policies.implementations import implementation_of
from rlctl.adapters.policies.processors import make_pre_post_processors
from rlctl.adapters.policies.vla.compute_dtype import use_compute_dtype
from rlctl.adapters.policies.vla.rtc import PrefixGuidance
from rlctl.application.policy_checks import check_actions, check_observation
from rlctl.application.ports.policy import Policy
from rlctl.application.ports.simulation import Simulation
from rlctl.domain.acting import ChunkedActing, Leftover
from rlctl.domain.action_chunk import ActionChunk
from rlctl.domain.errors import ConfigError, HardwareError, InvalidInput
from rlctl.domain.features import FeatureSpec
from rlctl.domain.frames import Transition
from rlctl.domain.policies import ACTION, PolicyConfig, known_policy_types, policy_config_class
from rlctl.domain.policies.rtc import CommittedActions, RTCConfig
from rlctl.domain.processors import ProcessorPipeline, RenameObservations

log = structlog.get_logger(__name__)


class LoadedPolicy:
    def __init__(
        self,
        model: PolicyModel,
        preprocessor: ProcessorPipeline,
        postprocessor: ProcessorPipeline,
        *,
        rtc: RTCConfig | None = None,
        rtc_delay: int | None = None,
        name: str | None = None,
    ) -> None:
        """`rtc` replaces the checkpoint's own `rtc_config` (real-time chunking while acting);
        `rtc_delay` is the inference delay `select_action` emulates with it, in ticks (0: the
        loop waits for each chunk, as `select_action`'s callers do). `name` is what errors call
        the policy (its folder; by default its type)."""
        self.model = model.eval()
        self.name = name or model.config.type_name
        self.preprocessor = preprocessor
        self.postprocessor = postprocessor
        self.rtc = _real_time_chunking(model.config, rtc)
        self._acting = ChunkedActing.for_config(
            model.config,
            rtc=self.rtc,
            inference_delay=rtc_delay or 0,
            buffer=None if self.rtc is not None else model.action_buffer(),
            history_keys=model.history_keys,
        )

    @property
    def config(self) -> PolicyConfig:
        return self.model.config

    @property
    def input_features(self) -> Mapping[str, FeatureSpec]:
        return self.config.input_features

    @property
    def output_features(self) -> Mapping[str, FeatureSpec]:
        return self.config.output_features

    @property
    def decodes_whole_chunks(self) -> bool:
        """A post-processor step decodes only whole chunks (GR00T's relative actions):
        `select_action` cannot serve this policy, `predict_chunk` can."""
        return any(getattr(step, "decodes_whole_chunks", False) for step in self.postprocessor)

    @property
    def actions_per_chunk(self) -> int:
        return self.config.n_action_steps

    @property
    def device(self) -> torch.device:
        return self.model.device

    @torch.no_grad()
    def predict_chunk(
        self,
        observation: Mapping[str, Any],
        noise: Any | None = None,
        *,
        committed: CommittedActions | None = None,
    ) -> ActionChunk:
        self._check(observation, committed)
        raw = _as_tensors(observation)
        noise_t = None if noise is None else self._to_model(torch.as_tensor(noise))
        if committed is None or not self.config.supports_rtc:
            # A policy that is not flow matching has nothing to guide: it ignores `committed`.
            actions = self.model.predict_chunk(self._preprocess(raw), noise=noise_t)
        else:
            # The committed actions go through the pre-processor with the observation, so they
            # reach the model in its own space (normalised; relative to this state if it learns
            # so).
            left = torch.as_tensor(committed.actions, dtype=torch.float32)
            batch = self._preprocess({**raw, ACTION: left})
            guidance = PrefixGuidance(batch.pop(ACTION), committed.inference_delay, committed.rtc)
            actions = self.model.predict_guided_chunk(batch, guidance, noise=noise_t)
        actions = self._postprocess(actions, raw)
        check_actions(
            self.name, actions, observation, where="policy.predict_chunk", what="none is returned"
        )
        return ActionChunk(actions=actions)

    @torch.no_grad()
    def select_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        self._check(observation)
        raw = _as_tensors(observation)
        if self._acting.reads_observation():
            action = self._acting.act(self._preprocess(raw), self._predict_normalised)
        else:
            # Between chunks a policy without a history does not read the observation:
            # normalising images every tick for nothing cost as much as the env step.
            action = self._acting.next_action()
        out = self._postprocess(action, raw).detach().cpu().numpy()
        check_actions(
            self.name, out, observation, where="policy.select_action", what="none is returned"
        )
        return out

    def _check(
        self, observation: Mapping[str, Any], committed: CommittedActions | None = None
    ) -> None:
        # What `rlctl policy serve` refuses, refused here too: NaN or infinity, an observation
        # the model cannot read (a missing key, another size, no numbers).
        if not isinstance(observation, Mapping):
            raise InvalidInput(
                f"an observation is a mapping of feature keys to arrays, got "
                f"{type(observation).__name__}",
                where="observation",
            )
        check_observation(
            self.name,
            self,
            observation,
            committed=None if committed is None else committed.actions,
            where="observation",
            sender="the observation",
            batched=False,
        )

    def _predict_normalised(self, batch: Mapping[str, Any], left: Leftover | None = None) -> Tensor:
        if self.rtc is None:
            return self.model.predict_chunk(batch)
        guidance = None if left is None else PrefixGuidance(*left, self.rtc)
        return self.model.predict_guided_chunk(batch, guidance)

    def reset(self) -> None:
        self._acting.reset()
        self.model.reset()

    @property
    def optional_inputs(self) -> frozenset[str]:
        """Input features an observation may lack (see `PolicyModel.optional_inputs`)."""
        return self.model.optional_inputs

    def observation_features(self, provided: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]:
        features = dict(provided)
        for step in self.preprocessor:
            if isinstance(step, RenameObservations):
                features = dict(step.transform_features(features))
        return features

    def save(self, folder: str | os.PathLike[str]) -> Path:
        return save_pretrained(folder, self.model, self.preprocessor, self.postprocessor)

    def _preprocess(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        batch = self.preprocessor.process_batch(raw)
        return {k: self._to_model(v) if isinstance(v, Tensor) else v for k, v in batch.items()}

    def _to_model(self, value: Tensor) -> Tensor:
        # Float inputs take the model's dtype (numpy gives float64); masks and indices keep theirs.
        dtype = self.model.dtype if value.is_floating_point() else value.dtype
        return value.to(device=self.model.device, dtype=dtype)

    def _postprocess(self, actions: Tensor, raw: Mapping[str, Any]) -> Tensor:
        # The raw observation travels along for steps that need it (relative -> absolute actions).
        tail = self.model.unprocessed_action_tail
        if tail:
            done = self.postprocessor(
                Transition(observation=dict(raw), action=actions[..., :-tail])
            ).action
            return torch.cat([done, actions[..., -tail:].to(done.device, done.dtype)], dim=-1)
        return self.postprocessor(Transition(observation=dict(raw), action=actions)).action


def _real_time_chunking(config: PolicyConfig, override: RTCConfig | None) -> RTCConfig | None:
    """The RTC settings acting follows: `override` (the command line's), else the config's own;
    None when off. A policy that cannot follow committed actions refuses to be asked to."""
    rtc = override if override is not None else getattr(config, "rtc_config", None)
    if rtc is None or not rtc.enabled:
        return None
    if not config.supports_rtc:
        supported = [n for n, c in known_policy_types().items() if c.supports_rtc]
        raise ConfigError(
            f"policy type {config.type_name!r} cannot use real-time chunking: it does not "
            "generate its chunks by flow matching",
            where="policy.rtc_config",
            hint=f"drop --policy.rtc_config (it works with {', '.join(supported)})",
        )
    return rtc


def _as_tensors(observation: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: torch.from_numpy(value)
        if isinstance(value, np.ndarray) and value.dtype.kind in "biufc"
        else value
        for key, value in observation.items()
    }


def load_policy_folder(
    location: str | os.PathLike[str],
    *,
    device: str | None = None,
    rtc: RTCConfig | None = None,
    rtc_delay: int | None = None,
    compute_dtype: str | None = None,
) -> LoadedPolicy:
    """Load a policy folder; `device` defaults to the one it was trained on, if present here.
    `rtc` replaces the checkpoint's real-time chunking settings (see `LoadedPolicy`);
    `compute_dtype` says whether a bfloat16 model computes in float32 on a device that only
    emulates bfloat16 (`vla.compute_dtype`; None: auto)."""
    folder = checkpoint_folder(location)
    config = read_config(folder)
    _real_time_chunking(config, rtc)  # refused before the weights are read
    target = _pick_device(device, config.device)
    model = read_model(folder, config, device=target, compute_dtype=compute_dtype)
    preprocessor, postprocessor = read_processors(folder, device=target)
    return LoadedPolicy(
        model, preprocessor, postprocessor, rtc=rtc, rtc_delay=rtc_delay, name=str(location)
    )


def create_policy(
    config: PolicyConfig,
    dataset_stats: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    device: str | None = None,
    rename_map: Mapping[str, str] | None = None,
) -> LoadedPolicy:
    """A freshly initialised policy with LeRobot's default processors over `dataset_stats`,
    computing in the dtype its config's `compute_dtype` gives on the device."""
    target = _pick_device(device, config.device)
    pre, post = make_pre_post_processors(
        config, dataset_stats, rename_map=rename_map, device=target
    )
    model = build_policy(config).to(target)
    use_compute_dtype(model, config.compute_dtype, target)
    return LoadedPolicy(model, pre, post)


class LeRobotPolicyLoader:
    """The `PolicyLoader` port: local checkpoint folders, and registered untrained types.
    `compute_dtype` (the command's `--policy.compute_dtype`; None: auto) applies to every
    policy it loads (`vla.compute_dtype`)."""

    def __init__(self, compute_dtype: str | None = None) -> None:
        self.compute_dtype = compute_dtype

    def load(
        self,
        location: str | Path,
        *,
        device: str | None = None,
        rtc: RTCConfig | None = None,
        rtc_delay: int | None = None,
    ) -> LoadedPolicy:
        return load_policy_folder(
            location,
            device=device,
            rtc=rtc,
            rtc_delay=rtc_delay,
            compute_dtype=self.compute_dtype,
        )

    def read_config(self, location: str | Path) -> PolicyConfig:
        return read_config(checkpoint_folder(location))

    def create_for_simulation(
        self, policy_type: str, simulation: Simulation, *, seed: int | None = None
    ) -> Policy:
        config_class = policy_config_class(policy_type)
        return implementation_of(config_class).for_simulation(config_class(), simulation, seed=seed)


def _parsed(device: Any) -> torch.device | None:
    """`device` as torch reads it, or None when it is no device torch knows."""
    try:
        return torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        return None


def _available(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_available() and (
            device.index is None or device.index < torch.cuda.device_count()
        )
    if device.type == "mps":
        return torch.backends.mps.is_available()
    return device.type == "cpu"


def _pick_device(requested: str | None, trained_on: str | None) -> str:
    if requested is not None:
        parsed = _parsed(requested)
        if parsed is None:
            raise ConfigError(
                f"unknown device {requested!r}"[:120],
                where="device",
                hint="give a torch device such as cpu, cuda, cuda:0 or mps",
            )
        if not _available(parsed):
            raise HardwareError(
                f"the device {requested!r} is not available on this machine",
                where="device",
                hint="choose another device, e.g. --device=cpu",
            )
        return requested
    if trained_on:
        parsed = _parsed(trained_on)
        if parsed is not None and _available(parsed):
            return trained_on
        if parsed is not None and parsed.type == "cuda" and torch.cuda.is_available():
            return "cuda"  # trained on a GPU this machine does not have: on its first one
        if parsed is None:
            # As for a device this machine lacks: the policy runs on the CPU.
            log.warning(
                "the policy config's device is no device torch knows; running on the CPU",
                device=str(trained_on)[:120],
                where="config.json: device",
            )
    return "cpu"
