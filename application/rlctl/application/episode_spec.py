"""Episode selections as people type them: `"0-4,7"`, `"3"`, `"10-"` (10 to the last).

Ranges are inclusive on both ends, as in `rlctl dataset pull --episodes 0-4,7`. The result is
sorted and without duplicates, so the same selection always names the same files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from rlctl.domain.errors import InvalidInput

_PART = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d*)\s*)?$")
SPEC_HINT = 'give episode indices and inclusive ranges separated by commas, e.g. "0-4,7"'


def parse_episode_spec(
    spec: str | Sequence[int], total: int | None = None, *, where: str = "--episodes"
) -> tuple[int, ...]:
    """The episode indices a spec names; with `total`, each must be below it.

    An open range (`"10-"`) needs `total` to know where it ends.
    """
    indices = _indices(spec, total, where) if isinstance(spec, str) else _checked(spec, where)
    if not indices:
        raise InvalidInput("the episode selection is empty", where=where, hint=SPEC_HINT)
    if total is not None:
        beyond = [i for i in indices if i >= total]
        if beyond:
            raise InvalidInput(
                f"episode(s) {format_episode_spec(beyond)} do not exist: the dataset has "
                f"{total} episode(s), numbered 0-{total - 1}"
                if total
                else f"episode(s) {format_episode_spec(beyond)} do not exist: the dataset is empty",
                where=where,
                hint=f"choose episodes between 0 and {max(total - 1, 0)}",
            )
    return indices


def _indices(spec: str, total: int | None, where: str) -> tuple[int, ...]:
    chosen: set[int] = set()
    for part in spec.split(","):
        if not part.strip():
            continue
        match = _PART.match(part)
        if match is None:
            raise InvalidInput(
                f"{part.strip()!r} is not an episode or a range", where=where, hint=SPEC_HINT
            )
        first = int(match.group(1))
        if match.group(2) is None:
            chosen.add(first)
            continue
        if match.group(3):
            last = int(match.group(3))
        elif total is not None:
            last = total - 1
        else:
            raise InvalidInput(
                f"the open range {part.strip()!r} needs the number of episodes",
                where=where,
                hint="close the range, e.g. 10-19",
            )
        if last < first:
            raise InvalidInput(
                f"the range {part.strip()!r} runs backwards", where=where, hint=SPEC_HINT
            )
        chosen.update(range(first, last + 1))
    return tuple(sorted(chosen))


def _checked(indices: Iterable[int], where: str) -> tuple[int, ...]:
    values = sorted(set(indices))
    if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in values):
        raise InvalidInput(
            f"episode indices must be whole numbers >= 0, got {values}",
            where=where,
            hint=SPEC_HINT,
        )
    return tuple(values)


def format_episode_spec(indices: Iterable[int]) -> str:
    """The shortest spec naming `indices`: [0, 1, 2, 3, 7] -> "0-3,7"."""
    values = sorted(set(indices))
    parts: list[str] = []
    start = previous = None
    for value in values:
        if previous is not None and value == previous + 1:
            previous = value
            continue
        if start is not None:
            parts.append(_range(start, previous))
        start = previous = value
    if start is not None:
        parts.append(_range(start, previous))
    return ",".join(parts)


def _range(first: int, last: int | None) -> str:
    return str(first) if last is None or last == first else f"{first}-{last}"
