"""Relative actions (action - state) and back, on the joints that move with the arm.

Policies such as pi0 learn offsets from the current state rather than absolute joint targets.
Joints whose name contains one of `exclude_joints` (the gripper, by default) stay absolute: an
offset means little for an open/close command. Matching is by case-insensitive substring, as in
LeRobot's `RelativeActionsProcessorStep`.

An action may be one step `(..., D)` or a chunk `(..., T, D)`; the state `(..., D)` is
broadcast over the chunk's time axis, and a state history `(..., S, D)` counts from its last
step. The absolute step reads the state from the transition, so the post-processor must be given
the raw observation beside the action, and its unnormaliser must declare only the action feature
(as LeRobot's does), or it would rescale that state too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from rlctl.domain.errors import InvalidInput
from rlctl.domain.frames import Transition
from rlctl.domain.processors.arrays import cast_like, constant_like, require_array
from rlctl.domain.processors.pipeline import ProcessorPipeline
from rlctl.domain.processors.registry import register_step
from rlctl.domain.processors.serialization import unstructure_config
from rlctl.domain.processors.step import Step

_DEFAULT_STATE_KEY = "observation.state"


def _names(value: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(str(v) for v in value)


def _joints(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class RelativeActionsConfig:
    """Shared by the relative step and its inverse, so one config describes the pair."""

    enabled: bool = True
    exclude_joints: tuple[str, ...] = attrs.field(default=("gripper",), converter=_joints)
    # The action's dimension names (the dataset's `action` feature names); without them every
    # dimension is converted.
    action_names: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    state_key: str = _DEFAULT_STATE_KEY


def joint_mask(
    action_dim: int, action_names: Sequence[str] | None, exclude_joints: Sequence[str]
) -> np.ndarray:
    """True for the dimensions made relative; unnamed trailing dimensions count as included."""
    tokens = [token.lower() for token in exclude_joints if token]
    mask = np.ones(action_dim, dtype=bool)
    if action_names is None or not tokens:
        return mask
    for index, name in enumerate(list(action_names)[:action_dim]):
        lowered = str(name).lower()
        mask[index] = not any(token in lowered for token in tokens)
    return mask


def _current_state(actions: Any, state: Any) -> Any:
    """The state actions are measured from. A history `(..., S, D)` (policies that read
    `n_obs_steps > 1` steps) is measured from its last, current step: with more axes than the
    action, or as many as a batch of chunks `(B, T, D)`."""
    if state.ndim > actions.ndim or (state.ndim == actions.ndim and state.ndim >= 3):
        return state[..., -1, :]
    return state


def _state_offset(actions: Any, state: Any, mask: np.ndarray) -> Any:
    dims = mask.shape[0]
    state = _current_state(actions, state)
    if state.shape[-1] < dims:
        raise InvalidInput(
            f"state has {state.shape[-1]} dimensions, fewer than the action's {dims}",
            where="observation.state",
        )
    state = cast_like(state, actions)
    offset = state[..., :dims] * constant_like(mask.astype(np.float32), actions)
    if actions.ndim == state.ndim + 1:
        return offset[..., None, :]
    if state.ndim == 1:
        return offset  # one unbatched state for every action of the batch
    if actions.ndim != state.ndim:
        raise InvalidInput(
            f"action of shape {tuple(actions.shape)} does not fit state of shape "
            f"{tuple(state.shape)}",
            where="action",
            hint="actions are (..., D) or chunks (..., T, D) against a state (..., D)",
        )
    return offset


def to_relative_actions(actions: Any, state: Any, mask: np.ndarray) -> Any:
    """`actions - state` on the dimensions where `mask` is True."""
    return actions - _state_offset(actions, state, mask)


def to_absolute_actions(actions: Any, state: Any, mask: np.ndarray) -> Any:
    """`actions + state` on the dimensions where `mask` is True: undoes `to_relative_actions`."""
    return actions + _state_offset(actions, state, mask)


class _ActionFrame(Step[RelativeActionsConfig]):
    config_class = RelativeActionsConfig
    lerobot_settings: ClassVar[tuple[str, ...]]

    def mask_for(self, actions: Any) -> np.ndarray:
        config = self.config
        return joint_mask(actions.shape[-1], config.action_names, config.exclude_joints)

    def _inputs(self, transition: Transition) -> tuple[Any, Any]:
        action = transition.action
        if action is not None:
            if isinstance(action, Mapping):
                raise InvalidInput(
                    "relative actions take the action as one array, got a mapping of joints",
                    where="action",
                )
            require_array(action, "action")
        return action, transition.observation.get(self.config.state_key)

    def config_data(self) -> dict[str, Any]:
        # LeRobot's step takes only its own settings and always reads `observation.state`;
        # another state key is kept for rlctl.
        kept = set(self.lerobot_settings)
        if self.config.state_key != _DEFAULT_STATE_KEY:
            kept.add("state_key")
        return {k: v for k, v in unstructure_config(self.config).items() if k in kept}


@register_step("relative_actions_processor")
class RelativeActions(_ActionFrame):
    """Absolute -> relative. Without an action or a state the transition passes unchanged."""

    lerobot_settings = ("enabled", "exclude_joints", "action_names")

    def __call__(self, transition: Transition) -> Transition:
        if not self.config.enabled:
            return transition
        action, state = self._inputs(transition)
        if action is None or state is None:
            return transition
        return transition.evolve(action=to_relative_actions(action, state, self.mask_for(action)))


@register_step("absolute_actions_processor")
class AbsoluteActions(_ActionFrame):
    """Relative -> absolute; needs the state the relative actions were taken against."""

    lerobot_settings = ("enabled",)

    def __call__(self, transition: Transition) -> Transition:
        if not self.config.enabled:
            return transition
        action, state = self._inputs(transition)
        if action is None:
            return transition
        if state is None:
            raise InvalidInput(
                "absolute actions need the state that relative actions are measured from",
                where=self.config.state_key,
                hint="pass the raw observation with the action to the post-processor",
            )
        return transition.evolve(action=to_absolute_actions(action, state, self.mask_for(action)))


def pair_absolute_with_relative(
    preprocessor: ProcessorPipeline, postprocessor: ProcessorPipeline
) -> ProcessorPipeline:
    """`postprocessor` with each absolute step measuring the joints of the pre-processor's
    relative step (a saved absolute step records only whether it is enabled)."""
    relative = next((s for s in preprocessor if isinstance(s, RelativeActions)), None)
    if relative is None:
        return postprocessor
    steps = [
        AbsoluteActions(attrs.evolve(relative.config, enabled=step.config.enabled))
        if isinstance(step, AbsoluteActions)
        else step
        for step in postprocessor
    ]
    return ProcessorPipeline(steps, name=postprocessor.name)
