"""Several Hub datasets streamed as one, by weight (`--dataset.streaming=true` with several repo
ids): the streamed counterpart of `MultiLeRobotTorchDataset`.

Each dataset is a `StreamingLeRobotDataset` (same items, same shards: every DataLoader worker of
every rank reads its own part of each), and each reader interleaves its parts as
`rlctl.domain.stream_mixture` says: a pass holds as many frames as its parts together, dataset
i giving its weight's part of them (without weights: exactly its part, so the readers together
read every frame once per pass), in an order drawn from the seed, the epoch and the shard. A
dataset asked for more than it holds there starts over in a new order, as one streamed dataset
starts each epoch over.

Items are as the local mixture's: only the features every dataset has with one dtype and shape
(the others dropped, said once in the log), and `dataset_index`, the dataset's place in the list.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

import structlog
import torch
from torch.utils.data import IterableDataset, get_worker_info

from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import ImageTransform, check_transform
from rlctl.adapters.storage.streaming.dataset import (
    DEFAULT_BUFFER_SIZE,
    DEFAULT_SEED,
    StreamingLeRobotDataset,
)
from rlctl.adapters.storage.streaming.source import StreamSource, open_source
from rlctl.adapters.storage.torch_dataset import MixtureView, _deltas_for, _read_cameras
from rlctl.domain.dataset_mixture import feature_differences
from rlctl.domain.depth import DEFAULT_OUTPUT_UNIT
from rlctl.domain.errors import DatasetError, InvalidInput
from rlctl.domain.stream_mixture import interleave_order, pass_counts, restart_epoch
from rlctl.domain.stream_shards import shard_of
from rlctl.domain.windows import DEFAULT_TOLERANCE_S, is_pad_key

log = structlog.get_logger(__name__)

DATASET_INDEX = "dataset_index"
# Starts of one dataset in a row that hold none of this reader's frames before giving up (a
# shard of whole files can be empty in one epoch's dealing and not in the next).
MAX_EMPTY_RUNS = 64


class StreamingMixture(MixtureView, IterableDataset[dict[str, Any]]):
    """A torch `IterableDataset` over several Hub datasets, interleaved by `weights` (one
    positive number per dataset; None: in proportion to their frames). The other arguments are
    `StreamingLeRobotDataset`'s, given to each dataset (`shuffle=False` reads each in file
    order; the interleave is still drawn from the seed); `cameras` (None: all) are the cameras
    read, as the local mixture's."""

    def __init__(
        self,
        repo_ids: Sequence[str | StreamSource],
        *,
        weights: Sequence[float] | None = None,
        revision: str | None = None,
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
        cameras: Collection[str] | None = None,
        hub: HuggingFaceHub | None = None,
    ) -> None:
        super().__init__()
        if isinstance(repo_ids, str) or not repo_ids:
            raise InvalidInput(
                f"a streamed mixture needs a list of repo ids, got {repo_ids!r}",
                where="repo_ids",
                hint="e.g. ['user/a', 'user/b']",
            )
        check_transform(image_transforms)
        if weights is not None:
            weights = [float(w) for w in weights]
            pass_counts([1] * len(repo_ids), weights)  # checks their number and signs
        self.weights = weights
        sources = [
            r if isinstance(r, StreamSource) else open_source(r, revision, hub) for r in repo_ids
        ]
        metas = [LeRobotMetaReader().read_meta(source.root) for source in sources]
        named = [(source.repo_id, meta) for source, meta in zip(sources, metas)]
        self.disabled_features, self.differences = feature_differences(named)
        if self.differences:
            log.warning(
                "streamed datasets differ; only what they share is returned",
                differences="; ".join(self.differences),
                dropped=sorted(self.disabled_features),
            )
        self._dropped = self.disabled_features | {is_pad_key(k) for k in self.disabled_features}
        self.datasets = [
            StreamingLeRobotDataset(
                source,
                delta_timestamps=_deltas_for(source.root, delta_timestamps),
                video_backend=video_backend,
                image_transforms=image_transforms,
                tolerance_s=tolerance_s,
                buffer_size=buffer_size,
                seed=seed,
                shuffle=shuffle,
                rank=rank,
                world_size=world_size,
                drop_n_last_frames=drop_n_last_frames,
                depth_output_unit=depth_output_unit,
                meta=_read_cameras(meta, cameras, self.disabled_features),
            )
            for source, meta in zip(sources, metas)
        ]
        self._seed = seed
        self.shuffle = shuffle
        self.epoch = 0
        self._image_transforms = image_transforms

    # ── What it holds ─────────────────────────────────────────────────

    @property
    def repo_ids(self) -> list[str]:
        return [d.repo_id for d in self.datasets]

    @property
    def repo_id(self) -> str:
        """The datasets' repo ids, for messages."""
        return ", ".join(self.repo_ids)

    @property
    def rank(self) -> int:
        return self.datasets[0].rank

    @property
    def world_size(self) -> int:
        return self.datasets[0].world_size

    @property
    def seed(self) -> int:
        return self._seed

    @seed.setter
    def seed(self, seed: int) -> None:
        self._seed = int(seed)
        for dataset in self.datasets:
            dataset.seed = self._seed

    def set_epoch(self, epoch: int) -> None:
        """Read pass `epoch`'s order next (every rank and worker must be told the same)."""
        self.epoch = int(epoch)

    def close(self) -> None:
        for dataset in self.datasets:
            dataset.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(repo_ids={self.repo_ids}, weights={self.weights}, "
            f"frames={self.num_frames}, dropped={sorted(self.disabled_features)})"
        )

    # ── Iterating ───────────────────────────────────────────────────

    def pass_counts(self, worker: int = 0, num_workers: int = 1) -> list[int]:
        """How many frames this rank's `worker` takes from each dataset in the current pass."""
        frames = []
        for dataset in self.datasets:
            dataset.set_epoch(self.epoch)
            frames.append(dataset.shard_frames(worker, num_workers))
        return pass_counts(frames, self.weights)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        shard, _ = shard_of(self.rank, self.world_size, worker, workers)
        counts = self.pass_counts(worker, workers)
        if self.weights is not None:
            left_out = [d.repo_id for d, n in zip(self.datasets, counts) if n == 0]
            if left_out and any(counts):
                log.warning(
                    "this reader's shard holds no frame of some streamed datasets; the others "
                    "share their weight in it",
                    datasets=left_out,
                    rank=self.rank,
                    worker=worker,
                    epoch=self.epoch,
                )
        order = interleave_order(counts, seed=self._seed, epoch=self.epoch, shard=shard)
        streams = [
            self._runs(number, dataset, self.epoch) if count else iter(())
            for number, (dataset, count) in enumerate(zip(self.datasets, counts))
        ]
        for number in map(int, order):
            item = next(streams[number])
            for key in self._dropped.intersection(item):
                del item[key]
            item[DATASET_INDEX] = torch.tensor(number)
            yield item

    def _runs(
        self, number: int, dataset: StreamingLeRobotDataset, epoch: int
    ) -> Iterator[dict[str, Any]]:
        """Dataset `number`'s items for pass `epoch`, starting over in a new order each time
        its shard runs out."""
        empty = 0
        for run in itertools.count():
            dataset.set_epoch(restart_epoch(epoch, run))
            found = False
            for item in dataset:
                found = True
                yield item
            empty = 0 if found else empty + 1
            if empty >= MAX_EMPTY_RUNS:
                raise DatasetError(
                    f"rank {self.rank}'s shard of {dataset.repo_id} holds no frame in "
                    f"{MAX_EMPTY_RUNS} orders in a row",
                    where=f"dataset {dataset.repo_id} (number {number} of the mixture)",
                    hint="the dataset has fewer data files and episodes than processes x "
                    "workers can share; lower --num_workers or the number of processes",
                )
