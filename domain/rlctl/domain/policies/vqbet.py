"""VQ-BeT's settings: LeRobot's `VQBeTConfig`, field for field (PushT-sized defaults)."""

from __future__ import annotations

import attrs

from rlctl.domain.optimization import VQBET, OptimizerSpec, SchedulerSpec
from rlctl.domain.policies.config import (
    PolicyConfig,
    check_resnet,
    norm_mapping,
    optional_pair,
    require,
    require_layers,
)
from rlctl.domain.policies.denoising import float_pair


def _vqbet_norms() -> dict[str, str]:
    return {"VISUAL": "IDENTITY", "STATE": "MIN_MAX", "ACTION": "MIN_MAX"}


@PolicyConfig.register("vqbet")
@attrs.frozen(kw_only=True)
class VQBeTConfig(PolicyConfig):
    """VQ-BeT (Lee et al. 2024, "Behavior Generation with Latent Actions"), LeRobot's defaults.

    Training runs in two phases, as LeRobot's: the first `n_vqvae_training_steps` fit the
    residual VQ-VAE that discretises action chunks, the rest train the GPT that predicts codes
    and offsets.
    """

    n_obs_steps: int = 5
    n_action_pred_token: int = 3
    action_chunk_size: int = 5
    normalization_mapping: dict[str, str] = attrs.field(
        factory=_vqbet_norms, converter=norm_mapping
    )
    vision_backbone: str = "resnet18"
    crop_shape: tuple[int, int] | None = attrs.field(default=(84, 84), converter=optional_pair)
    crop_is_random: bool = True
    pretrained_backbone_weights: str | None = "ResNet18_Weights.IMAGENET1K_V1"
    use_group_norm: bool = False
    spatial_softmax_num_keypoints: int = 32
    n_vqvae_training_steps: int = 20000
    vqvae_n_embed: int = 16
    vqvae_embedding_dim: int = 256
    vqvae_enc_hidden_dim: int = 128
    gpt_block_size: int = 500
    gpt_input_dim: int = 512
    gpt_output_dim: int = 512
    gpt_n_layer: int = 8
    gpt_n_head: int = 8
    gpt_hidden_dim: int = 512
    dropout: float = 0.1
    offset_loss_weight: float = 10000.0
    primary_code_loss_weight: float = 5.0
    secondary_code_loss_weight: float = 0.5
    bet_softmax_temperature: float = 0.1
    sequentially_select: bool = False
    optimizer_lr: float = 1e-4
    optimizer_betas: tuple[float, float] = attrs.field(default=(0.95, 0.999), converter=float_pair)
    optimizer_eps: float = 1e-8
    optimizer_weight_decay: float = 1e-6
    optimizer_vqvae_lr: float = 1e-3
    optimizer_vqvae_weight_decay: float = 1e-4
    scheduler_warmup_steps: int = 500
    # LeRobot's VQBeTConfig has no n_action_steps: each prediction's whole chunk of
    # `action_chunk_size` actions is executed. Derived from it here, never written.
    n_action_steps: int = attrs.field(
        default=attrs.Factory(lambda self: self.action_chunk_size, takes_self=True)
    )

    lerobot_omits = ("n_action_steps",)

    def __attrs_post_init__(self) -> None:
        check_resnet(self.vision_backbone)
        for name in (
            "n_obs_steps",
            "n_action_pred_token",
            "action_chunk_size",
            "spatial_softmax_num_keypoints",
            "vqvae_embedding_dim",
            "vqvae_enc_hidden_dim",
            "gpt_block_size",
            "gpt_input_dim",
            "gpt_output_dim",
            "gpt_n_head",
            "gpt_hidden_dim",
        ):
            value = getattr(self, name)
            require(value >= 1, f"{name} must be at least 1, got {value}", name)
        require_layers(self.gpt_n_layer, "gpt_n_layer")
        require(
            0.0 <= self.dropout <= 1.0,
            f"dropout must be between 0 and 1, got {self.dropout}",
            "dropout",
        )
        require(
            self.n_action_steps == self.action_chunk_size,
            f"VQ-BeT executes whole chunks of action_chunk_size ({self.action_chunk_size}) "
            f"actions; n_action_steps ({self.n_action_steps}) cannot differ",
            "n_action_steps",
            hint="set --policy.action_chunk_size instead",
        )
        require(
            self.gpt_hidden_dim % self.gpt_n_head == 0,
            f"gpt_hidden_dim ({self.gpt_hidden_dim}) must be divisible by gpt_n_head "
            f"({self.gpt_n_head})",
            "gpt_hidden_dim",
        )
        require(
            self.vqvae_n_embed >= 1 and self.n_vqvae_training_steps >= 0,
            "vqvae_n_embed must be positive and n_vqvae_training_steps not negative",
            "vqvae_n_embed",
        )
        if self.crop_shape is not None:
            for key, feature in self.image_features.items():
                require(
                    self.crop_shape[0] <= feature.shape[1]
                    and self.crop_shape[1] <= feature.shape[2],
                    f"crop_shape {list(self.crop_shape)} does not fit the image {key} "
                    f"{list(feature.shape)}",
                    "crop_shape",
                    hint="set --policy.crop_shape=[H,W] within the image, or null",
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
            type=VQBET,
            num_warmup_steps=self.scheduler_warmup_steps,
            num_vqvae_training_steps=self.n_vqvae_training_steps,
        )

    @property
    def observation_delta_indices(self) -> list[int]:
        return list(range(1 - self.n_obs_steps, 1))

    @property
    def action_delta_indices(self) -> list[int]:
        return list(
            range(1 - self.n_obs_steps, self.n_action_pred_token + self.action_chunk_size - 1)
        )


attrs.resolve_types(VQBeTConfig)
