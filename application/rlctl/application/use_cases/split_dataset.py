"""SplitDataset: chosen episodes of a dataset into a new one, or the whole of it into parts.

`--episodes SPEC -o OUT` copies those episodes (in index order) to OUT. Fractions follow
LeRobot's `split_dataset`: `{"train": 0.8, "val": 0.2}` gives the first 80 % of the episodes to
OUT/train and the rest to OUT/val (the last split takes what rounding leaves; a split that would
be empty is skipped). The source is not changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import structlog

from rlctl.application.episode_spec import parse_episode_spec
from rlctl.application.ports.dataset_tools import EpisodeRef
from rlctl.application.use_cases.dataset_rebuild import (
    DatasetTool,
    EditResult,
    build,
    require_new_output,
)
from rlctl.domain.errors import InvalidInput

log = structlog.get_logger(__name__)


def fraction_splits(total: int, fractions: Mapping[str, float]) -> dict[str, list[int]]:
    """LeRobot's `_fractions_to_episode_indices`: consecutive runs of episodes per split."""
    if not fractions:
        raise InvalidInput("no split given", where="--fractions", hint='e.g. "train=0.8,val=0.2"')
    if any(not 0 < f <= 1 for f in fractions.values()):
        raise InvalidInput(
            f"split fractions must lie in (0, 1], got {dict(fractions)}", where="--fractions"
        )
    if sum(fractions.values()) > 1.0 + 1e-9:
        raise InvalidInput(
            f"split fractions add up to {sum(fractions.values()):g}, more than 1",
            where="--fractions",
        )
    out: dict[str, list[int]] = {}
    start = 0
    names = list(fractions)
    for name in names:
        count = int(total * fractions[name])
        if count == 0:
            log.warning("split gets no episode; skipped", split=name)
            continue
        end = total if name == names[-1] else start + count
        out[name] = list(range(start, end))
        start = end
    return out


def parse_fractions(text: str) -> dict[str, float]:
    """`"train=0.8,val=0.2"` -> {"train": 0.8, "val": 0.2}."""
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            out[name.strip()] = float(value)
        except ValueError:
            raise InvalidInput(
                f"{part.strip()!r} is not NAME=FRACTION",
                where="--fractions",
                hint='e.g. "train=0.8,val=0.2"',
            ) from None
    return out


class SplitDataset(DatasetTool):
    def __call__(
        self,
        location: str,
        output: str,
        *,
        episodes: str | Sequence[int] | None = None,
        fractions: Mapping[str, float] | None = None,
    ) -> list[EditResult]:
        if (episodes is None) == (fractions is None):
            raise InvalidInput(
                "give either the episodes or the split fractions",
                where="--episodes / --fractions",
                hint='e.g. --episodes 0-9 -o OUT, or --fractions "train=0.8,val=0.2" -o OUT',
            )
        meta = self._meta_reader.read_meta(location)
        if episodes is not None:
            plan = {output: list(parse_episode_spec(episodes, meta.total_episodes))}
        else:
            assert fractions is not None
            splits = fraction_splits(meta.total_episodes, fractions)
            plan = {_child(output, name): chosen for name, chosen in splits.items()}
        for target in plan:
            require_new_output(self._folders, target, [location])
        return [
            build(
                self._rebuilder,
                self._progress,
                output=target,
                template=meta,
                refs=[EpisodeRef(location, i) for i in chosen],
                description=f"writing {target}",
            )
            for target, chosen in plan.items()
        ]


def _child(folder: str, name: str) -> str:
    return f"{folder.rstrip('/')}/{name}"
