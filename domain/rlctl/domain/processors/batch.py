"""Batch dict <-> Transition, with LeRobot's key conventions.

A LeRobot batch is flat: `observation.*` keys, `action`, `next.reward`, `next.done`,
`next.truncated`, `info`, plus bookkeeping (`task`, `index`, `*_is_pad` masks …). Bookkeeping goes
into `complementary_data`, and so does any key not recognised, so that
`from_transition(to_transition(batch)) == batch`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlctl.domain.frames import Transition

OBSERVATION_PREFIX = "observation"
ACTION = "action"
REWARD = "next.reward"
DONE = "next.done"
TRUNCATED = "next.truncated"
INFO = "info"
PAD_MARK = "_is_pad"


def to_transition(batch: Mapping[str, Any]) -> Transition:
    observation: dict[str, Any] = {}
    complementary: dict[str, Any] = {}
    for key, value in batch.items():
        if key in _TRANSITION_FIELDS:
            continue
        # Pad masks such as `observation.state_is_pad` describe the batch, not the observation.
        if key.startswith(OBSERVATION_PREFIX) and PAD_MARK not in key:
            observation[key] = value
        else:
            complementary[key] = value
    return Transition(
        observation=observation,
        action=batch.get(ACTION),
        reward=batch.get(REWARD),
        done=batch.get(DONE, False),
        truncated=batch.get(TRUNCATED, False),
        info=dict(batch.get(INFO, {})),
        complementary_data=complementary,
    )


def from_transition(transition: Transition) -> dict[str, Any]:
    """The flat batch dict; empty defaults (no action or reward, plain False flags) are left out."""
    batch: dict[str, Any] = dict(transition.observation)
    if transition.action is not None:
        batch[ACTION] = transition.action
    if transition.reward is not None:
        batch[REWARD] = transition.reward
    if transition.done is not False:
        batch[DONE] = transition.done
    if transition.truncated is not False:
        batch[TRUNCATED] = transition.truncated
    if transition.info:
        batch[INFO] = dict(transition.info)
    batch.update(transition.complementary_data)
    return batch


_TRANSITION_FIELDS = frozenset({ACTION, REWARD, DONE, TRUNCATED, INFO})
