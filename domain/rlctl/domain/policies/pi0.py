"""π0's settings: LeRobot 0.6.1's `PI0Config`, field for field, and the Gemma sizes it names.

π0 (Black et al. 2024) is a vision-language-action policy: a PaliGemma (a SigLIP vision tower and
a Gemma language model) reads the camera images and the task text; a smaller Gemma, the "action
expert", reads the robot state and noisy actions and, attending to the PaliGemma's keys and
values layer by layer, predicts the velocity that flow matching integrates from noise into a
chunk of actions.

`paligemma_variant` and `action_expert_variant` name the two Gemmas' sizes: LeRobot's
`gemma_2b` and `gemma_300m`, or, for tests and small experiments, a custom size written out in
the name itself (`custom:width=64,depth=2,mlp_dim=128,num_heads=8,num_kv_heads=1,head_dim=16`),
so that config.json keeps LeRobot's keys and a checkpoint says what it was built with. Keys a
custom name may set: `width depth mlp_dim num_heads num_kv_heads head_dim vocab_size` and, for
the PaliGemma, its vision tower's `vision_width vision_depth vision_mlp_dim vision_heads
patch_size`; the ones left out keep gemma_2b's (or gemma_300m's) and SigLIP-so400m's sizes.
LeRobot itself reads only its two names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import attrs

from rlctl.domain.errors import ConfigError
from rlctl.domain.optimization import (
    OptimizerSpec,
    SchedulerSpec,
    cosine_decay_optimizer,
    cosine_decay_scheduler,
)
from rlctl.domain.policies.config import PolicyConfig, norm_mapping, require
from rlctl.domain.policies.rtc import RTCConfig, optional_rtc_config

CUSTOM_PREFIX = "custom:"
DEFAULT_IMAGE_SIZE = 224
PALIGEMMA_VOCAB = 257_152
DTYPES = ("bfloat16", "float32")


@attrs.frozen(kw_only=True)
class GemmaSizes:
    """One Gemma's sizes (openpi's `gemma.Config`), with PaliGemma's vocabulary and, for the
    PaliGemma, its SigLIP vision tower's (so400m's by default)."""

    width: int
    depth: int
    mlp_dim: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int = PALIGEMMA_VOCAB
    vision_width: int = 1152
    vision_depth: int = 27
    vision_mlp_dim: int = 4304
    vision_heads: int = 16
    patch_size: int = 14


GEMMA_VARIANTS = {
    "gemma_300m": GemmaSizes(
        width=1024, depth=18, mlp_dim=4096, num_heads=8, num_kv_heads=1, head_dim=256
    ),
    "gemma_2b": GemmaSizes(
        width=2048, depth=18, mlp_dim=16_384, num_heads=8, num_kv_heads=1, head_dim=256
    ),
}
_SIZE_KEYS = tuple(a.name for a in attrs.fields(GemmaSizes))


def gemma_sizes(variant: str, *, where: str, base: str = "gemma_2b") -> GemmaSizes:
    """The sizes a variant names: a known name, or `custom:key=value,...` over `base`'s."""
    known = GEMMA_VARIANTS.get(variant)
    if known is not None:
        return known
    hint = (
        f"use {' or '.join(GEMMA_VARIANTS)}, or custom:width=64,depth=2,... with keys among "
        f"{', '.join(_SIZE_KEYS)}"
    )
    if not variant.startswith(CUSTOM_PREFIX):
        raise ConfigError(f"unknown Gemma variant {variant!r}", where=f"policy.{where}", hint=hint)
    sizes: dict[str, int] = {}
    for item in variant[len(CUSTOM_PREFIX) :].split(","):
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in _SIZE_KEYS or not value.strip().isdigit() or int(value) <= 0:
            raise ConfigError(
                f"cannot read {item!r} in the Gemma variant {variant!r}",
                where=f"policy.{where}",
                hint=hint,
            )
        sizes[key] = int(value)
    return attrs.evolve(GEMMA_VARIANTS[base], **sizes)


def _pi_norms() -> dict[str, str]:
    return {"VISUAL": "IDENTITY", "STATE": "MEAN_STD", "ACTION": "MEAN_STD"}


def _float_pair(value: Iterable[float]) -> tuple[float, float]:
    first, second = (float(x) for x in value)
    return first, second


def _int_pair(value: Iterable[int]) -> tuple[int, int]:
    first, second = (int(x) for x in value)
    return first, second


