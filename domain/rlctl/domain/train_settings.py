"""What `rlctl train` is told: dataset, policy, schedule, optimiser, checkpoints.

Names follow LeRobot's `TrainPipelineConfig` (`--steps`, `--batch_size`, `--save_freq`,
`--dataset.image_transforms.enable`, `--optimizer.lr` …) so a LeRobot user's command line reads
the same. Pure data, so that `rlctl train --help` imports nothing but attrs and the domain.

Optimiser and scheduler sections hold *overrides*: every field defaults to None, meaning "the
policy's preset" (`PolicyConfig.optimizer_preset` and `scheduler_preset`), so
`--optimizer.lr=3e-4` changes one number and keeps the rest of ACT's or Diffusion Policy's recipe.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import attrs

from rlctl.domain.config import converter
from rlctl.domain.errors import ConfigError
from rlctl.domain.eval_settings import EvalSettings
from rlctl.domain.policies import ACTConfig, PolicyConfig


def _pair(value: Any) -> tuple[float, float]:
    pair = tuple(float(v) for v in value)
    if len(pair) != 2:
        raise ConfigError(f"expected two numbers, got {value!r}")
    return pair


def _optional_pair(value: Any) -> tuple[float, float] | None:
    return None if value is None else _pair(value)


@attrs.frozen
class ImageTransformSpec:
    """One augmentation, as LeRobot's `ImageTransformConfig`: a sampling weight, a type and the
    ranges its parameters are drawn from."""

    weight: float = 1.0
    type: str = "Identity"
    kwargs: dict[str, Any] = attrs.field(factory=dict)


def _lerobot_transforms() -> dict[str, ImageTransformSpec]:
    return {
        "brightness": ImageTransformSpec(1.0, "ColorJitter", {"brightness": [0.8, 1.2]}),
        "contrast": ImageTransformSpec(1.0, "ColorJitter", {"contrast": [0.8, 1.2]}),
        "saturation": ImageTransformSpec(1.0, "ColorJitter", {"saturation": [0.5, 1.5]}),
        "hue": ImageTransformSpec(1.0, "ColorJitter", {"hue": [-0.05, 0.05]}),
        "sharpness": ImageTransformSpec(1.0, "SharpnessJitter", {"sharpness": [0.5, 1.5]}),
        "affine": ImageTransformSpec(
            1.0, "RandomAffine", {"degrees": [-5.0, 5.0], "translate": [0.05, 0.05]}
        ),
    }


@attrs.frozen
class ImageTransformsSettings:
    """LeRobot's `--dataset.image_transforms.*`: off by default, at most `max_num_transforms`
    of `tfs` per camera frame, drawn by weight, applied in the listed or a random order."""

    enable: bool = False
    max_num_transforms: int = 3
    random_order: bool = False
    tfs: dict[str, ImageTransformSpec] = attrs.field(factory=_lerobot_transforms)

    def __attrs_post_init__(self) -> None:
        if self.max_num_transforms < 1:
            raise ConfigError(
                f"max_num_transforms must be at least 1, got {self.max_num_transforms}",
                where="dataset.image_transforms.max_num_transforms",
            )


# One dataset's location, or several (`--dataset.repo_id='[a, b]'`: trained on as one mixture).
Locations = str | list[str] | None


def _structure_locations(value: Any, _: Any) -> str | list[str] | None:
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        # `--dataset.repo_id=[user/a, user/b]` as LeRobot's command line writes a list.
        value = [part.strip().strip("'\"") for part in value[1:-1].split(",")]
        value = [part for part in value if part]
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(
        f"a dataset location is a folder or a repo id, or a list of them; got {value!r}",
        where="dataset",
        hint="e.g. --dataset.repo_id=user/a or --dataset.repo_id='[user/a, user/b]'",
    )


converter.register_structure_hook(Locations, _structure_locations)


def _listed(given: Locations) -> list[str]:
    if not given:
        return []
    return [given] if isinstance(given, str) else list(given)


@attrs.frozen(kw_only=True)
class DatasetSource:
    """Which dataset to train on: a local `root`, or a Hub `repo_id` (pulled into the cache) —
    or several of either, mixed: each sample is drawn from dataset i with probability
    `weights[i] / sum(weights)` (default: in proportion to their frames, as one concatenation)."""

    repo_id: Locations = None
    root: Locations = None
    # The share of each dataset of a mixture (one positive number per dataset).
    weights: list[float] | None = None
    episodes: list[int] | None = None
    revision: str | None = None
    image_transforms: ImageTransformsSettings = attrs.field(factory=ImageTransformsSettings)
    # LeRobot replaces the cameras' statistics by ImageNet's, which pretrained backbones expect.
    use_imagenet_stats: bool = True
    # Read `repo_id` from the Hub as training goes (only meta/ is downloaded), as LeRobot's
    # `--dataset.streaming=true`; several repo ids are interleaved by `weights`.
    streaming: bool = False

    def __attrs_post_init__(self) -> None:
        if self.root and self.repo_id:
            folders, ids = _listed(self.root), _listed(self.repo_id)
            if len(folders) != len(ids):
                raise ConfigError(
                    f"--dataset.root names {len(folders)} folder(s) and --dataset.repo_id "
                    f"{len(ids)} dataset(s)",
                    where="dataset.root",
                    hint="give one folder per repo id, in the same order, or only one of the two",
                )
        mixed = len(self.locations_given) > 1
        if mixed and self.episodes is not None:
            raise ConfigError(
                "--dataset.episodes selects episodes of one dataset, not of a mixture",
                where="dataset.episodes",
                hint="train on all episodes of each, or make a dataset of the episodes you want "
                "first (`rlctl dataset split` / `delete-episodes`)",
            )
        if self.weights is not None:
            if len(self.weights) != len(self.locations_given):
                raise ConfigError(
                    f"{len(self.weights)} weights for {len(self.locations_given)} dataset(s)",
                    where="dataset.weights",
                    hint="give one weight per dataset, in the order of --dataset.repo_id "
                    "(or --dataset.root)",
                )
            if not all(math.isfinite(w) and w > 0 for w in self.weights):
                raise ConfigError(
                    f"dataset weights must be positive numbers, got {self.weights}",
                    where="dataset.weights",
                )
            if not math.isfinite(sum(self.weights)):
                raise ConfigError(
                    f"dataset weights must add up to a finite number; {self.weights} add up "
                    "to more than a float holds",
                    where="dataset.weights",
                    hint="weights are relative: scale them down (e.g. [1, 1] for two "
                    "equally weighted datasets)",
                )
        if self.streaming and (self.root or not self.repo_id):
            raise ConfigError(
                "streaming reads a dataset from the Hub: it needs --dataset.repo_id and no "
                "--dataset.root",
                where="dataset.streaming",
                hint="pass --dataset.repo_id=ID (and no --dataset.root), or drop "
                "--dataset.streaming to read a local folder",
            )

    @property
    def locations_given(self) -> list[str]:
        """The folders given (`root`), else the repo ids; empty when neither is."""
        return _listed(self.root or self.repo_id)

    @property
    def mixed(self) -> bool:
        return len(self.locations_given) > 1

    @property
    def location(self) -> str:
        """The one dataset's location (a mixture has `locations_given`)."""
        given = self.locations_given
        if len(given) > 1:
            raise ConfigError(
                "this needs one dataset, and several are given",
                where="dataset",
                hint="give one --dataset.repo_id (or --dataset.root)",
            )
        where = given[0] if given else None
        if not where:
            raise ConfigError(
                "no dataset given",
                where="dataset",
                hint="pass --dataset.root=PATH (a LeRobot v3.0 folder) or --dataset.repo_id=ID",
            )
        return where


