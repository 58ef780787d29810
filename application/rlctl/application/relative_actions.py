"""Relative actions for any policy: what the config asks for, checked against the dataset.

`--policy.use_relative_actions=true` trains on `action - observation.state` (LeRobot's pi0/pi05
convention), `--policy.relative_exclude_joints='["gripper"]'` (the default, as LeRobot's and
`rlctl dataset recompute-stats --relative-actions`) keeps the dimensions whose name contains one
of those words absolute. The joint names are the dataset's `action` feature names; they are
stored in the config (`action_feature_names`) and in the processors, so a checkpoint converts
back to absolute actions without the dataset.

The default "gripper" on a dataset without one (or without action names) excludes nothing, as
in LeRobot: every dimension becomes relative, with a warning. A word the user chose that names
no dimension is an error instead, since a typo would silently make that joint relative.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import structlog

from rlctl.application.relative_action_stats import (
    action_names,
    per_step_relative_action_stats,
    relative_action_stats,
)
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies import ACTION, OBS_STATE, RELATIVE_EXCLUDE_DEFAULT, PolicyConfig
from rlctl.domain.processors import RelativeActionsConfig
from rlctl.domain.processors.steps.relative_actions import joint_mask

WHERE = "policy.relative_exclude_joints"
log = structlog.get_logger(__name__)


def relative_actions_config(config: PolicyConfig) -> RelativeActionsConfig | None:
    """The processor steps' config for a policy config; None when relative actions are off."""
    if not config.use_relative_actions:
        return None
    return RelativeActionsConfig(
        enabled=True,
        exclude_joints=config.relative_exclude_joints,
        action_names=config.action_feature_names,
        state_key=OBS_STATE,
    )


def with_relative_action_names(
    config: PolicyConfig, features: Mapping[str, FeatureSpec]
) -> PolicyConfig:
    """`config` with the dataset's action names, after checking that relative actions fit the
    dataset: a state to measure from, as wide as the action, and excluded joints that exist."""
    if not config.use_relative_actions:
        return config
    action, state = features.get(ACTION), features.get(OBS_STATE)
    if action is None or state is None:
        lacking = " and ".join(repr(k) for k, f in ((ACTION, action), (OBS_STATE, state)) if not f)
        raise ConfigError(
            f"relative actions are measured from {OBS_STATE!r} and need {ACTION!r}; the dataset "
            f"lacks {lacking}",
            where="policy.use_relative_actions",
            hint="train with absolute actions (drop --policy.use_relative_actions) on this dataset",
        )
    action_dim, state_dim = int(np.prod(action.shape)), int(np.prod(state.shape))
    if state_dim < action_dim:
        raise ConfigError(
            f"relative actions subtract the state from the action, but {OBS_STATE!r} has "
            f"{state_dim} dimensions and {ACTION!r} {action_dim}",
            where="policy.use_relative_actions",
            hint="use relative actions only where the state holds each joint the action moves",
        )
    names = action_names(action.names)
    check_excluded_joints(config.relative_exclude_joints, names)
    return attrs.evolve(config, action_feature_names=names)


def check_excluded_joints(exclude: tuple[str, ...], names: list[str] | None) -> None:
    """Every excluded word must name (part of) an action dimension, as LeRobot matches them;
    LeRobot's default words may name none (a dataset without a gripper)."""
    if not exclude:
        return
    defaults = {word.lower() for word in RELATIVE_EXCLUDE_DEFAULT}
    chosen = [token for token in exclude if token.lower() not in defaults]
    if names is None:
        if chosen:
            raise ConfigError(
                f"the dataset's {ACTION!r} feature has no names, so joints {list(exclude)} "
                "cannot be told apart",
                where=WHERE,
                hint="drop --policy.relative_exclude_joints (every dimension becomes relative), "
                "or give the action feature names in meta/info.json",
            )
        _warn_all_relative(exclude, "the dataset's action feature has no names")
        return
    unknown = [token for token in exclude if not any(token.lower() in n.lower() for n in names)]
    if unknown and set(unknown) & set(chosen):
        raise ConfigError(
            f"relative_exclude_joints {[t for t in unknown if t in chosen]} match no action "
            "dimension",
            where=WHERE,
            hint=f"the dataset's action names are {names}; exclude words found in them",
        )
    if not joint_mask(len(names), names, exclude).any():
        raise ConfigError(
            f"relative_exclude_joints {list(exclude)} exclude every action dimension",
            where=WHERE,
            hint="turn relative actions off instead (--policy.use_relative_actions=false)",
        )
    if unknown:
        _warn_all_relative(unknown, f"no action dimension is named so ({names})")


