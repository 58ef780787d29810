"""One episode of a LeRobot v3.0 dataset for the viewer: its columns and its video clips.

Only the asked columns of the episode's data file are read (no image column, no video), and the
clips are where `meta/episodes` says the episode lies in each camera's mp4, so a page switches
episodes in milliseconds whatever the dataset's size.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlctl.adapters.storage.lerobot_v3.errors import read_parquet_table
from rlctl.adapters.storage.lerobot_v3.identity import FolderIdentity
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader, dataset_root
from rlctl.adapters.storage.lerobot_v3.paths import (
    INFO_PATH,
    episode_data_file,
    episode_video_file,
    episode_video_span,
)
from rlctl.adapters.storage.lerobot_v3.table import numeric_column
from rlctl.application.ports.episode_data import VideoClip
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import CorruptDataset, InvalidInput
from rlctl.domain.features import FeatureSpec

# Episodes' cameras whose pictures stay in memory (one camera of one episode each).
_CACHED_CAMERAS = 4


class LeRobotEpisodeData:
    def __init__(self) -> None:
        # Reread when info.json changes (a recording appended episodes); a page asks per episode.
        self._metas: dict[Path, tuple[int, DatasetMeta]] = {}
        # The folder first read at each root: an edit in place puts another one there, whose
        # episodes are not those the page lists (`identity`).
        self._identities: dict[Path, FolderIdentity] = {}
        self._pictures_cache: OrderedDict[tuple[Path, int, str], list[bytes | None]] = OrderedDict()
        self._lock = threading.Lock()

    def _meta(self, location: str) -> tuple[Path, DatasetMeta]:
        root = dataset_root(location).resolve()
        identity = self._identities.setdefault(root, FolderIdentity.of(root))
        identity.check()
        info = root / INFO_PATH
        stamp = info.stat().st_mtime_ns if info.is_file() else 0
        cached = self._metas.get(root)
        if cached is None or cached[0] != stamp:
            cached = self._metas[root] = (stamp, LeRobotMetaReader().read_meta(root))
        return root, cached[1]

    def _record(self, location: str, episode_index: int) -> tuple[Path, DatasetMeta, EpisodeRecord]:
        root, meta = self._meta(location)
        for record in meta.episodes:
            if record.index == episode_index:
                return root, meta, record
        raise InvalidInput(
            f"episode {episode_index} does not exist ({meta.total_episodes} episodes)",
            where=str(root),
            hint=f"pick one of 0..{meta.total_episodes - 1}",
        )

    def read_columns(
        self, location: str, episode_index: int, keys: Sequence[str]
    ) -> Mapping[str, np.ndarray]:
        root, meta, record = self._record(location, episode_index)
        path = root / episode_data_file(meta, record)
        wanted = list(dict.fromkeys([*keys, "episode_index", "frame_index"]))
        table = read_parquet_table(path, "data file", root, columns=wanted)
        rows = table.filter(pc.equal(table.column("episode_index"), pa.scalar(record.index)))
        rows = rows.take(pc.sort_indices(rows.column("frame_index")))
        if rows.num_rows != record.length:
            raise CorruptDataset(
                f"episode {record.index} has {rows.num_rows} rows in its data file, "
                f"meta/episodes says {record.length}",
                where=f"{path}: episode {record.index}",
                hint="`rlctl dataset check ROOT` lists every problem",
            )
        out: dict[str, np.ndarray] = {}
        for key in keys:
            column = rows.column(key)
            if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                out[key] = np.array(column.to_pylist(), dtype=object)
                continue
            spec = meta.features.get(key) or FeatureSpec(key=key, dtype="float64", shape=(1,))
            out[key] = numeric_column(column, spec, where=f"{path}: {key}")
        return out

    def video_clips(self, location: str, episode_index: int) -> Sequence[VideoClip]:
        _, meta, record = self._record(location, episode_index)
        clips = []
        for key in meta.video_keys:
            start, end = episode_video_span(record, key)
            clips.append(
                VideoClip(
                    key=key,
                    file=episode_video_file(meta, record, key).as_posix(),
                    start_s=start,
                    end_s=end,
                )
            )
        return clips

    def frame_image(self, location: str, episode_index: int, key: str, frame: int) -> bytes:
        root, meta, record = self._record(location, episode_index)
        spec = meta.features.get(key)
        if spec is None or not spec.is_image:
            raise InvalidInput(f"{key!r} is not an image feature of this dataset", where=str(root))
        if not 0 <= frame < record.length:
            raise InvalidInput(
                f"frame {frame} is outside episode {episode_index} (0..{record.length - 1})",
                where=str(root),
            )
        pictures = self._pictures(root, meta, record, key)
        picture = pictures[frame]
        if picture is None:
            raise CorruptDataset(
                f"episode {episode_index} has no picture for {key!r} at frame {frame}",
                where=f"{root / episode_data_file(meta, record)}: {key}",
                hint="`rlctl dataset check ROOT` lists every problem",
            )
        return picture

    def _pictures(
        self, root: Path, meta: DatasetMeta, record: EpisodeRecord, key: str
    ) -> list[bytes | None]:
        """Every picture of one camera of one episode, read once: a page steps through them."""
        cache_key = (root, record.index, key)
        with self._lock:
            if cache_key in self._pictures_cache:
                self._pictures_cache.move_to_end(cache_key)
                return self._pictures_cache[cache_key]
        path = root / episode_data_file(meta, record)
        table = read_parquet_table(
            path, "data file", root, columns=[key, "episode_index", "frame_index"]
        )
        rows = table.filter(pc.equal(table.column("episode_index"), pa.scalar(record.index)))
        rows = rows.take(pc.sort_indices(rows.column("frame_index")))
        pictures: list[bytes | None] = []
        for value in rows.column(key).to_pylist():
            if isinstance(value, dict):
                data = value.get("bytes")
                if data is None and value.get("path"):
                    file = root / value["path"]
                    data = file.read_bytes() if file.is_file() else None
            else:
                data = value
            pictures.append(bytes(data) if data is not None else None)
        with self._lock:
            self._pictures_cache[cache_key] = pictures
            while len(self._pictures_cache) > _CACHED_CAMERAS:
                self._pictures_cache.popitem(last=False)
        return pictures

    def root(self, location: str) -> str:
        return str(self._meta(location)[0])
