"""Where the files of a LeRobot v3.0 dataset live, relative to its root.

`meta/` has fixed names; data and video files are named by the `data_path` / `video_path`
templates of `meta/info.json`, filled with the chunk and file indices each episode's row in
`meta/episodes` records (`data/chunk_index`, `videos/<key>/file_index`, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rlctl.adapters.storage.lerobot_v3.errors import not_regular
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import CorruptDataset

INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
EPISODES_DIR = "meta/episodes"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DATA_DIR = "data"
VIDEOS_DIR = "videos"
DEFAULT_DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DEFAULT_VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"


def fill_template(template: str, template_key: str, **values: object) -> Path:
    """`template.format(**values)`, with a message naming info.json's key when it does not fit."""
    hint = "use LeRobot's template, e.g. " + (
        DEFAULT_DATA_PATH if template_key == "data_path" else DEFAULT_VIDEO_PATH
    )
    try:
        filled = template.format(**values)
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as err:
        raise CorruptDataset(
            f"the path template {template[:200]!r} cannot be filled with {sorted(values)} ({err})",
            where=f"{INFO_PATH}: {template_key}",
            hint=hint,
        ) from err
    path = Path(filled)
    # Metadata comes from strangers: a template must never lead out of the dataset folder.
    if not filled or path.is_absolute() or ".." in path.parts or "\x00" in filled:
        raise CorruptDataset(
            f"the path {filled[:200]!r} made from {template_key} is outside the dataset folder",
            where=f"{INFO_PATH}: {template_key}",
            hint="paths in info.json must be relative to the dataset root, without '..'; " + hint,
        )
    return path


def data_file(meta: DatasetMeta, chunk_index: int, file_index: int) -> Path:
    return fill_template(
        meta.data_path, "data_path", chunk_index=chunk_index, file_index=file_index
    )


def video_file(meta: DatasetMeta, video_key: str, chunk_index: int, file_index: int) -> Path:
    if not meta.video_path:
        raise CorruptDataset(
            f"feature {video_key!r} is a video but info.json has no video_path",
            where=f"{INFO_PATH}: video_path",
            hint=f"set video_path to {DEFAULT_VIDEO_PATH!r}",
        )
    return fill_template(
        meta.video_path,
        "video_path",
        video_key=video_key,
        chunk_index=chunk_index,
        file_index=file_index,
    )


def _episode_int(episode: EpisodeRecord, column: str) -> int:
    value = episode.columns.get(column)
    if value is None:
        raise CorruptDataset(
            f"episode {episode.index} has no {column!r}",
            where=f"{EPISODES_DIR}: {column}",
            hint="the episodes metadata is incomplete; rewrite it or re-download the dataset",
        )
    return int(value)


def episode_data_file(meta: DatasetMeta, episode: EpisodeRecord) -> Path:
    """The data parquet file holding an episode's rows."""
    return data_file(
        meta,
        _episode_int(episode, "data/chunk_index"),
        _episode_int(episode, "data/file_index"),
    )


def episode_video_file(meta: DatasetMeta, episode: EpisodeRecord, video_key: str) -> Path:
    """The mp4 file holding an episode's frames of one camera."""
    return video_file(
        meta,
        video_key,
        _episode_int(episode, f"videos/{video_key}/chunk_index"),
        _episode_int(episode, f"videos/{video_key}/file_index"),
    )


def episode_video_span(episode: EpisodeRecord, video_key: str) -> tuple[float, float]:
    """(from_timestamp, to_timestamp) of an episode inside its camera's mp4, in seconds."""
    start = episode.columns.get(f"videos/{video_key}/from_timestamp")
    end = episode.columns.get(f"videos/{video_key}/to_timestamp")
    if start is None or end is None:
        raise CorruptDataset(
            f"episode {episode.index} has no video span for {video_key!r}",
            where=f"{EPISODES_DIR}: videos/{video_key}/from_timestamp",
            hint="the episodes metadata is incomplete; rewrite it or re-download the dataset",
        )
    return float(start), float(end)


def missing_file_message(
    episodes: Sequence[int], video_key: str | None, path: Path | None = None
) -> str:
    """What the reader and the check say of a data (or video) file the episodes need, which is
    not there, or (`path` given) is there but no regular file (a FIFO, a device, a folder)."""
    shown = ", ".join(str(e) for e in episodes[:8]) + (" ..." if len(episodes) > 8 else "")
    what = "data file" if video_key is None else "video"
    kind = not_regular(path) if path is not None else None
    if kind is not None:
        return f"the {what} of episode(s) {shown} is {kind}, not a regular file"
    return f"the {what} of episode(s) {shown} is missing"
