"""Checking a dataset's `meta/` folder, problem by problem instead of stopping at the first.

The reader raises on the first thing wrong; `rlctl dataset check` wants all of them. The same
readers are used piece by piece (info.json, tasks, each episodes file, stats.json), each failure
is noted, and whatever could be read is handed on so the data and video files get checked too.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np

from rlctl.adapters.storage.lerobot_v3.errors import read_parquet_table
from rlctl.adapters.storage.lerobot_v3.meta_reader import (
    REQUIRED_EPISODE_COLUMNS,
    episode_files,
    read_info,
    read_stats,
    read_tasks,
)
from rlctl.adapters.storage.lerobot_v3.meta_writer import stats_shapes
from rlctl.adapters.storage.lerobot_v3.paths import (
    DEFAULT_DATA_PATH,
    EPISODES_DIR,
    INFO_PATH,
    STATS_PATH,
    TASKS_PATH,
)
from rlctl.adapters.storage.lerobot_v3.tools.findings import Findings
from rlctl.adapters.storage.lerobot_v3.tools.sources import stats_from_columns
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import DatasetError, DatasetVersionError, InvalidInput
from rlctl.domain.features import FeatureSpec, features_from_info
from rlctl.domain.statistics import FeatureStats

RECOVER_HINT = "reopen the dataset with resume (or ignore: readers skip it)"


def check_meta(root: Path, findings: Findings) -> DatasetMeta | None:
    """The metadata as far as it can be trusted, or None when the files cannot be placed."""
    try:
        info = read_info(root)
    except DatasetVersionError as err:
        findings.from_error(err, INFO_PATH, key="codebase_version")
        return None
    except DatasetError as err:
        findings.from_error(err, INFO_PATH)
        return None
    features = _features(info, findings)
    totals = {k: _whole(info, k, findings) for k in ("fps", "total_episodes", "total_frames")}
    if features is None or None in totals.values():
        return None
    tasks = _tasks(root, info, findings)
    records = _episodes(root, findings, features, tasks, totals["total_episodes"])
    frames = sum(r.length for r in records)
    if len(records) == totals["total_episodes"] and frames != totals["total_frames"]:
        findings.add(
            f"info.json says {totals['total_frames']} frames but the episodes add up to {frames}",
            file=INFO_PATH,
            key="total_frames",
            hint="set total_frames to the sum of the episodes' lengths",
        )
    meta = DatasetMeta(
        codebase_version=str(info["codebase_version"]),
        fps=totals["fps"],
        features=features,
        total_episodes=len(records),
        total_frames=frames,
        tasks=tasks,
        episodes=tuple(records),
        chunks_size=int(info.get("chunks_size") or 1000),
        data_path=str(info.get("data_path") or DEFAULT_DATA_PATH),
        video_path=info.get("video_path"),
        info=info,
    )
    _check_stats(root, meta, findings)
    return meta


def _whole(info: dict[str, Any], key: str, findings: Findings) -> int | None:
    value = info.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        findings.add(
            f"{key} must be a whole number, found {value!r}",
            file=INFO_PATH,
            key=key,
            hint="restore info.json from the original dataset",
        )
        return None
    return int(value)


def _features(info: dict[str, Any], findings: Findings) -> dict[str, FeatureSpec] | None:
    try:
        features = features_from_info(info.get("features"))  # type: ignore[arg-type]
    except InvalidInput as err:
        findings.add(err.message, file=INFO_PATH, key=err.where, hint=err.hint)
        return None
    for key, spec in features.items():
        if spec.is_video and not info.get("video_path"):
            findings.add(
                f"feature {key!r} is a video but info.json has no video_path",
                file=INFO_PATH,
                key="video_path",
            )
    return features


def _tasks(root: Path, info: dict[str, Any], findings: Findings) -> tuple[str, ...]:
    try:
        tasks = read_tasks(root, expected=info.get("total_tasks"))
    except DatasetError as err:
        findings.from_error(err, TASKS_PATH)
        return ()
    total = info.get("total_tasks")
    if isinstance(total, int) and len(tasks) < total:
        findings.add(
            f"info.json says {total} tasks but tasks.parquet lists {len(tasks)}",
            file=TASKS_PATH,
            key="total_tasks",
        )
    elif isinstance(total, int) and len(tasks) > total:
        findings.warning(
            f"tasks.parquet lists {len(tasks) - total} task(s) past info.json's total_tasks "
            "(an interrupted commit)",
            file=TASKS_PATH,
            hint=RECOVER_HINT,
        )
    return tasks


def _episodes(
    root: Path,
    findings: Findings,
    features: dict[str, FeatureSpec],
    tasks: tuple[str, ...],
    total: int,
) -> list[EpisodeRecord]:
    files = episode_files(root)
    if not files:
        if total:
            findings.add(
                f"info.json counts {total} episodes but meta/episodes holds no parquet file",
                file=EPISODES_DIR,
                hint="the local copy is incomplete: download the dataset again",
            )
        return []
    records: list[tuple[Path, EpisodeRecord]] = []
    for path in files:
        records += [(path, r) for r in _episode_rows(root, path, findings, features, tasks)]
    _check_numbering(records, findings)
    if len(records) > total:
        findings.warning(
            f"meta/episodes holds {len(records) - total} row(s) past info.json's "
            f"total_episodes ({total}): an interrupted commit, ignored",
            file=records[total][0],
            episode=records[total][1].index,
            hint=RECOVER_HINT,
        )
    elif len(records) < total:
        findings.add(
            f"info.json says {total} episodes but meta/episodes lists {len(records)}",
            file=INFO_PATH,
            key="total_episodes",
            hint="download the dataset again, or set total_episodes to the episodes present",
        )
    return [record for _, record in records[:total]]


def _episode_rows(
    root: Path,
    path: Path,
    findings: Findings,
    features: dict[str, FeatureSpec],
    tasks: tuple[str, ...],
) -> list[EpisodeRecord]:
    try:
        table = read_parquet_table(path, "episodes metadata file", root)
    except DatasetError as err:
        findings.from_error(err, path)
        return []
    missing = [c for c in REQUIRED_EPISODE_COLUMNS if c not in table.column_names]
    needed = ["data/chunk_index", "data/file_index"]
    for key, spec in features.items():
        if spec.is_video:
            needed += [f"videos/{key}/{c}" for c in ("chunk_index", "file_index")]
            needed += [f"videos/{key}/{c}" for c in ("from_timestamp", "to_timestamp")]
    missing += [c for c in needed if c not in table.column_names]
    if missing:
        findings.add(
            f"the episodes metadata lacks the column(s) {', '.join(missing)}",
            file=path,
            hint="rewrite the episodes metadata with LeRobot or rlctl",
        )
        if any(c in REQUIRED_EPISODE_COLUMNS for c in missing):
            return []
    records = []
    for values in table.to_pylist():
        record = EpisodeRecord(
            index=int(values["episode_index"]),
            length=int(values["length"]),
            tasks=tuple(values.get("tasks") or ()),
            dataset_from_index=int(values["dataset_from_index"]),
            dataset_to_index=int(values["dataset_to_index"]),
            columns=values,
        )
        where = {"file": path, "episode": record.index}
        if record.dataset_to_index - record.dataset_from_index != record.length:
            findings.add(
                f"length {record.length} but rows [{record.dataset_from_index}, "
                f"{record.dataset_to_index})",
                key="length",
                kind="lengths disagreeing with dataset_from/to_index",
                **where,
            )
        unknown = [t for t in record.tasks if t not in tasks]
        if unknown and tasks:
            findings.add(
                f"tasks {unknown} are not in meta/tasks.parquet", key="tasks", kind="tasks", **where
            )
        try:
            stats_from_columns(values, str(path))
        except DatasetError as err:
            findings.add(err.message, key="stats", kind="statistics", **where)
        if all(values.get(c) is not None for c in needed):
            records.append(record)
        else:
            findings.add("the episode's file columns are empty", kind="file columns", **where)
    return records


def _check_numbering(records: list[tuple[Path, EpisodeRecord]], findings: Findings) -> None:
    # LeRobot finds an episode's row by its position: episode_index must be 0..N-1 in order.
    for position, (path, record) in enumerate(records):
        if record.index != position:
            findings.add(
                f"row {position} of meta/episodes is episode {record.index}; episodes must be "
                "numbered 0..N-1 in order",
                file=path,
                key="episode_index",
                episode=record.index,
                kind="episode numbering",
            )
    for (_, before), (path, after) in itertools.pairwise(records):
        if after.dataset_from_index != before.dataset_to_index:
            findings.add(
                f"starts at row {after.dataset_from_index} but episode {before.index} ends at "
                f"row {before.dataset_to_index}",
                file=path,
                key="dataset_from_index",
                episode=after.index,
                kind="gaps between episodes",
            )


def _check_stats(root: Path, meta: DatasetMeta, findings: Findings) -> None:
    if not (root / STATS_PATH).exists():
        if meta.total_episodes:
            findings.warning(
                "there is no meta/stats.json; policies need it for normalisation",
                file=STATS_PATH,
                hint=f"compute it: rlctl dataset recompute-stats {root}",
            )
        return
    try:
        raw = read_stats(root) or {}
    except DatasetError as err:
        findings.from_error(err, STATS_PATH)
        return
    shapes = stats_shapes(meta.features)
    for key, entry in raw.items():
        if key not in meta.features:
            continue  # LeRobot keeps statistics of removed features; harmless
        try:
            stats = FeatureStats.from_json(
                {k: np.asarray(v).tolist() for k, v in entry.items()}, where=f"stats.{key}"
            )
        except InvalidInput as err:
            findings.add(err.message, file=STATS_PATH, key=key, hint=err.hint)
            continue
        expected = shapes.get(key)
        if expected is not None and stats.shape != tuple(expected):
            findings.add(
                f"statistics of shape {list(stats.shape)}, expected {list(expected)}",
                file=STATS_PATH,
                key=key,
                hint=f"recompute them: rlctl dataset recompute-stats {root}",
            )