@attrs.frozen(kw_only=True)
class PiConfig(PolicyConfig):
    supports_rtc: ClassVar[bool] = True
    """What π0 and π0.5 share (LeRobot's `PI0Config` and `PI05Config` differ only in defaults)."""

    paligemma_variant: str = "gemma_2b"
    action_expert_variant: str = "gemma_300m"
    # The weights' dtype: bfloat16 keeps the vision tower, its projector and the norms in float32.
    dtype: str = "float32"
    chunk_size: int = 50
    n_action_steps: int = 50
    # Shorter state and action vectors are zero-padded to these sizes.
    max_state_dim: int = 32
    max_action_dim: int = 32
    num_inference_steps: int = 10
    # Training times: Beta(alpha, beta) * scale + offset.
    time_sampling_beta_alpha: float = 1.5
    time_sampling_beta_beta: float = 1.0
    time_sampling_scale: float = 0.999
    time_sampling_offset: float = 0.001
    min_period: float = 4e-3
    max_period: float = 4.0
    # Real-time chunking (`rlctl.domain.policies.rtc`); None or enabled=false: independent chunks.
    rtc_config: RTCConfig | None = attrs.field(default=None, converter=optional_rtc_config)
    # Images are resized to (height, width) keeping their aspect ratio, padded on both sides.
    image_resolution: tuple[int, int] = attrs.field(
        default=(DEFAULT_IMAGE_SIZE, DEFAULT_IMAGE_SIZE), converter=_int_pair
    )
    # Black images, masked out, for cameras the robot lacks.
    empty_cameras: int = 0
    normalization_mapping: dict[str, str] = attrs.field(factory=_pi_norms, converter=norm_mapping)
    # Recomputes each layer's activations in the backward pass instead of keeping them.
    gradient_checkpointing: bool = False
    # torch.compile of the model: read, not applied by rlctl yet.
    compile_model: bool = False
    compile_mode: str = "max-autotune"
    freeze_vision_encoder: bool = False
    # Freezes the whole PaliGemma: the expert and the projections learn.
    train_expert_only: bool = False
    optimizer_lr: float = 2.5e-5
    optimizer_betas: tuple[float, float] = attrs.field(default=(0.9, 0.95), converter=_float_pair)
    optimizer_eps: float = 1e-8
    optimizer_weight_decay: float = 0.01
    optimizer_grad_clip_norm: float = 1.0
    scheduler_warmup_steps: int = 1_000
    scheduler_decay_steps: int = 30_000
    scheduler_decay_lr: float = 2.5e-6
    tokenizer_max_length: int = 48

    def __attrs_post_init__(self) -> None:
        require(
            self.n_action_steps <= self.chunk_size,
            f"n_action_steps ({self.n_action_steps}) cannot exceed chunk_size ({self.chunk_size})",
            "n_action_steps",
        )
        require(self.n_obs_steps == 1, "π0 reads one observation step", "n_obs_steps")
        require(
            self.dtype in DTYPES,
            f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}",
            "dtype",
        )
        require(
            self.image_resolution[0] == self.image_resolution[1] and self.image_resolution[0] > 0,
            f"PaliGemma reads square images, got image_resolution {self.image_resolution}",
            "image_resolution",
        )
        require(self.num_inference_steps >= 1, "must be at least 1", "num_inference_steps")
        require(self.tokenizer_max_length > 0, "must be positive", "tokenizer_max_length")
        require(self.empty_cameras >= 0, "cannot be negative", "empty_cameras")
        vlm, expert = self.vlm_sizes, self.expert_sizes
        for key in ("depth", "num_heads", "num_kv_heads", "head_dim"):
            require(
                getattr(vlm, key) == getattr(expert, key),
                f"the PaliGemma and the action expert attend together, so their {key} must be "
                f"equal ({getattr(vlm, key)} and {getattr(expert, key)})",
                "action_expert_variant",
            )

    def optimizer_preset(self) -> OptimizerSpec:
        return cosine_decay_optimizer(self)

    def scheduler_preset(self) -> SchedulerSpec:
        return cosine_decay_scheduler(self)

    @property
    def vlm_sizes(self) -> GemmaSizes:
        return gemma_sizes(self.paligemma_variant, where="paligemma_variant")

    @property
    def expert_sizes(self) -> GemmaSizes:
        return gemma_sizes(
            self.action_expert_variant, where="action_expert_variant", base="gemma_300m"
        )

    @property
    def observation_delta_indices(self) -> None:
        return None

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))


@PolicyConfig.register("pi0")
@attrs.frozen(kw_only=True)
class PI0Config(PiConfig):
    """π0 with LeRobot's defaults (PaliGemma 2B + a 300M action expert)."""


attrs.resolve_types(PiConfig)
attrs.resolve_types(PI0Config)
