"""The multi-task diffusion transformer (DiT), compatible with LeRobot 0.6.1's weights.

    conditioning, for each of the n_obs_steps observations, flattened:
        [state, CLIP class token of each camera (resized, cropped), projected CLIP text of the task]

    x = noise (batch, horizon, action_dim)
    for each diffusion step (DDPM or DDIM) / flow-matching step (Euler or RK4):
        condition = [time MLP(sincos(t)), conditioning]
        h = input_proj(x) (+ positions)
        each block: AdaLN-Zero: shift, scale and gate of attention and MLP from the condition;
                    self-attention over the horizon (rotary positions by default)
        prediction = output_proj(h)       the noise (or the trajectory), or the flow's velocity
    actions = x[:, n_obs_steps - 1 : n_obs_steps - 1 + n_action_steps]

It sits beside Diffusion Policy, not in the VLA room: it is Diffusion Policy's recipe (a history
of observations conditioning a denoiser over a horizon that starts at the oldest one, DDPM/DDIM
by default, its MIN_MAX statistics and cosine schedule) with a transformer for the U-Net and CLIP
for the ResNet, and what it shares with Diffusion is written once in `denoising`. From the VLA
room it borrows what is the same there: the task's tokenizer step, Gemma's rotary arithmetic, and
(with `objective="flow_matching"`) the flow-matching integrators with real-time chunking's
guidance. LeRobot integrates that flow from noise at t=0 to actions at t=1 and regresses
actions - (1 - sigma_min) · noise; the room's samplers run from t=1 to t=0, so the velocity is
handed to them negated at 1 - t (the same steps).

The speed paths (`speed_paths`, on by default; the same chunks up to float rounding): the
condition's share of each block's AdaLN projection, and the rotary tables, computed once per
chunk instead of at every denoising step (at real size that projection's weights outweigh the
rest of the transformer). Off, inference runs LeRobot's arithmetic step for step.

Module and parameter names are LeRobot's (`observation_encoder.vision_encoder.model...`,
`noise_predictor.transformer_blocks.0.adaLN_modulation.1`, ...), so its `model.safetensors`
loads as it is. The CLIP towers come from `transformers` (the `smolvla` extra).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl.adapters.policies.denoising import (
    SinusoidalStepEmbedding,
    check_horizon,
    check_steps,
    crop_images,
    denoise,
    initial_noise,
    noise_scheduler,
    noising_loss,
    resize_images,
    trajectory_loss,
    with_time_axis,
)
from rlctl.adapters.policies.vla.flow_matching import euler_integrate, rk4_integrate
from rlctl.adapters.policies.vla.loading import AssignsOnMeta, building, require_transformers
from rlctl.adapters.policies.vla.rotary import Rotary, gemma_rope_tables, gemma_rotate
from rlctl.adapters.policies.vla.rtc import PrefixGuidance, guided
from rlctl.adapters.policies.vla.tokenizer import TokenizerStep
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.policies import ACTION, OBS_STATE
from rlctl.domain.policies.multi_task_dit import MultiTaskDiTConfig
from rlctl.domain.processors import ProcessorStep
from rlctl.domain.processors.steps.task_text import (
    LANGUAGE_ATTENTION_MASK,
    LANGUAGE_TOKENS,
    TokenizerConfig,
)

# The transformer's prediction for the trajectory x at times (or steps) t (B,).
Predictor = Callable[[Tensor, Tensor], Tensor]
VISION_PREFIX = "observation_encoder.vision_encoder"


class MultiTaskDiTPolicy(AssignsOnMeta, PolicyModel):
    config_class = MultiTaskDiTConfig
    config: MultiTaskDiTConfig

    # The one switch of the inference speed paths (see the module's docstring).
    speed_paths = True

    def __init__(self, config: MultiTaskDiTConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        if config.robot_state_feature is None:
            raise ConfigError(
                "multi-task DiT needs the robot state 'observation.state' among its inputs",
                where="policy.input_features",
            )
        # Without the CLIP weights a checkpoint's follow: built on the meta device (no memory,
        # no random init), load_state_dict assigns the file's tensors.
        with building(load_backbone_weights):
            encoder = ObservationEncoder(config, load_weights=load_backbone_weights)
            self.observation_encoder = encoder
            self.noise_predictor = DiffusionTransformer(
                config, self.observation_encoder.conditioning_dim
            )
        self.objective: DiffusionObjective | FlowMatchingObjective = (
            DiffusionObjective(config)
            if config.objective == "diffusion"
            else FlowMatchingObjective(config)
        )
        self.observation_keys = [OBS_STATE, *config.image_features]

    @classmethod
    def preprocessor_steps(cls, config: MultiTaskDiTConfig) -> list[ProcessorStep]:
        """LeRobot's step between batching and the device move: CLIP's tokenizer reads the task."""
        return [
            TokenizerStep(
                TokenizerConfig(
                    tokenizer_name=config.text_encoder_name,
                    max_length=config.tokenizer_max_length,
                    padding=config.tokenizer_padding,
                    padding_side=config.tokenizer_padding_side,
                    truncation=config.tokenizer_truncation,
                )
            )
        ]

    def parameter_groups(self) -> list[dict[str, Any]]:
        """The vision encoder learns at `optimizer_lr * vision_encoder_lr_multiplier`; the text
        encoder is frozen."""
        vision: list[nn.Parameter] = []
        rest: list[nn.Parameter] = []
        for name, param in self.named_parameters():
            if param.requires_grad:
                (vision if name.startswith(VISION_PREFIX) else rest).append(param)
        lr = self.config.optimizer_lr * self.config.vision_encoder_lr_multiplier
        return [{"params": rest}, {"params": vision, "lr": lr}]

    @property
    def dtype(self) -> torch.dtype:
        dtype: torch.dtype = self.noise_predictor.input_proj.weight.dtype
        return dtype

    @property
    def history_keys(self) -> list[str]:
        return self.observation_keys

    def _observations(self, batch: Batch) -> tuple[dict[str, Any], int]:
        batch = with_time_axis(
            batch, self.observation_keys, self.config.image_features, self.config.n_obs_steps
        )
        missing = [key for key in self.config.image_features if key not in batch]
        if missing:
            raise InvalidInput(
                f"the batch lacks the camera(s) {', '.join(missing)} the policy was trained on",
                where="observation.images",
                hint="give every camera of the policy's input_features (rename a camera with "
                "--rename_map if it has another name here)",
            )
        return batch, check_steps(batch, self.config.n_obs_steps)

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        batch, _ = self._observations(batch)
        trajectory = batch[ACTION]
        check_horizon(trajectory, self.config.horizon)
        condition = self.observation_encoder(batch)
        loss = self.objective.loss(
            lambda x, t: self.noise_predictor(x, t, condition),
            trajectory,
            batch,
        )
        return loss, {"loss": loss.item()}

    @torch.no_grad()
    def predict_chunk(
        self,
        batch: Batch,
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """`(B, n_action_steps, action_dim)` from `(B, n_obs_steps, ...)` histories."""
        return self.predict_guided_chunk(batch, None, noise, generator)

    @torch.no_grad()
    def predict_guided_chunk(
        self,
        batch: Batch,
        guidance: PrefixGuidance | None,
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        self.eval()
        batch, n_steps = self._observations(batch)
        condition = self.observation_encoder(batch)
        shape = (condition.shape[0], self.config.horizon, self.config.action_dim)
        sample = initial_noise(shape, self.noise_predictor.input_proj.weight, noise, generator)
        predictor = (
            self.noise_predictor.predictor(condition)
            if self.speed_paths
            else lambda x, t: self.noise_predictor(x, t, condition)
        )
        # The trajectory starts at the oldest observation; execution starts at the current one.
        start = n_steps - 1
        if guidance is not None:
            guidance = FromStep(guidance, start)
        trajectory = self.objective.sample(predictor, sample, generator, guidance)
        return trajectory[:, start : start + self.config.n_action_steps]

    def fsdp_units(self) -> list[nn.Module | tuple[nn.Module, ...]]:
        """CLIP's vision and text encoder layers; of each transformer block, its AdaLN
        projection (run for every block before the first) and its attention with its MLP."""
        from rlctl.adapters.policies.wrap_units import layer_stacks

        units: list[nn.Module | tuple[nn.Module, ...]] = list(
            layer_stacks(self.observation_encoder)
        )
        for block in self.noise_predictor.transformer_blocks:
            attention = block.attn if block.use_rope else block.multihead_attn
            units += [block.adaLN_modulation, (attention, block.mlp)]
        return units


# -- the observation encoder ---------------------------------------------------------------------


def clip_tower(kind: str, name: str, *, load_weights: bool) -> nn.Module:
    """CLIP's vision or text model named `name` (a folder or a Hub repository): pretrained, or
    built from its config when a checkpoint's weights follow."""
    transformers = require_transformers("multi-task DiT")
    field = f"policy.{kind}_encoder_name"
    vision = kind == "vision"
    model_class = transformers.CLIPVisionModel if vision else transformers.CLIPTextModel
    config_class = transformers.CLIPVisionConfig if vision else transformers.CLIPTextConfig
    try:
        if load_weights:
            model = model_class.from_pretrained(name)
        else:
            model = model_class(config_class.from_pretrained(name))
    except (OSError, ValueError, KeyError) as err:
        raise ConfigError(
            f"cannot read the CLIP {kind} model {name!r}: {err}",
            where=field,
            hint="give a CLIP folder (config.json, model.safetensors, tokenizer files) or a Hub "
            "repository id such as openai/clip-vit-base-patch16 (downloaded once into the Hub "
            "cache)",
        ) from err
    inner = "vision_model" if vision else "text_model"
    return model if hasattr(model, inner) else Nested(inner, model)


