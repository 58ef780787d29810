"""RecomputeStats: every feature's statistics computed again from the data.

Per episode, as LeRobot computes them: numeric features over all rows; cameras over LeRobot's
sampled frames (`stats_sample_indices`), shrunk as LeRobot shrinks them, per channel in [0, 1].
They replace the per-episode statistics in meta/episodes, and stats.json becomes their aggregate.

With `relative_actions`, stats.json's `action` entry holds the statistics of relative actions
(action - state over every chunk of `chunk_size` frames, see `relative_action_stats`): that is
LeRobot's convention (`recompute_stats(relative_action=True)`), which pi0/pi05 trained with
relative actions normalise with. The per-episode `action` statistics in meta/episodes stay
absolute, so running this again without the flag restores the absolute ones.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs
import numpy as np

from rlctl.application.ports.dataset import DatasetMetaReader
from rlctl.application.ports.dataset_tools import DatasetStatsAccess
from rlctl.application.ports.progress import Progress
from rlctl.application.relative_action_stats import action_names, relative_action_stats
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import InvalidInput
from rlctl.domain.statistics import (
    FeatureStats,
    aggregate_stats,
    compute_stats,
    image_stats,
    stats_from_json,
    stats_sample_indices,
)

ACTION = "action"
STATE = "observation.state"


def _joints(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class RecomputeRequest:
    location: str
    relative_actions: bool = False
    exclude_joints: tuple[str, ...] = attrs.field(default=("gripper",), converter=_joints)
    chunk_size: int = 50
    # False keeps the cameras' statistics as they are (decoding every episode takes a while).
    visual: bool = True


@attrs.frozen
class RecomputeResult:
    location: str
    episodes: int
    features: tuple[str, ...]
    # Chunks the relative action statistics were computed over (None without them).
    relative_chunks: int | None = None


class RecomputeStats:
    def __init__(
        self, meta_reader: DatasetMetaReader, stats_access: DatasetStatsAccess, progress: Progress
    ) -> None:
        self._meta_reader = meta_reader
        self._access = stats_access
        self._progress = progress

    def __call__(self, request: RecomputeRequest) -> RecomputeResult:
        if request.chunk_size < 1:
            raise InvalidInput(
                f"chunk size {request.chunk_size} must be positive", where="--chunk-size"
            )
        # Held from reading to writing: statistics written over a recording's new episodes
        # rows would drop them, and statistics of a dataset that changed meanwhile are wrong.
        with self._access.lock(request.location):
            return self._recompute(request)

    def _recompute(self, request: RecomputeRequest) -> RecomputeResult:
        meta = self._meta_reader.read_meta(request.location)
        if meta.total_episodes == 0:
            raise InvalidInput("the dataset has no episode", where=request.location)
        numeric = [k for k, f in meta.features.items() if f.is_numeric]
        # Depth cameras keep their statistics: LeRobot computes them from the frames as recorded,
        # which the quantized video only approximates (and LeRobot never recomputes cameras).
        visual = [k for k in meta.visual_keys if not meta.features[k].is_depth_map]
        visual = visual if request.visual else []
        if request.relative_actions:
            _require_relative_inputs(meta)
        per_episode: dict[int, dict[str, FeatureStats]] = {}
        relative_inputs: dict[str, list[np.ndarray]] = {ACTION: [], STATE: [], "episode": []}
        task = self._progress.task("computing statistics", total=meta.total_episodes)
        try:
            for episode, columns in self._access.numeric_columns(request.location, numeric):
                stats = {
                    key: compute_stats(columns[key], last_axis=columns[key].ndim >= 3)
                    for key in numeric
                }
                length = meta.episodes[episode].length
                for key in visual:
                    frames = self._access.frames(
                        request.location, key, episode, stats_sample_indices(length)
                    )
                    stats[key] = image_stats(frames)
                per_episode[episode] = stats
                if request.relative_actions:
                    relative_inputs[ACTION].append(columns[ACTION])
                    relative_inputs[STATE].append(columns[STATE])
                    relative_inputs["episode"].append(np.full(length, episode))
                task.advance()
        finally:
            task.close()
        stats = aggregate_stats([per_episode[i] for i in sorted(per_episode)])
        stats = {**_kept_stats(meta, stats), **stats}
        chunks = None
        if request.relative_actions:
            stats[ACTION], chunks = relative_action_stats(
                np.concatenate(relative_inputs[ACTION]),
                np.concatenate(relative_inputs[STATE]),
                np.concatenate(relative_inputs["episode"]),
                chunk_size=request.chunk_size,
                names=action_names(meta.features[ACTION].names),
                exclude_joints=request.exclude_joints,
            )
        ordered = {k: stats[k] for k in meta.features if k in stats}
        self._access.write_stats(request.location, per_episode, ordered)
        return RecomputeResult(
            request.location, len(per_episode), tuple(numeric + visual), relative_chunks=chunks
        )


def _require_relative_inputs(meta: DatasetMeta) -> None:
    missing = [k for k in (ACTION, STATE) if k not in meta.features]
    if missing:
        raise InvalidInput(
            f"relative actions need the features {ACTION!r} and {STATE!r}; the dataset lacks "
            f"{', '.join(missing)}",
            where="--relative-actions",
        )


def _kept_stats(meta: DatasetMeta, fresh: dict[str, FeatureStats]) -> dict[str, FeatureStats]:
    """stats.json entries of features not recomputed (cameras when skipped), kept as they are."""
    if not meta.stats:
        return {}
    try:
        current = stats_from_json(meta.stats)
    except InvalidInput:
        return {}
    return {k: v for k, v in current.items() if k in meta.features and k not in fresh}
