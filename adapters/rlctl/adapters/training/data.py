"""The training data: the dataset the plan names, the windows a policy reads, its statistics,
the loader.

As `lerobot-train` does it: `delta_timestamps` come from the policy's `observation_delta_indices`
and `action_delta_indices` divided by the dataset's fps; the normaliser's statistics are the
dataset's `meta/stats.json`, with the cameras' replaced by ImageNet's when
`use_imagenet_stats` is on (pretrained ResNets expect them). The action window and the episode
tails left out are the model's `training_window`: the config's, unless the loaded model trains on
a shorter chunk (GR00T from a raw checkpoint), whose frames past it are then not read at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from rlctl.adapters.policies.base import TrainingWindow, config_window
from rlctl.adapters.policies.implementations import implementation_of
from rlctl.adapters.storage.collate import collate_items
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.table import files_in_order
from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset, MultiLeRobotTorchDataset
from rlctl.adapters.training.augmentations import ImageAugmentations
from rlctl.adapters.training.sampling import (
    AugmentedItems,
    GatheredBatches,
    StepBatchSampler,
    batch_as_is,
    usable_positions,
)
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import DatasetError
from rlctl.domain.policies import ACTION, PolicyConfig
from rlctl.domain.train_settings import DatasetSource

if TYPE_CHECKING:  # streaming needs huggingface_hub, an optional extra: imported when used
    from rlctl.adapters.storage.streaming.dataset import StreamingLeRobotDataset
    from rlctl.adapters.storage.streaming.mixture import StreamingMixture

OBSERVATION_PREFIX = "observation."
REWARD = "next.reward"
IMAGENET_STATS = {
    "mean": [[[0.485]], [[0.456]], [[0.406]]],
    "std": [[[0.229]], [[0.224]], [[0.225]]],
}

Stats = dict[str, dict[str, Any]]


def training_window(config: PolicyConfig) -> TrainingWindow:
    """The action window and dropped tail the model serving `config` trains with (a plugin's
    model without `training_window`: the config's)."""
    window = getattr(implementation_of(type(config)), "training_window", None)
    return window(config) if callable(window) else config_window(config)


def delta_timestamps(
    config: PolicyConfig, features: Sequence[str], fps: int
) -> dict[str, list[float]] | None:
    """LeRobot's `resolve_delta_timestamps`: the policy's frame offsets, in seconds (the
    actions': its model's `training_window`)."""
    out: dict[str, list[float]] = {}
    actions = training_window(config).action_indices
    for key in features:
        if key == REWARD and config.reward_delta_indices is not None:
            out[key] = [i / fps for i in config.reward_delta_indices]
        if key == ACTION and actions is not None:
            out[key] = [i / fps for i in actions]
        if key.startswith(OBSERVATION_PREFIX) and config.observation_delta_indices is not None:
            out[key] = [i / fps for i in config.observation_delta_indices]
    return out or None


def normalization_stats(
    stats: Mapping[str, Mapping[str, Any]] | None,
    camera_keys: Sequence[str],
    *,
    use_imagenet_stats: bool,
    where: str,
) -> Stats:
    if stats is None:
        raise DatasetError(
            "the dataset has no statistics (meta/stats.json), which normalisation needs",
            where=where,
            hint="compute them with `rlctl dataset recompute-stats ROOT` or LeRobot",
        )
    out = {key: dict(per) for key, per in stats.items()}
    if use_imagenet_stats:
        for key in camera_keys:
            out.setdefault(key, {}).update({k: v for k, v in IMAGENET_STATS.items()})
    return {k: {n: np.asarray(v).tolist() for n, v in per.items()} for k, per in out.items()}


@attrs.define
class TrainingData:
    # A streamed dataset (`--dataset.streaming=true`) is read in its own order, not sampled,
    # several interleaved by their weights; a local mixture is sampled by its weights
    # (`sample_probabilities`).
    dataset: (
        LeRobotTorchDataset | MultiLeRobotTorchDataset | StreamingLeRobotDataset | StreamingMixture
    )
    root: Path
    # The dataset's own metadata (every feature, the statistics); a mixture's shared one.
    meta: DatasetMeta

    @property
    def camera_keys(self) -> list[str]:
        return self.dataset.camera_keys

    @property
    def streaming(self) -> bool:
        return not isinstance(self.dataset, LeRobotTorchDataset | MultiLeRobotTorchDataset)

    @property
    def num_frames(self) -> int:
        dataset = self.dataset
        sampled = isinstance(dataset, LeRobotTorchDataset | MultiLeRobotTorchDataset)
        return len(dataset) if sampled else dataset.num_frames

    def episode_lengths(self) -> list[int]:
        """Episode lengths in the order the dataset's positions run (its files' order; a
        mixture's datasets one after the other)."""
        dataset = self.dataset
        if isinstance(dataset, MultiLeRobotTorchDataset):
            return [n for part in dataset.datasets for n in _episode_lengths(part)]
        assert isinstance(dataset, LeRobotTorchDataset)
        return _episode_lengths(dataset)


def _episode_lengths(dataset: LeRobotTorchDataset) -> list[int]:
    meta = dataset.meta
    chosen = dataset.reader.episodes
    records = list(meta.episodes) if chosen is None else [meta.episodes[i] for i in chosen]
    plan = files_in_order(dataset.root, meta, records)
    return [episode.length for _, episodes in plan for episode in episodes]


def open_training_data(
    root: Path,
    meta: DatasetMeta,
    source: DatasetSource,
    config: PolicyConfig,
    *,
    video_backend: str | None = None,
    rank: int = 0,
    world_size: int = 1,
    mixture: Sequence[Path] = (),
) -> TrainingData:
    """The dataset with the policy's windows. Cameras the policy does not read are left out,
    so they are never decoded (nor, streaming, fetched)."""
    if config.reward_delta_indices is not None and REWARD not in meta.features:
        raise DatasetError(
            f"policy type {config.type_name!r} learns from rewards, and the dataset has no "
            f"'{REWARD}' feature",
            where=str(root),
            hint="train it on a dataset that records next.reward (LeRobot's pusht, xarm), or "
            "choose a policy that imitates actions alone (act, diffusion, vqbet)",
        )
    unread = {k for k in meta.visual_keys if k not in config.image_features}
    kept = attrs.evolve(meta, features={k: v for k, v in meta.features.items() if k not in unread})
    if source.streaming and source.mixed:
        from rlctl.adapters.storage.streaming.mixture import StreamingMixture

        streams = StreamingMixture(
            source.locations_given,
            weights=source.weights,
            revision=source.revision,
            delta_timestamps=delta_timestamps(config, list(kept.features), meta.fps),
            video_backend=video_backend,
            drop_n_last_frames=max(0, getattr(config, "drop_n_last_frames", 0)),
            rank=rank,
            world_size=world_size,
            cameras=list(config.image_features),
        )
        return TrainingData(streams, streams.datasets[0].root, meta)
    if len(mixture) > 1:
        deltas = delta_timestamps(config, list(kept.features), meta.fps)
        mixed = MultiLeRobotTorchDataset(
            mixture,
            delta_timestamps=deltas,
            video_backend=video_backend,
            cameras=list(config.image_features),
        )
        return TrainingData(mixed, Path(mixture[0]), meta)
    if source.streaming:
        from rlctl.adapters.storage.streaming.dataset import StreamingLeRobotDataset

        stream = StreamingLeRobotDataset(
            source.location,
            revision=source.revision,
            episodes=source.episodes,
            delta_timestamps=delta_timestamps(config, list(kept.features), meta.fps),
            video_backend=video_backend,
            drop_n_last_frames=training_window(config).drop_n_last_frames,
            rank=rank,
            world_size=world_size,
            meta=kept,
        )
        return TrainingData(stream, stream.root, meta)
    reader = LeRobotDatasetReader(
        root,
        delta_timestamps=delta_timestamps(config, list(kept.features), meta.fps),
        episodes=source.episodes,
        video_backend=video_backend,
        meta=kept,
    )
    return TrainingData(LeRobotTorchDataset.from_reader(reader), reader.root, meta)


def make_loader(
    data: TrainingData,
    sampler: StepBatchSampler,
    augment: ImageAugmentations | None,
    *,
    num_workers: int,
    pin_memory: bool,
    seed: int,
) -> DataLoader:
    items: Dataset[dict[str, Any]]
    collate: Callable[[Any], dict[str, Any] | None]
    if getattr(data.dataset, "gathers", False):
        # Numbers only: a batch is gathered by index from the columns, not built item by item.
        items, collate = GatheredBatches(data.dataset), batch_as_is
    else:
        # Language annotations (lists of row dicts) stay per-item lists; the rest as by default.
        items, collate = AugmentedItems(data.dataset, data.camera_keys, augment), collate_items
    return DataLoader(
        items,
        batch_sampler=sampler,
        collate_fn=collate,
        num_workers=num_workers,
        pin_memory=pin_memory,
        # Its own generator: creating the loader's iterator must not draw from the global RNG,
        # or a resumed run's model randomness would drift from the uninterrupted run's.
        generator=torch.Generator().manual_seed(seed),
        prefetch_factor=2 if num_workers > 0 else None,
    )


def sample_positions(data: TrainingData, config: PolicyConfig) -> np.ndarray:
    return usable_positions(data.episode_lengths(), training_window(config).drop_n_last_frames)


def sample_probabilities(
    data: TrainingData, positions: np.ndarray, weights: Sequence[float] | None
) -> np.ndarray | None:
    """Each position's chance of being drawn when a mixture's datasets are weighted: dataset i
    gets `weights[i] / sum(weights)` of the samples, spread evenly over its usable positions;
    None (every position alike: datasets in proportion to their frames) otherwise."""
    dataset = data.dataset
    if weights is None or not isinstance(dataset, MultiLeRobotTorchDataset):
        return None
    starts = np.asarray([dataset.locate_start(i) for i in range(len(dataset.datasets))])
    owner = np.searchsorted(starts, positions, side="right") - 1
    counts = np.bincount(owner, minlength=len(starts))
    # Divided by the largest first: the sum of weights near the float limit overflows.
    relative = np.asarray(weights, dtype=np.float64)
    relative = relative / relative.max()
    share = relative / relative.sum()
    if np.any(counts == 0):
        empty = [str(dataset.roots[i]) for i in np.flatnonzero(counts == 0)]
        raise DatasetError(
            f"no frame to train on in {', '.join(empty)}",
            where="dataset.weights",
            hint="drop that dataset from the mixture",
        )
    probabilities = share[owner] / counts[owner]
    return probabilities / probabilities.sum()
