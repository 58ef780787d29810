"""The rows of some episodes of one data file, read from the Hub by ranges.

pyarrow reads the file's footer, then only the row groups whose `index` range meets the
episodes' rows (all of them when the file keeps no statistics), and only the stored columns.
The rows then pass the local reader's checks and become the same `FrameTable`, so an item
built from them is the item a local copy gives.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rlctl.adapters.storage.lerobot_v3.errors import plain_table
from rlctl.adapters.storage.lerobot_v3.table import (
    FrameTable,
    checked_rows,
    frame_table,
    missing_column_message,
    stored_columns,
)
from rlctl.adapters.storage.streaming.source import StreamSource
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import CorruptDataset, RlctlError

DAMAGED_HINT = (
    "the dataset on the Hub is damaged: ask its owner to push it again, or use another "
    "revision (--dataset.revision)"
)


@contextmanager
def remote_table(url: str, local: Path) -> Iterator[None]:
    """pyarrow's failures, and the local reader's refusals, named by the file's URL."""
    try:
        yield
    except CorruptDataset as error:
        where = (error.where or "").replace(str(local), url) or url
        raise CorruptDataset(error.message, where=where, hint=DAMAGED_HINT) from error
    except RlctlError:
        raise
    except (pa.ArrowException, OSError, ValueError) as error:
        first = (str(error).strip() or type(error).__name__).splitlines()[0]
        raise CorruptDataset(
            f"the data file cannot be read: {first}", where=url, hint=DAMAGED_HINT
        ) from error


def read_piece(
    source: StreamSource, meta: DatasetMeta, path: Path, episodes: Sequence[EpisodeRecord]
) -> FrameTable:
    """The rows of `episodes` (all held by the data file at `path` under the root)."""
    in_repo = source.path_in_repo(path)
    remote = source.files.open(in_repo)
    chosen = sorted(episodes, key=lambda e: e.dataset_from_index)
    columns = stored_columns(meta)
    with remote_table(source.files.url(in_repo), path):
        parquet = pq.ParquetFile(remote, pre_buffer=True)
        names = parquet.schema_arrow.names
        missing = [key for key in columns if key not in names]
        if missing:
            raise CorruptDataset(
                missing_column_message(missing[0], meta), where=f"{path}: {missing[0]}"
            )
        # No group meeting the episodes: the file disagrees with meta/episodes; reading it all
        # lets the local reader's checks say how.
        groups = _row_groups(parquet, chosen) or list(range(parquet.metadata.num_row_groups))
        table = plain_table(parquet.read_row_groups(groups, columns=columns))
        rows = checked_rows(source.root, path, table, chosen)
        return frame_table(source.root, meta, [(path, chosen)], [rows])


def _row_groups(parquet: pq.ParquetFile, episodes: Sequence[EpisodeRecord]) -> list[int]:
    """Row groups whose `index` column meets an episode's `[dataset_from_index, to_index)`."""
    metadata = parquet.metadata
    spans = [(e.dataset_from_index, e.dataset_to_index) for e in episodes]
    chosen = []
    for number in range(metadata.num_row_groups):
        group = metadata.row_group(number)
        bounds = None
        for column in range(group.num_columns):
            chunk = group.column(column)
            if chunk.path_in_schema == "index":
                stats = chunk.statistics
                if stats is not None and stats.has_min_max:
                    bounds = (int(stats.min), int(stats.max))
                break
        if bounds is None or any(lo <= bounds[1] and bounds[0] < hi for lo, hi in spans):
            chosen.append(number)
    return chosen
