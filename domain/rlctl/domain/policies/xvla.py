"""X-VLA's settings: LeRobot 0.6.1's `XVLAConfig`, field for field.

X-VLA (Zheng et al. 2025) reads the cameras and the task with Florence-2's encoder (a DaViT vision
tower and a BART encoder over [first camera's tokens, task tokens]; the other cameras' tokens go
to the policy as they are) and predicts a chunk of actions with a "soft-prompted" transformer:
each embodiment or dataset is a *domain* (`domain_id`), which owns learned prompt tokens and its
own input and output projections. Actions are denoised in `num_denoising_steps` steps from noise,
the transformer predicting the clean chunk at each step.

`florence_config` is the Florence-2 config as a dict (transformers' `Florence2Config` fields, or
the original remote-code layout X-VLA's Hub checkpoints store: `dim_embed`, `image_pos_embed` …);
`action_mode` names the action space: `ee6d` (20 values: two arms' xyz, 6D rotation, gripper),
`joint` (14), `agibot_ee6d` (20), `franka_joint7` (7 of 20), `so101_bimanual` (12 of 20), or
`auto` (the dataset's action size, padded to `max_action_dim`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from rlctl.domain.optimization import (
    XVLA_ADAMW,
    OptimizerSpec,
    SchedulerSpec,
    cosine_decay_optimizer,
    cosine_decay_scheduler,
)
from rlctl.domain.policies.config import (
    PolicyConfig,
    norm_mapping,
    optional_pair,
    require,
    require_layers,
)

DTYPES = ("bfloat16", "float32")
PAD_LANGUAGE_TO = ("longest", "max_length")
PADDING_SIDES = ("left", "right")
# Action spaces: the model's action size (the real one where it differs) and the gripper
# channels, whose logits go through a sigmoid (LeRobot's `action_hub`).
ACTION_MODES = ("ee6d", "joint", "agibot_ee6d", "franka_joint7", "auto", "so101_bimanual")
BART_TOKENIZER = "facebook/bart-large"


def _identity_norms() -> dict[str, str]:
    return {"VISUAL": "IDENTITY", "STATE": "IDENTITY", "ACTION": "IDENTITY"}


def _float_pair(value: Iterable[float]) -> tuple[float, float]:
    first, second = (float(x) for x in value)
    return first, second


def _plain_dict(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value or {})


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


@PolicyConfig.register("xvla")
@attrs.frozen(kw_only=True)
class XVLAConfig(PolicyConfig):
    """X-VLA with LeRobot's defaults (a 24-layer, 1024-wide soft-prompted transformer)."""

    chunk_size: int = 32
    n_action_steps: int = 32
    # The weights' dtype.
    dtype: str = "float32"
    normalization_mapping: dict[str, str] = attrs.field(
        factory=_identity_norms, converter=norm_mapping
    )
    # The whole Florence-2 config (vision_config, text_config …) the VLM is built from; a
    # pretrained checkpoint's config.json holds it.
    florence_config: dict[str, Any] = attrs.field(factory=dict, converter=_plain_dict)
    # The task's tokenizer: a Hub repository id (from the Hub cache) or a local folder.
    tokenizer_name: str = BART_TOKENIZER
    tokenizer_max_length: int = 64
    tokenizer_padding_side: str = "right"
    pad_language_to: str = "max_length"
    hidden_size: int = 1024
    depth: int = 24
    num_heads: int = 16
    mlp_ratio: float = 4.0
    # Embodiments or datasets (domain ids), each with its own soft prompts and action projections.
    num_domains: int = 30
    # Learned prompt tokens per domain (0: none).
    len_soft_prompts: int = 32
    dim_time: int = 32
    max_len_seq: int = 512
    # Domain-specific projections of the VLM's and the other cameras' features.
    use_hetero_proj: bool = False
    # The action space: ee6d, joint, agibot_ee6d, franka_joint7, so101_bimanual or auto.
    action_mode: str = "ee6d"
    # Steps from noise to the chunk when predicting.
    num_denoising_steps: int = 10
    use_proprio: bool = True
    # The state is zero-padded (or cut) to max_state_dim; `auto` pads actions to max_action_dim.
    max_state_dim: int = 32
    max_action_dim: int = 20
    # The batch key holding each row's domain id (None: `domain_id`, else domain 0).
    domain_feature_key: str | None = None
    # Cameras resized to fit (height, width) and padded on the top and left; None: as they come.
    resize_imgs_with_padding: tuple[int, int] | None = attrs.field(
        default=None, converter=optional_pair
    )
    # Camera slots the model reads (None: the cameras plus empty_cameras); missing ones are
    # black images masked out.
    num_image_views: int | None = attrs.field(default=None, converter=_optional_int)
    empty_cameras: int = 0
    freeze_vision_encoder: bool = False
    freeze_language_encoder: bool = False
    train_policy_transformer: bool = True
    train_soft_prompts: bool = True
    optimizer_lr: float = 1e-4
    optimizer_betas: tuple[float, float] = attrs.field(default=(0.9, 0.99), converter=_float_pair)
    optimizer_eps: float = 1e-8
    optimizer_weight_decay: float = 0.0
    optimizer_grad_clip_norm: float = 10.0
    # The soft prompts' lr is optimizer_lr times this (or times the warm-up scale when set).
    optimizer_soft_prompt_lr_scale: float = 1.0
    optimizer_soft_prompt_warmup_lr_scale: float | None = attrs.field(
        default=None, converter=_optional_float
    )
    scheduler_warmup_steps: int = 1_000
    scheduler_decay_steps: int = 30_000
    scheduler_decay_lr: float = 2.5e-6

    def __attrs_post_init__(self) -> None:
        require(self.chunk_size > 0, "chunk_size must be strictly positive", "chunk_size")
        require(
            self.n_action_steps <= self.chunk_size,
            f"n_action_steps ({self.n_action_steps}) must be <= chunk_size ({self.chunk_size})",
            "n_action_steps",
        )
        require(
            self.num_image_views is None or self.num_image_views > 0,
            "num_image_views must be > 0 when given",
            "num_image_views",
        )
        require(
            self.dtype in DTYPES,
            f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}",
            "dtype",
        )
        require(
            self.action_mode.lower() in ACTION_MODES,
            f"unknown action space {self.action_mode!r}",
            "action_mode",
            hint=f"choose one of: {', '.join(ACTION_MODES)}",
        )
        require(
            self.pad_language_to in PAD_LANGUAGE_TO,
            f"pad_language_to must be one of {', '.join(PAD_LANGUAGE_TO)}, "
            f"got {self.pad_language_to!r}",
            "pad_language_to",
        )
        require(
            self.tokenizer_padding_side in PADDING_SIDES,
            f"tokenizer_padding_side must be left or right, got {self.tokenizer_padding_side!r}",
            "tokenizer_padding_side",
        )
        require(self.tokenizer_max_length > 0, "must be positive", "tokenizer_max_length")
        require(self.num_denoising_steps >= 1, "must be at least 1", "num_denoising_steps")
        require(self.empty_cameras >= 0, "cannot be negative", "empty_cameras")
        require(self.num_domains >= 1, "must be at least 1", "num_domains")
        require(self.len_soft_prompts >= 0, "cannot be negative", "len_soft_prompts")
        require_layers(self.depth, "depth")
        for name in ("hidden_size", "num_heads", "dim_time", "max_len_seq"):
            value = getattr(self, name)
            require(value >= 1, f"{name} must be at least 1, got {value}", name)
        require(
            self.mlp_ratio > 0, f"mlp_ratio must be positive, got {self.mlp_ratio}", "mlp_ratio"
        )
        # The transformer's sequence: the chunk's action tokens, then the VLM's (the task's
        # tokens, padded to tokenizer_max_length with "max_length", and the images') and the
        # other cameras'; each has a position of the max_len_seq learned ones.
        text = self.tokenizer_max_length if self.pad_language_to == "max_length" else 1
        require(
            self.chunk_size + text <= self.max_len_seq,
            f"chunk_size ({self.chunk_size}) action tokens and at least {text} task tokens do "
            f"not fit the transformer's max_len_seq ({self.max_len_seq}) positions",
            "chunk_size",
            hint="use the chunk_size the checkpoint was trained with (LeRobot's default is 32)",
        )
        require(
            self.hidden_size % self.num_heads == 0,
            f"hidden_size ({self.hidden_size}) must be a multiple of num_heads ({self.num_heads})",
            "hidden_size",
        )

    def optimizer_preset(self) -> OptimizerSpec:
        """LeRobot's `xvla-adamw`: AdamW over the groups the model names (`parameter_groups`):
        the VLM at a tenth of the lr and weight decay, the soft prompts at their own scale."""
        return attrs.evolve(
            cosine_decay_optimizer(self),
            type=XVLA_ADAMW,
            soft_prompt_lr_scale=self.optimizer_soft_prompt_lr_scale,
            soft_prompt_warmup_lr_scale=self.optimizer_soft_prompt_warmup_lr_scale,
        )

    def scheduler_preset(self) -> SchedulerSpec:
        return cosine_decay_scheduler(self)

    @property
    def image_views(self) -> int:
        """The camera slots the model reads (LeRobot's `num_image_views` once validated)."""
        present = len(self.image_features) + self.empty_cameras
        return present if self.num_image_views is None else max(self.num_image_views, present)

    @property
    def observation_delta_indices(self) -> None:
        return None

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))


attrs.resolve_types(XVLAConfig)
