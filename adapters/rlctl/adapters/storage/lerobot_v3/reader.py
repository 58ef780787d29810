"""Random access to a LeRobot v3.0 dataset, item for item what LeRobot 0.6.1's `__getitem__` gives.

An item holds every stored feature of one row as torch tensors (floats float32, integers int64,
`(1,)`-shaped features 0-d), each camera as float32 CHW in [0, 1], the task string, and for every
key of `delta_timestamps` a window of rows clamped into the episode plus its `<key>_is_pad` mask.
Video frames are decoded at `from_timestamp + timestamp` of each queried row, from the camera's
file for the episode.

Speed comes from three things LeRobot does not do: numeric columns are numpy arrays (a window is
one fancy-index, not 50 Python rows), video decoders stay open per process, and `get_items`
decodes a batch's frames with one sorted call per file.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch

from rlctl.adapters.storage.lerobot_v3.decoders import backend_name, decoder_factory
from rlctl.adapters.storage.lerobot_v3.depth_frames import DepthCameras
from rlctl.adapters.storage.lerobot_v3.errors import INCOMPLETE_HINT, check_hint
from rlctl.adapters.storage.lerobot_v3.identity import FolderIdentity, changed_error
from rlctl.adapters.storage.lerobot_v3.images import ImageColumn
from rlctl.adapters.storage.lerobot_v3.language_columns import item_rows
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader, dataset_root
from rlctl.adapters.storage.lerobot_v3.paths import (
    episode_data_file,
    episode_video_file,
    episode_video_span,
    missing_file_message,
)
from rlctl.adapters.storage.lerobot_v3.table import (
    FrameTable,
    load_frame_table,
    task_index_message,
)
from rlctl.adapters.storage.lerobot_v3.video_frames import FrameRequest, VideoFrameFetcher
from rlctl.adapters.video.pyav_depth import decode_depth_codes
from rlctl.application.ports.video import VideoDecoder
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.depth import DEFAULT_OUTPUT_UNIT
from rlctl.domain.errors import (
    CorruptDataset,
    InvalidInput,
    NotSupported,
)
from rlctl.domain.video import default_tolerance_s
from rlctl.domain.windows import (
    DEFAULT_TOLERANCE_S,
    check_delta_timestamps,
    delta_indices,
    is_pad_key,
    window_batch,
)

ImageTransform = Callable[[torch.Tensor], torch.Tensor]


def check_transform(image_transforms: object) -> None:
    if image_transforms is not None and not callable(image_transforms):
        raise InvalidInput(
            f"image_transforms must be callable or None, got {type(image_transforms).__name__}",
            where="image_transforms",
            hint="pass a function or a torchvision transform (e.g. torchvision.transforms.v2)",
        )


class _Query:
    """What one item needs: its row, and for each windowed key the rows and padding."""

    __slots__ = ("episode", "pads", "position", "rows")

    def __init__(self, position: int, episode: int) -> None:
        self.position = position
        self.episode = episode
        self.rows: dict[str, np.ndarray] = {}
        self.pads: dict[str, np.ndarray] = {}


@attrs.frozen(eq=False)
class NumericColumns:
    """A numbers-only dataset's rows as `gather` reads them (`reader.numeric_columns()`).

    `columns[key]` is `(positions, *shape)`, in an item's key order; `windows[key]` is
    `(rows, is_pad)`, each `(positions, len(deltas))`: the positions a windowed key reads for
    each position, clamped into its episode, and where they were padded; `tasks[task_index[p]]`
    is position p's task.
    """

    columns: dict[str, np.ndarray]
    windows: dict[str, tuple[np.ndarray, np.ndarray]]
    task_index: np.ndarray
    tasks: list[str]


class LeRobotDatasetReader:
    """A LeRobot v3.0 dataset folder opened for reading: `len(reader)`, `reader[i]`.

    `episodes` selects a subset (rows re-indexed from 0 in file order, as LeRobot does);
    `delta_timestamps` maps feature keys to offsets in seconds (multiples of 1/fps);
    `video_backend` is 'torchcodec', 'pyav' or None (auto: torchcodec when it works here).
    Depth cameras come as float32 `(1, H, W)` in `depth_output_unit` ('mm' or 'm'), and
    `meta.stats` gives their statistics in that unit, as LeRobot's `depth_output_unit`.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        delta_timestamps: Mapping[str, Sequence[float]] | None = None,
        episodes: Iterable[int] | None = None,
        video_backend: str | None = None,
        image_transforms: ImageTransform | None = None,
        tolerance_s: float = DEFAULT_TOLERANCE_S,
        video_decoder_factory: Callable[[], VideoDecoder] | None = None,
        meta: DatasetMeta | None = None,
        depth_output_unit: str = DEFAULT_OUTPUT_UNIT,
    ) -> None:
        check_transform(image_transforms)
        root = dataset_root(root)
        # Taken before anything is read: an edit swapping the folder later is noticed.
        identity = FolderIdentity.of(root)
        self._configure(
            root,
            meta if meta is not None else LeRobotMetaReader().read_meta(root),
            delta_timestamps=delta_timestamps,
            video_backend=video_backend,
            image_transforms=image_transforms,
            tolerance_s=tolerance_s,
            depth_output_unit=depth_output_unit,
        )
        self.episodes = _selected_episodes(episodes, self.meta)
        selected = self._selected_records()
        check_files_present(self.root, self.meta, selected)
        self._deltas = self._delta_indices()
        self._attach(
            load_frame_table(self.root, self.meta, selected),
            VideoFrameFetcher(
                video_decoder_factory or decoder_factory(video_backend),
                fps=self.meta.fps,
                tolerance_s=self.video_tolerance_s,
            ),
        )
        if not identity.unchanged():  # swapped while the metadata and rows were read
            raise changed_error(identity.root)
        self._identity: FolderIdentity | None = identity

    @classmethod
    def over_rows(
        cls,
        root: Path,
        meta: DatasetMeta,
        table: FrameTable,
        frames: VideoFrameFetcher,
        *,
        episodes: Iterable[int] | None = None,
        delta_timestamps: Mapping[str, Sequence[float]] | None = None,
        image_transforms: ImageTransform | None = None,
        tolerance_s: float = DEFAULT_TOLERANCE_S,
        depth_output_unit: str = DEFAULT_OUTPUT_UNIT,
    ) -> LeRobotDatasetReader:
        """A reader of rows read elsewhere (`table`, the rows of `episodes`, e.g. streamed from
        the Hub), decoding videos with `frames` (`video_frames(...)`). Video paths are
        `root / video_path`; `frames`' decoder is what finds them."""
        check_transform(image_transforms)
        reader = cls.__new__(cls)
        reader._configure(
            root,
            meta,
            delta_timestamps=delta_timestamps,
            video_backend=None,
            image_transforms=image_transforms,
            tolerance_s=tolerance_s,
            depth_output_unit=depth_output_unit,
        )
        reader.episodes = _selected_episodes(episodes, reader.meta)
        reader._deltas = reader._delta_indices()
        reader._attach(table, frames)
        reader._identity = None  # rows from elsewhere: no folder of ours to watch
        return reader

    def _configure(
        self,
        root: Path,
        meta: DatasetMeta,
        *,
        delta_timestamps: Mapping[str, Sequence[float]] | None,
        video_backend: str | None,
        image_transforms: ImageTransform | None,
        tolerance_s: float,
        depth_output_unit: str,
    ) -> None:
        self.root = root
        self.meta = meta
        self._depth = DepthCameras(self.meta, depth_output_unit)
        if self._depth.keys:
            self.meta = attrs.evolve(self.meta, stats=self._depth.stats(self.meta.stats))
        self.video_backend = backend_name(video_backend)
        self.delta_timestamps = dict(delta_timestamps) if delta_timestamps is not None else None
        self.tolerance_s = tolerance_s
        # Frames are matched to the nearest one; this bound only rejects a timestamp that falls
        # between frames, so it is the frame period less LeRobot's 1e-4 s of slack.
        self.video_tolerance_s = default_tolerance_s(self.meta.fps)
        self._image_transforms = image_transforms

    def _attach(self, table: FrameTable, frames: VideoFrameFetcher) -> None:
        self._table = table
        self._hf_dataset: Any = None
        self._check_task_indices()
        self._images = {
            key: ImageColumn(key, self._table.arrow[key], self.root, _files(self._table))
            for key, spec in self.meta.features.items()
            if spec.is_image
        }
        self._other = {
            key: column for key, column in self._table.arrow.items() if key not in self._images
        }
        self._language = {k for k, spec in self.meta.features.items() if spec.is_language}
        # Depth videos hold 12-bit codes, decoded apart (`_decode_depth`).
        self._videos = {
            key: _VideoIndex(self.root, self.meta, key)
            for key in self.meta.video_keys
            if key not in self._depth.video_keys
        }
        self._depth_videos = {
            key: _VideoIndex(self.root, self.meta, key) for key in self._depth.video_keys
        }
        self._frames = frames

    # ── Size and metadata ────────────────────────────────────────────

    def __len__(self) -> int:
        return len(self._table)

    @property
    def num_frames(self) -> int:
        return len(self._table)

    @property
    def num_episodes(self) -> int:
        return len(self.episodes) if self.episodes is not None else self.meta.total_episodes

    @property
    def fps(self) -> int:
        return self.meta.fps

    @property
    def features(self) -> Mapping[str, Any]:
        return self.meta.features

    @property
    def camera_keys(self) -> list[str]:
        return self.meta.visual_keys

    @property
    def image_transforms(self) -> ImageTransform | None:
        return self._image_transforms

    def set_image_transforms(self, image_transforms: ImageTransform | None) -> None:
        """Replace the transform applied to each camera's tensor (None removes it)."""
        check_transform(image_transforms)
        self._image_transforms = image_transforms

    def clear_image_transforms(self) -> None:
        self._image_transforms = None

    @property
    def hf_dataset(self) -> Any:
        """The selected rows as a Hugging Face `datasets.Dataset`, LeRobot's `hf_dataset`
        (filter, select, map, to_pandas), over the rows already read: no copy, no cache files.
        Needs the `datasets` extra."""
        if self._hf_dataset is None:
            try:
                from rlctl.adapters.storage.lerobot_v3.hf_table import hf_dataset
            except ModuleNotFoundError as err:
                if err.name != "datasets":
                    raise
                raise InvalidInput(
                    "hf_dataset needs the Hugging Face `datasets` library, not installed here",
                    where=str(self.root),
                    hint="pip install 'rlctl[datasets]'",
                ) from err
            self._hf_dataset = hf_dataset(self._table, self.meta)
        return self._hf_dataset

    def close(self) -> None:
        """Close this process's open video files; the reader reopens them when used again."""
        self._frames.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(root={str(self.root)!r}, episodes={self.num_episodes}, "
            f"frames={len(self)}, features={list(self.meta.features)})"
        )

    # ── Items ────────────────────────────────────────────────────────

    def __getitem__(self, idx: int) -> dict[str, Any]:
        if isinstance(idx, slice):
            return self.get_items(range(*idx.indices(len(self))))  # type: ignore[return-value]
        return self.get_items([idx])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        # torch's DataLoader fetches a whole batch through this when it exists.
        return self.get_items(indices)

    def get_items(self, indices: Iterable[int]) -> list[dict[str, Any]]:
        """Items for several positions; video frames decoded with one call per file."""
        queries = [self._query(self._position(i)) for i in indices]
        try:
            frames = self._decode_videos(queries)
            frames.update(self._decode_depth(queries))
            items = [self._item(query, frames) for query in queries]
        except Exception as err:
            # A file missing or not what the metadata says: because the folder was swapped?
            if self._identity is not None and not self._identity.unchanged():
                raise changed_error(self._identity.root) from err
            raise
        # After every file was opened: unchanged now means each file read was this dataset's.
        if self._identity is not None:
            self._identity.check()
        return items

    @property
    def gathers(self) -> bool:
        """Whether a batch can be gathered from the in-memory columns at once (`gather`): the
        dataset holds numbers only — no cameras, no text columns — and nothing transforms items."""
        return not (
            self._videos
            or self._depth_videos
            or self._images
            or self._other
            or self._depth.image_keys
            or self._image_transforms is not None
        )

    def gather(self, indices: Sequence[int]) -> dict[str, Any]:
        """The collated batch of `indices`, gathered by index from the columns with the windows
        computed for all rows at once: what collating `get_items(indices)` gives, without building
        one item at a time (for a small state-only dataset, item building was most of a step)."""
        if not self.gathers:
            raise NotSupported(
                "this dataset's items cannot be gathered from columns (it has cameras or text)",
                where=str(self.root),
                hint="read its items with get_items",
            )
        table = self._table
        positions = self._positions(indices)
        rows: dict[str, np.ndarray] = {}
        batch: dict[str, Any] = {}
        if self._deltas:
            global_rows = table.index[positions]
            starts, ends = table.episode_from[positions], table.episode_to[positions]
            for key, deltas in self._deltas.items():
                window = window_batch(global_rows, starts, ends, deltas)
                rows[key] = positions[:, None] + (window.indices - global_rows[:, None])
                batch[is_pad_key(key)] = torch.from_numpy(window.is_pad)
        for key, column in table.numeric.items():
            batch[key] = torch.from_numpy(np.ascontiguousarray(column[rows.get(key, positions)]))
        tasks = self.meta.tasks
        batch["task"] = [tasks[t] for t in table.task_index[positions].tolist()]
        if self._identity is not None:
            self._identity.check()
        # The keys in an item's order, as default_collate leaves them.
        order = [*table.numeric, *(is_pad_key(k) for k in self._deltas), "task"]
        return {key: batch[key] for key in order}

    def numeric_columns(self) -> NumericColumns:
        """What `gather` reads, for a caller that keeps the batches' sources in memory and
        gathers them itself (training's column batches): the columns in position order, and for
        each windowed key its rows and padding at every position, computed once."""
        if not self.gathers:
            raise NotSupported(
                "this dataset's items cannot be gathered from columns (it has cameras or text)",
                where=str(self.root),
                hint="read its items with get_items",
            )
        table = self._table
        positions = np.arange(len(table), dtype=np.int64)
        windows = {}
        for key, deltas in self._deltas.items():
            window = window_batch(table.index, table.episode_from, table.episode_to, deltas)
            rows = positions[:, None] + (window.indices - table.index[:, None])
            windows[key] = (rows, window.is_pad)
        return NumericColumns(dict(table.numeric), windows, table.task_index, list(self.meta.tasks))

    def check_unchanged(self) -> None:
        """Raise `DatasetChanged` when the dataset folder was replaced since it was opened (an
        edit in place): one `stat`. Rows already read stay the opened dataset's either way."""
        if self._identity is not None:
            self._identity.check()

    def _positions(self, indices: Sequence[int]) -> np.ndarray:
        """`_position` of every index, checked for the whole batch at once."""
        values = np.asarray(indices)
        size = len(self._table)
        if values.ndim != 1 or values.dtype.kind not in "iu":
            return np.fromiter((self._position(i) for i in indices), np.int64, len(indices))
        positions = values.astype(np.int64)
        positions = np.where(positions < 0, positions + size, positions)
        if len(positions) and (positions.min() < 0 or positions.max() >= size):
            for idx in indices:  # the first out of range, named as one index is
                self._position(idx)
        return positions

    def _position(self, idx: int) -> int:
        try:
            value = operator.index(idx)  # ints, numpy integers, 0-d integer tensors
        except TypeError:
            raise TypeError(f"dataset indices must be integers, not {type(idx).__name__}") from None
        size = len(self._table)
        position = value + size if value < 0 else value
        if not 0 <= position < size:
            raise IndexError(f"index {idx} is out of range for a dataset of {size} frames")
        return position

    def _query(self, position: int) -> _Query:
        table = self._table
        query = _Query(position, int(table.episode_index[position]))
        if self._deltas:
            global_row = int(table.index[position])
            start, end = int(table.episode_from[position]), int(table.episode_to[position])
            for key, deltas in self._deltas.items():
                window = window_batch([global_row], start, end, deltas)
                query.rows[key] = table.rows_of(position, window.indices[0])
                query.pads[key] = window.is_pad[0]
        return query

    def _item(self, query: _Query, frames: dict[tuple[int, str], torch.Tensor]) -> dict[str, Any]:
        position = query.position
        item: dict[str, Any] = {key: frames[(id(query), key)] for key in self.meta.video_keys}
        for key, column in self._table.numeric.items():
            rows = query.rows.get(key)
            value = column[position] if rows is None else column[rows]
            item[key] = torch.from_numpy(np.array(value))
        for key, images in self._images.items():
            rows = query.rows.get(key)
            if rows is None:
                item[key] = torch.from_numpy(images.chw(position))
            else:
                item[key] = torch.from_numpy(np.stack([images.chw(int(r)) for r in rows]))
        for key, column in self._other.items():
            rows = query.rows.get(key)
            py = item_rows if key in self._language else _same
            item[key] = (
                py(column[position].as_py())
                if rows is None
                else [py(column[int(r)].as_py()) for r in rows]
            )
        for key, pad in query.pads.items():
            item[is_pad_key(key)] = torch.from_numpy(pad.copy())
        transform = self._image_transforms
        if transform is not None:
            for key in self.camera_keys:
                if key not in self._depth.keys:  # LeRobot leaves depth maps untransformed
                    item[key] = transform(item[key])
        for key in self._depth.image_keys:
            item[key] = self._depth.image(key, item[key])
        item["task"] = self.meta.tasks[int(self._table.task_index[position])]
        return item

    # ── Video ────────────────────────────────────────────────────────

    def _decode_videos(self, queries: list[_Query]) -> dict[tuple[int, str], torch.Tensor]:
        """Frames of every (item, camera): `from_timestamp + timestamp` of each queried row."""
        if not self._videos:
            return {}
        slots: list[tuple[int, str]] = []
        requests: list[FrameRequest] = []
        timestamps = self._table.timestamp
        for query in queries:
            for key, video in self._videos.items():
                rows = query.rows.get(key)
                times = timestamps[[query.position] if rows is None else rows]
                path, start = video.file_and_start(query.episode)
                slots.append((id(query), key))
                requests.append(FrameRequest(path, start + times.astype(np.float64)))
        frames = self._frames.fetch(requests)
        # LeRobot squeezes the frame axis when a single frame was asked.
        return {slot: torch.from_numpy(f).squeeze(0) for slot, f in zip(slots, frames)}

    def _decode_depth(self, queries: list[_Query]) -> dict[tuple[int, str], torch.Tensor]:
        """Depth frames of every (item, depth camera), dequantized as LeRobot does."""
        found: dict[tuple[int, str], torch.Tensor] = {}
        timestamps = self._table.timestamp
        for query in queries:
            for key, video in self._depth_videos.items():
                rows = query.rows.get(key)
                times = timestamps[[query.position] if rows is None else rows]
                path, start = video.file_and_start(query.episode)
                codes = decode_depth_codes(
                    path, start + times.astype(np.float64), self.video_tolerance_s
                )
                found[(id(query), key)] = self._depth.video_frames(key, codes).squeeze(0)
        return found

    # ── Opening checks ───────────────────────────────────────────────

    def _selected_records(self) -> list[EpisodeRecord]:
        if self.episodes is None:
            return list(self.meta.episodes)
        return [self.meta.episodes[i] for i in self.episodes]

    def _delta_indices(self) -> dict[str, np.ndarray]:
        if not self.delta_timestamps:
            return {}
        unknown = [key for key in self.delta_timestamps if key not in self.meta.features]
        if unknown:
            raise InvalidInput(
                f"delta_timestamps names {unknown}, which the dataset does not have",
                where=f"delta_timestamps.{unknown[0]}",
                hint=f"use keys among {list(self.meta.features)}",
            )
        check_delta_timestamps(self.delta_timestamps, self.meta.fps, self.tolerance_s)
        return delta_indices(self.delta_timestamps, self.meta.fps)

    def _check_task_indices(self) -> None:
        task_index = self._table.task_index
        if len(task_index) and (task_index.min() < 0 or task_index.max() >= len(self.meta.tasks)):
            bad = int(task_index[(task_index < 0) | (task_index >= len(self.meta.tasks))][0])
            raise CorruptDataset(
                task_index_message(bad, len(self.meta.tasks)),
                where=f"{_files(self._table)}: task_index",
                hint=check_hint(self.root, "run `rlctl dataset check ROOT` to list every problem"),
            )


