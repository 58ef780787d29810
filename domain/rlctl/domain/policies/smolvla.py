"""SmolVLA's settings: LeRobot 0.6.1's `SmolVLAConfig`, field for field.

SmolVLA (Shukor et al. 2025) is a vision-language-action policy: a SmolVLM backbone reads the
camera images, the task text and the robot state; a smaller "action expert" transformer,
interleaved with the VLM's layers, turns noise into a chunk of actions by flow matching.
`vlm_model_name` names the SmolVLM folder or Hub repository whose config (and, with
`load_vlm_weights`, weights) build the backbone; its tokenizer reads the task.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import attrs

from rlctl.domain.optimization import (
    OptimizerSpec,
    SchedulerSpec,
    cosine_decay_optimizer,
    cosine_decay_scheduler,
)
from rlctl.domain.policies.config import PolicyConfig, norm_mapping, optional_pair, require
from rlctl.domain.policies.rtc import RTCConfig, optional_rtc_config

SMOLVLM_DEFAULT = "HuggingFaceTB/SmolVLM2-500M-Video-Instruct"
ATTENTION_MODES = ("cross_attn", "self_attn")
PAD_LANGUAGE_TO = ("longest", "max_length")


def _smolvla_norms() -> dict[str, str]:
    return {"VISUAL": "IDENTITY", "STATE": "MEAN_STD", "ACTION": "MEAN_STD"}


def _float_pair(value: Iterable[float]) -> tuple[float, float]:
    first, second = (float(x) for x in value)
    return first, second


@PolicyConfig.register("smolvla")
@attrs.frozen(kw_only=True)
class SmolVLAConfig(PolicyConfig):
    """SmolVLA with LeRobot's defaults (the SmolVLM2-500M backbone, 16 of its layers)."""

    supports_rtc: ClassVar[bool] = True

    chunk_size: int = 50
    n_action_steps: int = 50
    normalization_mapping: dict[str, str] = attrs.field(
        factory=_smolvla_norms, converter=norm_mapping
    )
    # Shorter state and action vectors are zero-padded to these sizes.
    max_state_dim: int = 32
    max_action_dim: int = 32
    # Images are resized to fit (height, width), keeping their aspect ratio, padded on the
    # top and left.
    resize_imgs_with_padding: tuple[int, int] | None = attrs.field(
        default=(512, 512), converter=optional_pair
    )
    empty_cameras: int = 0
    adapt_to_pi_aloha: bool = False
    use_delta_joint_actions_aloha: bool = False
    tokenizer_max_length: int = 48
    num_steps: int = 10
    # rlctl always caches the prefix's keys and values between Euler steps (LeRobot's
    # cross-attention cannot run without them); kept so config.json round-trips.
    use_cache: bool = True
    freeze_vision_encoder: bool = True
    train_expert_only: bool = True
    train_state_proj: bool = True
    optimizer_lr: float = 1e-4
    optimizer_betas: tuple[float, float] = attrs.field(default=(0.9, 0.95), converter=_float_pair)
    optimizer_eps: float = 1e-8
    optimizer_weight_decay: float = 1e-10
    optimizer_grad_clip_norm: float = 10
    scheduler_warmup_steps: int = 1_000
    scheduler_decay_steps: int = 30_000
    scheduler_decay_lr: float = 2.5e-6
    vlm_model_name: str = SMOLVLM_DEFAULT
    # False builds the VLM from its config with random weights (training the expert from
    # scratch, or loading a SmolVLA checkpoint, whose weights include the VLM's).
    load_vlm_weights: bool = False
    add_image_special_tokens: bool = False
    attention_mode: str = "cross_attn"
    prefix_length: int = -1
    pad_language_to: str = "longest"
    # <= 0: as many expert layers as VLM layers; otherwise a divisor of num_vlm_layers.
    num_expert_layers: int = -1
    # The first num_vlm_layers of the VLM's text model are used.
    num_vlm_layers: int = 16
    self_attn_every_n_layers: int = 2
    expert_width_multiplier: float = 0.75
    min_period: float = 4e-3
    max_period: float = 4.0
    # Real-time chunking (`rlctl.domain.policies.rtc`): how acting loops guide each chunk
    # towards the previous one's leftover; None or enabled=false: chunks are independent.
    rtc_config: RTCConfig | None = attrs.field(default=None, converter=optional_rtc_config)
    # torch.compile of the model: read, not applied by rlctl yet.
    compile_model: bool = False
    compile_mode: str = "max-autotune"

    def __attrs_post_init__(self) -> None:
        require(
            self.n_action_steps <= self.chunk_size,
            f"n_action_steps ({self.n_action_steps}) cannot exceed chunk_size ({self.chunk_size})",
            "n_action_steps",
        )
        require(self.n_obs_steps == 1, "SmolVLA reads one observation step", "n_obs_steps")
        require(
            not self.use_delta_joint_actions_aloha,
            "use_delta_joint_actions_aloha is not implemented (nor is it in LeRobot)",
            "use_delta_joint_actions_aloha",
        )
        require(
            not self.adapt_to_pi_aloha,
            "adapt_to_pi_aloha (the pi runtime's ALOHA joint space) is not supported by rlctl",
            "adapt_to_pi_aloha",
        )
        require(
            self.attention_mode in ATTENTION_MODES,
            f"attention_mode must be one of {', '.join(ATTENTION_MODES)}, "
            f"got {self.attention_mode!r}",
            "attention_mode",
        )
        require(
            self.pad_language_to in PAD_LANGUAGE_TO,
            f"pad_language_to must be one of {', '.join(PAD_LANGUAGE_TO)}, "
            f"got {self.pad_language_to!r}",
            "pad_language_to",
        )
        require(self.num_steps >= 1, "num_steps must be at least 1", "num_steps")
        require(
            self.num_expert_layers <= 0
            or self.num_vlm_layers <= 0
            or self.num_vlm_layers % self.num_expert_layers == 0,
            f"num_vlm_layers ({self.num_vlm_layers}) must be a multiple of num_expert_layers "
            f"({self.num_expert_layers})",
            "num_expert_layers",
        )
        require(self.tokenizer_max_length > 0, "must be positive", "tokenizer_max_length")

    def optimizer_preset(self) -> OptimizerSpec:
        return cosine_decay_optimizer(self)

    def scheduler_preset(self) -> SchedulerSpec:
        return cosine_decay_scheduler(self)

    @property
    def observation_delta_indices(self) -> list[int]:
        return [0]

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))


attrs.resolve_types(SmolVLAConfig)
