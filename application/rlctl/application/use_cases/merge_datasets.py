"""MergeDatasets: A B … -> OUT, every episode of A, then of B, … renumbered from 0.

The datasets must share fps and features (all differences are listed at once). Tasks are
renumbered (a task of B equal to one of A becomes the same task), videos are copied without
re-encoding, and the statistics of the result are the merge of the inputs' statistics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import structlog

from rlctl.application.dataset_compat import dataset_differences, merged_features
from rlctl.application.ports.dataset_tools import EpisodeRef
from rlctl.application.use_cases.dataset_rebuild import (
    DatasetTool,
    EditResult,
    build,
    require_new_output,
)
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import FeatureMismatch, InvalidInput
from rlctl.domain.features import DEFAULT_FEATURE_KEYS
from rlctl.domain.statistics import FeatureStats, aggregate_stats, stats_from_json

log = structlog.get_logger(__name__)


class MergeDatasets(DatasetTool):
    def __call__(self, sources: Sequence[str], output: str) -> EditResult:
        if len(sources) < 2:
            raise InvalidInput(
                "merging needs at least two datasets",
                where="sources",
                hint="rlctl merge A B -o OUT",
            )
        if len(set(sources)) < len(sources):
            raise InvalidInput("a dataset is named twice", where=", ".join(sources))
        require_new_output(self._folders, output, sources)
        metas = [self._meta_reader.read_meta(source) for source in sources]
        check_mergeable(sources, metas)
        template = attrs.evolve(metas[0], features=merged_features(metas))
        refs = [
            EpisodeRef(source, episode)
            for source, meta in zip(sources, metas)
            for episode in range(meta.total_episodes)
        ]
        return build(
            self._rebuilder,
            self._progress,
            output=output,
            template=template,
            refs=refs,
            stats=merged_stats(metas),
            description="merging episodes",
        )


def check_mergeable(sources: Sequence[str], metas: Sequence[DatasetMeta]) -> None:
    """Raise one error listing every difference of every dataset from the first."""
    lines = []
    for source, meta in zip(sources[1:], metas[1:]):
        lines += [f"{source}: {line}" for line in dataset_differences(metas[0], meta)]
    if lines:
        raise FeatureMismatch(
            f"the datasets differ from {sources[0]}:\n  " + "\n  ".join(lines),
            where=sources[0],
            hint="only datasets with the same fps and features can be merged",
        )
    robots = {meta.robot_type for meta in metas}
    if len(robots) > 1:
        log.warning("merging datasets of different robot types; keeping the first", robots=robots)


def merged_stats(metas: Sequence[DatasetMeta]) -> Mapping[str, FeatureStats] | None:
    """The merge of each input's stats.json (what LeRobot's merge writes), for the features.

    The re-indexed columns are left to the rebuild (their values change). None, and the rebuild
    aggregates the episodes' own statistics, when an input has no usable stats.json.
    """
    parts = []
    for meta in metas:
        if not meta.stats:
            return None
        try:
            stats = stats_from_json(meta.stats)
        except InvalidInput:
            return None
        parts.append({k: v for k, v in stats.items() if k in meta.features and k not in _REINDEXED})
    try:
        return aggregate_stats(parts)
    except InvalidInput:  # statistics without counts, or of differing shapes
        return None


_REINDEXED = frozenset(DEFAULT_FEATURE_KEYS) - {"timestamp", "frame_index"}
