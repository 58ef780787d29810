"""Diffusion Policy (Chi et al. 2023, "Visuomotor Policy Learning via Action Diffusion"),
compatible with LeRobot 0.6.1's weights.

The model, at inference:

    each camera, each of the n_obs_steps frames:
        image ──(resize)──crop──ResNet──spatial softmax (keypoints)──linear+relu──► features
    global condition = [state, image features, (env state)] of every observation step, flattened

    x_T = noise (batch, horizon, action_dim)
    for t in the scheduler's timesteps (DDPM or DDIM):
        epsilon = U-Net(x_t, t, global condition)     1D convolutions over the horizon, FiLM
        x_{t-1} = scheduler.step(epsilon, t, x_t)     conditioning on [embed(t), condition]
    actions = x_0[:, n_obs_steps - 1 : n_obs_steps - 1 + n_action_steps]

Training noises a clean action chunk at a random step and regresses the noise (or the chunk,
with prediction_type "sample") with an MSE loss. Attribute names follow LeRobot's so that its
`model.safetensors` loads without renaming.
"""

from __future__ import annotations

import itertools
from functools import partial

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl.adapters.policies.denoising import (
    SinusoidalStepEmbedding,
    check_horizon,
    check_steps,
    denoise,
    initial_noise,
    noise_scheduler,
    noising_loss,
    trajectory_loss,
    with_time_axis,
)
from rlctl.adapters.policies.keypoint_encoder import KeypointEncoder
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import ACTION, OBS_ENV_STATE, OBS_STATE, DiffusionConfig


