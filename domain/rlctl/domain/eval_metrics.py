"""What an evaluation measures: per-episode rewards and success, and LeRobot's eval_info.json.

`RolloutTracker` follows one batch of vectorised episodes step by step. Each environment's
episode ends at its first `terminated | truncated` (or when the step limit is reached); what the
environment returns after that is ignored, so a batch can keep stepping until its slowest
episode ends without counting anything twice.

`EvalReport.to_info()` writes LeRobot 0.6.1's `eval_info.json` layout (`per_task`, `per_group`,
`overall`, with `avg_sum_reward`, `avg_max_reward`, `pc_success`, `n_episodes`, `eval_s`,
`eval_ep_s`, `video_paths`) so that dashboards reading LeRobot's file read ours; `per_episode`
is added beside them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from rlctl.domain.errors import InvalidInput

SUCCESS_KEY = "is_success"
FINAL_INFO_KEY = "final_info"


def _flags(value: Any, num_envs: int) -> np.ndarray:
    """A (num_envs,) bool array from a scalar, a list, or an object array holding None."""
    if value is None:
        return np.zeros(num_envs, dtype=bool)
    array = np.asarray(value)
    if array.ndim == 0:
        return np.full(num_envs, bool(array.item()), dtype=bool)
    if array.dtype == object:
        array = np.array([bool(v) if v is not None else False for v in array.ravel()])
    return array.astype(bool).reshape(num_envs)


def success_flags(info: Mapping[str, Any], num_envs: int) -> np.ndarray:
    """Which environments report success in a vectorised step's `info`.

    An environment that just ended may carry its terminal info under `final_info` (gymnasium's
    same-step autoreset, or an env that resets itself): that wins for it. Every other
    environment is read from `info["is_success"]`. Gymnasium marks the environments a key
    applies to with `_key` masks; the masks are honoured when present. The gymnasium < 1.0 form,
    a sequence of per-env dicts (or None), is accepted too.
    """
    flags: np.ndarray = _flags(info.get(SUCCESS_KEY), num_envs) & _mask(info, SUCCESS_KEY, num_envs)
    final = info.get(FINAL_INFO_KEY)
    if final is None:
        return flags
    if isinstance(final, Mapping):
        has_final = _mask(info, FINAL_INFO_KEY, num_envs) & _mask(final, SUCCESS_KEY, num_envs)
        final_flags = _flags(final.get(SUCCESS_KEY), num_envs)
    else:
        items = list(final)
        has_final = np.array([isinstance(x, Mapping) and SUCCESS_KEY in x for x in items])
        final_flags = np.array(
            [bool(x[SUCCESS_KEY]) if ok else False for x, ok in zip(items, has_final)]
        )
    return np.where(has_final, final_flags, flags)


def _mask(info: Mapping[str, Any], key: str, num_envs: int) -> np.ndarray:
    mask = info.get(f"_{key}")
    return np.ones(num_envs, dtype=bool) if mask is None else _flags(mask, num_envs)


class RolloutTracker:
    """Per-environment sums, maxima, success and length for one batch of episodes."""

    def __init__(
        self, num_envs: int, max_steps: int, task_texts: Sequence[str] | None = None
    ) -> None:
        if num_envs < 1 or max_steps < 1:
            raise InvalidInput(
                f"a rollout needs at least one env and one step, got {num_envs} and {max_steps}",
                where="rollout",
            )
        self.num_envs = num_envs
        self.max_steps = max_steps
        # The task text each env was given (LIBERO's instruction …), kept with its episode.
        texts = list(task_texts or [])
        self.task_texts = [str(t) for t in texts[:num_envs]] + [""] * (num_envs - len(texts))
        self.steps = 0
        self.done = np.zeros(num_envs, dtype=bool)
        self.sum_reward = np.zeros(num_envs, dtype=np.float64)
        # Every episode has at least one step before it is read, so -inf never leaks out.
        self.max_reward = np.full(num_envs, -np.inf, dtype=np.float64)
        self.success = np.zeros(num_envs, dtype=bool)
        self.length = np.zeros(num_envs, dtype=np.int64)

    @property
    def all_done(self) -> bool:
        return bool(self.done.all())

    def record(self, reward: Any, terminated: Any, truncated: Any, success: Any) -> np.ndarray:
        """Count one step for the environments still running; return those that just ended."""
        live = ~self.done
        reward = np.asarray(reward, dtype=np.float64).reshape(self.num_envs)
        ended = _flags(terminated, self.num_envs) | _flags(truncated, self.num_envs)
        self.sum_reward[live] += reward[live]
        self.max_reward[live] = np.maximum(self.max_reward[live], reward[live])
        self.success |= live & _flags(success, self.num_envs)
        self.length[live] += 1
        self.steps += 1
        finished: np.ndarray = live & (ended | (self.steps >= self.max_steps))
        self.done |= finished
        return finished

    def episodes(
        self, first_index: int, seeds: Sequence[int | None], keep: int
    ) -> list[EpisodeResult]:
        """The first `keep` environments' episodes, numbered from `first_index`."""
        return [
            EpisodeResult(
                index=first_index + i,
                seed=seeds[i],
                sum_reward=float(self.sum_reward[i]),
                max_reward=float(self.max_reward[i]),
                success=bool(self.success[i]),
                length=int(self.length[i]),
                task=self.task_texts[i],
            )
            for i in range(min(keep, self.num_envs))
        ]