@attrs.frozen(kw_only=True)
class OptimizerOverrides:
    """`--optimizer.*`: what replaces the preset's values; None keeps the preset's."""

    type: str | None = None  # adam, adamw, sgd, xvla-adamw
    lr: float | None = None
    weight_decay: float | None = None
    betas: tuple[float, float] | None = attrs.field(default=None, converter=_optional_pair)
    eps: float | None = None
    momentum: float | None = None
    grad_clip_norm: float | None = None


@attrs.frozen(kw_only=True)
class SchedulerOverrides:
    """`--scheduler.*`; `--scheduler.type=none` trains at a constant learning rate."""

    type: str | None = None  # diffuser, cosine_annealing_with_warmup, constant_with_warmup, none
    name: str | None = None  # for "diffuser": cosine, linear, constant, constant_with_warmup
    num_warmup_steps: int | None = None


@attrs.frozen(kw_only=True)
class EmaSettings:
    """An exponential moving average of the weights, as the original Diffusion Policy keeps:
    decay = 1 - (1 + step / inv_gamma) ** -power, clamped to [min_decay, max_decay].

    The checkpoint's `pretrained_model` then holds the averaged weights (what is evaluated and
    deployed); the live weights go to `training_state/` for resuming.
    """

    enable: bool = False
    update_after_step: int = 0
    inv_gamma: float = 1.0
    power: float = 0.75
    min_decay: float = 0.0
    max_decay: float = 0.9999


