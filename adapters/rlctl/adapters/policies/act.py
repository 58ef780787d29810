"""ACT: the Action Chunking Transformer (Zhao et al. 2023, "Learning Fine-Grained Bimanual
Manipulation with Low-Cost Hardware"), compatible with LeRobot 0.6.1's weights.

The model, at inference:

    image ──ResNet──► feature map ──1x1 conv──► one token per pixel ─┐ (+ 2D sine positions)
    robot state ──linear──► one token ──────────────────────────────┤ (+ learned positions)
    latent z = 0 ──linear──► one token ─────────────────────────────┘
                                                  │
                                        transformer encoder
                                                  │ memory
    chunk_size learned queries ──► transformer decoder ──► linear ──► (chunk_size, action_dim)

In training a second, BERT-like transformer (the CVAE encoder) reads [cls, state, action chunk]
and its cls output parameterises z; the loss is L1 on the chunk plus kl_weight * KL(z || N(0, I)).

Tensors are batch-first `(batch, sequence, dim_model)` here; attribute names follow LeRobot's so
that its `model.safetensors` loads without renaming. This file is the plain model; training on a
CPU swaps in quicker modules that compute the same functions (`cpu_kernels`, `act_training`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.backbones import resnet
from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl.adapters.policies.resnet import FrozenBatchNorm2d, stem
from rlctl.domain.acting import ActionBuffer
from rlctl.domain.action_chunk import ActionChunk
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.policies import ACTION, OBS_ENV_STATE, OBS_STATE, ACTConfig


class ACTPolicy(PolicyModel):
    config_class = ACTConfig
    config: ACTConfig

    def __init__(self, config: ACTConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        if not config.image_features and config.env_state_feature is None:
            raise ConfigError(
                "ACT needs at least one image or an environment state among its inputs",
                where="policy.input_features",
            )
        self.model = ACT(config, load_backbone_weights=load_backbone_weights)

    def parameter_groups(self) -> list[dict]:
        """The ResNet trains with its own learning rate (`optimizer_lr_backbone`)."""
        backbone: list[nn.Parameter] = []
        rest: list[nn.Parameter] = []
        for name, param in self.named_parameters():
            if param.requires_grad:
                (backbone if name.startswith("model.backbone") else rest).append(param)
        return [
            {"params": rest},
            {"params": backbone, "lr": self.config.optimizer_lr_backbone},
        ]

    def fsdp_units(self) -> list[nn.Module | tuple[nn.Module, ...]]:
        """Each transformer layer (the CVAE encoder's, the encoder's, the decoder's), and the
        ResNet trunk as one."""
        act = self.model
        units: list[nn.Module | tuple[nn.Module, ...]] = []
        if hasattr(act, "vae_encoder"):
            units += list(act.vae_encoder.layers)
        units += [*act.encoder.layers, *act.decoder.layers]
        if hasattr(act, "backbone"):
            units.append(act.backbone)
        return units

    @torch.no_grad()
    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        self.eval()
        actions, _ = self.model(batch)
        return actions

    def action_buffer(self) -> ActionBuffer:
        """With temporal ensembling every tick predicts a whole chunk and averages it with the
        earlier chunks' predictions for the same tick."""
        if self.config.temporal_ensemble_coeff is None:
            return super().action_buffer()
        return TemporalEnsembler(self.config.temporal_ensemble_coeff, self.config.chunk_size)

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        actions_hat, (mu, log_sigma_x2) = self.model(batch)
        target = batch[ACTION]
        abs_err = F.l1_loss(target, actions_hat, reduction="none")
        valid = _valid_mask(batch, target)
        n_valid = valid.sum() * abs_err.shape[-1]
        l1 = (abs_err * valid).sum() / n_valid.clamp_min(1)
        parts = {"l1_loss": l1.item()}
        if mu is None or log_sigma_x2 is None:
            return l1, parts
        # KL(N(mu, sigma²) || N(0, 1)) summed over the latent dimensions, averaged over the batch.
        kld = (-0.5 * (1 + log_sigma_x2 - mu.pow(2) - log_sigma_x2.exp())).sum(-1).mean()
        parts["kld_loss"] = kld.item()
        return l1 + self.config.kl_weight * kld, parts


def _valid_mask(batch: Batch, target: Tensor) -> Tensor:
    """`(B, S, 1)` true where the target action is real, not padding past the episode end."""
    is_pad = batch.get("action_is_pad")
    if is_pad is None:
        return torch.ones((*target.shape[:-1], 1), dtype=torch.bool, device=target.device)
    return ~is_pad.bool().unsqueeze(-1)


class ACT(nn.Module):
    """The network: (optional) CVAE encoder, ResNet, transformer encoder and decoder."""

    def __init__(self, config: ACTConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__()
        self.config = config
        dim = config.dim_model
        state = config.robot_state_feature
        env_state = config.env_state_feature
        self.image_keys = list(config.image_features)

        if config.use_vae:
            self.vae_encoder = TransformerEncoder(config, config.n_vae_encoder_layers)
            self.vae_encoder_cls_embed = nn.Embedding(1, dim)
            if state is not None:
                self.vae_encoder_robot_state_input_proj = nn.Linear(state.shape[0], dim)
            self.vae_encoder_action_input_proj = nn.Linear(config.action_dim, dim)
            # The cls token's output holds [mean, 2·log(sigma)] of the latent.
            self.vae_encoder_latent_output_proj = nn.Linear(dim, config.latent_dim * 2)
            n_tokens = 1 + config.chunk_size + (1 if state is not None else 0)
            self.register_buffer(
                "vae_encoder_pos_enc", sinusoidal_positions(n_tokens, dim).unsqueeze(0)
            )

        if self.image_keys:
            trunk = resnet(
                config.vision_backbone,
                config.pretrained_backbone_weights,
                load_weights=load_backbone_weights,
                norm_layer=FrozenBatchNorm2d,
                replace_stride_with_dilation=[
                    False,
                    False,
                    bool(config.replace_final_stride_with_dilation),
                ],
            )
            self.backbone = ResNetTrunk(trunk)

        self.encoder = TransformerEncoder(config, config.n_encoder_layers)
        self.decoder = TransformerDecoder(config)

        # Input projections; the encoder's tokens are [latent, (state), (env state), (pixels…)].
        if state is not None:
            self.encoder_robot_state_input_proj = nn.Linear(state.shape[0], dim)
        if env_state is not None:
            self.encoder_env_state_input_proj = nn.Linear(env_state.shape[0], dim)
        self.encoder_latent_input_proj = nn.Linear(config.latent_dim, dim)
        if self.image_keys:
            self.encoder_img_feat_input_proj = nn.Conv2d(trunk.fc.in_features, dim, kernel_size=1)
        n_1d_tokens = 1 + (state is not None) + (env_state is not None)
        self.encoder_1d_feature_pos_embed = nn.Embedding(n_1d_tokens, dim)
        if self.image_keys:
            self.encoder_cam_feat_pos_embed = SinusoidalPositions2d(dim // 2)

        # DETR-style learned queries, one per action of the chunk.
        self.decoder_pos_embed = nn.Embedding(config.chunk_size, dim)
        self.action_head = nn.Linear(dim, config.action_dim)

        for param in [*self.encoder.parameters(), *self.decoder.parameters()]:
            if param.dim() > 1:
                nn.init.xavier_uniform_(param)

    def forward(self, batch: Batch) -> tuple[Tensor, tuple[Tensor | None, Tensor | None]]:
        """`(B, chunk_size, action_dim)` actions and the latent's (mean, 2·log sigma) or Nones."""
        config = self.config
        images = [batch[key] for key in self.image_keys]
        batch_size = images[0].shape[0] if images else batch[OBS_ENV_STATE].shape[0]

        if config.use_vae and self.training:
            if ACTION not in batch:
                raise InvalidInput(
                    "ACT trains with its CVAE objective, which needs the target actions",
                    where="batch",
                    hint="give the batch an 'action' chunk (and 'action_is_pad'), or set "
                    "--policy.use_vae=false",
                )
            mu, log_sigma_x2 = self._encode_latent(batch, batch_size)
            latent = mu + (log_sigma_x2 / 2).exp() * torch.randn_like(mu)
        else:
            # At inference the latent is the prior's mean.
            mu = log_sigma_x2 = None
            reference = images[0] if images else batch[OBS_ENV_STATE]
            latent = torch.zeros(
                batch_size, config.latent_dim, dtype=torch.float32, device=reference.device
            )

        tokens = [self.encoder_latent_input_proj(latent)]
        if config.robot_state_feature is not None:
            tokens.append(self.encoder_robot_state_input_proj(batch[OBS_STATE]))
        if config.env_state_feature is not None:
            tokens.append(self.encoder_env_state_input_proj(batch[OBS_ENV_STATE]))
        tokens_t = torch.stack(tokens, dim=1)  # (B, n_1d, D)
        positions = self.encoder_1d_feature_pos_embed.weight.unsqueeze(0)  # (1, n_1d, D)

        for image in images:
            features = self.backbone(image)  # (B, C, h, w)
            feature_positions = self.encoder_cam_feat_pos_embed(features).to(features.dtype)
            features = self.encoder_img_feat_input_proj(features)  # (B, D, h, w)
            # One token per feature-map pixel, row by row.
            tokens_t = torch.cat([tokens_t, features.flatten(2).transpose(1, 2)], dim=1)
            positions = torch.cat([positions, feature_positions.flatten(2).transpose(1, 2)], dim=1)

        memory = self.encoder(tokens_t, positions)
        queries = torch.zeros(
            batch_size, config.chunk_size, config.dim_model, dtype=positions.dtype,
            device=positions.device,
        )  # fmt: skip
        decoded = self.decoder(
            queries,
            memory,
            query_positions=self.decoder_pos_embed.weight.unsqueeze(0),
            memory_positions=positions,
        )
        return self.action_head(decoded), (mu, log_sigma_x2)

    def _encode_latent(self, batch: Batch, batch_size: int) -> tuple[Tensor, Tensor]:
        """The CVAE encoder: [cls, (state), actions…] -> the cls output -> (mean, 2·log sigma)."""
        cls = self.vae_encoder_cls_embed.weight.unsqueeze(0).expand(batch_size, -1, -1)
        parts = [cls]
        if self.config.robot_state_feature is not None:
            parts.append(self.vae_encoder_robot_state_input_proj(batch[OBS_STATE]).unsqueeze(1))
        actions = batch[ACTION]
        parts.append(self.vae_encoder_action_input_proj(actions))
        tokens = torch.cat(parts, dim=1)
        # Padded actions (past the episode end) are masked out of the attention.
        n_leading = len(parts) - 1
        is_pad = batch.get("action_is_pad")
        if is_pad is None:
            is_pad = torch.zeros(actions.shape[:2], dtype=torch.bool, device=actions.device)
        leading = torch.zeros(batch_size, n_leading, dtype=torch.bool, device=actions.device)
        key_padding_mask = torch.cat([leading, is_pad.bool()], dim=1)
        cls_out = self.vae_encoder(
            tokens, self.vae_encoder_pos_enc, key_padding_mask, first_only=True
        )
        params = self.vae_encoder_latent_output_proj(cls_out[:, 0])
        return params[:, : self.config.latent_dim], params[:, self.config.latent_dim :]


class ResNetTrunk(nn.Module):
    """A ResNet up to `layer4` (no pooling, no classifier): a feature map."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.conv1, self.bn1, self.relu, self.maxpool = net.conv1, net.bn1, net.relu, net.maxpool
        self.layer1, self.layer2, self.layer3, self.layer4 = (
            net.layer1,
            net.layer2,
            net.layer3,
            net.layer4,
        )

    def forward(self, x: Tensor) -> Tensor:
        x = stem(self.conv1, self.bn1, self.relu, self.maxpool, x)
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))


def _activation(name: str) -> nn.Module:
    return {"relu": nn.ReLU, "gelu": nn.GELU, "glu": nn.GLU}[name]()


def _with_positions(x: Tensor, positions: Tensor | None) -> Tensor:
    return x if positions is None else x + positions


def _attention(config: ACTConfig) -> nn.MultiheadAttention:
    return nn.MultiheadAttention(
        config.dim_model, config.n_heads, dropout=config.dropout, batch_first=True
    )


class TransformerEncoder(nn.Module):
    def __init__(self, config: ACTConfig, n_layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([EncoderLayer(config) for _ in range(n_layers)])
        self.norm = nn.LayerNorm(config.dim_model) if config.pre_norm else nn.Identity()

    def forward(
        self,
        x: Tensor,
        positions: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        first_only: bool = False,
    ) -> Tensor:
        """Every token's output, or with `first_only` the first token's alone, `(B, 1, D)`:
        the last layer then attends from that token only (the CVAE reads just its cls token)."""
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer(
                x, positions, key_padding_mask, n_queries=1 if first_only and i == last else None
            )
        return self.norm(x)


def feed_forward(layer: EncoderLayer | DecoderLayer, x: Tensor) -> Tensor:
    return layer.linear2(layer.dropout(layer.activation(layer.linear1(x))))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with a residual; post-norm unless `pre_norm`.

    Positions are added to the queries and keys only, never to the values (as in DETR).
    """

    def __init__(self, config: ACTConfig) -> None:
        super().__init__()
        dim = config.dim_model
        self.self_attn = _attention(config)
        self.linear1 = nn.Linear(dim, config.dim_feedforward)
        self.dropout = nn.Dropout(config.dropout)
        self.linear2 = nn.Linear(config.dim_feedforward, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)
        self.activation = _activation(config.feedforward_activation)
        self.pre_norm = config.pre_norm

    def forward(
        self,
        x: Tensor,
        positions: Tensor | None,
        key_padding_mask: Tensor | None,
        n_queries: int | None = None,
    ) -> Tensor:
        """With `n_queries`, only the first tokens' outputs (the others still serve as keys)."""
        skip = x if n_queries is None else x[:, :n_queries]
        if self.pre_norm:
            x = self.norm1(x)
        qk = _with_positions(x, positions)
        q = qk if n_queries is None else qk[:, :n_queries]
        x = self.self_attn(q, qk, x, key_padding_mask=key_padding_mask, need_weights=False)[0]
        x = skip + self.dropout1(x)
        if self.pre_norm:
            skip, x = x, self.norm2(x)
        else:
            x = self.norm1(x)
            skip = x
        x = feed_forward(self, x)
        x = skip + self.dropout2(x)
        return x if self.pre_norm else self.norm2(x)


class TransformerDecoder(nn.Module):
    def __init__(self, config: ACTConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(config) for _ in range(config.n_decoder_layers)])
        self.norm = nn.LayerNorm(config.dim_model)

    def forward(
        self, x: Tensor, memory: Tensor, query_positions: Tensor, memory_positions: Tensor
    ) -> Tensor:
        """`x` is ACT's decoder input: zeros, which only their positions tell apart."""
        for layer in self.layers:
            x = layer(x, memory, query_positions, memory_positions)
        return self.norm(x)


class DecoderLayer(nn.Module):
    """Self-attention over the queries, cross-attention into the encoder's memory, feed-forward."""

    def __init__(self, config: ACTConfig) -> None:
        super().__init__()
        dim = config.dim_model
        self.self_attn = _attention(config)
        self.multihead_attn = _attention(config)
        self.linear1 = nn.Linear(dim, config.dim_feedforward)
        self.dropout = nn.Dropout(config.dropout)
        self.linear2 = nn.Linear(config.dim_feedforward, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.norm3 = nn.LayerNorm(dim)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)
        self.dropout3 = nn.Dropout(config.dropout)
        self.activation = _activation(config.feedforward_activation)
        self.pre_norm = config.pre_norm

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        query_positions: Tensor,
        memory_positions: Tensor,
    ) -> Tensor:
        skip = x
        if self.pre_norm:
            x = self.norm1(x)
        x = skip + self.dropout1(self.attend_to_queries(x, query_positions))
        if self.pre_norm:
            skip, x = x, self.norm2(x)
        else:
            x = self.norm1(x)
            skip = x
        x = self.multihead_attn(
            _with_positions(x, query_positions),
            _with_positions(memory, memory_positions),
            memory,
            need_weights=False,
        )[0]
        x = skip + self.dropout2(x)
        if self.pre_norm:
            skip, x = x, self.norm3(x)
        else:
            x = self.norm2(x)
            skip = x
        x = feed_forward(self, x)
        x = skip + self.dropout3(x)
        return x if self.pre_norm else self.norm3(x)

    def attend_to_queries(self, x: Tensor, positions: Tensor) -> Tensor:
        """The self-attention among the action queries."""
        qk = _with_positions(x, positions)
        return self.self_attn(qk, qk, x, need_weights=False)[0]


def sinusoidal_positions(n_positions: int, dim: int) -> Tensor:
    """`(n_positions, dim)` sine/cosine positions of "Attention Is All You Need" (interleaved)."""
    exponents = 2 * (np.arange(dim) // 2) / dim
    angles = np.arange(n_positions)[:, None] / np.power(10000, exponents)[None, :]
    table = np.empty_like(angles)
    table[:, 0::2] = np.sin(angles[:, 0::2])
    table[:, 1::2] = np.cos(angles[:, 1::2])
    return torch.from_numpy(table).float()


class SinusoidalPositions2d(nn.Module):
    """2D sine positions for a feature map: `dim` channels for y, then `dim` for x.

    Row and column indices run 1..H and 1..W and are scaled to (0, 2π], as in the original ACT
    (and DETR) code, which the trained weights expect.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, feature_map: Tensor) -> Tensor:
        """`(B, C, H, W)` -> `(1, 2·dim, H, W)`."""
        ones = torch.ones_like(feature_map[0, :1])  # (1, H, W)
        y = ones.cumsum(1, dtype=torch.float32)
        x = ones.cumsum(2, dtype=torch.float32)
        eps, two_pi = 1e-6, 2 * math.pi
        y = y / (y[:, -1:, :] + eps) * two_pi
        x = x / (x[:, :, -1:] + eps) * two_pi
        channel = torch.arange(self.dim, dtype=torch.float32, device=feature_map.device)
        frequencies = 10000 ** (2 * (channel // 2) / self.dim)
        x = x.unsqueeze(-1) / frequencies  # (1, H, W, dim)
        y = y.unsqueeze(-1) / frequencies
        # Interleave sin (even channels) and cos (odd channels).
        x = torch.stack((x[..., 0::2].sin(), x[..., 1::2].cos()), dim=-1).flatten(3)
        y = torch.stack((y[..., 0::2].sin(), y[..., 1::2].cos()), dim=-1).flatten(3)
        return torch.cat((y, x), dim=3).permute(0, 3, 1, 2)


class TemporalEnsembler:
    """Algorithm 2 of the ACT paper: each tick's action averages every chunk that predicted it.

    Weights are `exp(-coeff * i)` with i = 0 for the oldest prediction; the average is kept
    online, so only the pending actions and how many predictions each has are stored. As an
    action buffer it wants a chunk every tick: `push` folds one in, `pop` hands out the action.
    """

    def __init__(self, coeff: float, chunk_size: int) -> None:
        self.chunk_size = chunk_size
        self.weights = torch.exp(-coeff * torch.arange(chunk_size))
        self.weights_cumsum = torch.cumsum(self.weights, dim=0)
        self.reset()

    def reset(self) -> None:
        self._next: Tensor | None = None
        self.pending: Tensor | None = None  # (B, n, action_dim)
        self.counts: Tensor | None = None  # (n, 1) predictions averaged into each pending action

    def needs_chunk(self) -> bool:
        return True

    def push(self, chunk: ActionChunk) -> None:
        self._next = self.update(chunk.actions)

    def pop(self) -> Tensor:
        return self._next

    def update(self, chunk: Tensor) -> Tensor:
        """Fold in a new `(B, chunk_size, action_dim)` chunk; pop the `(B, action_dim)` action."""
        weights = self.weights.to(chunk.device)
        cumsum = self.weights_cumsum.to(chunk.device)
        if self.pending is None or self.counts is None:
            pending = chunk.clone()
            counts = torch.ones((self.chunk_size, 1), dtype=torch.long, device=chunk.device)
        else:
            previous = self.pending * cumsum[self.counts - 1]
            pending = (previous + chunk[:, :-1] * weights[self.counts]) / cumsum[self.counts]
            counts = torch.clamp(self.counts + 1, max=self.chunk_size)
            # The chunk's last action has no earlier prediction to average with.
            pending = torch.cat([pending, chunk[:, -1:]], dim=1)
            counts = torch.cat([counts, torch.ones_like(counts[-1:])])
        self.pending, self.counts = pending[:, 1:], counts[1:]
        return pending[:, 0]