class Nested(nn.Module):
    """A CLIP tower under the name transformers gave it before flattening its CLIP classes
    (`CLIPTextModel.text_model`, `CLIPVisionModel.vision_model`): the parameter names stay
    LeRobot's (`...text_encoder.text_model.embeddings...`) whichever transformers is installed."""

    def __init__(self, inner: str, model: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.add_module(inner, model)

    @property
    def config(self) -> Any:
        return getattr(self, self.inner).config

    def forward(self, **inputs: Any) -> Any:
        return getattr(self, self.inner)(**inputs)


class CLIPVisionEncoder(nn.Module):
    """A camera image `(B, 3, H, W)` -> CLIP's class token `(B, width)` (before its last norm)."""

    def __init__(self, name: str, *, load_weights: bool) -> None:
        super().__init__()
        self.model = clip_tower("vision", name, load_weights=load_weights)
        self.embed_dim = int(self.model.config.hidden_size)
        self.image_size = int(self.model.config.image_size)

    def forward(self, x: Tensor) -> Tensor:
        return self.model(pixel_values=x).last_hidden_state[:, 0]


class CLIPTextEncoder(nn.Module):
    """The task's tokens -> CLIP's pooled text feature (frozen), projected to `projection_dim`."""

    def __init__(self, name: str, projection_dim: int, *, load_weights: bool) -> None:
        super().__init__()
        self.text_encoder = clip_tower("text", name, load_weights=load_weights)
        self.text_encoder.requires_grad_(False)
        self.projection = nn.Linear(int(self.text_encoder.config.hidden_size), projection_dim)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        with torch.no_grad():
            pooled = self.text_encoder(
                input_ids=input_ids, attention_mask=attention_mask
            ).pooler_output
        return self.projection(pooled)


class ObservationEncoder(nn.Module):
    """The conditioning vector: each observation step's [state, cameras, task], flattened."""

    def __init__(self, config: MultiTaskDiTConfig, *, load_weights: bool) -> None:
        super().__init__()
        self.config = config
        self.camera_names = list(config.image_features)
        self.crop_shape = config.effective_crop_shape
        self.vision_encoder: CLIPVisionEncoder | None = None
        self.vision_encoders: nn.ModuleList | None = None
        camera_dim = 0
        if self.camera_names:
            name = config.vision_encoder_name
            if config.use_separate_rgb_encoder_per_camera:
                self.vision_encoders = nn.ModuleList(
                    CLIPVisionEncoder(name, load_weights=load_weights) for _ in self.camera_names
                )
                first: CLIPVisionEncoder = self.vision_encoders[0]
            else:
                self.vision_encoder = first = CLIPVisionEncoder(name, load_weights=load_weights)
            self._check_image_size(first.image_size)
            camera_dim = first.embed_dim
        self.text_encoder = CLIPTextEncoder(
            config.text_encoder_name, config.hidden_dim, load_weights=load_weights
        )
        state_dim = config.robot_state_feature.shape[0]  # type: ignore[union-attr]
        per_step = state_dim + camera_dim * len(self.camera_names) + config.hidden_dim
        self.conditioning_dim = per_step * config.n_obs_steps

    def _check_image_size(self, size: int) -> None:
        shape = next(iter(self.config.image_features.values())).shape
        reached = self.crop_shape or self.config.image_resize_shape or tuple(shape[1:3])
        if tuple(reached) != (size, size):
            raise ConfigError(
                f"the CLIP vision encoder takes {size}x{size} images, but the cameras "
                f"({shape[1]}x{shape[2]}) reach it at {reached[0]}x{reached[1]}",
                where="policy.image_resize_shape",
                hint=f"resize them with --policy.image_resize_shape=[{size},{size}] (and "
                "--policy.image_crop_shape=null), or resize and crop to that size",
            )

    def _prepare(self, images: Tensor) -> Tensor:
        if self.config.image_resize_shape is not None:
            images = resize_images(images, self.config.image_resize_shape)
        if self.crop_shape is not None:
            random = self.training and self.config.image_crop_is_random
            images = crop_images(images, self.crop_shape, random=random)
        return images

    def forward(self, batch: Mapping[str, Any]) -> Tensor:
        state = batch[OBS_STATE]
        batch_size, n_steps = state.shape[:2]
        features = [state]
        if self.camera_names:
            images = torch.stack([batch[key] for key in self.camera_names], dim=2)  # B,S,N,C,H,W
            if self.vision_encoders is not None:
                per_camera = [
                    encoder(self._prepare(images[:, :, n].flatten(0, 1)))
                    for n, encoder in enumerate(self.vision_encoders)
                ]
                features += [f.reshape(batch_size, n_steps, -1) for f in per_camera]
            else:
                assert self.vision_encoder is not None
                encoded = self.vision_encoder(self._prepare(images.flatten(0, 2)))
                features.append(encoded.reshape(batch_size, n_steps, -1))
        if LANGUAGE_TOKENS not in batch:
            raise InvalidInput(
                "the batch has no task tokens: the multi-task DiT reads the task's text",
                where=LANGUAGE_TOKENS,
                hint="run the policy's pre-processor (its tokenizer_processor step turns the "
                "'task' text into tokens)",
            )
        text = self.text_encoder(batch[LANGUAGE_TOKENS], batch[LANGUAGE_ATTENTION_MASK])
        features.append(text[:, None, :].expand(-1, n_steps, -1))
        return torch.cat(features, dim=-1).flatten(start_dim=1)


# -- the transformer -----------------------------------------------------------------------------


def modulate(x: Tensor, shift: Tensor, scale: Tensor) -> Tensor:
    return x * (1 + scale) + shift


class RoPEAttention(nn.Module):
    """Multi-head self-attention with rotary positions (Gemma's arithmetic, `rope_base`)."""

    def __init__(self, hidden_size: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.qkv_proj = nn.Linear(hidden_size, 3 * hidden_size, bias=True)
        self.out_proj = nn.Linear(hidden_size, hidden_size, bias=True)
        self.dropout = dropout

    def forward(self, x: Tensor, rotary: Rotary) -> Tensor:
        batch, length, _ = x.shape
        qkv = self.qkv_proj(x).reshape(batch, length, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        q, k = gemma_rotate(q, rotary), gemma_rotate(k, rotary)
        dropout = self.dropout if self.training else 0.0
        attended = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)
        return self.out_proj(attended.transpose(1, 2).reshape(batch, length, self.hidden_size))


class TransformerBlock(nn.Module):
    """A DiT block with AdaLN-Zero: the condition shifts, scales and gates both sub-layers."""

    def __init__(self, config: MultiTaskDiTConfig, num_features: int) -> None:
        super().__init__()
        hidden = config.hidden_dim
        self.use_rope = config.use_rope
        if self.use_rope:
            self.attn = RoPEAttention(hidden, config.num_heads, config.dropout)
        else:
            self.multihead_attn = nn.MultiheadAttention(
                hidden, num_heads=config.num_heads, batch_first=True, dropout=config.dropout
            )
        self.norm1 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.norm2 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(
            nn.Linear(hidden, hidden * 4),
            nn.GELU(approximate="tanh"),
            nn.Linear(hidden * 4, hidden),
        )
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(num_features, 6 * hidden))

    def forward(self, x: Tensor, modulation: Tensor, rotary: Rotary | None) -> Tensor:
        """`modulation` (B, 6 · hidden): the AdaLN projection of the condition."""
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
            m.unsqueeze(1) for m in modulation.chunk(6, dim=1)
        )
        attn_input = modulate(self.norm1(x), shift_msa, scale_msa)
        if self.use_rope:
            assert rotary is not None
            attended = self.attn(attn_input, rotary)
        else:
            attended, _ = self.multihead_attn(attn_input, attn_input, attn_input)
        x = x + gate_msa * attended
        mlp_input = modulate(self.norm2(x), shift_mlp, scale_mlp)
        return x + gate_mlp * self.mlp(mlp_input)


