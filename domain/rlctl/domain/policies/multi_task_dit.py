"""Multi-task DiT's settings: LeRobot 0.6.1's `MultiTaskDiTConfig`, field for field.

The multi-task diffusion transformer (Jones 2025, after Boston Dynamics' and TRI's large behaviour
models) conditions a DiT on the robot state, each camera's CLIP image embedding and the task's
CLIP text embedding, over `n_obs_steps` observations, and turns noise into a `horizon` of
actions, by diffusion (DDPM or DDIM, `objective="diffusion"`, the default) or by flow matching
(`objective="flow_matching"`). `vision_encoder_name` and `text_encoder_name` name the CLIP folder
or Hub repository the two towers (and the task's tokenizer) come from; they must name a CLIP, as
LeRobot insists.
"""

from __future__ import annotations

import attrs

from rlctl.domain.policies.config import PolicyConfig, norm_mapping, optional_pair, require
from rlctl.domain.policies.denoising import DenoisingSettings, denoising_norms, float_pair

CLIP_DEFAULT = "openai/clip-vit-base-patch16"
OBJECTIVES = ("diffusion", "flow_matching")
INTEGRATION_METHODS = ("euler", "rk4")
TIMESTEP_STRATEGIES = ("uniform", "beta")


def _frames_to_drop(config: MultiTaskDiTConfig) -> int:
    # LeRobot's: the frames whose action window would run past the episode's end.
    return config.horizon - config.n_action_steps - config.n_obs_steps + 1


