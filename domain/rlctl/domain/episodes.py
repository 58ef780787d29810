"""Episodes: contiguous runs of dataset rows, and finding the one that holds a global row index.

An episode owns the global rows `[dataset_from_index, dataset_to_index)`, as LeRobot's
`meta/episodes` table says. Episodes of a dataset (or of a selection of them) are sorted by their
first row and never overlap, but a selection may leave gaps between them.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from rlctl.domain.errors import InvalidInput
from rlctl.domain.feature_stats import FeatureStats


def _tasks(value: Sequence[str] | str) -> tuple[str, ...]:
    # A bare string is one task, not a sequence of one-letter tasks.
    return (value,) if isinstance(value, str) else tuple(value)


@attrs.frozen(eq=False)
class Episode:
    """One episode: its position in the dataset, its tasks, and the global rows it owns."""

    index: int
    length: int
    tasks: tuple[str, ...] = attrs.field(converter=_tasks)
    dataset_from_index: int
    dataset_to_index: int
    stats: Mapping[str, FeatureStats] | None = None

    def __attrs_post_init__(self) -> None:
        where = f"episode {self.index}"
        if self.index < 0:
            raise InvalidInput(f"episode index must be >= 0, got {self.index}", where=where)
        if self.dataset_from_index < 0 or self.dataset_to_index < self.dataset_from_index:
            raise InvalidInput(
                f"row range [{self.dataset_from_index}, {self.dataset_to_index}) is not a range",
                where=where,
                hint="dataset_from_index must be >= 0 and <= dataset_to_index (exclusive end)",
            )
        if self.length != self.dataset_to_index - self.dataset_from_index:
            raise InvalidInput(
                f"length {self.length} disagrees with rows "
                f"[{self.dataset_from_index}, {self.dataset_to_index})",
                where=where,
                hint="length must equal dataset_to_index - dataset_from_index",
            )

    def contains(self, global_index: int) -> bool:
        return self.dataset_from_index <= global_index < self.dataset_to_index

    def frame_index(self, global_index: int) -> int:
        """The position of a global row inside this episode (LeRobot's `frame_index`)."""
        if not self.contains(global_index):
            raise InvalidInput(
                f"row {global_index} is outside the episode's rows "
                f"[{self.dataset_from_index}, {self.dataset_to_index})",
                where=f"episode {self.index}",
            )
        return global_index - self.dataset_from_index

    def global_index(self, frame_index: int) -> int:
        if not 0 <= frame_index < self.length:
            raise InvalidInput(
                f"frame {frame_index} is outside the episode (length {self.length})",
                where=f"episode {self.index}",
            )
        return self.dataset_from_index + frame_index

    def with_stats(self, stats: Mapping[str, FeatureStats] | None) -> Episode:
        return attrs.evolve(self, stats=stats)


def _not_found(global_index: int, episodes: Sequence[Episode]) -> InvalidInput:
    if not episodes:
        return InvalidInput(f"row {global_index} asked of a dataset without episodes")
    first, last = episodes[0].dataset_from_index, episodes[-1].dataset_to_index
    return InvalidInput(
        f"row {global_index} belongs to none of the {len(episodes)} episodes "
        f"(rows {first} to {last - 1})",
        hint="the index is past the end, negative, or falls in a gap between selected episodes",
    )


def locate_episode(episodes: Sequence[Episode], global_index: int) -> Episode:
    """The episode holding `global_index`; `episodes` must be sorted by their first row."""
    position = bisect.bisect_right(episodes, global_index, key=lambda e: e.dataset_from_index) - 1
    if position < 0 or not episodes[position].contains(global_index):
        raise _not_found(global_index, episodes)
    return episodes[position]


@attrs.frozen(eq=False)
class EpisodeIndex:
    """Sorted episodes with their row bounds as arrays, to locate many rows at once.

    Build it once per dataset with `EpisodeIndex.of(episodes)`; it checks the order and overlap
    that `locate_episode` takes on trust.
    """

    episodes: tuple[Episode, ...]
    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def of(cls, episodes: Sequence[Episode]) -> EpisodeIndex:
        ordered = tuple(episodes)
        starts = np.array([e.dataset_from_index for e in ordered], dtype=np.int64)
        ends = np.array([e.dataset_to_index for e in ordered], dtype=np.int64)
        overlapping = np.flatnonzero(starts[1:] < ends[:-1])
        if overlapping.size:
            a, b = ordered[overlapping[0]], ordered[overlapping[0] + 1]
            raise InvalidInput(
                f"episode {b.index} starts at row {b.dataset_from_index}, before episode "
                f"{a.index} ends at row {a.dataset_to_index}",
                where="episodes",
                hint="episodes must be sorted by dataset_from_index and must not overlap",
            )
        return cls(episodes=ordered, starts=starts, ends=ends)

    def __len__(self) -> int:
        return len(self.episodes)

    @property
    def total_rows(self) -> int:
        return int((self.ends - self.starts).sum())

    def positions(self, global_indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Position (in `episodes`) of the episode holding each row, vectorised."""
        rows = np.asarray(global_indices, dtype=np.int64)
        positions = np.searchsorted(self.starts, rows, side="right") - 1
        inside = positions >= 0
        inside[inside] = rows[inside] < self.ends[positions[inside]]
        if not inside.all():
            raise _not_found(int(rows[~inside].flat[0]), self.episodes)
        return positions

    def locate(self, global_index: int) -> Episode:
        return self.episodes[int(self.positions([global_index])[0])]
