"""Which frames each step trains on, as a pure function of (seed, step): exact resume, DDP shards.

The stream of sample positions is endless: position p falls in epoch p // N (N usable frames)
and picks frame `perm(seed, epoch)[p % N]`; batches never straddle a step, so step s of a run
with world size W and batch B reads positions [s·W·B, (s+1)·W·B), rank r the r-th block of B.
That is LeRobot's `EpisodeAwareSampler` idea (order from (seed, epoch), no synchronised RNG)
carried one step further: resuming is "start at step s", with no sampler state to save, and
the ranks' shards are disjoint like `DistributedSampler`'s.

Each position also gets its own seed, which the loader uses for that sample's augmentations, so
they do not depend on which worker fetched it either; a run without image augmentations gets 0
for every sample instead (a seed costs tens of microseconds: most of a small model's data time).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from rlctl.adapters.training.augmentations import ImageAugmentations
from rlctl.domain.errors import InvalidInput

SampleKey = tuple[int, int]  # (dataset position, sample seed)


def usable_positions(episode_lengths: Sequence[int], drop_n_last_frames: int = 0) -> np.ndarray:
    """Dataset positions a sample may start at: each episode less its last frames (Diffusion
    Policy drops the frames whose action horizon would run mostly past the end). A negative
    count (a multi-task DiT whose horizon is shorter than its history and chunk) drops none."""
    parts, start = [], 0
    drop = max(0, drop_n_last_frames)
    for length in episode_lengths:
        parts.append(np.arange(start, start + max(0, length - drop)))
        start += length
    positions = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if not len(positions):
        raise InvalidInput(
            f"no frame left to train on after dropping the last {drop_n_last_frames} of each "
            "episode",
            where="dataset",
            hint="use longer episodes, or a policy config that drops fewer frames",
        )
    return positions.astype(np.int64)


def _seed_of(*parts: int) -> int:
    return int(np.random.SeedSequence([p & 0xFFFFFFFFFFFFFFFF for p in parts]).generate_state(1)[0])


class StepBatchSampler:
    """A `batch_sampler` for torch's DataLoader: lists of `(position, sample_seed)`, forever."""

    def __init__(
        self,
        positions: np.ndarray,
        *,
        batch_size: int,
        seed: int,
        start_step: int = 0,
        rank: int = 0,
        world_size: int = 1,
        probabilities: np.ndarray | None = None,
        sample_seeds: bool = True,
    ) -> None:
        """`probabilities`: each position's chance per draw (a weighted mixture): an epoch is
        then `len(positions)` draws with replacement, still a function of (seed, epoch).
        `sample_seeds`: whether samples need their own seed (augmented cameras); else 0."""
        self.positions = positions
        self.probabilities = (
            None if probabilities is None else torch.from_numpy(np.asarray(probabilities))
        )
        self.batch_size = batch_size
        self.seed = seed
        self.start_step = start_step
        self.rank = rank
        self.world_size = world_size
        self.sample_seeds = sample_seeds
        self._epoch = -1
        self._order = np.zeros(0, dtype=np.int64)

    def order(self, epoch: int) -> np.ndarray:
        if epoch != self._epoch:
            generator = torch.Generator().manual_seed(_seed_of(self.seed, epoch))
            if self.probabilities is None:
                order = torch.randperm(len(self.positions), generator=generator)
            else:
                order = torch.multinomial(
                    self.probabilities, len(self.positions), replacement=True, generator=generator
                )
            self._order = order.numpy()
            self._epoch = epoch
        return self._order

    def epoch_frames(self, epoch: int) -> np.ndarray:
        """The dataset positions of every sample of `epoch`, in stream order."""
        return self.positions[self.order(epoch)]

    def spans(self, step: int) -> list[tuple[int, int, int]]:
        """This rank's samples for step `step` as `(epoch, start, stop)`: samples start..stop-1
        of those epochs, one after the other (a batch spans two epochs at most, or a few when
        the dataset holds fewer usable frames than a batch)."""
        size = len(self.positions)
        start = (step * self.world_size + self.rank) * self.batch_size
        end = start + self.batch_size
        found = []
        while start < end:
            epoch, offset = divmod(start, size)
            stop = min(size, offset + end - start)
            found.append((epoch, offset, stop))
            start += stop - offset
        return found

    def frames(self, step: int) -> np.ndarray:
        """This rank's dataset positions for step `step` (0-based): `batch`'s, without seeds."""
        parts = [self.positions[self.order(epoch)[a:b]] for epoch, a, b in self.spans(step)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def batch(self, step: int) -> list[SampleKey]:
        """This rank's samples for optimisation step `step` (0-based)."""
        frames = self.frames(step)
        if not self.sample_seeds:
            return [(frame, 0) for frame in frames.tolist()]
        first = (step * self.world_size + self.rank) * self.batch_size
        stream = np.arange(first, first + self.batch_size, dtype=np.int64)
        return [
            (frame, _seed_of(self.seed, p, 1))
            for frame, p in zip(frames.tolist(), stream.tolist(), strict=True)
        ]

    def __iter__(self) -> Iterator[list[SampleKey]]:
        step = self.start_step
        while True:
            yield self.batch(step)
            step += 1


class AugmentedItems(Dataset[dict[str, Any]]):
    """Items of `dataset` at `(position, seed)` keys, the cameras augmented with that seed."""

    def __init__(
        self, dataset: Any, camera_keys: Sequence[str], augment: ImageAugmentations | None
    ) -> None:
        self.dataset = dataset
        self.camera_keys = list(camera_keys)
        self.augment = augment if augment is not None and augment.enabled else None

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitems__(self, keys: Sequence[SampleKey]) -> list[dict[str, Any]]:
        items = self.dataset.__getitems__([position for position, _ in keys])
        if self.augment is not None:
            for item, (_, seed) in zip(items, keys):
                generator = torch.Generator().manual_seed(seed)
                for key in self.camera_keys:
                    if key in item:
                        item[key] = self.augment(item[key], generator)
        return items

    def __getitem__(self, key: SampleKey) -> dict[str, Any]:
        return self.__getitems__([key])[0]


class GatheredBatches(Dataset[dict[str, Any]]):
    """Whole batches of a numbers-only dataset gathered from its columns at `(position, seed)`
    keys (no camera to augment, so the seed is unused); the loader passes them through
    (`batch_as_is`) instead of collating items."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitems__(self, keys: Sequence[SampleKey]) -> dict[str, Any]:  # type: ignore[override]
        return self.dataset.gather([position for position, _ in keys])  # type: ignore[no-any-return]

    def __getitem__(self, key: SampleKey) -> dict[str, Any]:
        return self.__getitems__([key])


def batch_as_is(batch: dict[str, Any]) -> dict[str, Any]:
    """The collate function of gathered batches (module level: workers pickle it)."""
    return batch
