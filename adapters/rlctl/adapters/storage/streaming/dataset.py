"""A LeRobot v3.0 dataset on the Hub, read as it streams: no download beyond `meta/`.

Items are the local reader's items for the same frames (same keys, dtypes and values; video
frames decoded by the same decoders at the same timestamps), because they are built by it: each
piece of work (one data file, or some episodes of it) is read by ranges into the rows the local
reader holds (`rows.read_piece`), and a `LeRobotDatasetReader` over those rows builds the items,
its decoders reading the mp4 files by ranges too. Windows (`delta_timestamps`) are exact: a
piece holds whole episodes, so a window is clamped at the episode's true edges, as locally.

Order, as LeRobot 0.6.1's `StreamingLeRobotDataset`: a shuffle buffer of `buffer_size` (1000)
frames, seeded by `seed` (42). Unlike it, every DataLoader worker and every DDP rank reads its
own shard (`rlctl.domain.stream_shards`), so together they read each frame once per epoch;
`set_epoch(n)` draws another order. The buffer holds which frames, not decoded items: frames
are decoded as they leave it, so memory does not grow with cameras or resolution.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog
import torch
from torch.utils.data import IterableDataset, get_worker_info

from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.adapters.storage.lerobot_v3.depth_frames import DepthCameras
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import (
    ImageTransform,
    LeRobotDatasetReader,
    _selected_episodes,
    check_transform,
)
from rlctl.adapters.storage.lerobot_v3.table import files_in_order
from rlctl.adapters.storage.lerobot_v3.video_frames import VideoFrameFetcher
from rlctl.adapters.storage.streaming.rows import read_piece
from rlctl.adapters.storage.streaming.source import (
    RemoteDecoderFactory,
    RemoteVideos,
    StreamSource,
    open_source,
)
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.depth import DEFAULT_OUTPUT_UNIT
from rlctl.domain.errors import InvalidInput, NotSupported
from rlctl.domain.stream_shards import Piece, shard_of, shard_pieces
from rlctl.domain.video import default_tolerance_s
from rlctl.domain.windows import DEFAULT_TOLERANCE_S, check_delta_timestamps

log = structlog.get_logger(__name__)

DEFAULT_BUFFER_SIZE = 1000  # LeRobot's
DEFAULT_SEED = 42  # LeRobot's

# A frame waiting in the buffer: the reader over its piece's rows, and its position there.
FrameKey = tuple[LeRobotDatasetReader, int]


class StreamingLeRobotDataset(IterableDataset[dict[str, Any]]):
    """A torch `IterableDataset` over a Hub dataset: `for item in dataset`, or in a DataLoader.

    `repo_id` (or a `StreamSource` already opened) at `revision` (LeRobot's default: the
    `v3.0` tag, else the default branch). `episodes`, `delta_timestamps`, `video_backend`,
    `image_transforms`, `tolerance_s` and `depth_output_unit` as the local reader's.
    `shuffle=False` reads in file order, without a buffer. `rank` / `world_size` default to
    torch.distributed's when it is initialised. `drop_n_last_frames` leaves out each episode's
    last frames (as Diffusion Policy's training sampler does). `meta` may narrow the features
    (training leaves out cameras the policy does not read, so they are never fetched).
    """

    def __init__(
        self,
        repo_id: str | StreamSource,
        *,
        revision: str | None = None,
        episodes: Iterable[int] | None = None,
        delta_timestamps: Mapping[str, Sequence[float]] | None = None,
        video_backend: str | None = None,
        image_transforms: ImageTransform | None = None,
        tolerance_s: float = DEFAULT_TOLERANCE_S,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        seed: int = DEFAULT_SEED,
        shuffle: bool = True,
        rank: int | None = None,
        world_size: int | None = None,
        drop_n_last_frames: int = 0,
        depth_output_unit: str = DEFAULT_OUTPUT_UNIT,
        meta: DatasetMeta | None = None,
        hub: HuggingFaceHub | None = None,
    ) -> None:
        super().__init__()
        check_transform(image_transforms)
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
            raise InvalidInput(
                f"buffer_size must be a whole number of frames, at least 1, got {buffer_size!r}",
                where="buffer_size",
                hint="LeRobot's default is 1000; larger mixes episodes more",
            )
        if drop_n_last_frames < 0:
            raise InvalidInput(
                f"drop_n_last_frames must be 0 or more, got {drop_n_last_frames}",
                where="drop_n_last_frames",
            )
        self.source = (
            repo_id if isinstance(repo_id, StreamSource) else open_source(repo_id, revision, hub)
        )
        self.meta = meta if meta is not None else LeRobotMetaReader().read_meta(self.root)
        depth = DepthCameras(self.meta, depth_output_unit).video_keys
        if depth:
            raise NotSupported(
                f"streaming does not decode depth videos yet ({', '.join(depth)})",
                where=f"dataset {self.source.repo_id}",
                hint="pull the dataset (`rlctl dataset pull`) and read it locally",
            )
        self.episodes = _selected_episodes(episodes, self.meta)
        self.delta_timestamps = dict(delta_timestamps) if delta_timestamps else None
        self._check_deltas(tolerance_s)
        self.tolerance_s = tolerance_s
        self.depth_output_unit = depth_output_unit
        self.buffer_size = buffer_size
        self.seed = seed
        self.shuffle = shuffle
        self.drop_n_last_frames = drop_n_last_frames
        self.epoch = 0
        self._image_transforms = image_transforms
        world = _distributed_world()
        self.rank = world[0] if rank is None else rank
        self.world_size = world[1] if world_size is None else world_size
        shard_of(self.rank, self.world_size, 0, 1)  # checks them
        records = (
            list(self.meta.episodes)
            if self.episodes is None
            else [self.meta.episodes[i] for i in self.episodes]
        )
        self._files: list[tuple[Path, list[EpisodeRecord]]] = files_in_order(
            self.root, self.meta, records
        )
        self._frames = VideoFrameFetcher(
            RemoteDecoderFactory(video_backend, RemoteVideos(self.source)),
            fps=self.meta.fps,
            tolerance_s=default_tolerance_s(self.meta.fps),
        )

    # ── What it holds ─────────────────────────────────────────────────

    @property
    def root(self) -> Path:
        """The local folder of the dataset's `meta/` (its data and videos stay on the Hub)."""
        return self.source.root

    @property
    def repo_id(self) -> str:
        return self.source.repo_id

    @property
    def commit(self) -> str:
        return self.source.files.commit

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
    def num_episodes(self) -> int:
        return sum(len(episodes) for _, episodes in self._files)

    @property
    def num_frames(self) -> int:
        return sum(e.length for _, episodes in self._files for e in episodes)

    @property
    def image_transforms(self) -> ImageTransform | None:
        return self._image_transforms

    def set_image_transforms(self, image_transforms: ImageTransform | None) -> None:
        check_transform(image_transforms)
        self._image_transforms = image_transforms

    def set_epoch(self, epoch: int) -> None:
        """Read epoch `epoch`'s order next (every rank and worker must be told the same)."""
        self.epoch = int(epoch)

    def close(self) -> None:
        self._frames.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(repo_id={self.repo_id!r}, commit={self.commit[:12]!r}, "
            f"episodes={self.num_episodes}, frames={self.num_frames}, "
            f"buffer_size={self.buffer_size}, shuffle={self.shuffle})"
        )

    # ── Iterating ───────────────────────────────────────────────────

    def shard_pieces(self, worker: int = 0, num_workers: int = 1) -> list[Piece]:
        """The (file, episodes) pieces this rank's `worker` reads in the current epoch."""
        shard, shards = shard_of(self.rank, self.world_size, worker, num_workers)
        return shard_pieces(
            [[e.index for e in episodes] for _, episodes in self._files],
            shard=shard,
            shards=shards,
            seed=self.seed,
            epoch=self.epoch,
            shuffle=self.shuffle,
        )

    def shard_frames(self, worker: int = 0, num_workers: int = 1) -> int:
        """How many frames this rank's `worker` yields in the current epoch (without the
        frames `drop_n_last_frames` leaves out)."""
        total = 0
        for file_number, indices in self.shard_pieces(worker, num_workers):
            wanted = set(indices)
            total += sum(
                max(0, e.length - self.drop_n_last_frames)
                for e in self._files[file_number][1]
                if e.index in wanted
            )
        return total

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        keys = self._frame_keys(self.shard_pieces(worker, workers))
        if not self.shuffle:
            for key in keys:
                yield _item(key)
            return
        shard, _ = shard_of(self.rank, self.world_size, worker, workers)
        rng = np.random.default_rng([self.seed & 0xFFFFFFFF, self.epoch & 0xFFFFFFFF, shard])
        buffer: list[FrameKey] = []
        for key in keys:
            if len(buffer) < self.buffer_size:
                buffer.append(key)
                continue
            slot = int(rng.integers(len(buffer)))
            yield _item(buffer[slot])
            buffer[slot] = key
        for slot in rng.permutation(len(buffer)):
            yield _item(buffer[int(slot)])

    def _frame_keys(self, pieces: list[Piece]) -> Iterator[FrameKey]:
        for file_number, indices in pieces:
            path, held = self._files[file_number]
            wanted = set(indices)
            episodes = [e for e in held if e.index in wanted]
            reader = LeRobotDatasetReader.over_rows(
                self.root,
                self.meta,
                read_piece(self.source, self.meta, path, episodes),
                self._frames,
                delta_timestamps=self.delta_timestamps,
                image_transforms=self._image_transforms,
                tolerance_s=self.tolerance_s,
                depth_output_unit=self.depth_output_unit,
            )
            start = 0
            for episode in sorted(episodes, key=lambda e: e.dataset_from_index):
                usable = max(0, episode.length - self.drop_n_last_frames)
                for position in range(start, start + usable):
                    yield reader, position
                start += episode.length

    def _check_deltas(self, tolerance_s: float) -> None:
        if not self.delta_timestamps:
            return
        unknown = [key for key in self.delta_timestamps if key not in self.meta.features]
        if unknown:
            raise InvalidInput(
                f"delta_timestamps names {unknown}, which the dataset does not have",
                where=f"delta_timestamps.{unknown[0]}",
                hint=f"use keys among {list(self.meta.features)}",
            )
        check_delta_timestamps(self.delta_timestamps, self.meta.fps, tolerance_s)


def _item(key: FrameKey) -> dict[str, Any]:
    reader, position = key
    return reader.get_items([position])[0]


def _distributed_world() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1
