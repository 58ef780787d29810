"""Reopening a dataset for appending: find its last committed episode, drop what came after.

`meta/info.json` is the writer's commit point: its `total_episodes` says which episodes are
complete. An interrupted session may have left more behind it: rows of an unfinished episode at
the end of the last data file, a row in the episodes file or a task in tasks.parquet that info.json
does not count yet, frames at the end of a video file, temporary files. `recover` removes all of it
(frames at the end of a video are left: nothing points at them, and new episodes start a new file)
and returns what a new session needs to carry on.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import structlog

from rlctl.adapters.storage.lerobot_v3.atomic_files import StagedReplace, write_atomic
from rlctl.adapters.storage.lerobot_v3.errors import read_parquet_table, reading
from rlctl.adapters.storage.lerobot_v3.leftovers import STAGING_DIR
from rlctl.adapters.storage.lerobot_v3.meta_rules import Refuse, episode_files, load_meta
from rlctl.adapters.storage.lerobot_v3.meta_writer import (
    STAT_KEYS,
    stage_stats,
    stage_tasks,
    stats_shapes,
)
from rlctl.adapters.storage.lerobot_v3.paths import STATS_PATH, TASKS_PATH, data_file
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec
from rlctl.domain.statistics import FeatureStats, aggregate_stats

log = structlog.get_logger(__name__)

_WRITTEN_DIRS = ("meta", "data", "videos")

ChunkFile = tuple[int, int]


@attrs.frozen
class RecoveredDataset:
    """The committed state of a dataset, ready for appending.

    `layout` holds info.json's checked file settings (chunks_size, size limits, path templates,
    defaults filled in); `info` is the file as it was, unknown keys and all, to be written back.
    """

    info: dict[str, Any]
    layout: DatasetMeta
    features: dict[str, FeatureSpec]
    tasks: tuple[str, ...]
    total_episodes: int
    total_frames: int
    stats: dict[str, FeatureStats] | None
    last_data_file: ChunkFile | None
    last_meta_file: ChunkFile | None
    last_video_files: dict[str, ChunkFile | None]
    removed: tuple[str, ...]


def remove_leftovers(root: Path) -> list[Path]:
    """Delete the staging folder and the hidden temporary files of an interrupted session."""
    removed: list[Path] = []
    staging = root / STAGING_DIR
    if staging.exists():
        shutil.rmtree(staging, ignore_errors=True)
        removed.append(staging)
    for folder in _WRITTEN_DIRS:
        for path in (root / folder).rglob(".*"):
            if path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def _chunk_file(path: Path) -> ChunkFile | None:
    """(chunk, file) of `.../chunk-XXX/file-YYY.ext`, None for other names."""
    try:
        chunk = int(path.parent.name.removeprefix("chunk-"))
        file = int(path.stem.removeprefix("file-"))
    except ValueError:
        return None
    return chunk, file


def _files_after(folder: Path, suffix: str, last: ChunkFile | None) -> list[Path]:
    """Files under `folder/chunk-*/` numbered after `last` (all of them when `last` is None)."""
    found = []
    for path in folder.glob(f"chunk-*/file-*{suffix}"):
        position = _chunk_file(path)
        if position is not None and (last is None or position > last):
            found.append(path)
    return sorted(found)


def recover(root: Path) -> RecoveredDataset:
    # The reader's rules, to the letter: what the reader refuses cannot be resumed either.
    meta = load_meta(root, Refuse(root))
    assert meta is not None
    info = dict(meta.info)
    features = dict(meta.features)
    total = meta.total_episodes
    removed = [str(p) for p in remove_leftovers(root)]

    rows = _committed_episode_rows(root, total, removed)
    frames = meta.total_frames
    last_data = _last(rows, "data")
    _truncate_data(root, meta, rows, last_data, removed)
    video_keys = [k for k, f in features.items() if f.is_video]
    last_videos = {key: _last(rows, f"videos/{key}") for key in video_keys}
    for key, last in last_videos.items():
        for path in _files_after(root / "videos" / key, ".mp4", last):
            path.unlink()
            removed.append(str(path))

    tasks = meta.tasks
    counted = info.get("total_tasks")  # checked by the rules: a whole number or absent
    total_tasks = len(tasks) if counted is None else int(counted)
    stats = _episode_stats(rows, features)
    staged = StagedReplace()
    if len(tasks) > total_tasks:
        tasks = tasks[:total_tasks]
        stage_tasks(staged, root, tasks)
        removed.append(f"{root / TASKS_PATH} (tasks past {total_tasks})")
    if stats is not None:
        stage_stats(staged, root, stats)
    staged.publish()
    if stats is None:
        (root / STATS_PATH).unlink(missing_ok=True)
    if not rows:
        (root / TASKS_PATH).unlink(missing_ok=True)
    if removed:
        log.info("resume removed an interrupted session's leftovers", removed=removed)
    return RecoveredDataset(
        info=info,
        layout=attrs.evolve(meta, episodes=(), stats=None),
        features=features,
        tasks=tuple(tasks),
        total_episodes=total,
        total_frames=frames,
        stats=stats,
        last_data_file=last_data,
        last_meta_file=_last(rows, "meta/episodes"),
        last_video_files=last_videos,
        removed=tuple(removed),
    )


def _last(rows: list[dict[str, Any]], prefix: str) -> ChunkFile | None:
    if not rows:
        return None
    return int(rows[-1][f"{prefix}/chunk_index"]), int(rows[-1][f"{prefix}/file_index"])


def _committed_episode_rows(root: Path, total: int, removed: list[str]) -> list[dict[str, Any]]:
    """Rows of episodes 0..total-1 (the rules checked their numbering); rows of later episodes
    are cut from the files."""
    rows: list[dict[str, Any]] = []
    for path in episode_files(root):
        table = read_parquet_table(path, "episodes metadata file", root)
        keep = pc.less(table.column("episode_index"), total)
        kept = table.filter(keep)
        if kept.num_rows < table.num_rows:
            if kept.num_rows:
                write_atomic(path, functools.partial(pq.write_table, kept))
            else:
                path.unlink()
            removed.append(f"{path} ({table.num_rows - kept.num_rows} uncommitted rows)")
        rows.extend(kept.to_pylist())
    return rows


def _truncate_data(
    root: Path,
    meta: DatasetMeta,
    rows: list[dict[str, Any]],
    last: ChunkFile | None,
    removed: list[str],
) -> None:
    for path in _files_after(root / "data", ".parquet", last):
        path.unlink()
        removed.append(str(path))
    if last is None:
        return
    path = root / data_file(meta, *last)
    expected = sum(
        int(row["length"])
        for row in rows
        if (int(row["data/chunk_index"]), int(row["data/file_index"])) == last
    )
    with reading(path, "data file", root):
        source = pq.ParquetFile(path)
    if source.metadata.num_rows == expected:
        return
    committed = len(rows)

    def rewrite(temp: Path) -> None:
        with pq.ParquetWriter(temp, source.schema_arrow, compression="snappy") as out:
            for group in range(source.num_row_groups):
                table = source.read_row_group(group)
                table = table.filter(pc.less(table.column("episode_index"), pa.scalar(committed)))
                if table.num_rows:
                    out.write_table(table)

    write_atomic(path, rewrite)
    removed.append(f"{path} ({source.metadata.num_rows - expected} uncommitted rows)")


def _episode_stats(
    rows: list[dict[str, Any]], features: dict[str, FeatureSpec]
) -> dict[str, FeatureStats] | None:
    """stats.json recomputed from the committed episodes' own statistics."""
    if not rows:
        return None
    per_episode = []
    for row in rows:
        stats = {}
        for key in stats_shapes(features):
            entry = {s: row[f"stats/{key}/{s}"] for s in STAT_KEYS if f"stats/{key}/{s}" in row}
            if entry.get("mean") is None:
                continue
            try:
                stats[key] = FeatureStats.from_json(entry, where=f"meta/episodes: stats/{key}")
            except (InvalidInput, TypeError, ValueError) as err:
                # The reader and the check only warn about these (LeRobot loads them): so does
                # resume, leaving them out of stats.json.
                log.warning(
                    "an episode's statistics cannot be used; stats.json is computed without them "
                    "(`rlctl dataset recompute-stats` rebuilds them)",
                    episode=row["episode_index"],
                    feature=key,
                    error=str(err),
                )
        per_episode.append(stats)
    return aggregate_stats(per_episode)
