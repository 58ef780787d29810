"""Ports for trained policies: ask one for actions, and load one from a checkpoint.

Observations and actions are arrays (numpy arrays or torch tensors, whatever the adapter takes)
keyed like a LeRobot batch: `observation.state`, `observation.images.<camera>`, … . A policy
handles its own pre- and post-processing (normalisation, renames, device moves): callers give raw
observations and get raw actions back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rlctl.application.ports.simulation import Simulation
from rlctl.domain.action_chunk import ActionChunk
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.policies.rtc import CommittedActions, RTCConfig


class Policy(Protocol):
    """A policy ready for inference, processors included."""

    @property
    def config(self) -> PolicyConfig: ...

    @property
    def input_features(self) -> Mapping[str, FeatureSpec]: ...

    @property
    def output_features(self) -> Mapping[str, FeatureSpec]: ...

    @property
    def actions_per_chunk(self) -> int:
        """Ticks served by each predicted chunk (`n_action_steps`): how often the model runs."""
        ...

    def predict_chunk(
        self,
        observation: Mapping[str, Any],
        noise: Any | None = None,
        *,
        committed: CommittedActions | None = None,
    ) -> ActionChunk:
        """Predict a batched chunk `(batch, steps, action_dim)` of raw (unnormalised) actions.

        `observation` is one batch of raw observations; a single unbatched observation gets a
        batch axis of one. Policies that read a history (`n_obs_steps > 1`) take it stacked on
        axis 1. `noise` fixes the initial noise of a sampling policy (Diffusion Policy:
        `(batch, horizon, action_dim)`) so that its output is reproducible; other policies
        ignore it.

        `committed` (real-time chunking) carries the raw actions the caller has committed to
        and not executed yet, from the observation's tick on, and the ticks it will act on them
        while this chunk is computed: a flow-matching policy (`config.supports_rtc`) generates
        the chunk consistent with them. Every other policy ignores `committed` and predicts as
        without it.
        """
        ...

    def select_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        """One raw action `(batch, action_dim)` for the current control tick, as a numpy array
        on the CPU whatever device the policy runs on.

        Keeps what the policy needs between ticks (the chunk being executed, the observation
        history, a temporal ensemble); call `reset()` when an episode starts.
        """
        ...

    def observation_features(self, provided: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]:
        """What the model reads when a caller provides `provided`: the policy's own renames
        (a LeRobot checkpoint's `rename_map`) applied. Compare it with `input_features`."""
        ...

    def reset(self) -> None:
        """Forget everything kept between ticks; call at the start of each episode."""
        ...


class PolicyLoader(Protocol):
    """Finds policies: saved ones (a LeRobot `pretrained_model` folder, or one rlctl saved), and
    the policy types that act without training (random, scripted experts), built for an env."""

    def load(
        self,
        location: str | Path,
        *,
        device: str | None = None,
        rtc: RTCConfig | None = None,
        rtc_delay: int | None = None,
    ) -> Policy:
        """Raise an `RlctlError` naming the file when the checkpoint is missing or malformed.

        `rtc` replaces the checkpoint's real-time chunking settings for acting (`select_action`);
        a `ConfigError` when enabled for a policy that cannot follow committed actions.
        `rtc_delay`: the inference delay, in ticks, `select_action` emulates (None: 0)."""
        ...

    def read_config(self, location: str | Path) -> PolicyConfig:
        """The config of a saved policy, without loading its weights."""
        ...

    def create_for_simulation(
        self, policy_type: str, simulation: Simulation, *, seed: int | None = None
    ) -> Policy:
        """A policy of a registered type that needs no checkpoint, fitted to `simulation`.

        Raise a `ConfigError` for an unknown type, or one that must be trained first."""
        ...
