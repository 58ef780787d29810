"""π0-FAST's settings: LeRobot 0.6.1's `PI0FastConfig`, field for field.

π0-FAST (Pertsch et al. 2025) is a PaliGemma that writes its actions as text: the prompt holds
the task and the robot state (discretised into 256 bins, as π0.5's), and the model continues it
autoregressively with "Action: ", then FAST tokens (an action chunk compressed by a DCT and a
byte-pair encoding, `rlctl train-tokenizer`), then "|". There is no action expert and no flow
matching: training is next-token cross-entropy on the action tokens, inference greedy (or
sampled, `temperature`) decoding over cached keys and values, then the FAST tokenizer turns the
tokens back into a chunk.

`paligemma_variant` names the PaliGemma's size as π0's does (`gemma_2b`, or `custom:...` for
tests); `action_expert_variant` is kept for LeRobot's config.json and unused (there is no
expert). `action_tokenizer_name` is a folder holding a fitted FAST tokenizer, or a Hub repo id;
`text_tokenizer_name` the PaliGemma tokenizer's.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from rlctl.domain.optimization import (
    OptimizerSpec,
    SchedulerSpec,
    cosine_decay_optimizer,
    cosine_decay_scheduler,
)
from rlctl.domain.policies.config import PolicyConfig, norm_mapping, require
from rlctl.domain.policies.pi0 import (
    DEFAULT_IMAGE_SIZE,
    DTYPES,
    GEMMA_VARIANTS,
    GemmaSizes,
    _float_pair,
    _int_pair,
    _pi_norms,
    gemma_sizes,
)
from rlctl.domain.policies.rtc import RTCConfig, optional_rtc_config

PALIGEMMA_TOKENIZER = "google/paligemma-3b-pt-224"
FAST_TOKENIZER = "lerobot/fast-action-tokenizer"


@PolicyConfig.register("pi0_fast")
@attrs.frozen(kw_only=True)
class PI0FastConfig(PolicyConfig):
    """π0-FAST with LeRobot's defaults (PaliGemma 2B, 200-token prompts, 256 action tokens)."""

    # It decodes tokens: real-time chunking's guidance has no velocity to steer.
    supports_rtc: ClassVar[bool] = False

    paligemma_variant: str = "gemma_2b"
    # Read and written for LeRobot's config.json; π0-FAST has no action expert.
    action_expert_variant: str = "gemma_300m"
    # The weights' dtype: bfloat16 keeps the vision tower, its projector and the norms in float32.
    dtype: str = "float32"
    chunk_size: int = 50
    n_action_steps: int = 50
    max_state_dim: int = 32
    max_action_dim: int = 32
    # Training: the action tokens of a chunk, "Action: " and "|" included, padded or cut to this.
    max_action_tokens: int = 256
    # Read for LeRobot's config.json; π0-FAST decodes tokens, real-time chunking cannot guide it.
    rtc_config: RTCConfig | None = attrs.field(default=None, converter=optional_rtc_config)
    image_resolution: tuple[int, int] = attrs.field(
        default=(DEFAULT_IMAGE_SIZE, DEFAULT_IMAGE_SIZE), converter=_int_pair
    )
    # Black images, masked out, for cameras the robot lacks.
    empty_cameras: int = 0
    # The prompt ("Task: ..., State: ...;\n") is padded or cut to this many tokens.
    tokenizer_max_length: int = 200
    text_tokenizer_name: str = PALIGEMMA_TOKENIZER
    # A folder holding a fitted FAST tokenizer (`rlctl train-tokenizer`), or a Hub repo id.
    action_tokenizer_name: str = FAST_TOKENIZER
    # 0: greedy decoding; above: sampling from the softmax at that temperature.
    temperature: float = 0.0
    # The most tokens generated per chunk.
    max_decoding_steps: int = 256
    # FAST token t is PaliGemma token vocab_size - 1 - fast_skip_tokens - t.
    fast_skip_tokens: int = 128
    # A generated sequence that does not start with "Action:" is refused (an error, not actions).
    validate_action_token_prefix: bool = True
    # Decode over cached keys and values (false: the whole sequence again at every token).
    use_kv_cache: bool = True
    normalization_mapping: dict[str, str] = attrs.field(factory=_pi_norms, converter=norm_mapping)
    gradient_checkpointing: bool = False
    # torch.compile of the model: read, not applied by rlctl yet.
    compile_model: bool = False
    compile_mode: str = "max-autotune"
    optimizer_lr: float = 2.5e-5
    optimizer_betas: tuple[float, float] = attrs.field(default=(0.9, 0.95), converter=_float_pair)
    optimizer_eps: float = 1e-8
    optimizer_weight_decay: float = 0.01
    optimizer_grad_clip_norm: float = 1.0
    scheduler_warmup_steps: int = 1_000
    scheduler_decay_steps: int = 30_000
    scheduler_decay_lr: float = 2.5e-6

    def __attrs_post_init__(self) -> None:
        require(
            self.n_action_steps <= self.chunk_size,
            f"n_action_steps ({self.n_action_steps}) cannot exceed chunk_size ({self.chunk_size})",
            "n_action_steps",
        )
        require(self.chunk_size >= 1, "must be at least 1", "chunk_size")
        require(self.n_obs_steps == 1, "π0-FAST reads one observation step", "n_obs_steps")
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
        require(self.tokenizer_max_length > 0, "must be positive", "tokenizer_max_length")
        require(self.empty_cameras >= 0, "cannot be negative", "empty_cameras")
        require(
            self.max_action_tokens >= 1 and self.max_decoding_steps >= 1,
            "max_action_tokens and max_decoding_steps must be at least 1",
            "max_decoding_steps" if self.max_action_tokens >= 1 else "max_action_tokens",
        )
        require(self.fast_skip_tokens >= 0, "cannot be negative", "fast_skip_tokens")
        require(
            self.temperature >= 0,
            f"temperature cannot be negative, got {self.temperature}",
            "temperature",
            hint="0 decodes greedily; above 0 samples",
        )
        require(
            bool(self.action_tokenizer_name.strip()),
            "π0-FAST needs a FAST action tokenizer",
            "action_tokenizer_name",
            hint="fit one with `rlctl train-tokenizer --dataset.root=DIR --output_dir=OUT` and "
            "pass --policy.action_tokenizer_name=OUT (a folder or a Hub repo id)",
        )
        require(
            self.paligemma_variant in GEMMA_VARIANTS
            or self.paligemma_variant.startswith("custom:"),
            f"unknown paligemma_variant {self.paligemma_variant!r}",
            "paligemma_variant",
            hint=f"use {' or '.join(GEMMA_VARIANTS)}",
        )
        _ = self.vlm_sizes  # a custom variant is read now, so a typo is named at once

    def optimizer_preset(self) -> OptimizerSpec:
        return cosine_decay_optimizer(self)

    def scheduler_preset(self) -> SchedulerSpec:
        return cosine_decay_scheduler(self)

    @property
    def vlm_sizes(self) -> GemmaSizes:
        return gemma_sizes(self.paligemma_variant, where="paligemma_variant")

    @property
    def observation_delta_indices(self) -> None:
        return None

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))


attrs.resolve_types(PI0FastConfig)
