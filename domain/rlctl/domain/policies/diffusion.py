"""Diffusion Policy's settings: LeRobot's `DiffusionConfig`, field for field."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from rlctl.domain.optimization import OptimizerSpec, SchedulerSpec
from rlctl.domain.policies.config import (
    PolicyConfig,
    check_resnet,
    int_tuple,
    norm_mapping,
    optional_pair,
    require,
)


def _float_pair(value: Iterable[float]) -> tuple[float, float]:
    first, second = (float(x) for x in value)
    return first, second


def _diffusion_norms() -> dict[str, str]:
    return {"VISUAL": "MEAN_STD", "STATE": "MIN_MAX", "ACTION": "MIN_MAX"}


@PolicyConfig.register("diffusion")
@attrs.frozen(kw_only=True)
class DiffusionConfig(PolicyConfig):
    """Diffusion Policy (Chi et al. 2023) with a 1D conditional U-Net, LeRobot's defaults."""

    n_obs_steps: int = 2
    normalization_mapping: dict[str, str] = attrs.field(
        factory=_diffusion_norms, converter=norm_mapping
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
    optimizer_betas: tuple[float, float] = attrs.field(default=(0.95, 0.999), converter=_float_pair)
    optimizer_eps: float = 1e-8
    optimizer_weight_decay: float = 1e-6
    scheduler_name: str = "cosine"
    scheduler_warmup_steps: int = 500

    def __attrs_post_init__(self) -> None:
        check_resnet(self.vision_backbone)
        require(
            self.prediction_type in ("epsilon", "sample"),
            f"prediction_type must be 'epsilon' or 'sample', got {self.prediction_type!r}",
            "prediction_type",
        )
        require(
            self.noise_scheduler_type in ("DDPM", "DDIM"),
            f"noise_scheduler_type must be 'DDPM' or 'DDIM', got {self.noise_scheduler_type!r}",
            "noise_scheduler_type",
        )
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
        steps = self.num_inference_steps
        require(
            steps is None or 0 < steps <= self.num_train_timesteps,
            f"num_inference_steps ({steps}) must be in 1..num_train_timesteps "
            f"({self.num_train_timesteps})",
            "num_inference_steps",
        )
        for key, feature in self.image_features.items():
            crop = self.effective_crop_shape
            if self.resize_shape is None and crop is not None:
                require(
                    crop[0] <= feature.shape[1] and crop[1] <= feature.shape[2],
                    f"crop_shape {list(crop)} does not fit the image {key} {list(feature.shape)}",
                    "crop_shape",
                )

    def optimizer_preset(self) -> OptimizerSpec:
        return OptimizerSpec(
            type="adam",
            lr=self.optimizer_lr,
            betas=self.optimizer_betas,
            eps=self.optimizer_eps,
            weight_decay=self.optimizer_weight_decay,
        )

    def scheduler_preset(self) -> SchedulerSpec:
        return SchedulerSpec(
            type="diffuser", name=self.scheduler_name, num_warmup_steps=self.scheduler_warmup_steps
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

    @property
    def observation_delta_indices(self) -> list[int]:
        return list(range(1 - self.n_obs_steps, 1))

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(1 - self.n_obs_steps, 1 - self.n_obs_steps + self.horizon))


attrs.resolve_types(DiffusionConfig)
