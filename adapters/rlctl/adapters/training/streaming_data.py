"""Training on a dataset streamed from the Hub (`--dataset.streaming=true`), or on several
interleaved by weight (`StreamingMixture`).

The stream replaces the step sampler: each rank and each loader worker reads its own shard
(`StreamingLeRobotDataset`; of each dataset, for a mixture), epoch after epoch (`set_epoch`
before each, so every process draws the same new order), with the policy's windows and without
the frames Diffusion Policy drops at episode ends. Augmentations draw from a generator seeded
by the run's data seed, the epoch, the shard and the frame's rank in it. A resumed run starts a
fresh epoch order (numbered from the step it resumes at; a mixture's pass alike): a stream
cannot be replayed from the middle.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from rlctl.adapters.storage.collate import collate_items
from rlctl.adapters.storage.streaming.dataset import StreamingLeRobotDataset
from rlctl.adapters.storage.streaming.mixture import StreamingMixture
from rlctl.adapters.training.augmentations import ImageAugmentations
from rlctl.domain.errors import DatasetError


class AugmentedStream(IterableDataset[dict[str, Any]]):
    def __init__(
        self,
        dataset: StreamingLeRobotDataset | StreamingMixture,
        camera_keys: Sequence[str],
        augment: ImageAugmentations | None,
        seed: int,
    ) -> None:
        super().__init__()
        self.dataset = dataset
        self.camera_keys = list(camera_keys)
        self.augment = augment if augment is not None and augment.enabled else None
        self.seed = seed

    def set_epoch(self, epoch: int) -> None:
        self.dataset.set_epoch(epoch)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker = info.id if info is not None else 0
        ids = [self.seed, self.dataset.epoch, self.dataset.rank, worker]
        for number, item in enumerate(self.dataset):
            if self.augment is not None:
                state = np.random.SeedSequence([*ids, number]).generate_state(1)[0]
                generator = torch.Generator().manual_seed(int(state))
                for key in self.camera_keys:
                    if key in item:
                        item[key] = self.augment(item[key], generator)
            yield item


def stream_batches(
    dataset: StreamingLeRobotDataset | StreamingMixture,
    augment: ImageAugmentations | None,
    *,
    batch_size: int,
    num_workers: int,
    pin_memory: bool,
    seed: int,
    start_epoch: int = 0,
) -> Iterator[dict[str, Any]]:
    """Batches of this rank's shard, forever (one epoch after the other)."""
    dataset.seed = seed  # the run's data seed orders the stream
    items = AugmentedStream(dataset, dataset.camera_keys, augment, seed)
    loader = DataLoader(
        items,
        batch_size=batch_size,
        collate_fn=collate_items,  # language annotations stay per-item lists
        num_workers=num_workers,
        pin_memory=pin_memory,
        prefetch_factor=2 if num_workers > 0 else None,
    )
    epoch = start_epoch
    while True:
        items.set_epoch(epoch)
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise DatasetError(
                f"rank {dataset.rank}'s shard of the streamed dataset holds no frame",
                where=f"dataset {dataset.repo_id}",
                hint="the dataset has fewer episodes than processes x workers can share; "
                "lower --num_workers or the number of processes",
            )
        epoch += 1
