"""The policy and data a run trains, as its `TrainingPlan` says: fresh, fine-tuned, or restored.

As `lerobot-train` does it: the dataset is opened with the policy's windows; a new policy's
processors normalise with the dataset's statistics (the relative-action `action` statistics of
the plan replacing the dataset's) — prepared on rank 0 and broadcast so every process
normalises alike; a resumed run takes the checkpoint's policy config, weights and processors
(their statistics are authoritative). A fine-tuned run (`plan.pretrained`) starts from that
checkpoint's weights with processors built anew over the *dataset's* statistics, as
`lerobot-train` overrides the pretrained processors' statistics unless it resumes.

Under fsdp/hsdp only rank 0 builds (or reads) the whole model; the other ranks build it on the
meta device, and `shard_model` fills their shards from rank 0's weights.

Everything was decided and resolved by the application (`PlanTraining`): nothing here pulls
from the Hub or checks a config.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import structlog

from rlctl.adapters.policies.base import PolicyModel
from rlctl.adapters.policies.checkpoint import (
    checkpoint_folder,
    read_config,
    read_model,
    read_processors,
)
from rlctl.adapters.policies.loaded_policy import LoadedPolicy, create_policy, load_policy_folder
from rlctl.adapters.policies.processors import make_pre_post_processors
from rlctl.adapters.training.data import (
    Stats,
    TrainingData,
    normalization_stats,
    open_training_data,
)
from rlctl.adapters.training.distributed import World
from rlctl.adapters.training.sharding import builds_on_meta, empty_model
from rlctl.application.ports.training import TrainingPlan
from rlctl.domain.policies import ACTION, RELATIVE_ACTION, PolicyConfig
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
    plan: TrainingPlan, world: World, *, video_backend: str | None = None
) -> PreparedRun:
    settings = plan.settings
    loaded = None
    if plan.resume is not None:
        checkpoint = Path(plan.resume.location)
        loaded = _resumed_policy(checkpoint / PRETRAINED_DIR, world)
        settings = attrs.evolve(settings, policy=loaded.config)
    data = open_training_data(
        plan.dataset_root,
        plan.dataset,
        settings.dataset,
        settings.policy,
        video_backend=video_backend,
        rank=world.rank,
        world_size=world.size,
        mixture=plan.dataset_roots,
    )
    if loaded is None:
        loaded = new_policy(
            settings, data, world, pretrained=plan.pretrained, action_stats=plan.action_stats
        )
    return PreparedRun(settings, loaded, data)


def _resumed_policy(folder: Path, world: World) -> LoadedPolicy:
    """The checkpoint's policy; on a sharded run's ranks after the first, its config and
    processors with an empty model (rank 0's weights fill its shards, then the sharded state)."""
    model = _empty_model(read_config(folder), world)
    if model is None:
        return load_policy_folder(folder, device=str(world.device))
    pre, post = read_processors(folder, device=str(world.device))
    return LoadedPolicy(model, pre, post)


def _empty_model(config: PolicyConfig, world: World) -> PolicyModel | None:
    """This rank's model with its parameters on the meta device, where a sharded run's rank
    after the first (`builds_on_meta`) and the type allows it; None: build it whole."""
    if not builds_on_meta(world):
        return None
    model = empty_model(config)
    if model is not None:
        log.info("built on the meta device", rank=world.rank, policy=config.type_name)
    return model


def new_policy(
    settings: TrainSettings,
    data: TrainingData,
    world: World,
    *,
    pretrained: Path | None = None,
    action_stats: Mapping[str, Any] | None = None,
) -> LoadedPolicy:
    """A policy over the dataset's statistics: fresh, or with the weights of `pretrained`."""
    stats = world.broadcast_json(
        training_stats(settings, data, action_stats) if world.is_main else None
    )
    device = str(world.device)
    if pretrained is not None:
        log.info("fine-tuning", pretrained=str(pretrained), policy=settings.policy.type_name)
    # Sharded: this rank's weights come from rank 0's once sharded (`shard_model`); it
    # neither initialises nor reads the whole model.
    model = _empty_model(settings.policy, world)
    if model is None:
        # A bfloat16 model trains in float32 where the device emulates bfloat16
        # (`--policy.compute_dtype`, `vla.compute_dtype`); its checkpoints stay bfloat16. A
        # sharded run keeps the dtypes: its ranks' shards must agree with rank 0's.
        config = settings.policy
        if world.mesh is not None:
            config = attrs.evolve(config, compute_dtype="keep")
        if pretrained is None:
            return create_policy(config, stats, device=device)
        model = read_model(checkpoint_folder(pretrained), config, device=device)
    pre, post = make_pre_post_processors(settings.policy, stats, device=device)
    return LoadedPolicy(model, pre, post)


def training_stats(
    settings: TrainSettings, data: TrainingData, action_stats: Mapping[str, Any] | None = None
) -> Stats:
    stats = normalization_stats(
        data.meta.stats,
        data.camera_keys,
        use_imagenet_stats=settings.dataset.use_imagenet_stats,
        where=str(data.root / "meta" / "stats.json"),
    )
    if action_stats is not None:
        per_step = type(settings.policy).relative_stats_horizon is not None
        stats[RELATIVE_ACTION if per_step else ACTION] = dict(action_stats)
    return stats