@attrs.frozen
class EpisodeResult:
    index: int
    seed: int | None
    sum_reward: float
    max_reward: float
    success: bool
    length: int
    # The task text the policy was given ("" for envs without one).
    task: str = ""


def _mean(values: Sequence[float]) -> float:
    if not values:
        return math.nan
    return float(np.nanmean(np.asarray(values, dtype=np.float64)))


def aggregate(episodes: Sequence[EpisodeResult]) -> dict[str, Any]:
    """LeRobot's aggregate figures; NaN (as LeRobot writes) when there is no episode."""
    return {
        "avg_sum_reward": _mean([e.sum_reward for e in episodes]),
        "avg_max_reward": _mean([e.max_reward for e in episodes]),
        "pc_success": _mean([float(e.success) for e in episodes]) * 100,
        "n_episodes": len(episodes),
    }


def _episodes(value: Iterable[EpisodeResult]) -> tuple[EpisodeResult, ...]:
    return tuple(value)


def _video_paths(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _tasks(value: Iterable[TaskResult]) -> tuple[TaskResult, ...]:
    return tuple(value)


@attrs.frozen
class TaskResult:
    """The episodes of one task of one suite (LeRobot's task group and task id)."""

    suite: str
    task_id: int
    episodes: tuple[EpisodeResult, ...] = attrs.field(converter=_episodes)
    video_paths: tuple[str, ...] = attrs.field(default=(), converter=_video_paths)
    task: str = ""

    def to_info(self) -> dict[str, Any]:
        return {
            "task_group": self.suite,
            "task_id": self.task_id,
            "task": self.task,
            "metrics": {
                "sum_rewards": [e.sum_reward for e in self.episodes],
                "max_rewards": [e.max_reward for e in self.episodes],
                "successes": [e.success for e in self.episodes],
                "video_paths": list(self.video_paths),
                "predicted_video_paths": [],
            },
        }


@attrs.frozen
class EvalReport:
    tasks: tuple[TaskResult, ...] = attrs.field(converter=_tasks)
    eval_s: float = 0.0

    @property
    def episodes(self) -> list[EpisodeResult]:
        return [e for t in self.tasks for e in t.episodes]

    @property
    def suites(self) -> list[str]:
        return list(dict.fromkeys(t.suite for t in self.tasks))

    def overall(self) -> dict[str, Any]:
        episodes = self.episodes
        return {
            **aggregate(episodes),
            "eval_s": self.eval_s,
            "eval_ep_s": self.eval_s / max(1, len(episodes)),
            "video_paths": _paths(self.tasks),
            "predicted_video_paths": [],
        }

    def per_group(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for suite in self.suites:
            tasks = [t for t in self.tasks if t.suite == suite]
            out[suite] = {
                **aggregate([e for t in tasks for e in t.episodes]),
                "video_paths": _paths(tasks),
                "predicted_video_paths": [],
            }
        return out

    def to_info(self) -> dict[str, Any]:
        """The content of eval_info.json."""
        return {
            "per_episode": [
                {
                    "episode_ix": e.index,
                    "sum_reward": e.sum_reward,
                    "max_reward": e.max_reward,
                    "success": e.success,
                    "seed": e.seed,
                    "length": e.length,
                    "task_group": t.suite,
                    "task_id": t.task_id,
                    "task": e.task,
                }
                for t in self.tasks
                for e in t.episodes
            ],
            "per_task": [t.to_info() for t in self.tasks],
            "per_group": self.per_group(),
            "overall": self.overall(),
        }


def _paths(tasks: Iterable[TaskResult]) -> list[str]:
    return [p for t in tasks for p in t.video_paths]
