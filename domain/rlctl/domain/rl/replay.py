"""Transitions and the learner's replay: online transitions mixed with demonstrations.

As LeRobot's HIL-SERL learner does it:

- each transition the actor streams goes into the *online* buffer; one taken while a person was
  intervening (`is_intervention`) goes into the *offline* buffer too, beside the demonstrations
  (when there are demonstrations): interventions are sampled from both, so they weigh more;
- a batch takes `max(1, int(batch_size * online_ratio))` transitions from the online buffer and
  the rest from the offline one (`online_ratio` 0.5 by default), each drawn uniformly with
  replacement;
- a buffer is a ring of `capacity` transitions: the oldest is overwritten first;
- a demonstration episode becomes transitions with `next.done` (or, lacking it, the episode's
  last frame) as `done`, the next frame of the same episode as the next state (the frame itself
  at the end), and `truncated` equal to `done`;
- images may be randomly shifted by up to 4 pixels when sampled (DrQ, LeRobot's `use_drq`).

Unlike LeRobot's `optimize_memory`, a transition keeps its own next state, so the last frame of
an episode never borrows the first of the next.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from rlctl.domain.errors import InvalidInput

IMAGE_PREFIX = "observation.image"
IS_INTERVENTION = "is_intervention"
DISCRETE_PENALTY = "discrete_penalty"
DEFAULT_ONLINE_RATIO = 0.5
DRQ_PAD = 4

Arrays = dict[str, np.ndarray]


@attrs.frozen
class RLTransition:
    """One step: `state` and `next_state` map observation keys to arrays (no batch axis)."""

    state: Mapping[str, np.ndarray]
    action: np.ndarray
    reward: float
    next_state: Mapping[str, np.ndarray]
    done: bool
    truncated: bool
    is_intervention: bool = False
    discrete_penalty: float = 0.0


@attrs.frozen
class TransitionBatch:
    """Transitions stacked along a first axis; what the learner trains on."""

    state: Arrays
    action: np.ndarray
    reward: np.ndarray  # float32 (n,)
    next_state: Arrays
    done: np.ndarray  # float32 (n,)
    truncated: np.ndarray  # float32 (n,)
    is_intervention: np.ndarray  # bool (n,)
    discrete_penalty: np.ndarray  # float32 (n,)

    def __len__(self) -> int:
        return int(self.reward.shape[0])

    def transitions(self) -> list[RLTransition]:
        return [
            RLTransition(
                state={k: v[i] for k, v in self.state.items()},
                action=self.action[i],
                reward=float(self.reward[i]),
                next_state={k: v[i] for k, v in self.next_state.items()},
                done=bool(self.done[i]),
                truncated=bool(self.truncated[i]),
                is_intervention=bool(self.is_intervention[i]),
                discrete_penalty=float(self.discrete_penalty[i]),
            )
            for i in range(len(self))
        ]


def stack(transitions: Sequence[RLTransition]) -> TransitionBatch:
    """Transitions as one batch; they must share keys and shapes."""
    if not transitions:
        raise InvalidInput("no transitions to stack", where="transitions")
    first = transitions[0]
    for i, t in enumerate(transitions):
        if set(t.state) != set(first.state) or set(t.next_state) != set(first.state):
            raise InvalidInput(
                f"transition {i} has observation keys {sorted(t.state)}, the first "
                f"{sorted(first.state)}",
                where="transitions",
            )
    return TransitionBatch(
        state={k: np.stack([np.asarray(t.state[k]) for t in transitions]) for k in first.state},
        action=np.stack([np.asarray(t.action, dtype=np.float32) for t in transitions]),
        reward=np.array([t.reward for t in transitions], dtype=np.float32),
        next_state={
            k: np.stack([np.asarray(t.next_state[k]) for t in transitions]) for k in first.state
        },
        done=np.array([t.done for t in transitions], dtype=np.float32),
        truncated=np.array([t.truncated for t in transitions], dtype=np.float32),
        is_intervention=np.array([t.is_intervention for t in transitions], dtype=bool),
        discrete_penalty=np.array([t.discrete_penalty for t in transitions], dtype=np.float32),
    )


def concatenate(left: TransitionBatch, right: TransitionBatch) -> TransitionBatch:
    if len(right) == 0:
        return left
    if len(left) == 0:
        return right

    def join(a: Arrays, b: Arrays) -> Arrays:
        if set(a) != set(b):
            raise InvalidInput(
                f"the buffers hold different observations: {sorted(a)} and {sorted(b)}",
                where="replay",
                hint="the demonstrations must have the features the actor observes",
            )
        return {k: np.concatenate([a[k], b[k]]) for k in a}

    return TransitionBatch(
        state=join(left.state, right.state),
        action=np.concatenate([left.action, right.action]),
        reward=np.concatenate([left.reward, right.reward]),
        next_state=join(left.next_state, right.next_state),
        done=np.concatenate([left.done, right.done]),
        truncated=np.concatenate([left.truncated, right.truncated]),
        is_intervention=np.concatenate([left.is_intervention, right.is_intervention]),
        discrete_penalty=np.concatenate([left.discrete_penalty, right.discrete_penalty]),
    )


def non_finite(transition: RLTransition) -> str | None:
    """What is not finite in a transition (LeRobot's learner skips those), or None."""
    for label, values in (("state", transition.state), ("next_state", transition.next_state)):
        for key, value in values.items():
            array = np.asarray(value)
            if array.dtype.kind in "fc" and not np.isfinite(array).all():
                return f"{label}[{key}]"
    if not np.isfinite(np.asarray(transition.action, dtype=np.float64)).all():
        return "action"
    if not np.isfinite(transition.reward):
        return "reward"
    return None


class ReplayBuffer:
    """A ring of at most `capacity` transitions, preallocated on the first one."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise InvalidInput(f"a replay buffer holds at least 1 transition, not {capacity}")
        self.capacity = int(capacity)
        self.position = 0
        self.size = 0
        self._data: dict[str, np.ndarray] | None = None
        self._keys: list[str] = []

    def __len__(self) -> int:
        return self.size

    @property
    def observation_keys(self) -> list[str]:
        return list(self._keys)

    def add(self, transition: RLTransition) -> None:
        self.extend(stack([transition]))

    def extend(self, batch: TransitionBatch) -> None:
        if len(batch) == 0:
            return
        if self._data is None:
            self._allocate(batch)
        data = self._data
        assert data is not None
        if set(batch.state) != set(self._keys):
            raise InvalidInput(
                f"transitions with observations {sorted(batch.state)} do not fit a buffer of "
                f"{sorted(self._keys)}",
                where="replay",
                hint="the actor must observe what the policy reads",
            )
        columns = _columns(batch)
        for name, values in columns.items():
            if values.shape[1:] != data[name].shape[1:]:
                raise InvalidInput(
                    f"{name} of shape {values.shape[1:]} does not fit the buffer's "
                    f"{data[name].shape[1:]}",
                    where="replay",
                )
        n = len(batch)
        # Only the last `capacity` of a batch larger than the ring survive.
        start = max(0, n - self.capacity)
        rows = (self.position + np.arange(start, n)) % self.capacity
        for name, values in columns.items():
            data[name][rows] = values[start:]
        self.position = int((self.position + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample(
        self, batch_size: int, rng: np.random.Generator, *, drq: bool = False
    ) -> TransitionBatch:
        if self._data is None or self.size == 0:
            raise InvalidInput("cannot sample from an empty replay buffer", where="replay")
        n = min(int(batch_size), self.size)
        rows = rng.integers(0, self.size, size=n)
        batch = self._rows(rows)
        return random_shift_images(batch, rng) if drq else batch

    def arrays(self) -> Arrays:
        """The stored transitions, oldest first, as flat arrays (`state.<key>` …): to save."""
        if self._data is None:
            return {}
        order = (self.position - self.size + np.arange(self.size)) % self.capacity
        return {name: values[order] for name, values in self._data.items()}

    @classmethod
    def from_arrays(cls, capacity: int, arrays: Mapping[str, np.ndarray]) -> ReplayBuffer:
        """A buffer holding the transitions `arrays()` gave (the last `capacity` of them)."""
        buffer = cls(capacity)
        if arrays:
            buffer.extend(_batch_from_columns(arrays))
        return buffer

    def _allocate(self, batch: TransitionBatch) -> None:
        self._keys = sorted(batch.state)
        self._data = {
            name: np.zeros((self.capacity, *values.shape[1:]), dtype=values.dtype)
            for name, values in _columns(batch).items()
        }

    def _rows(self, rows: np.ndarray) -> TransitionBatch:
        assert self._data is not None
        return _batch_from_columns({name: values[rows] for name, values in self._data.items()})


def _columns(batch: TransitionBatch) -> Arrays:
    columns: Arrays = {}
    for key, value in batch.state.items():
        columns[f"state.{key}"] = value
    for key, value in batch.next_state.items():
        columns[f"next_state.{key}"] = value
    columns["action"] = batch.action.astype(np.float32)
    columns["reward"] = batch.reward.astype(np.float32)
    columns["done"] = batch.done.astype(np.float32)
    columns["truncated"] = batch.truncated.astype(np.float32)
    columns[IS_INTERVENTION] = batch.is_intervention.astype(bool)
    columns[DISCRETE_PENALTY] = batch.discrete_penalty.astype(np.float32)
    return columns


COLUMNS = ("action", "reward", "done", "truncated", IS_INTERVENTION, DISCRETE_PENALTY)


def _batch_from_columns(columns: Mapping[str, np.ndarray]) -> TransitionBatch:
    missing = [name for name in COLUMNS if name not in columns]
    if missing:
        raise InvalidInput(
            f"saved transitions lack {', '.join(missing)}",
            where="replay",
            hint="the replay file is damaged or from another tool",
        )
    state = {k[len("state.") :]: v for k, v in columns.items() if k.startswith("state.")}
    next_state = {
        k[len("next_state.") :]: v for k, v in columns.items() if k.startswith("next_state.")
    }
    if set(state) != set(next_state):
        raise InvalidInput("saved transitions' states and next states differ", where="replay")
    n = columns["reward"].shape[0]
    for name, values in columns.items():
        if values.shape[:1] != (n,):
            raise InvalidInput(f"saved column {name} has {values.shape[:1]} rows, not {n}")
    return TransitionBatch(
        state=dict(state),
        action=columns["action"],
        reward=columns["reward"],
        next_state=dict(next_state),
        done=columns["done"],
        truncated=columns["truncated"],
        is_intervention=columns[IS_INTERVENTION].astype(bool),
        discrete_penalty=columns[DISCRETE_PENALTY],
    )


class Replay:
    """The learner's two buffers: what the actors stream, and the demonstrations (if any)."""

    def __init__(
        self,
        online: ReplayBuffer,
        offline: ReplayBuffer | None = None,
        *,
        online_ratio: float = DEFAULT_ONLINE_RATIO,
        drq: bool = True,
    ) -> None:
        if not 0.0 <= online_ratio <= 1.0:
            raise InvalidInput(
                f"online_ratio must be in [0, 1], got {online_ratio}", where="online_ratio"
            )
        self.online = online
        self.offline = offline
        self.online_ratio = online_ratio
        self.drq = drq
        self.skipped = 0

    def add(self, transitions: Iterable[RLTransition]) -> int:
        """Store the actor's transitions (interventions twice); returns how many were kept.
        Transitions with a non-finite value are skipped, as LeRobot's learner skips them."""
        kept = []
        for transition in transitions:
            if non_finite(transition) is not None:
                self.skipped += 1
                continue
            kept.append(transition)
        if not kept:
            return 0
        batch = stack(kept)
        self.online.extend(batch)
        if self.offline is not None:
            interventions = [t for t in kept if t.is_intervention]
            if interventions:
                self.offline.extend(stack(interventions))
        return len(kept)

    def online_count(self, batch_size: int) -> int:
        if self.offline is None or len(self.offline) == 0:
            return batch_size
        return max(1, int(batch_size * self.online_ratio))

    def sample(self, batch_size: int, rng: np.random.Generator) -> TransitionBatch:
        n_online = self.online_count(batch_size)
        batch = self.online.sample(n_online, rng, drq=self.drq)
        n_offline = batch_size - n_online
        if self.offline is not None and n_offline > 0 and len(self.offline) > 0:
            batch = concatenate(batch, self.offline.sample(n_offline, rng, drq=self.drq))
        return batch


def demonstration_transitions(
    observations: Mapping[str, np.ndarray],
    actions: np.ndarray,
    rewards: np.ndarray,
    episode_index: np.ndarray,
    dones: np.ndarray | None = None,
    complementary: Mapping[str, np.ndarray] | None = None,
) -> TransitionBatch:
    """A dataset's frames (in order) as transitions, as LeRobot's `from_lerobot_dataset` makes
    them. `dones` is `next.done` (None: the last frame of each episode is done); `complementary`
    the `complementary_info.*` columns (`is_intervention`, `discrete_penalty`)."""
    n = int(actions.shape[0])
    episodes = np.asarray(episode_index).reshape(-1)
    if episodes.shape[0] != n or np.asarray(rewards).reshape(-1).shape[0] != n:
        raise InvalidInput("actions, rewards and episode indices differ in length", where="dataset")
    for key, values in observations.items():
        if values.shape[0] != n:
            raise InvalidInput(f"{key} has {values.shape[0]} frames, actions {n}", where=key)
    if dones is None:
        last = np.ones(n, dtype=bool)
        last[:-1] = episodes[1:] != episodes[:-1]
        done = last
    else:
        done = np.asarray(dones).reshape(-1).astype(bool)
    following = np.arange(n) + 1
    same_episode = np.zeros(n, dtype=bool)
    same_episode[:-1] = episodes[1:] == episodes[:-1]
    take_next = ~done & same_episode
    next_rows = np.where(take_next, np.minimum(following, n - 1), np.arange(n))
    extra = complementary or {}
    penalty = extra.get(DISCRETE_PENALTY)
    intervention = extra.get(IS_INTERVENTION)
    return TransitionBatch(
        state={k: np.asarray(v) for k, v in observations.items()},
        action=np.asarray(actions, dtype=np.float32),
        reward=np.asarray(rewards, dtype=np.float32).reshape(-1),
        next_state={k: np.asarray(v)[next_rows] for k, v in observations.items()},
        done=done.astype(np.float32),
        truncated=done.astype(np.float32),
        is_intervention=(
            np.zeros(n, dtype=bool)
            if intervention is None
            else np.asarray(intervention).reshape(-1).astype(bool)
        ),
        discrete_penalty=(
            np.zeros(n, dtype=np.float32)
            if penalty is None
            else np.asarray(penalty, dtype=np.float32).reshape(-1)
        ),
    )


def random_shift_images(
    batch: TransitionBatch, rng: np.random.Generator, pad: int = DRQ_PAD
) -> TransitionBatch:
    """DrQ: each image (state and next state alike, each its own draw) padded by `pad` pixels
    (edge values repeated) and cropped back to its size at a random offset. Images are
    `(n, C, H, W)` under keys starting with `observation.image`."""
    keys = [k for k in batch.state if k.startswith(IMAGE_PREFIX) and batch.state[k].ndim == 4]
    if not keys:
        return batch
    state, next_state = dict(batch.state), dict(batch.next_state)
    for key in keys:
        state[key] = _shift(batch.state[key], rng, pad)
        next_state[key] = _shift(batch.next_state[key], rng, pad)
    return attrs.evolve(batch, state=state, next_state=next_state)


def _shift(images: np.ndarray, rng: np.random.Generator, pad: int) -> np.ndarray:
    n, _, height, width = images.shape
    padded = np.pad(images, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="edge")
    offsets = rng.integers(0, 2 * pad + 1, size=(n, 2))
    out = np.empty_like(images)
    for i in range(n):
        top, left = (int(v) for v in offsets[i])
        out[i] = padded[i, :, top : top + height, left : left + width]
    return out


def episode_report(
    rewards: Sequence[float], interventions: Sequence[bool], interaction_step: int
) -> dict[str, Any]:
    """What the actor tells the learner at each episode's end (LeRobot's interaction message)."""
    steps = len(rewards)
    return {
        "Episodic reward": float(sum(rewards)),
        "Interaction step": int(interaction_step),
        "Episode intervention": int(any(interventions)),
        "Intervention rate": (sum(bool(i) for i in interventions) / steps) if steps else 0.0,
    }
