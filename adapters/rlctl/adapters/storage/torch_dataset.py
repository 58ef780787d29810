"""torch `Dataset`s over LeRobot v3.0 folders: one dataset, or several concatenated.

Both work in a `DataLoader` with `num_workers > 0` and either video backend: the readers open
their video decoders lazily, one per process, so forked workers never share decoder state with
the parent (see `lerobot_v3.decoders`). Both expose `__getitems__`, which the DataLoader uses to
fetch a whole batch and lets the reader decode each video file once per batch.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import structlog
import torch
from torch.utils.data import Dataset

from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import (
    ImageTransform,
    LeRobotDatasetReader,
    check_transform,
)
from rlctl.application.ports.video import VideoDecoder
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.dataset_mixture import feature_differences
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec
from rlctl.domain.statistics import FeatureStats, aggregate_stats, stats_from_json
from rlctl.domain.windows import is_pad_key

log = structlog.get_logger()


class LeRobotTorchDataset(Dataset[dict[str, Any]]):
    """A torch `Dataset` whose items are LeRobot 0.6.1's `__getitem__` items."""

    def __init__(
        self,
        root: str | Path,
        *,
        delta_timestamps: Mapping[str, Sequence[float]] | None = None,
        episodes: Iterable[int] | None = None,
        video_backend: str | None = None,
        image_transforms: ImageTransform | None = None,
        video_decoder_factory: Callable[[], VideoDecoder] | None = None,
        meta: DatasetMeta | None = None,
    ) -> None:
        self.reader = LeRobotDatasetReader(
            root,
            delta_timestamps=delta_timestamps,
            episodes=episodes,
            video_backend=video_backend,
            image_transforms=image_transforms,
            video_decoder_factory=video_decoder_factory,
            meta=meta,
        )

    @classmethod
    def from_reader(cls, reader: LeRobotDatasetReader) -> LeRobotTorchDataset:
        dataset = cls.__new__(cls)
        dataset.reader = reader
        return dataset

    @property
    def meta(self) -> DatasetMeta:
        return self.reader.meta

    @property
    def root(self) -> Path:
        return self.reader.root

    @property
    def fps(self) -> int:
        return self.reader.fps

    @property
    def num_episodes(self) -> int:
        return self.reader.num_episodes

    @property
    def num_frames(self) -> int:
        return self.reader.num_frames

    @property
    def camera_keys(self) -> list[str]:
        return self.reader.camera_keys

    @property
    def hf_dataset(self) -> Any:
        """The data rows as a Hugging Face `datasets.Dataset`, as LeRobot's `hf_dataset`."""
        return self.reader.hf_dataset

    def set_image_transforms(self, image_transforms: ImageTransform | None) -> None:
        self.reader.set_image_transforms(image_transforms)

    def clear_image_transforms(self) -> None:
        self.reader.clear_image_transforms()

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, idx: int) -> dict[str, Any]:
        return self.reader[idx]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        return self.reader.get_items(indices)

    @property
    def gathers(self) -> bool:
        """Whether whole batches are gathered from columns (`gather`): numbers only."""
        return self.reader.gathers

    def gather(self, indices: Sequence[int]) -> dict[str, Any]:
        """The collated batch of `indices`, gathered from the columns at once."""
        return self.reader.gather(indices)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reader!r})"


class MixtureView:
    """What a mixture shows of its datasets, local or streamed alike: the features they share,
    the first one's rate, their episodes and frames together, their statistics aggregated as
    LeRobot aggregates them, and one image transform for all."""

    datasets: Sequence[Any]
    disabled_features: set[str]
    _image_transforms: ImageTransform | None

    @property
    def features(self) -> dict[str, FeatureSpec]:
        first = self.datasets[0].meta.features
        return {k: v for k, v in first.items() if k not in self.disabled_features}

    @property
    def fps(self) -> int:
        return int(self.datasets[0].fps)

    @property
    def camera_keys(self) -> list[str]:
        return [k for k, f in self.features.items() if f.is_visual]

    @property
    def num_episodes(self) -> int:
        return sum(d.num_episodes for d in self.datasets)

    @property
    def num_frames(self) -> int:
        return sum(d.num_frames for d in self.datasets)

    @property
    def stats(self) -> dict[str, FeatureStats] | None:
        """Statistics of the shared features, aggregated as LeRobot aggregates them."""
        parts = [d.meta.stats for d in self.datasets]
        if any(p is None for p in parts):
            return None
        merged = aggregate_stats([stats_from_json(p) for p in parts if p is not None])
        return {k: v for k, v in merged.items() if k not in self.disabled_features}

    @property
    def image_transforms(self) -> ImageTransform | None:
        return self._image_transforms

    def set_image_transforms(self, image_transforms: ImageTransform | None) -> None:
        check_transform(image_transforms)
        self._image_transforms = image_transforms
        for dataset in self.datasets:
            dataset.set_image_transforms(image_transforms)