class DiffusionTransformer(nn.Module):
    """The denoiser: a trajectory `(B, horizon, action_dim)` at a time, under a condition."""

    def __init__(self, config: MultiTaskDiTConfig, conditioning_dim: int) -> None:
        super().__init__()
        self.config = config
        embed = config.timestep_embed_dim
        hidden = config.hidden_dim
        self.time_mlp = nn.Sequential(
            SinusoidalStepEmbedding(embed),
            nn.Linear(embed, 2 * embed),
            nn.GELU(),
            nn.Linear(2 * embed, embed),
            nn.GELU(),
        )
        self.input_proj = nn.Linear(config.action_dim, hidden)
        self.pos_embedding = (
            nn.Parameter(torch.empty(1, config.horizon, hidden).normal_(std=0.02))
            if config.use_positional_encoding
            else None
        )
        self.transformer_blocks = nn.ModuleList(
            TransformerBlock(config, embed + conditioning_dim) for _ in range(config.num_layers)
        )
        self.output_proj = nn.Linear(hidden, config.action_dim)
        # AdaLN-Zero: every block starts as the identity.
        for block in self.transformer_blocks:
            nn.init.zeros_(block.adaLN_modulation[-1].weight)
            nn.init.zeros_(block.adaLN_modulation[-1].bias)

    def rotary(self, length: int, device: torch.device, dtype: torch.dtype) -> Rotary | None:
        if not self.config.use_rope:
            return None
        positions = torch.arange(length, device=device)[None, :]
        head_dim = self.config.hidden_dim // self.config.num_heads
        return gemma_rope_tables(positions, head_dim, dtype, base=self.config.rope_base)

    def _run(self, x: Tensor, modulations: list[Tensor], rotary: Rotary | None) -> Tensor:
        hidden = self.input_proj(x)
        if self.pos_embedding is not None:
            hidden = hidden + self.pos_embedding[:, : x.shape[1]]
        for block, modulation in zip(self.transformer_blocks, modulations):
            hidden = block(hidden, modulation, rotary)
        return self.output_proj(hidden)

    def forward(self, x: Tensor, timestep: Tensor, condition: Tensor) -> Tensor:
        """LeRobot's arithmetic: the time's features and the condition through each block's
        AdaLN projection as one vector."""
        features = torch.cat([self.time_mlp(timestep), condition], dim=-1)
        modulations = [block.adaLN_modulation(features) for block in self.transformer_blocks]
        return self._run(x, modulations, self.rotary(x.shape[1], x.device, x.dtype))

    def predictor(self, condition: Tensor) -> Predictor:
        """`forward` under one condition, on the speed paths: the condition's share of each
        AdaLN projection (the SiLU is elementwise, so the projection splits into the time's
        columns and the condition's) and the rotary tables are computed once, here."""
        embed = self.config.timestep_embed_dim
        silu_condition = F.silu(condition)
        shares = []
        for block in self.transformer_blocks:
            linear = block.adaLN_modulation[-1]
            shares.append(F.linear(silu_condition, linear.weight[:, embed:], linear.bias))
        rotary = self.rotary(self.config.horizon, condition.device, condition.dtype)

        def predict(x: Tensor, timestep: Tensor) -> Tensor:
            silu_time = F.silu(self.time_mlp(timestep))
            modulations = [
                share + F.linear(silu_time, block.adaLN_modulation[-1].weight[:, :embed])
                for block, share in zip(self.transformer_blocks, shares)
            ]
            return self._run(x, modulations, rotary)

        return predict