@attrs.frozen(kw_only=True)
class DistributedSettings:
    """How several processes (`torchrun`, SLURM) share a run.

    - `ddp`: every process holds the whole model; gradients are averaged (one process: plain).
    - `fsdp`: parameters, gradients and optimiser state sharded over all processes (FSDP2,
      `fully_shard`), checkpoints written shard by shard (torch distributed checkpoint).
    - `hsdp`: sharded inside groups of `shard_size` processes, replicated across the groups
      (a 2-D device mesh: replicate x shard), so the all-gathers stay inside one node.
    """

    strategy: Literal["ddp", "fsdp", "hsdp"] = "ddp"
    # hsdp: processes per shard group; None: the processes of one node (LOCAL_WORLD_SIZE).
    shard_size: int | None = None
    # Recompute each wrap unit's activations in the backward pass instead of keeping them:
    # less memory for about a third more compute (any strategy; the units are the policy's).
    activation_checkpointing: bool = False
    # fsdp/hsdp: free the gathered parameters after each unit's forward (less memory, one more
    # all-gather in the backward pass).
    reshard_after_forward: bool = True

    def __attrs_post_init__(self) -> None:
        if self.shard_size is not None and self.shard_size < 1:
            raise ConfigError(
                f"shard_size must be at least 1, got {self.shard_size}",
                where="distributed.shard_size",
            )
        if self.shard_size is not None and self.strategy != "hsdp":
            raise ConfigError(
                "shard_size applies to --distributed.strategy=hsdp only",
                where="distributed.shard_size",
                hint="drop --distributed.shard_size, or train with --distributed.strategy=hsdp",
            )

    @property
    def sharded(self) -> bool:
        return self.strategy in ("fsdp", "hsdp")


def _positive(name: str) -> Any:
    def check(_: Any, attribute: attrs.Attribute[int], value: int) -> None:
        if value < 1:
            raise ConfigError(f"{name} must be at least 1, got {value}", where=name)

    return check


@attrs.frozen(kw_only=True)
class TrainSettings:
    """One training run. Frequencies count optimisation steps; 0 turns a periodic action off
    (the last step is always checkpointed when `save_checkpoint` is on)."""

    dataset: DatasetSource = attrs.field(factory=DatasetSource)
    policy: PolicyConfig = attrs.field(factory=ACTConfig)
    output_dir: str | None = None
    job_name: str | None = None
    # A run's output dir (its last checkpoint is used) or one `checkpoints/<step>` folder.
    resume: str | None = None
    seed: int | None = 1000
    num_workers: int = 4
    batch_size: int = attrs.field(default=8, validator=_positive("batch_size"))
    # Micro-batches of `batch_size` per process whose gradients add up to one optimisation step:
    # the step sees batch_size x processes x grad_accum_steps samples.
    grad_accum_steps: int = attrs.field(default=1, validator=_positive("grad_accum_steps"))
    steps: int = attrs.field(default=100_000, validator=_positive("steps"))
    log_freq: int = 200
    save_freq: int = 20_000
    save_checkpoint: bool = True
    eval_freq: int = 20_000
    eval: EvalSettings = attrs.field(factory=EvalSettings)
    use_policy_training_preset: bool = True
    optimizer: OptimizerOverrides = attrs.field(factory=OptimizerOverrides)
    scheduler: SchedulerOverrides = attrs.field(factory=SchedulerOverrides)
    # None: the policy's `use_amp`. Mixed precision runs on CUDA only (bf16 where supported).
    use_amp: bool | None = None
    # None: the optimiser's (10 in every preset, as LeRobot); 0 or less: no clipping.
    grad_clip_norm: float | None = None
    ema: EmaSettings = attrs.field(factory=EmaSettings)
    distributed: DistributedSettings = attrs.field(factory=DistributedSettings)
    # The training speed paths for the CPU (the torch adapters' CPU kernels): "auto" uses
    # them, "torch" trains with torch's own modules and allocator (same results within float
    # tolerance; different dropout draws). Checkpoints are the same either way.
    cpu_kernels: Literal["auto", "torch"] = "auto"

    def __attrs_post_init__(self) -> None:
        if self.num_workers < 0:
            raise ConfigError(
                f"num_workers must be 0 or more, got {self.num_workers}", where="num_workers"
            )
        for name, value in (
            ("log_freq", self.log_freq),
            ("save_freq", self.save_freq),
            ("eval_freq", self.eval_freq),
        ):
            if value < 0:
                raise ConfigError(f"{name} must be 0 (off) or positive", where=name)

    @property
    def amp_requested(self) -> bool:
        return self.policy.use_amp if self.use_amp is None else self.use_amp


for _cls in (
    ImageTransformSpec,
    ImageTransformsSettings,
    DatasetSource,
    OptimizerOverrides,
    SchedulerOverrides,
    EmaSettings,
    DistributedSettings,
    TrainSettings,
):
    attrs.resolve_types(_cls)
