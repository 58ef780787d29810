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