# -- the objectives -------------------------------------------------------------------------------


class DiffusionObjective:
    """DDPM or DDIM: regress the noise (or the trajectory) at a random step; denoise step by
    step at inference."""

    def __init__(self, config: MultiTaskDiTConfig) -> None:
        self.config = config
        self.scheduler = noise_scheduler(config)
        self.num_inference_steps = config.num_inference_steps or config.num_train_timesteps

    def loss(self, predictor: Predictor, trajectory: Tensor, batch: Batch) -> Tensor:
        prediction, target = noising_loss(self.scheduler, trajectory, predictor)
        return trajectory_loss(prediction, target, batch, self.config.do_mask_loss_for_padding)

    def sample(
        self,
        predictor: Predictor,
        noise: Tensor,
        generator: torch.Generator | None,
        guidance: PrefixGuidance | None,
    ) -> Tensor:
        if guidance is not None:
            raise ConfigError(
                "the multi-task DiT follows committed actions (real-time chunking) only when it "
                "generates by flow matching",
                where="policy.rtc_config",
                hint="drop --policy.rtc_config, or train with --policy.objective=flow_matching",
            )
        return denoise(self.scheduler, self.num_inference_steps, noise, predictor, generator)


class FlowMatchingObjective:
    """Flow matching in LeRobot's convention: noise at t=0, actions at t=1,
    x_t = t · actions + (1 - (1 - sigma_min) · t) · noise, velocity actions - (1 - sigma_min) ·
    noise; integrated by the VLA room's samplers, which run from t=1 to t=0."""

    def __init__(self, config: MultiTaskDiTConfig) -> None:
        self.config = config

    def sample_times(self, batch: int, device: torch.device) -> Tensor:
        if self.config.timestep_sampling_strategy == "uniform":
            return torch.rand(batch, device=device)
        beta = torch.distributions.Beta(
            self.config.timestep_sampling_alpha, self.config.timestep_sampling_beta
        )
        return self.config.timestep_sampling_s * (1.0 - beta.sample((batch,)).to(device))

    def loss(self, predictor: Predictor, trajectory: Tensor, batch: Batch) -> Tensor:
        noise = torch.randn_like(trajectory)
        time = self.sample_times(trajectory.shape[0], trajectory.device)
        t = time.view(-1, 1, 1)
        keep = 1 - self.config.sigma_min
        x_t = t * trajectory + (1 - keep * t) * noise
        target = trajectory - keep * noise
        return trajectory_loss(
            predictor(x_t, time), target, batch, self.config.do_mask_loss_for_padding
        )

    def sample(
        self,
        predictor: Predictor,
        noise: Tensor,
        generator: torch.Generator | None,
        guidance: PrefixGuidance | None,
    ) -> Tensor:
        def velocity(x_t: Tensor, time: Tensor) -> Tensor:
            # The room's time runs from 1 (noise) to 0: LeRobot's is 1 - time, its velocity
            # points the other way.
            return -predictor(x_t, (1 - time).to(x_t.dtype))

        steps = self.config.num_integration_steps
        field = guided(velocity, guidance)
        if self.config.integration_method == "rk4":
            return rk4_integrate(field, noise, steps)
        return euler_integrate(field, noise, steps)


class FromStep(PrefixGuidance):
    """Real-time chunking's guidance over a trajectory whose first `offset` steps lie in the past
    (the observations before the current one): the leftover is followed from step `offset` on,
    and nothing before it."""

    def __init__(self, guidance: PrefixGuidance, offset: int) -> None:
        super().__init__(guidance.leftover, guidance.inference_delay, guidance.config)
        self.offset = offset

    def target(self, x_t: Tensor) -> tuple[Tensor, Tensor]:
        target, weights = super().target(x_t[:, self.offset :])
        if not self.offset:
            return target, weights
        return F.pad(target, (0, 0, self.offset, 0)), F.pad(weights, (0, 0, self.offset, 0))
