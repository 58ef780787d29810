"""ACT's settings: LeRobot's `ACTConfig`, field for field."""

from __future__ import annotations

import attrs

from rlctl.domain.optimization import OptimizerSpec
from rlctl.domain.policies.config import PolicyConfig, check_resnet, require


@PolicyConfig.register("act")
@attrs.frozen(kw_only=True)
class ACTConfig(PolicyConfig):
    """Action Chunking Transformer (Zhao et al. 2023), LeRobot's defaults (ALOHA-sized)."""

    chunk_size: int = 100
    n_action_steps: int = 100
    vision_backbone: str = "resnet18"
    pretrained_backbone_weights: str | None = "ResNet18_Weights.IMAGENET1K_V1"
    replace_final_stride_with_dilation: bool = False
    pre_norm: bool = False
    dim_model: int = 512
    n_heads: int = 8
    dim_feedforward: int = 3200
    feedforward_activation: str = "relu"
    n_encoder_layers: int = 4
    # The original ACT code asks for 7 decoder layers but a bug makes it use only the first.
    n_decoder_layers: int = 1
    use_vae: bool = True
    latent_dim: int = 32
    n_vae_encoder_layers: int = 4
    temporal_ensemble_coeff: float | None = None
    dropout: float = 0.1
    kl_weight: float = 10.0
    optimizer_lr: float = 1e-5
    optimizer_weight_decay: float = 1e-4
    optimizer_lr_backbone: float = 1e-5

    def __attrs_post_init__(self) -> None:
        check_resnet(self.vision_backbone)
        require(
            self.n_action_steps <= self.chunk_size,
            f"n_action_steps ({self.n_action_steps}) cannot exceed chunk_size ({self.chunk_size})",
            "n_action_steps",
        )
        require(
            self.temporal_ensemble_coeff is None or self.n_action_steps == 1,
            "temporal ensembling queries the policy every step, so n_action_steps must be 1",
            "n_action_steps",
            hint="set --policy.n_action_steps=1 or drop temporal_ensemble_coeff",
        )
        require(self.n_obs_steps == 1, "ACT reads one observation step", "n_obs_steps")
        require(
            self.dim_model % self.n_heads == 0,
            f"dim_model ({self.dim_model}) must be divisible by n_heads ({self.n_heads})",
            "dim_model",
        )
        require(
            self.feedforward_activation in ("relu", "gelu", "glu"),
            f"feedforward_activation must be relu, gelu or glu, got "
            f"{self.feedforward_activation!r}",
            "feedforward_activation",
        )

    def optimizer_preset(self) -> OptimizerSpec:
        return OptimizerSpec(
            type="adamw", lr=self.optimizer_lr, weight_decay=self.optimizer_weight_decay
        )

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))


attrs.resolve_types(ACTConfig)
