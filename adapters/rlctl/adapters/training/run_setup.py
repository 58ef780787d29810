"""The policy and data a run trains: fresh from the dataset, or restored from a checkpoint.

As `lerobot-train` does it: the policy's input and output features come from the dataset, its
processors normalise with the dataset's statistics — prepared once on rank 0 and broadcast so
every process normalises alike — and a resumed run takes the checkpoint's policy config,
weights and processors (their statistics are authoritative).
"""

from __future__ import annotations

from pathlib import Path

import attrs

from rlctl.adapters.policies.loaded_policy import LoadedPolicy, create_policy, load_policy
from rlctl.adapters.training.checkpoints import PRETRAINED_DIR
from rlctl.adapters.training.data import (
    TrainingData,
    dataset_root,
    normalization_stats,
    open_training_data,
    read_dataset_meta,
)
from rlctl.adapters.training.distributed import World
from rlctl.application.policy_configs import PolicyConfig, policy_features
from rlctl.application.use_cases.train_settings import TrainSettings
from rlctl.domain.dataset_meta import DatasetMeta

# Policies that read states only: a dataset's cameras are neither decoded nor normalised for them.
STATE_ONLY_POLICIES = frozenset({"mlp"})


@attrs.frozen
class PreparedRun:
    # The settings as trained: the policy config carries its features and device.
    settings: TrainSettings
    policy: LoadedPolicy
    data: TrainingData


def prepare_run(
    settings: TrainSettings,
    checkpoint: Path | None,
    world: World,
    *,
    video_backend: str | None = None,
) -> PreparedRun:
    loaded = None
    if checkpoint is not None:
        loaded = load_policy(checkpoint / PRETRAINED_DIR, device=str(world.device))
        settings = attrs.evolve(settings, policy=loaded.config)
    root = dataset_root_once(settings, world)
    meta = read_dataset_meta(root)
    if loaded is None:
        config = with_dataset_features(settings.policy, meta)
        settings = attrs.evolve(settings, policy=attrs.evolve(config, device=world.device.type))
    data = open_training_data(
        root, meta, settings.dataset, settings.policy, video_backend=video_backend
    )
    if loaded is None:
        loaded = new_policy(settings, data, world)
    return PreparedRun(settings, loaded, data)


def new_policy(settings: TrainSettings, data: TrainingData, world: World) -> LoadedPolicy:
    stats = world.broadcast_json(
        normalization_stats(
            data.meta.stats,
            data.camera_keys,
            use_imagenet_stats=settings.dataset.use_imagenet_stats,
            where=str(data.root / "meta" / "stats.json"),
        )
        if world.is_main
        else None
    )
    return create_policy(settings.policy, stats, device=str(world.device))


def dataset_root_once(settings: TrainSettings, world: World) -> Path:
    """The local dataset folder. A Hub dataset under several processes is pulled by rank 0
    while the others wait, then they find it in the cache."""
    if settings.dataset.root or not world.distributed:
        return dataset_root(settings.dataset)
    root = dataset_root(settings.dataset) if world.is_main else None
    world.barrier()
    return root if root is not None else dataset_root(settings.dataset)


def with_dataset_features(config: PolicyConfig, meta: DatasetMeta) -> PolicyConfig:
    """LeRobot's `make_policy`: features the config leaves empty come from the dataset —
    without cameras for a policy that never looks at them (so they are not even decoded)."""
    inputs, outputs = policy_features(meta.features)
    if config.type_name in STATE_ONLY_POLICIES:
        inputs = {k: f for k, f in inputs.items() if f.type != "VISUAL"}
    return config.with_features(config.input_features or inputs, config.output_features or outputs)