class MultiLeRobotTorchDataset(MixtureView, Dataset[dict[str, Any]]):
    """Several LeRobot datasets concatenated, keeping the features they share.

    Features not common to all (or of different dtype/shape) are dropped from items and reported
    once in `differences` and a logged warning; items gain `dataset_index`, as in LeRobot's
    `MultiLeRobotDataset`. Image transforms set here reach every child. `cameras` (None: all)
    are the cameras to read: the others, and those not every dataset has, are never decoded.
    """

    def __init__(
        self,
        roots: Sequence[str | Path],
        *,
        delta_timestamps: Mapping[str, Sequence[float]] | None = None,
        episodes: Mapping[str, Iterable[int]] | None = None,
        video_backend: str | None = None,
        image_transforms: ImageTransform | None = None,
        video_decoder_factory: Callable[[], VideoDecoder] | None = None,
        cameras: Collection[str] | None = None,
    ) -> None:
        if not roots:
            raise InvalidInput("no dataset given", where="roots", hint="give one or more roots")
        check_transform(image_transforms)
        self.roots = [Path(r) for r in roots]
        metas = [LeRobotMetaReader().read_meta(root) for root in self.roots]
        named = [(str(root), meta) for root, meta in zip(self.roots, metas)]
        self.disabled_features, self.differences = feature_differences(named)
        self.datasets = [
            LeRobotTorchDataset(
                root,
                delta_timestamps=_deltas_for(root, delta_timestamps),
                episodes=_episodes_for(root, episodes),
                video_backend=video_backend,
                image_transforms=image_transforms,
                video_decoder_factory=video_decoder_factory,
                meta=_read_cameras(meta, cameras, self.disabled_features),
            )
            for root, meta in zip(self.roots, metas)
        ]
        self._dropped = self.disabled_features | {is_pad_key(k) for k in self.disabled_features}
        if self.differences:
            log.warning(
                "datasets differ; only what they share is returned",
                differences="; ".join(self.differences),
                dropped=sorted(self.disabled_features),
            )
        self._starts = list(itertools.accumulate((len(d) for d in self.datasets), initial=0))
        self._image_transforms = image_transforms

    def clear_image_transforms(self) -> None:
        self.set_image_transforms(None)

    def __len__(self) -> int:
        return self._starts[-1]

    def locate_start(self, which: int) -> int:
        """The first global position of dataset number `which`."""
        return self._starts[which]

    def locate(self, idx: int) -> tuple[int, int]:
        """(dataset number, position inside it) of a global position."""
        try:
            value = operator.index(idx)
        except TypeError:
            raise TypeError(f"dataset indices must be integers, not {type(idx).__name__}") from None
        position = value + len(self) if value < 0 else value
        if not 0 <= position < len(self):
            raise IndexError(f"index {idx} is out of range for a dataset of {len(self)} frames")
        which = bisect.bisect_right(self._starts, position) - 1
        return which, position - self._starts[which]

    def __getitem__(self, idx: int) -> dict[str, Any]:
        return self.__getitems__([idx])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        located = [self.locate(i) for i in indices]
        by_dataset: dict[int, list[int]] = {}
        for which, position in located:
            by_dataset.setdefault(which, []).append(position)
        fetched = {
            which: iter(self.datasets[which].__getitems__(positions))
            for which, positions in by_dataset.items()
        }
        items = []
        for which, _ in located:
            item = next(fetched[which])
            for key in self._dropped.intersection(item):
                del item[key]
            item["dataset_index"] = torch.tensor(which)
            items.append(item)
        return items

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(roots={[str(r) for r in self.roots]}, frames={len(self)}, "
            f"dropped={sorted(self.disabled_features)})"
        )


def _read_cameras(
    meta: DatasetMeta, cameras: Collection[str] | None, disabled: set[str]
) -> DatasetMeta:
    """`meta` without the cameras that are not read: dropped from the mixture's items, or not
    among `cameras`."""
    unread = {
        key
        for key in meta.visual_keys
        if key in disabled or (cameras is not None and key not in cameras)
    }
    if not unread:
        return meta
    return attrs.evolve(meta, features={k: v for k, v in meta.features.items() if k not in unread})


def _deltas_for(
    root: str | Path, delta_timestamps: Mapping[str, Sequence[float]] | None
) -> dict[str, Sequence[float]] | None:
    # A key some datasets lack is dropped from all items anyway; ask each only for what it has.
    if delta_timestamps is None:
        return None
    from rlctl.adapters.storage.lerobot_v3.meta_reader import read_info

    features = read_info(Path(root)).get("features", {})
    return {k: v for k, v in delta_timestamps.items() if k in features}


def _episodes_for(
    root: str | Path, episodes: Mapping[str, Iterable[int]] | None
) -> Iterable[int] | None:
    if episodes is None:
        return None
    for key in (str(root), Path(root).name):
        if key in episodes:
            return episodes[key]
    return None
