"""The policy and data a run trains, as its `TrainingPlan` says: fresh, fine-tuned, or restored.

As `lerobot-train` does it: the dataset is opened with the policy's windows; a new policy's
processors normalise with the dataset's statistics (the relative-action `action` statistics of
the plan replacing the dataset's) — prepared on rank 0 and broadcast so every process
normalises alike; a resumed run takes the checkpoint's policy config, weights and processors
(their statistics are authoritative). A fine-tuned run (`plan.pretrained`) starts from that
checkpoint's weights with processors built anew over the *dataset's* statistics, as
`lerobot-train` overrides the pretrained processors' statistics unless it resumes.

Under fsdp/hsdp on several processes no rank reads a whole model from disk: every rank builds
it on the meta device and `shard_model` fills its shards from the rows of the file it reads
(fine-tuning, or resuming an unsharded checkpoint), or the resumed sharded checkpoint fills them
(`load_sharded`). Only a fresh model is built whole, on rank 0 alone (its initial weights are
rank 0's draw), and broadcast into the others' shards.

Everything was decided and resolved by the application (`PlanTraining`): nothing here pulls
from the Hub or checks a config.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import structlog

from rlctl.adapters.policies.base import PolicyModel, policy_class
from rlctl.adapters.policies.checkpoint import (
    check_weights_file,
    checkpoint_folder,
    read_config,
    read_model,
    read_processors,
)
from rlctl.adapters.policies.errors import CheckpointError
from rlctl.adapters.policies.files import inside_checkpoint
from rlctl.adapters.policies.loaded_policy import LoadedPolicy, create_policy, load_policy_folder
from rlctl.adapters.policies.processors import make_pre_post_processors
from rlctl.adapters.training.data import (
    Stats,
    TrainingData,
    normalization_stats,
    open_training_data,
)
from rlctl.adapters.training.distributed import World
from rlctl.adapters.training.sharded_checkpoint import is_sharded_checkpoint
from rlctl.adapters.training.sharding import (
    FIRST_RANK,
    WeightSource,
    builds_on_meta,
    empty_model,
    sharded_over_ranks,
)
from rlctl.application.ports.training import TrainingPlan
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import ACTION, RELATIVE_ACTION, PolicyConfig
from rlctl.domain.run_layout import MODEL_FILE, PRETRAINED_DIR
from rlctl.domain.train_settings import TrainSettings

log = structlog.get_logger(__name__)


@attrs.frozen
class PreparedRun:
    # The settings as trained: the policy config carries its features and device.
    settings: TrainSettings
    policy: LoadedPolicy
    data: TrainingData
    # Where a sharded run's weights come from (`shard_model`); the first rank's otherwise.
    weights: WeightSource = FIRST_RANK


def prepare_run(
    plan: TrainingPlan, world: World, *, video_backend: str | None = None
) -> PreparedRun:
    settings = plan.settings
    loaded, weights = None, FIRST_RANK
    if plan.resume is not None:
        checkpoint = Path(plan.resume.location)
        loaded, weights = _resumed_policy(checkpoint, world)
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
        loaded, weights = _new_policy(
            settings, data, world, pretrained=plan.pretrained, action_stats=plan.action_stats
        )
    return PreparedRun(settings, loaded, data, weights)


def _resumed_policy(checkpoint: Path, world: World) -> tuple[LoadedPolicy, WeightSource]:
    """The checkpoint's policy. Sharded over several processes, its config and processors with
    a model without weights: the checkpoint's shards fill it (a sharded checkpoint), or each
    rank reads its rows of pretrained_model's weights (an unsharded one)."""
    folder = checkpoint / PRETRAINED_DIR
    if not sharded_over_ranks(world):
        return load_policy_folder(folder, device=str(world.device)), FIRST_RANK
    if is_sharded_checkpoint(checkpoint):
        weights = WeightSource(restored=True)
    else:
        weights = WeightSource(file=_weights_file(folder))
    config = read_config(folder)
    model = _unloaded_model(config, world, weights)
    pre, post = read_processors(folder, device=str(world.device))
    return LoadedPolicy(model, pre, post), weights


def _weights_file(folder: Path) -> Path:
    return inside_checkpoint(folder, folder / MODEL_FILE, where=str(folder / MODEL_FILE))


def _unloaded_model(config: PolicyConfig, world: World, weights: WeightSource) -> PolicyModel:
    """The model `config` describes for a rank whose weights come from `weights` once sharded:
    on the meta device where the type allows it, else built whole without reading a backbone;
    checked against `weights.file` before a byte of it is read."""
    model = _empty_model(config, world, weights)
    if model is None:
        try:
            model = policy_class(config)(config, load_backbone_weights=False)
        except ConfigError as err:
            raise CheckpointError(err.message, where=err.where, hint=err.hint) from err
        model = model.to(world.device)
    if weights.file is not None:
        check_weights_file(model, weights.file)
    return model


def _empty_model(
    config: PolicyConfig, world: World, weights: WeightSource = FIRST_RANK
) -> PolicyModel | None:
    """This rank's model with its parameters on the meta device, where `builds_on_meta` and
    the type allows it; None: build it whole."""
    if not builds_on_meta(world, weights):
        return None
    model = empty_model(config, computed_buffers=not weights.first_rank)
    if model is not None:
        log.info("built on the meta device", rank=world.rank, policy=config.type_name)
    return model


def _new_policy(
    settings: TrainSettings,
    data: TrainingData,
    world: World,
    *,
    pretrained: Path | None = None,
    action_stats: Mapping[str, Any] | None = None,
) -> tuple[LoadedPolicy, WeightSource]:
    """A policy over the dataset's statistics: fresh, or with the weights of `pretrained`."""
    stats = world.broadcast_json(
        training_stats(settings, data, action_stats) if world.is_main else None
    )
    device = str(world.device)
    weights = FIRST_RANK
    # A bfloat16 model trains in float32 where the device emulates bfloat16
    # (`--policy.compute_dtype`, `vla.compute_dtype`); its checkpoints stay bfloat16. A
    # sharded run keeps the dtypes: its ranks' shards must agree with rank 0's.
    config = settings.policy
    if world.mesh is not None:
        config = attrs.evolve(config, compute_dtype="keep")
    if pretrained is not None:
        log.info("fine-tuning", pretrained=str(pretrained), policy=settings.policy.type_name)
        folder = checkpoint_folder(pretrained)
        if sharded_over_ranks(world):
            # Each rank reads its own rows of the file once sharded (`shard_model`).
            weights = WeightSource(file=_weights_file(folder))
            model = _unloaded_model(settings.policy, world, weights)
        else:
            model = read_model(folder, config, device=device)
    else:
        # Sharded: the ranks after the first take rank 0's fresh weights once sharded; they
        # neither initialise nor read the whole model.
        empty = _empty_model(settings.policy, world)
        if empty is None:
            return create_policy(config, stats, device=device), weights
        model = empty
    pre, post = make_pre_post_processors(settings.policy, stats, device=device)
    return LoadedPolicy(model, pre, post), weights


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