class DiffusionPolicy(PolicyModel):
    config_class = DiffusionConfig
    config: DiffusionConfig

    def __init__(self, config: DiffusionConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        if config.robot_state_feature is None:
            raise ConfigError(
                "Diffusion Policy needs the robot state 'observation.state' among its inputs",
                where="policy.input_features",
            )
        if not config.image_features and config.env_state_feature is None:
            raise ConfigError(
                "Diffusion Policy needs at least one image or an environment state among its "
                "inputs",
                where="policy.input_features",
            )
        self.diffusion = DiffusionModel(config, load_backbone_weights=load_backbone_weights)
        self.observation_keys = [OBS_STATE, *config.image_features]
        if config.env_state_feature is not None:
            self.observation_keys.append(OBS_ENV_STATE)

    def _with_time_axis(self, batch: Batch) -> dict:
        return with_time_axis(
            batch, self.observation_keys, self.config.image_features, self.config.n_obs_steps
        )

    @torch.no_grad()
    def predict_chunk(
        self,
        batch: Batch,
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """`(B, n_action_steps, action_dim)`; `batch` holds `(B, n_obs_steps, ...)` histories."""
        self.eval()
        return self.diffusion.generate_actions(
            self._with_time_axis(batch), noise=noise, generator=generator
        )

    @property
    def history_keys(self) -> list[str]:
        return self.observation_keys

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        loss = self.diffusion.compute_loss(self._with_time_axis(batch))
        return loss, {"diffusion_loss": loss.item()}

    def fsdp_units(self) -> list[nn.Module | tuple[nn.Module, ...]]:
        """Each camera encoder (ResNet trunk and keypoints) and each residual block of the
        U-Net."""
        model = self.diffusion
        units: list[nn.Module | tuple[nn.Module, ...]] = []
        if model.image_keys:
            encoder = model.rgb_encoder
            units += list(encoder) if isinstance(encoder, nn.ModuleList) else [encoder]
        unet = model.unet
        for first, second, _ in [*unet.down_modules, *unet.up_modules]:
            units += [first, second]
        units += list(unet.mid_modules)
        return units


class DiffusionModel(nn.Module):
    def __init__(self, config: DiffusionConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__()
        self.config = config
        self.image_keys = list(config.image_features)
        cond_dim = config.robot_state_feature.shape[0]  # type: ignore[union-attr]
        if self.image_keys:
            n_cameras = len(self.image_keys)
            make = partial(rgb_encoder, config, load_backbone_weights=load_backbone_weights)
            if config.use_separate_rgb_encoder_per_camera:
                self.rgb_encoder: nn.Module = nn.ModuleList([make() for _ in range(n_cameras)])
                cond_dim += self.rgb_encoder[0].feature_dim * n_cameras
            else:
                self.rgb_encoder = make()
                cond_dim += self.rgb_encoder.feature_dim * n_cameras
        if config.env_state_feature is not None:
            cond_dim += config.env_state_feature.shape[0]
        self.unet = ConditionalUnet1d(config, global_cond_dim=cond_dim * config.n_obs_steps)
        self.noise_scheduler = noise_scheduler(config)
        self.num_inference_steps = config.num_inference_steps or config.num_train_timesteps

    def global_conditioning(self, batch: Batch) -> Tensor:
        """`(B, n_obs_steps * per_step_dim)`: state, camera features, env state, step by step."""
        state = batch[OBS_STATE]
        batch_size, n_steps = state.shape[:2]
        features = [state]
        if self.image_keys:
            images = torch.stack([batch[key] for key in self.image_keys], dim=2)  # (B,S,N,C,H,W)
            if isinstance(self.rgb_encoder, nn.ModuleList):
                per_camera = [
                    encoder(images[:, :, n].flatten(0, 1)).view(batch_size, n_steps, -1)
                    for n, encoder in enumerate(self.rgb_encoder)
                ]
                features.append(torch.cat(per_camera, dim=-1))
            else:
                encoded = self.rgb_encoder(images.flatten(0, 2))
                features.append(encoded.view(batch_size, n_steps, -1))
        if self.config.env_state_feature is not None:
            features.append(batch[OBS_ENV_STATE])
        return torch.cat(features, dim=-1).flatten(start_dim=1)

    def generate_actions(
        self,
        batch: Batch,
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        n_steps = check_steps(batch, self.config.n_obs_steps)
        condition = self.global_conditioning(batch)
        shape = (condition.shape[0], self.config.horizon, self.config.action_dim)
        sample = initial_noise(shape, next(self.parameters()), noise, generator)
        sample = denoise(
            self.noise_scheduler,
            self.num_inference_steps,
            sample,
            lambda x, steps: self.unet(x, steps, condition),
            generator,
        )

        # The trajectory starts at the oldest observation; execution starts at the current one.
        start = n_steps - 1
        return sample[:, start : start + self.config.n_action_steps]

    def compute_loss(self, batch: Batch) -> Tensor:
        check_steps(batch, self.config.n_obs_steps)
        trajectory = batch[ACTION]
        check_horizon(trajectory, self.config.horizon)
        condition = self.global_conditioning(batch)
        prediction, target = noising_loss(
            self.noise_scheduler, trajectory, lambda x, steps: self.unet(x, steps, condition)
        )
        return trajectory_loss(prediction, target, batch, self.config.do_mask_loss_for_padding)


def rgb_encoder(config: DiffusionConfig, *, load_backbone_weights: bool = True) -> KeypointEncoder:
    """One camera's encoder: resize, crop, ResNet trunk, spatial softmax, linear + relu."""
    return KeypointEncoder(
        config,
        crop_shape=config.effective_crop_shape,
        resize_shape=config.resize_shape,
        load_backbone_weights=load_backbone_weights,
    )


class Conv1dBlock(nn.Module):
    """Conv1d -> GroupNorm -> Mish."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, n_groups: int = 8):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2),
            nn.GroupNorm(n_groups, out_channels),
            nn.Mish(),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.block(x)


class ConditionalResidualBlock1d(nn.Module):
    """Two conv blocks with a residual; the condition modulates the first one's output (FiLM:
    a per-channel scale and bias, or just a bias without `use_film_scale_modulation`)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        *,
        cond_dim: int,
        kernel_size: int,
        n_groups: int,
        use_film_scale_modulation: bool,
    ) -> None:
        super().__init__()
        self.out_channels = out_channels
        self.use_film_scale_modulation = use_film_scale_modulation
        self.conv1 = Conv1dBlock(in_channels, out_channels, kernel_size, n_groups)
        film_channels = out_channels * 2 if use_film_scale_modulation else out_channels
        self.cond_encoder = nn.Sequential(nn.Mish(), nn.Linear(cond_dim, film_channels))
        self.conv2 = Conv1dBlock(out_channels, out_channels, kernel_size, n_groups)
        self.residual_conv = (
            nn.Conv1d(in_channels, out_channels, 1)
            if in_channels != out_channels
            else nn.Identity()
        )

    def forward(self, x: Tensor, condition: Tensor) -> Tensor:
        """`(B, in_channels, T)`, `(B, cond_dim)` -> `(B, out_channels, T)`."""
        out = self.conv1(x)
        film = self.cond_encoder(condition).unsqueeze(-1)  # (B, film_channels, 1)
        if self.use_film_scale_modulation:
            out = film[:, : self.out_channels] * out + film[:, self.out_channels :]
        else:
            out = out + film
        return self.conv2(out) + self.residual_conv(x)


class ConditionalUnet1d(nn.Module):
    """A U-Net over the horizon axis: channels grow as `down_dims` while time halves per level.

    As in LeRobot (and the original code), the deepest level does not downsample, every up level
    upsamples, and the skip connection of the first (full-resolution) level goes unused.
    """

    def __init__(self, config: DiffusionConfig, global_cond_dim: int) -> None:
        super().__init__()
        self.config = config
        embed_dim = config.diffusion_step_embed_dim
        self.diffusion_step_encoder = nn.Sequential(
            SinusoidalStepEmbedding(embed_dim),
            nn.Linear(embed_dim, embed_dim * 4),
            nn.Mish(),
            nn.Linear(embed_dim * 4, embed_dim),
        )
        block = partial(
            ConditionalResidualBlock1d,
            cond_dim=embed_dim + global_cond_dim,
            kernel_size=config.kernel_size,
            n_groups=config.n_groups,
            use_film_scale_modulation=config.use_film_scale_modulation,
        )
        dims = [config.action_dim, *config.down_dims]
        in_out = list(itertools.pairwise(dims))

        self.down_modules = nn.ModuleList()
        for level, (dim_in, dim_out) in enumerate(in_out):
            deepest = level == len(in_out) - 1
            downsample = nn.Identity() if deepest else nn.Conv1d(dim_out, dim_out, 3, 2, 1)
            self.down_modules.append(
                nn.ModuleList([block(dim_in, dim_out), block(dim_out, dim_out), downsample])
            )

        deepest_dim = config.down_dims[-1]
        self.mid_modules = nn.ModuleList(
            [block(deepest_dim, deepest_dim), block(deepest_dim, deepest_dim)]
        )

        self.up_modules = nn.ModuleList()
        for dim_out, dim_in in reversed(in_out[1:]):
            self.up_modules.append(
                nn.ModuleList(
                    [
                        block(dim_in * 2, dim_out),  # * 2: the skip connection is concatenated
                        block(dim_out, dim_out),
                        nn.ConvTranspose1d(dim_out, dim_out, 4, 2, 1),
                    ]
                )
            )

        first_dim = config.down_dims[0]
        # LeRobot leaves this block at its default of 8 groups, whatever `n_groups` says.
        self.final_conv = nn.Sequential(
            Conv1dBlock(first_dim, first_dim, kernel_size=config.kernel_size),
            nn.Conv1d(first_dim, config.action_dim, 1),
        )

    def _run(self, block: nn.Module, x: Tensor, condition: Tensor) -> Tensor:
        if self.config.gradient_checkpointing and self.training:
            return checkpoint(block, x, condition, use_reentrant=False)
        return block(x, condition)

    def forward(self, x: Tensor, timesteps: Tensor, global_cond: Tensor | None = None) -> Tensor:
        """`(B, T, action_dim)` noisy actions, `(B,)` steps, `(B, cond)` -> `(B, T, action_dim)`."""
        x = x.transpose(1, 2)  # convolutions want (B, channels, T)
        condition = self.diffusion_step_encoder(timesteps)
        if global_cond is not None:
            condition = torch.cat([condition, global_cond], dim=-1)

        skips: list[Tensor] = []
        for first, second, downsample in self.down_modules:
            x = self._run(second, self._run(first, x, condition), condition)
            skips.append(x)
            x = downsample(x)
        for mid in self.mid_modules:
            x = self._run(mid, x, condition)
        for first, second, upsample in self.up_modules:
            x = torch.cat((x, skips.pop()), dim=1)
            x = self._run(second, self._run(first, x, condition), condition)
            x = upsample(x)
        return self.final_conv(x).transpose(1, 2)
