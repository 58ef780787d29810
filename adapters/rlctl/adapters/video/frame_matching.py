"""LeRobot's rule for accepting a decoded frame as the answer to a timestamp query."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rlctl.domain.video import VideoTimestampError


def check_tolerance(
    path: Path,
    queries: Sequence[float],
    found: Sequence[float],
    tolerance_s: float,
    backend: str,
) -> None:
    """Raise when a frame is `tolerance_s` or farther from its query (LeRobot accepts `< tol`)."""
    for query, frame_time in zip(queries, found, strict=True):
        if abs(query - frame_time) >= tolerance_s:
            raise VideoTimestampError(
                f"no frame within {tolerance_s:.4f} s of timestamp {query:.4f} s: the nearest "
                f"is at {frame_time:.4f} s (backend {backend})",
                where=str(path),
                hint=(
                    "the episode's from_timestamp/to_timestamp or the frame timestamps disagree "
                    "with the video; check meta/episodes, or skip this item"
                ),
            )