def _warn_all_relative(words: Any, why: str) -> None:
    log.warning(
        "relative actions: these words exclude no dimension",
        words=list(words),
        why=why,
        hint="those dimensions become relative too; name the joints to keep absolute with "
        "--policy.relative_exclude_joints='[\"...\"]', or [] to silence this",
    )


def relative_action_statistics(
    config: PolicyConfig,
    actions: np.ndarray,
    states: np.ndarray,
    episode_index: np.ndarray,
) -> dict[str, Any]:
    """The normalisation statistics of relative actions: every chunk of the policy's action
    window inside one episode, minus the state at its first frame — for a policy normalising
    per chunk step (`relative_stats_horizon`, GR00T N1.7), one row per step over chunks of that
    horizon instead (its `relative_action` entry; otherwise the `action` one)."""
    horizon = type(config).relative_stats_horizon
    if horizon is not None:
        return _per_step_statistics(config, horizon, actions, states, episode_index)
    chunk_size = len(config.action_delta_indices or [0])
    lengths = np.unique(episode_index, return_counts=True)[1]
    if len(lengths) == 0 or lengths.max() < chunk_size:
        raise ConfigError(
            f"relative action statistics need an episode of at least {chunk_size} frames (the "
            f"policy's action window); the longest has {lengths.max() if len(lengths) else 0}",
            where="policy.use_relative_actions",
            hint="shorten the policy's chunk (--policy.chunk_size or --policy.horizon)",
        )
    stats, _ = relative_action_stats(
        actions.reshape(len(actions), -1),
        states.reshape(len(states), -1),
        episode_index,
        chunk_size=chunk_size,
        names=config.action_feature_names,
        exclude_joints=config.relative_exclude_joints,
    )
    return stats.to_json()


def _per_step_statistics(
    config: PolicyConfig,
    horizon: int,
    actions: np.ndarray,
    states: np.ndarray,
    episode_index: np.ndarray,
) -> dict[str, Any]:
    if not config.action_feature_names:
        raise ConfigError(
            f"{config.type_name}'s relative actions group the action dimensions by their names "
            f"(the relative joints, each excluded one), and the dataset's {ACTION!r} feature "
            "has none",
            where="policy.use_relative_actions",
            hint="give the action feature names in meta/info.json, or train with absolute "
            "actions (--policy.use_relative_actions=false)",
        )
    lengths = np.unique(episode_index, return_counts=True)[1]
    chunks = int(np.maximum(lengths - horizon + 1, 0).sum())
    if chunks < 2:
        raise ConfigError(
            f"{config.type_name}'s relative action statistics are taken per step of "
            f"{horizon}-frame chunks (whatever the chunk size), so they need 2 such chunks "
            f"inside episodes; the longest episode has {lengths.max() if len(lengths) else 0} "
            "frames",
            where="policy.use_relative_actions",
            hint=f"train on episodes of more than {horizon} frames, or with absolute actions "
            "(--policy.use_relative_actions=false)",
        )
    stats = per_step_relative_action_stats(
        actions.reshape(len(actions), -1),
        states.reshape(len(states), -1),
        episode_index,
        horizon=horizon,
        names=config.action_feature_names,
        exclude_joints=config.relative_exclude_joints,
    )
    return {name: value.tolist() for name, value in stats.items()}
