"""Statistics of relative actions, as pi0/pi05 see them when trained with relative actions.

LeRobot's `compute_relative_action_stats`: every chunk of `chunk_size` consecutive frames that
stays inside one episode (every start frame whose chunk fits), each action of the chunk minus the
state at the chunk's first frame on the joints `joint_mask` selects (the gripper stays
absolute), statistics over all those actions. The chunk size should be the policy's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlctl.domain.errors import InvalidInput
from rlctl.domain.processors.steps.relative_actions import joint_mask, to_relative_actions
from rlctl.domain.statistics import FeatureStats, RunningStats

# Chunks processed at a time: bounds the (starts, chunk_size, action_dim) temporary.
BATCH_STARTS = 50_000


def action_names(names: Any) -> list[str] | None:
    """An action feature's `names` as a flat list (LeRobot writes a list, older files a dict)."""
    if isinstance(names, dict):
        names = next(iter(names.values()), None)
    return [str(n) for n in names] if isinstance(names, (list, tuple)) else None


def valid_chunk_starts(episode_index: np.ndarray, chunk_size: int) -> np.ndarray:
    """Rows whose chunk of `chunk_size` rows lies within one episode (rows in episode order)."""
    total = len(episode_index)
    if chunk_size < 1 or total < chunk_size:
        return np.zeros(0, dtype=np.int64)
    starts = np.arange(total - chunk_size + 1)
    within: np.ndarray = starts[episode_index[starts] == episode_index[starts + chunk_size - 1]]
    return within


def relative_action_stats(
    actions: np.ndarray,
    states: np.ndarray,
    episode_index: np.ndarray,
    *,
    chunk_size: int,
    names: Sequence[str] | None,
    exclude_joints: Sequence[str],
) -> tuple[FeatureStats, int]:
    """Statistics of `action - state` over every chunk; returns them and the number of chunks."""
    if actions.ndim != 2 or states.ndim != 2 or len(actions) != len(states):
        raise InvalidInput(
            f"relative actions need (rows, dim) actions and states, got {actions.shape} and "
            f"{states.shape}",
            where="action",
        )
    starts = valid_chunk_starts(episode_index, chunk_size)
    if len(starts) == 0:
        raise InvalidInput(
            f"no episode has {chunk_size} frames, so no action chunk fits",
            where="--chunk-size",
            hint="give the policy's chunk size, smaller than the episodes",
        )
    mask = joint_mask(actions.shape[1], names, exclude_joints)
    running = RunningStats()
    offsets = np.arange(chunk_size)
    for first in range(0, len(starts), BATCH_STARTS):
        batch = starts[first : first + BATCH_STARTS]
        chunks = actions[batch[:, None] + offsets[None, :]].astype(np.float32)
        relative = to_relative_actions(chunks, states[batch].astype(np.float32), mask)
        running.update(relative.reshape(-1, actions.shape[1]))
    return running.result(), len(starts)


PER_STEP_STATS = ("min", "max", "mean", "std", "q01", "q99")


def per_step_relative_action_stats(
    actions: np.ndarray,
    states: np.ndarray,
    episode_index: np.ndarray,
    *,
    horizon: int,
    names: Sequence[str] | None,
    exclude_joints: Sequence[str],
) -> dict[str, np.ndarray]:
    """GR00T N1.7's relative action statistics (LeRobot's `_make_relative_action_training_stats`
    with its action horizon preserved): every `horizon`-frame chunk inside one episode, minus
    the state at its first frame on the joints `joint_mask` selects, and for each step of the
    chunk the min, max, mean, std, 1st and 99th percentiles over all chunks (`(horizon, dim)`
    each, float32) and their `count` (`(horizon,)`)."""
    if actions.ndim != 2 or states.ndim != 2 or len(actions) != len(states):
        raise InvalidInput(
            f"relative actions need (rows, dim) actions and states, got {actions.shape} and "
            f"{states.shape}",
            where="action",
        )
    starts = valid_chunk_starts(episode_index, horizon)
    if len(starts) < 2:
        raise InvalidInput(
            f"per-step relative action statistics need at least 2 chunks of {horizon} frames "
            f"inside an episode; the dataset has {len(starts)}",
            where="policy.use_relative_actions",
            hint=f"train on episodes of more than {horizon} frames, or with absolute actions "
            "(--policy.use_relative_actions=false)",
        )
    mask = joint_mask(actions.shape[1], names, exclude_joints)
    reference = states[starts].astype(np.float32)
    rows: dict[str, list[np.ndarray]] = {name: [] for name in PER_STEP_STATS}
    for step in range(horizon):
        values = to_relative_actions(actions[starts + step].astype(np.float32), reference, mask)
        values = np.ascontiguousarray(values, dtype=np.float32)
        rows["min"].append(np.min(values, axis=0))
        rows["max"].append(np.max(values, axis=0))
        rows["mean"].append(np.mean(values, axis=0))
        rows["std"].append(np.std(values, axis=0))
        rows["q01"].append(np.quantile(values, 0.01, axis=0).astype(np.float32))
        rows["q99"].append(np.quantile(values, 0.99, axis=0).astype(np.float32))
    stats = {name: np.stack(values, axis=0) for name, values in rows.items()}
    stats["count"] = np.full(horizon, len(starts), dtype=np.int64)
    return stats
