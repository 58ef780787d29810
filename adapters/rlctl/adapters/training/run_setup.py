"""The policy and data a run trains: fresh from the dataset, or restored from a checkpoint.

As `lerobot-train` does it: the policy's input and output features come from the dataset, its
processors normalise with the dataset's statistics — prepared once on rank 0 and broadcast so
every process normalises alike — and a resumed run takes the checkpoint's policy config,
weights and processors (their statistics are authoritative).

A run with `policy.pretrained_path` (fine-tuning) starts from that checkpoint's weights; its
processors are built anew over the *dataset's* statistics, as `lerobot-train` overrides the
pretrained processors' statistics with the dataset's unless it resumes. With
`policy.use_relative_actions`, the action statistics are those of `action - state` over every
action window of the dataset (LeRobot's `compute_relative_action_stats`).
"""

from __future__ import annotations

from pathlib import Path

import attrs
import structlog

from rlctl.adapters.policies.checkpoint import (
    CONFIG_FILE,
    checkpoint_folder,
    read_config,
    read_model,
)
from rlctl.adapters.policies.loaded_policy import LoadedPolicy, create_policy, load_policy_folder
from rlctl.adapters.policies.processors import make_pre_post_processors
from rlctl.adapters.training.data import (
    Stats,
    TrainingData,
    action_and_state_columns,
    local_dataset_root,
    normalization_stats,
    open_training_data,
    read_dataset_meta,
)
from rlctl.adapters.training.distributed import World
from rlctl.application.fine_tuning import check_pretrained, fine_tuned_config
from rlctl.application.relative_actions import (
    relative_action_statistics,
    with_relative_action_names,
)
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.features import FeatureKind
from rlctl.domain.policies import ACTION, PolicyConfig, dataset_policy_features
from rlctl.domain.run_layout import PRETRAINED_DIR
from rlctl.domain.train_settings import TrainSettings

log = structlog.get_logger(__name__)


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
        loaded = load_policy_folder(checkpoint / PRETRAINED_DIR, device=str(world.device))
        settings = attrs.evolve(settings, policy=loaded.config)
    root = dataset_root_once(settings, world)
    meta = read_dataset_meta(root)
    pretrained = None
    if loaded is None:
        config = settings.policy
        pretrained = pretrained_folder_once(config, world)
        if pretrained is not None:
            pretrained_config = read_config(pretrained)
            config = fine_tuned_config(pretrained_config, config)
            check_pretrained(
                pretrained_config, config, meta.features, where=str(pretrained / CONFIG_FILE)
            )
        config = with_dataset_features(config, meta)
        config = with_relative_action_names(config, meta.features)
        settings = attrs.evolve(settings, policy=attrs.evolve(config, device=world.device.type))
    data = open_training_data(
        root,
        meta,
        settings.dataset,
        settings.policy,
        video_backend=video_backend,
        rank=world.rank,
        world_size=world.size,
    )
    if loaded is None:
        loaded = new_policy(settings, data, world, pretrained=pretrained)
    return PreparedRun(settings, loaded, data)


def new_policy(
    settings: TrainSettings, data: TrainingData, world: World, *, pretrained: Path | None = None
) -> LoadedPolicy:
    """A policy over the dataset's statistics: fresh, or with the weights of `pretrained`."""
    stats = world.broadcast_json(training_stats(settings, data) if world.is_main else None)
    device = str(world.device)
    if pretrained is None:
        return create_policy(settings.policy, stats, device=device)
    log.info("fine-tuning", pretrained=str(pretrained), policy=settings.policy.type_name)
    model = read_model(pretrained, settings.policy, device=device)
    pre, post = make_pre_post_processors(settings.policy, stats, device=device)
    return LoadedPolicy(model, pre, post)


def training_stats(settings: TrainSettings, data: TrainingData) -> Stats:
    stats = normalization_stats(
        data.meta.stats,
        data.camera_keys,
        use_imagenet_stats=settings.dataset.use_imagenet_stats,
        where=str(data.root / "meta" / "stats.json"),
    )
    config = settings.policy
    if config.use_relative_actions:
        actions, states, episodes = action_and_state_columns(data)
        stats[ACTION] = relative_action_statistics(config, actions, states, episodes)
        log.info(
            "relative actions",
            excluded=list(config.relative_exclude_joints),
            names=list(config.action_feature_names or []),
        )
    return stats


def pretrained_folder_once(config: PolicyConfig, world: World) -> Path | None:
    """The pretrained checkpoint's folder (a Hub repo id is pulled, by rank 0 first)."""
    location = config.pretrained_path
    if not location:
        return None

    def resolve() -> Path:
        if Path(location).expanduser().exists():
            return checkpoint_folder(location)
        from rlctl.adapters.hub.resolve import resolve_location

        pulled = resolve_location(location, kind="model", revision=config.pretrained_revision)
        return checkpoint_folder(pulled)

    if not world.distributed:
        return resolve()
    folder = resolve() if world.is_main else None
    world.barrier()
    return folder if folder is not None else resolve()


def dataset_root_once(settings: TrainSettings, world: World) -> Path:
    """The local dataset folder. A Hub dataset under several processes is pulled by rank 0
    while the others wait, then they find it in the cache."""
    if settings.dataset.root or not world.distributed:
        return local_dataset_root(settings.dataset)
    root = local_dataset_root(settings.dataset) if world.is_main else None
    world.barrier()
    return root if root is not None else local_dataset_root(settings.dataset)


def with_dataset_features(config: PolicyConfig, meta: DatasetMeta) -> PolicyConfig:
    """LeRobot's `make_policy`: features the config leaves empty come from the dataset —
    without cameras for a policy that never looks at them (so they are not even decoded)."""
    inputs, outputs = dataset_policy_features(meta.features)
    if not type(config).reads_images:
        inputs = {k: f for k, f in inputs.items() if f.kind is not FeatureKind.VISUAL}
    return config.with_features(config.input_features or inputs, config.output_features or outputs)