class _VideoIndex:
    """Per episode, the camera's file and where the episode starts in it."""

    def __init__(self, root: Path, meta: DatasetMeta, key: str) -> None:
        self._files: dict[int, tuple[Path, float]] = {}
        self._root = root
        self._meta = meta
        self._key = key

    def file_and_start(self, episode_index: int) -> tuple[Path, float]:
        found = self._files.get(episode_index)
        if found is None:
            episode = self._meta.episodes[episode_index]
            path = self._root / episode_video_file(self._meta, episode, self._key)
            found = (path, episode_video_span(episode, self._key)[0])
            self._files[episode_index] = found
        return found


def _same(value: Any) -> Any:
    return value


def _selected_episodes(episodes: Iterable[int] | None, meta: DatasetMeta) -> list[int] | None:
    if episodes is None:
        return None
    chosen: list[int] = []
    for value in episodes:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise InvalidInput(f"episode indices must be integers, got {value!r}", where="episodes")
        if not 0 <= int(value) < meta.total_episodes:
            raise InvalidInput(
                f"episode {value} does not exist: the dataset has episodes "
                f"0..{meta.total_episodes - 1}",
                where="episodes",
                hint="choose among the dataset's episode indices (see `rlctl dataset info`)",
            )
        if int(value) not in chosen:
            chosen.append(int(value))
    return chosen


def check_files_present(root: Path, meta: DatasetMeta, episodes: Sequence[EpisodeRecord]) -> None:
    """Every data and video file the episodes point at must exist: the first missing one (in
    the check's order) is named as `rlctl dataset check` names it, with a count of the rest."""
    needed: dict[Path, tuple[str | None, list[int]]] = {}
    for episode in episodes:
        files: list[tuple[Path, str | None]] = [(episode_data_file(meta, episode), None)]
        files += [(episode_video_file(meta, episode, key), key) for key in meta.video_keys]
        for path, key in files:
            needed.setdefault(root / path, (key, []))[1].append(episode.index)
    missing = sorted((path for path in needed if not path.is_file()), key=str)
    if missing:
        key, indices = needed[missing[0]]
        others = f"; {len(missing) - 1} more file(s) are missing too" if len(missing) > 1 else ""
        raise CorruptDataset(
            missing_file_message(indices, key, missing[0]),
            where=str(missing[0]),
            hint=check_hint(root, INCOMPLETE_HINT) + others,
        )


def _files(table: FrameTable) -> str:
    return ", ".join(str(p) for p in table.files[:2]) + (" ..." if len(table.files) > 2 else "")
