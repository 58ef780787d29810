"""Language annotations, as LeRobot 0.6.1 stores them next to a dataset's frames.

Two columns, each row of the data a list of annotation rows:

- `language_persistent`: what holds from a moment on (a plan, the current subtask, a memory, a
  motion primitive, task rephrasings); the whole episode's list is repeated on every frame of the
  episode, each row carrying the `timestamp` (seconds into the episode) it starts at;
- `language_events`: what happens at one frame (an interjection, a question and answer about one
  camera's view, a pixel trace, a spoken reply as a `say` tool call); stored on that frame only.

A row is `role`, `content`, `style`, (`timestamp`,) `camera` and `tool_calls`. Styles `vqa` and
`trace` are tied to a camera (`observation.images.*`); a row with no style is a tool call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

LANGUAGE_PERSISTENT = "language_persistent"
LANGUAGE_EVENTS = "language_events"
LANGUAGE_COLUMNS = (LANGUAGE_PERSISTENT, LANGUAGE_EVENTS)
PERSISTENT_ROW_FIELDS = ("role", "content", "style", "timestamp", "camera", "tool_calls")
EVENT_ROW_FIELDS = ("role", "content", "style", "camera", "tool_calls")
PERSISTENT_STYLES = frozenset({"subtask", "plan", "memory", "motion", "task_aug"})
EVENT_STYLES = frozenset({"interjection", "vqa", "trace"})
VIEW_DEPENDENT_STYLES = frozenset({"vqa", "trace"})
# How a summary names rows without a style (LeRobot's tool-call atoms, e.g. `say`).
NO_STYLE = "none"


def row_fields(column: str) -> tuple[str, ...]:
    return PERSISTENT_ROW_FIELDS if column == LANGUAGE_PERSISTENT else EVENT_ROW_FIELDS


def column_for_style(style: str | None) -> str:
    """The column rows of `style` belong in (LeRobot's `column_for_style`); unknown styles
    (a project's own) go with the events."""
    return LANGUAGE_PERSISTENT if style in PERSISTENT_STYLES else LANGUAGE_EVENTS


@attrs.frozen
class ColumnSummary:
    """One language column: its annotation rows by style and by camera."""

    rows: int
    episodes: int
    styles: Mapping[str, int]
    cameras: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "episodes": self.episodes,
            "styles": dict(self.styles),
            "cameras": dict(self.cameras),
        }


def summarize_column(
    per_episode: Iterable[tuple[int, Sequence[Mapping[str, Any]]]],
) -> ColumnSummary:
    """Counts over `(episode, rows)` pairs: for `language_persistent` one pair per episode (its
    list, which every frame repeats), for `language_events` one per frame."""
    styles: Counter[str] = Counter()
    cameras: Counter[str] = Counter()
    episodes: set[int] = set()
    rows = 0
    for episode, found in per_episode:
        for row in found:
            rows += 1
            episodes.add(episode)
            styles[row.get("style") or NO_STYLE] += 1
            if row.get("camera"):
                cameras[str(row["camera"])] += 1
    return ColumnSummary(rows, len(episodes), dict(sorted(styles.items())), dict(cameras))
