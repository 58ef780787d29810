"""Diffusion Policy's settings: LeRobot's `DiffusionConfig`, field for field."""

from __future__ import annotations

import attrs

from rlctl.domain.policies.config import (
    PolicyConfig,
    check_resnet,
    int_tuple,
    norm_mapping,
    optional_pair,
    require,
)
from rlctl.domain.policies.denoising import DenoisingSettings, denoising_norms, float_pair


@PolicyConfig.register("diffusion")
@attrs.frozen(kw_only=True)
class DiffusionConfig(DenoisingSettings, PolicyConfig):
    """Diffusion Policy (Chi et al. 2023) with a 1D conditional U-Net, LeRobot's defaults."""

    n_obs_steps: int = 2
    normalization_mapping: dict[str, str] = attrs.field(
        factory=denoising_norms, converter=norm_mapping
    )
    horizon: int = 64
    n_action_steps: int = 32
    drop_n_last_frames: int = 7
    vision_backbone: str = "resnet18"
    resize_shape: tuple[int, int] | None = attrs.field(default=None, converter=optional_pair)
    crop_ratio: float = 1.0
    crop_shape: tuple[int, int] | None = attrs.field(default=None, converter=optional_pair)
    crop_is_random: bool = True
    pretrained_backbone_weights: str | None = "ResNet18_Weights.IMAGENET1K_V1"
    use_group_norm: bool = False
    spatial_softmax_num_keypoints: int = 32
    use_separate_rgb_encoder_per_camera: bool = True
    down_dims: tuple[int, ...] = attrs.field(default=(512, 1024, 2048), converter=int_tuple)
    kernel_size: int = 5
    n_groups: int = 8
    diffusion_step_embed_dim: int = 128
    use_film_scale_modulation: bool = True
    gradient_checkpointing: bool = False
    noise_scheduler_type: str = "DDPM"
    num_train_timesteps: int = 100
    beta_schedule: str = "squaredcos_cap_v2"
    beta_start: float = 0.0001
    beta_end: float = 0.02
    prediction_type: str = "epsilon"
    clip_sample: bool = True
    clip_sample_range: float = 1.0
    num_inference_steps: int | None = None
    compile_model: bool = False
    compile_mode: str = "reduce-overhead"
    do_mask_loss_for_padding: bool = False
    optimizer_lr: float = 1e-4
    optimizer_betas: tuple[float, float] = attrs.field(default=(0.95, 0.999), converter=float_pair)
    optimizer_eps: float = 1e-8
    optimizer_weight_decay: float = 1e-6
    scheduler_name: str = "cosine"
    scheduler_warmup_steps: int = 500

    def __attrs_post_init__(self) -> None:
        check_resnet(self.vision_backbone)
        self.check_noise_scheduler()
        require(
            0 < self.crop_ratio <= 1.0,
            f"crop_ratio must be in (0, 1], got {self.crop_ratio}",
            "crop_ratio",
        )
        factor = 2 ** len(self.down_dims)
        require(
            self.horizon % factor == 0,
            f"horizon ({self.horizon}) must be a multiple of 2**len(down_dims) = {factor}, "
            "because the U-Net halves the sequence at each level",
            "horizon",
        )
        # n_action_steps beyond horizon - n_obs_steps + 1 is not refused: LeRobot trains and
        # runs such configs, executing the (shorter) chunk the horizon leaves.
        for key, feature in self.image_features.items():
            crop = self.effective_crop_shape
            if self.resize_shape is None and crop is not None:
                require(
                    crop[0] <= feature.shape[1] and crop[1] <= feature.shape[2],
                    f"crop_shape {list(crop)} does not fit the image {key} {list(feature.shape)}",
                    "crop_shape",
                )

    @property
    def effective_crop_shape(self) -> tuple[int, int] | None:
        """The crop the encoder applies; with a resize, LeRobot derives it from crop_ratio."""
        if self.resize_shape is None:
            return self.crop_shape
        if self.crop_ratio < 1.0:
            return (
                int(self.resize_shape[0] * self.crop_ratio),
                int(self.resize_shape[1] * self.crop_ratio),
            )
        return None


attrs.resolve_types(DiffusionConfig)