@PolicyConfig.register("multi_task_dit")
@attrs.frozen(kw_only=True)
class MultiTaskDiTConfig(DenoisingSettings, PolicyConfig):
    """Multi-task DiT with LeRobot's defaults (CLIP ViT-B/16 towers, a 6-layer DiT of width 512)."""

    n_obs_steps: int = 2
    horizon: int = 32
    n_action_steps: int = 24
    objective: str = "diffusion"
    # Diffusion (objective="diffusion").
    noise_scheduler_type: str = "DDPM"
    num_train_timesteps: int = 100
    beta_schedule: str = "squaredcos_cap_v2"
    beta_start: float = 0.0001
    beta_end: float = 0.02
    prediction_type: str = "epsilon"
    clip_sample: bool = True
    clip_sample_range: float = 1.0
    num_inference_steps: int | None = None
    # Flow matching (objective="flow_matching").
    sigma_min: float = 0.0
    num_integration_steps: int = 100
    integration_method: str = "euler"
    timestep_sampling_strategy: str = "beta"
    timestep_sampling_s: float = 0.999
    timestep_sampling_alpha: float = 1.5
    timestep_sampling_beta: float = 1.0
    # The transformer.
    hidden_dim: int = 512
    num_layers: int = 6
    num_heads: int = 8
    dropout: float = 0.1
    use_positional_encoding: bool = False
    timestep_embed_dim: int = 256
    use_rope: bool = True
    rope_base: float = 10000.0
    # The vision encoder (CLIP's, its class token per camera).
    vision_encoder_name: str = CLIP_DEFAULT
    use_separate_rgb_encoder_per_camera: bool = False
    vision_encoder_lr_multiplier: float = 0.1
    image_resize_shape: tuple[int, int] | None = attrs.field(default=None, converter=optional_pair)
    # Cropped after the resize (randomly while training with image_crop_is_random); a crop that
    # does not fit the (resized) images is skipped, as LeRobot disables it.
    image_crop_shape: tuple[int, int] | None = attrs.field(
        default=(224, 224), converter=optional_pair
    )
    image_crop_is_random: bool = True
    # The text encoder (CLIP's, frozen) and how the task is tokenised for it.
    text_encoder_name: str = CLIP_DEFAULT
    tokenizer_max_length: int = 77
    tokenizer_padding: str = "max_length"
    tokenizer_padding_side: str = "right"
    tokenizer_truncation: bool = True
    normalization_mapping: dict[str, str] = attrs.field(
        factory=denoising_norms, converter=norm_mapping
    )
    optimizer_lr: float = 2e-5
    optimizer_betas: tuple[float, float] = attrs.field(default=(0.95, 0.999), converter=float_pair)
    optimizer_eps: float = 1e-8
    optimizer_weight_decay: float = 0.0
    scheduler_name: str = "cosine"
    scheduler_warmup_steps: int = 0
    do_mask_loss_for_padding: bool = False
    # None: horizon - n_action_steps - n_obs_steps + 1, as LeRobot computes (and saves) it.
    drop_n_last_frames: int | None = attrs.field(
        default=attrs.Factory(_frames_to_drop, takes_self=True)
    )

    def __attrs_post_init__(self) -> None:
        if self.drop_n_last_frames is None:
            object.__setattr__(self, "drop_n_last_frames", _frames_to_drop(self))
        self._check_shapes()
        self._check_encoders()
        if self.objective == "diffusion":
            self._check_diffusion()
        else:
            self._check_flow_matching()

    def _check_shapes(self) -> None:
        require(
            self.objective in OBJECTIVES,
            f"objective must be 'diffusion' or 'flow_matching', got {self.objective!r}",
            "objective",
        )
        require(self.n_obs_steps >= 1, "n_obs_steps must be at least 1", "n_obs_steps")
        require(self.horizon >= 1, "horizon must be at least 1", "horizon")
        require(self.n_action_steps >= 1, "n_action_steps must be at least 1", "n_action_steps")
        require(
            self.n_obs_steps <= self.horizon,
            f"the horizon ({self.horizon}) must cover the n_obs_steps ({self.n_obs_steps}) "
            "observations it starts at",
            "horizon",
        )
        for name in ("hidden_dim", "num_layers", "num_heads", "timestep_embed_dim"):
            require(getattr(self, name) > 0, f"{name} must be positive", name)
        require(
            self.hidden_dim % self.num_heads == 0,
            f"hidden_dim ({self.hidden_dim}) must be divisible by num_heads ({self.num_heads})",
            "hidden_dim",
        )
        require(
            not self.use_rope or (self.hidden_dim // self.num_heads) % 2 == 0,
            f"rotary embeddings need an even head size; hidden_dim / num_heads is "
            f"{self.hidden_dim // self.num_heads}",
            "num_heads",
        )
        require(
            self.timestep_embed_dim % 2 == 0 and self.timestep_embed_dim >= 4,
            f"timestep_embed_dim must be even and at least 4, got {self.timestep_embed_dim}",
            "timestep_embed_dim",
        )
        require(
            0.0 <= self.dropout <= 1.0,
            f"dropout must be between 0.0 and 1.0, got {self.dropout}",
            "dropout",
        )

    def _check_encoders(self) -> None:
        for name in ("vision_encoder_name", "text_encoder_name"):
            require(
                "clip" in getattr(self, name).lower(),
                f"{name} must name a CLIP model (contain 'clip'), got {getattr(self, name)!r}",
                name,
                hint=f"e.g. {CLIP_DEFAULT}, or a local folder whose name contains 'clip'",
            )
        require(
            self.tokenizer_padding in ("max_length", "longest"),
            f"tokenizer_padding must be 'max_length' or 'longest', got {self.tokenizer_padding!r}",
            "tokenizer_padding",
        )
        require(
            self.tokenizer_padding_side in ("left", "right"),
            f"tokenizer_padding_side must be 'left' or 'right', "
            f"got {self.tokenizer_padding_side!r}",
            "tokenizer_padding_side",
        )
        require(self.tokenizer_max_length > 0, "must be positive", "tokenizer_max_length")
        shapes = {tuple(f.shape) for f in self.image_features.values()}
        require(
            len(shapes) <= 1,
            "every camera must have the same shape (the encoders take them as one batch), got "
            + ", ".join(f"{k} {list(f.shape)}" for k, f in self.image_features.items()),
            "input_features",
            hint="resize the cameras to one size when recording, or train on one camera",
        )

    def _check_diffusion(self) -> None:
        require(
            self.num_train_timesteps > 0,
            f"num_train_timesteps must be positive, got {self.num_train_timesteps}",
            "num_train_timesteps",
        )
        require(
            0.0 <= self.beta_start <= self.beta_end <= 1.0,
            f"need 0 <= beta_start <= beta_end <= 1, got {self.beta_start}, {self.beta_end}",
            "beta_start",
        )
        self.check_noise_scheduler()

    def _check_flow_matching(self) -> None:
        require(
            0.0 <= self.sigma_min <= 1.0,
            f"sigma_min must be in [0, 1], got {self.sigma_min}",
            "sigma_min",
        )
        require(
            self.num_integration_steps > 0,
            f"num_integration_steps must be positive, got {self.num_integration_steps}",
            "num_integration_steps",
        )
        require(
            self.integration_method in INTEGRATION_METHODS,
            f"integration_method must be 'euler' or 'rk4', got {self.integration_method!r}",
            "integration_method",
        )
        require(
            self.timestep_sampling_strategy in TIMESTEP_STRATEGIES,
            f"timestep_sampling_strategy must be 'uniform' or 'beta', "
            f"got {self.timestep_sampling_strategy!r}",
            "timestep_sampling_strategy",
        )
        if self.timestep_sampling_strategy == "beta":
            require(
                0.0 < self.timestep_sampling_s <= 1.0,
                f"timestep_sampling_s must be in (0, 1], got {self.timestep_sampling_s}",
                "timestep_sampling_s",
            )
            for name in ("timestep_sampling_alpha", "timestep_sampling_beta"):
                require(getattr(self, name) > 0, f"{name} must be positive", name)

    # Real-time chunking guides a flow; diffusion's DDPM and DDIM steps are not one.
    @property
    def supports_rtc(self) -> bool:  # type: ignore[override]
        return self.objective == "flow_matching"

    @property
    def effective_crop_shape(self) -> tuple[int, int] | None:
        """The crop the encoder applies: none when it does not fit the (resized) images, as
        LeRobot disables it."""
        crop = self.image_crop_shape
        if crop is None:
            return None
        if self.image_resize_shape is not None:
            sizes = [self.image_resize_shape]
        else:
            sizes = [(int(f.shape[1]), int(f.shape[2])) for f in self.image_features.values()]
        if any(crop[0] > height or crop[1] > width for height, width in sizes):
            return None
        return crop


attrs.resolve_types(MultiTaskDiTConfig)
