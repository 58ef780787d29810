"""Checking the data and video files one by one against the episodes placed in them.

A data file is read whole: every column the features need, each feature's dtype and shape
against its column and values that are not finite numbers (`check_values.py`), and for each
episode its rows (`index` exactly `[dataset_from_index, dataset_to_index)`, `frame_index` from 0,
timestamps `frame_index / fps`, task indices known, images decodable). A video file's packets are
all read (not decoded, except the first frame): each episode's span must hold one frame per row.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa

from rlctl.adapters.storage.lerobot_v3.errors import read_parquet_table
from rlctl.adapters.storage.lerobot_v3.paths import missing_file_message
from rlctl.adapters.storage.lerobot_v3.table import (
    bookkeeping_problem,
    missing_column_message,
    numeric_column,
    row_count_message,
    stored_columns,
    task_index_message,
)
from rlctl.adapters.storage.lerobot_v3.tools.check_values import (
    declared_type_problems,
    value_problems,
)
from rlctl.adapters.storage.lerobot_v3.tools.findings import Findings
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import DatasetError
from rlctl.domain.features import FeatureSpec

# LeRobot's `check_timestamps_sync` tolerance between a timestamp and frame_index / fps.
TIMESTAMP_TOLERANCE_S = 1e-4
REREAD_HINT = "download the dataset again, or rebuild it from its source"


def check_data_file(
    path: Path, meta: DatasetMeta, episodes: Sequence[EpisodeRecord], findings: Findings
) -> None:
    if not path.is_file():
        findings.add(
            missing_file_message([e.index for e in episodes], None, path),
            file=path,
            hint=REREAD_HINT,
        )
        return
    try:
        table = read_parquet_table(path, "data file", findings.root)
    except DatasetError as err:
        findings.from_error(err, path)
        return
    missing = [k for k in stored_columns(meta) if k not in table.column_names]
    for key in missing:
        findings.add(
            missing_column_message(key, meta),
            file=path,
            key=key,
            hint="remove the feature from meta/info.json, or rewrite the data with it",
        )
    if any(k in missing for k in ("index", "episode_index")):
        return
    wrong = bookkeeping_problem(table)
    if wrong is not None:
        findings.add(wrong[1], file=path, key=wrong[0], hint=REREAD_HINT)
        return
    unshaped = declared_type_problems(path, table, meta, findings)
    columns = _numeric_columns(path, table, meta, findings, skip=[*missing, *unshaped])
    if "episode_index" not in columns:
        return  # unreadable as numbers: noted; the rows cannot be told apart
    _check_episode_rows(path, columns, meta, episodes, findings)
    value_problems(
        path, table, columns["episode_index"], columns.get("frame_index"), findings, unshaped
    )
    for key, spec in meta.features.items():
        if spec.is_image and key not in missing and key not in unshaped:
            _check_images(path, key, table.column(key), columns["episode_index"], findings)


def _numeric_columns(
    path: Path, table: pa.Table, meta: DatasetMeta, findings: Findings, skip: list[str]
) -> dict[str, np.ndarray]:
    out = {}
    for key in stored_columns(meta):
        spec = meta.features.get(key) or FeatureSpec(key=key, dtype="int64", shape=(1,))
        if key in skip or not spec.is_numeric:
            continue
        try:
            out[key] = numeric_column(table.column(key), spec, where=f"{path}: {key}")
        except DatasetError as err:
            findings.add(err.message, file=path, key=key, hint=err.hint)
        except (pa.ArrowException, TypeError, ValueError) as err:
            findings.add(f"the column cannot be read as numbers: {err}", file=path, key=key)
    return out


def _check_episode_rows(
    path: Path,
    columns: dict[str, np.ndarray],
    meta: DatasetMeta,
    episodes: Sequence[EpisodeRecord],
    findings: Findings,
) -> None:
    episode_index = columns["episode_index"]
    placed = {e.index for e in episodes}
    for episode in episodes:
        where: dict[str, Any] = {"file": path, "episode": episode.index}
        rows = np.flatnonzero(episode_index == episode.index)
        if len(rows) != episode.length:
            findings.add(
                row_count_message(episode.length, len(rows)),
                key="episode_index",
                kind="row counts",
                **where,
            )
            continue
        expected = np.arange(episode.dataset_from_index, episode.dataset_to_index)
        index = columns.get("index")
        if index is not None and not np.array_equal(index[rows], expected):
            findings.add(
                f"its rows' index should run over [{episode.dataset_from_index}, "
                f"{episode.dataset_to_index}), found {_span(index[rows])}",
                key="index",
                kind="index values",
                **where,
            )
        frame_index = columns.get("frame_index")
        if frame_index is not None and not np.array_equal(
            frame_index[rows], np.arange(episode.length)
        ):
            findings.add(
                f"frame_index should run 0..{episode.length - 1}, found {_span(frame_index[rows])}",
                key="frame_index",
                kind="frame_index values",
                **where,
            )
        timestamp = columns.get("timestamp")
        if timestamp is not None:
            drift = np.abs(timestamp[rows].astype(np.float64) - np.arange(len(rows)) / meta.fps)
            if len(drift) and drift.max() > TIMESTAMP_TOLERANCE_S + 1e-6:
                findings.add(
                    f"timestamps are off frame_index / fps by up to {drift.max():.4f} s",
                    key="timestamp",
                    kind="timestamps",
                    **where,
                )
        task_index = columns.get("task_index")
        if task_index is not None:
            bad = task_index[rows][(task_index[rows] < 0) | (task_index[rows] >= len(meta.tasks))]
            if len(bad):
                findings.add(
                    task_index_message(int(bad[0]), len(meta.tasks)),
                    key="task_index",
                    kind="task indices",
                    **where,
                )
    stray = sorted(set(np.unique(episode_index).tolist()) - placed)
    committed = [e for e in stray if e < meta.total_episodes]
    if committed:
        findings.add(
            f"holds rows of episode(s) {committed[:8]} that meta/episodes places elsewhere",
            file=path,
            key="episode_index",
        )
    if len(committed) < len(stray):
        findings.warning(
            f"holds rows of uncommitted episode(s) {[e for e in stray if e not in committed][:8]} "
            "(an interrupted recording)",
            file=path,
            key="episode_index",
            hint="readers skip them; reopening the dataset with resume removes them",
        )


def _check_images(
    path: Path, key: str, column: pa.ChunkedArray, episode_index: np.ndarray, findings: Findings
) -> None:
    from PIL import Image

    data = column.combine_chunks()
    values = data.field("bytes") if pa.types.is_struct(data.type) else data
    for row, blob in enumerate(values.to_pylist()):
        try:
            if blob is None:
                raise ValueError("no image bytes")
            with Image.open(io.BytesIO(blob)) as image:
                image.verify()
        except Exception as err:
            findings.add(
                f"row {row} holds no readable image ({type(err).__name__}: {err})",
                file=path,
                key=key,
                episode=int(episode_index[row]),
                kind=f"unreadable images of {key}",
            )


def check_video_file(
    path: Path, key: str, meta: DatasetMeta, episodes: Sequence[EpisodeRecord], findings: Findings
) -> None:
    if not path.is_file():
        findings.add(
            missing_file_message([e.index for e in episodes], key, path),
            file=path,
            key=key,
            hint=REREAD_HINT,
        )
        return
    try:
        times, keyframes, size, declared = _packets(path)
    except Exception as err:
        findings.add(
            f"the video cannot be read: {type(err).__name__}: {err}",
            file=path,
            key=key,
            hint=REREAD_HINT,
        )
        return
    if declared > len(times):
        findings.add(
            f"the video is cut short: its header lists {declared} frames but {len(times)} can "
            "be read",
            file=path,
            key=key,
            hint=REREAD_HINT,
        )
    expected = meta.features[key].hwc[:2]
    if size != expected:
        findings.add(
            f"frames are {size[0]}x{size[1]} but the feature declares {expected[0]}x{expected[1]}",
            file=path,
            key=key,
        )
    half = 0.5 / meta.fps
    for episode in episodes:
        start = float(episode.columns[f"videos/{key}/from_timestamp"])
        end = float(episode.columns[f"videos/{key}/to_timestamp"])
        inside = np.flatnonzero((times >= start - half) & (times < end - half))
        where: dict[str, Any] = {"file": path, "key": key, "episode": episode.index}
        if len(inside) != episode.length:
            findings.add(
                f"its span [{start:.3f}, {end:.3f}) s holds {len(inside)} frames for "
                f"{episode.length} rows",
                kind="frame counts",
                **where,
            )
        elif len(inside) and not keyframes[inside[0]]:
            findings.warning(
                "its span does not start on a keyframe: editing tools must re-encode it",
                kind="spans not on keyframes",
                **where,
            )


def _packets(path: Path) -> tuple[np.ndarray, np.ndarray, tuple[int, int], int]:
    """Every packet's time (seconds, sorted) and keyframe flag, the picture size (from the first
    decoded frame) and the frame count the header declares."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        time_base = stream.time_base
        assert time_base is not None
        found: list[tuple[float, bool]] = []
        size: tuple[int, int] | None = None
        for packet in container.demux(stream):
            if packet.pts is None:
                continue
            found.append((float(packet.pts * time_base), bool(packet.is_keyframe)))
            if size is None:
                frames = packet.decode()
                if frames:
                    size = (frames[0].height, frames[0].width)
        if size is None:
            size = (stream.codec_context.height, stream.codec_context.width)
        declared = int(stream.frames or 0)
    found.sort()
    times = np.array([t for t, _ in found])
    keyframes = np.array([k for _, k in found], dtype=bool)
    return times, keyframes, size, declared


def _span(values: np.ndarray) -> str:
    if len(values) and np.array_equal(values, np.arange(values[0], values[0] + len(values))):
        return f"[{values[0]}, {values[0] + len(values)})"
    return str(values[:8].tolist()) + (" ..." if len(values) > 8 else "")
