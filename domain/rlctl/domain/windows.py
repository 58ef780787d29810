"""Which rows `delta_timestamps` selects around a row, the way LeRobot 0.6.1 answers it.

A policy asks, per feature, for frames at offsets in seconds from the current one (`action`:
`[0, 1/fps, …]`, `observation.state`: `[-1/fps, 0]`). The offsets become whole frames; every
selected row is clamped into the current episode, and `is_pad` marks the rows that fell outside
it — the `"{key}_is_pad"` masks of a LeRobot item. Pure index arithmetic, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from rlctl.domain.errors import InvalidInput

DEFAULT_TOLERANCE_S = 1e-4

Deltas = Sequence[int] | np.ndarray


def is_pad_key(key: str) -> str:
    """The name of a feature's padding mask in a LeRobot item."""
    return f"{key}_is_pad"


def check_delta_timestamps(
    delta_timestamps: Mapping[str, Sequence[float]],
    fps: float,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> None:
    """Raise `InvalidInput` naming every key whose deltas are not multiples of `1/fps`.

    A delta `d` is accepted when `|d*fps - round(d*fps)| / fps <= tolerance_s`, LeRobot's rule.
    """
    if not fps > 0:
        raise InvalidInput(f"fps must be positive, got {fps}", where="fps")
    offending: dict[str, list[float]] = {}
    for key, deltas in delta_timestamps.items():
        seconds = np.asarray(deltas, dtype=np.float64).reshape(-1)
        frames = seconds * fps
        # NaN and inf land here too: their distance to the grid is NaN, never <= tolerance.
        with np.errstate(invalid="ignore"):
            outside = ~(np.abs(frames - np.rint(frames)) / fps <= tolerance_s)
        if outside.any():
            offending[key] = seconds[outside].tolist()
    if offending:
        listing = "; ".join(f"'{key}': {values}" for key, values in offending.items())
        raise InvalidInput(
            f"delta_timestamps not on the 1/{fps} s frame grid (tolerance {tolerance_s} s): "
            f"{listing}",
            where=f"delta_timestamps.{next(iter(offending))}",
            hint=f"use multiples of 1/fps, e.g. [i / {fps} for i in range(n)]",
        )


def delta_indices(
    delta_timestamps: Mapping[str, Sequence[float]], fps: float
) -> dict[str, np.ndarray]:
    """Deltas in seconds to deltas in frames: `round(d * fps)` (half to even, as Python's round)."""
    return {
        key: np.rint(np.asarray(deltas, dtype=np.float64).reshape(-1) * fps).astype(np.int64)
        for key, deltas in delta_timestamps.items()
    }


@attrs.frozen(eq=False)
class Window:
    """Rows selected around one row (shape `(k,)`) or many rows (shape `(n, k)`).

    `indices` are global rows, always inside the episode; `is_pad` is True exactly where the
    wanted row lay outside it and `indices` holds the clamped edge row instead.
    """

    indices: np.ndarray
    is_pad: np.ndarray


def window_batch(
    indices: Sequence[int] | np.ndarray,
    episode_from: int | Sequence[int] | np.ndarray,
    episode_to: int | Sequence[int] | np.ndarray,
    deltas: Deltas,
) -> Window:
    """Windows for many rows at once: row `indices[i]` lives in `[episode_from[i], episode_to[i])`.

    `episode_from` / `episode_to` may be scalars shared by all rows. The result has shape
    `(len(indices), len(deltas))`.
    """
    rows = np.asarray(indices, dtype=np.int64).reshape(-1, 1)
    starts = _per_row(episode_from, rows, "episode_from")
    ends = _per_row(episode_to, rows, "episode_to")
    _check_rows_inside(rows, starts, ends)
    wanted = rows + np.asarray(deltas, dtype=np.int64).reshape(1, -1)
    return Window(
        indices=np.clip(wanted, starts, ends - 1),
        is_pad=(wanted < starts) | (wanted >= ends),
    )


def window(index: int, episode_from: int, episode_to: int, deltas: Deltas) -> Window:
    """The rows `index + delta` for each delta, clamped into `[episode_from, episode_to)`."""
    batch = window_batch([index], episode_from, episode_to, deltas)
    return Window(indices=batch.indices[0], is_pad=batch.is_pad[0])


def query_windows(
    index: int, episode_from: int, episode_to: int, deltas_by_key: Mapping[str, Deltas]
) -> dict[str, Window]:
    """One window per feature, as LeRobot's `_get_query_indices` builds for one item."""
    return {key: window(index, episode_from, episode_to, d) for key, d in deltas_by_key.items()}


def _per_row(bound: int | Sequence[int] | np.ndarray, rows: np.ndarray, name: str) -> np.ndarray:
    values = np.asarray(bound, dtype=np.int64).reshape(-1, 1)
    if values.shape[0] not in (1, rows.shape[0]):
        raise InvalidInput(
            f"{name} has {values.shape[0]} entries for {rows.shape[0]} rows",
            where="window",
            hint=f"give one {name} per row, or one shared by all rows",
        )
    return np.broadcast_to(values, rows.shape)


def _check_rows_inside(rows: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
    empty = starts >= ends
    if empty.any():
        at = int(np.flatnonzero(empty.reshape(-1))[0])
        raise InvalidInput(
            f"episode rows [{starts.flat[at]}, {ends.flat[at]}) are empty",
            where="window",
            hint="episode_to is exclusive and must be greater than episode_from",
        )
    outside = (rows < starts) | (rows >= ends)
    if outside.any():
        at = int(np.flatnonzero(outside.reshape(-1))[0])
        raise InvalidInput(
            f"row {rows.flat[at]} is not inside its episode [{starts.flat[at]}, {ends.flat[at]})",
            where="window",
            hint="pass the bounds of the episode that holds the row",
        )
