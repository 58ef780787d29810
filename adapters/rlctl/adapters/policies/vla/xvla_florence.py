"""Florence-2's encoder side as X-VLA reads it: the DaViT vision tower, the image projector and
BART's encoder, written here in plain PyTorch.

transformers' `Florence2Model` (LeRobot's) computes the same, but importing its modelling code
pulls in transformers' model machinery (torch's compiler, distributed tensors, SciPy, …): at real
size most of X-VLA's import-and-load time. These modules take its config
(`transformers.Florence2Config`, cheap to import) and its parameter names, module for module
(`vision_tower.convs.0.conv.weight`, `language_model.encoder.layers.0.self_attn.q_proj.weight`,
…), so LeRobot's checkpoints load as they are; attention is `scaled_dot_product_attention` (what
transformers picks on the CPU, "sdpa"). The text decoder, which X-VLA never runs, is not built.
`tests/adapters/policies/test_xvla_florence.py` checks the outputs against transformers'.

    image (3, H, W) ─► 4 stages: conv embedding, then per block a spatial block (depthwise conv,
                        window attention, MLP) and a channel block (depthwise conv, attention
                        across channel groups, MLP) ─► + 2-D positions, + temporal embedding
                        ─► [spatial mean, every position] ─► projection ─► LayerNorm
    embeddings ─► + learned positions ─► LayerNorm ─► BART encoder layers (post-norm)
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.domain.errors import ConfigError

ACTIVATIONS = {
    "gelu": F.gelu,
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


def activation(name: str, where: str) -> Any:
    if name not in ACTIVATIONS:
        raise ConfigError(
            f"unsupported activation_function {name!r}",
            where=where,
            hint=f"use one of {', '.join(sorted(ACTIVATIONS))}",
        )
    return ACTIVATIONS[name]


def normal_(tensor: Tensor, std: float = 1.0) -> None:
    """`nn.init.normal_`, skipped on the meta device (a checkpoint's weights follow), where
    PyTorch runs it through its Python references and so imports its compiler stack (seconds)."""
    if not tensor.is_meta:
        nn.init.normal_(tensor, std=std)


def embedding_weight(count: int, dim: int, padding_idx: int | None = None) -> Tensor:
    """An `nn.Embedding`'s initial weight (normal, the padding row zero), left unset on the
    meta device: pass it as `_weight` (`nn.Embedding` would call `normal_` itself)."""
    weight = torch.empty(count, dim)
    normal_(weight)
    if padding_idx is not None and not weight.is_meta:
        weight[padding_idx].zero_()
    return weight


def init_weights(module: nn.Module, std: float) -> None:
    """transformers' initialisation of a fresh model: normal weights, zero biases, unit norms."""
    for layer in module.modules():
        if isinstance(layer, nn.Linear | nn.Conv2d):
            normal_(layer.weight, std=std)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
        elif isinstance(layer, nn.Embedding):
            normal_(layer.weight, std=std)
            if layer.padding_idx is not None and not layer.weight.is_meta:
                with torch.no_grad():
                    layer.weight[layer.padding_idx].zero_()
        elif isinstance(layer, nn.LayerNorm):
            nn.init.ones_(layer.weight)
            nn.init.zeros_(layer.bias)


# --- DaViT --------------------------------------------------------------------------------------


class DropPath(nn.Module):
    """Stochastic depth per sample while training; the identity otherwise."""

    def __init__(self, rate: float) -> None:
        super().__init__()
        self.rate = rate

    def forward(self, x: Tensor) -> Tensor:
        if self.rate == 0.0 or not self.training:
            return x
        keep = 1 - self.rate
        shape = (x.shape[0],) + (1,) * (x.ndim - 1)
        mask = torch.floor(torch.rand(shape, dtype=x.dtype, device=x.device) + keep)
        return x.div(keep) * mask


class VisionMLP(nn.Module):
    def __init__(self, config: Any, dim: int) -> None:
        super().__init__()
        hidden = int(dim * config.mlp_ratio)
        self.act = activation(config.activation_function, "vision_config.activation_function")
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.fc2(self.act(self.fc1(x)))
        return out


class ConvEmbed(nn.Module):
    """A stage's patch embedding: a strided conv, its LayerNorm before (`patch_prenorm`) or
    after."""

    def __init__(self, config: Any, stage: int) -> None:
        super().__init__()
        dim_in = config.in_channels if stage == 0 else config.embed_dim[stage - 1]
        dim = config.embed_dim[stage]
        self.pre_norm = bool(config.patch_prenorm[stage])
        self.conv = nn.Conv2d(
            dim_in,
            dim,
            kernel_size=config.patch_size[stage],
            stride=config.patch_stride[stage],
            padding=config.patch_padding[stage],
        )
        self.norm = nn.LayerNorm(dim_in if self.pre_norm else dim)

    def _norm(self, x: Tensor) -> Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    def forward(self, x: Tensor) -> Tensor:
        if self.pre_norm:
            x = self._norm(x)
        x = self.conv(x)
        return x if self.pre_norm else self._norm(x)


class WindowAttention(nn.Module):
    """Multi-head attention inside `window_size`² windows (the map zero-padded to whole
    windows at the right and bottom)."""

    def __init__(self, config: Any, stage: int) -> None:
        super().__init__()
        dim = config.embed_dim[stage]
        self.window, self.num_heads = config.window_size, config.num_heads[stage]
        self.qkv = nn.Linear(dim, dim * 3, bias=config.qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor, speed: bool = False) -> Tensor:
        """(B, H, W, C) to (B, H·W, C); `speed` (the speed paths): the padding's rows skip the
        projections (see `_padded_qkv`)."""
        rows, height, width, dim = x.shape
        w = self.window
        pad_w, pad_h = (w - width % w) % w, (w - height % w) % w
        if speed and (pad_w or pad_h):
            qkv = self._padded_qkv(x, pad_h, pad_w)
        else:
            qkv = self.qkv(F.pad(x, (0, 0, 0, pad_w, 0, pad_h)))
        padded_h, padded_w = height + pad_h, width + pad_w
        windows = self._windows(qkv, w)
        count, tokens = windows.shape[:2]
        heads = windows.reshape(count, tokens, 3, self.num_heads, dim // self.num_heads)
        q, k, v = heads.permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(count, tokens, dim)
        if not speed:
            out = self.proj(out)
        out = (
            out.view(-1, padded_h // w, padded_w // w, w, w, dim)
            .permute(0, 1, 3, 2, 4, 5)
            .reshape(-1, padded_h, padded_w, dim)
        )
        out = out[:, :height, :width].reshape(rows, height * width, dim)
        return self.proj(out) if speed else out

    @staticmethod
    def _windows(x: Tensor, w: int) -> Tensor:
        """(B, H, W, D), H and W multiples of w, to the windows' tokens (B·windows, w², D)."""
        rows, height, width, dim = x.shape
        return (
            x.view(rows, height // w, w, width // w, w, dim)
            .permute(0, 1, 3, 2, 4, 5)
            .reshape(-1, w * w, dim)
        )

    def _padded_qkv(self, x: Tensor, pad_h: int, pad_w: int) -> Tensor:
        """`qkv` of the zero-padded map without multiplying the zeros: a padding row's
        projection is the bias (0·W + b, exactly). At Florence-2-large's 224x224 the 14x14
        map of the third stage is padded to 24x24 windows: three rows in four are padding."""
        rows, height, width, _ = x.shape
        real = self.qkv(x)
        padded = real.new_empty((rows, height + pad_h, width + pad_w, real.shape[-1]))
        if self.qkv.bias is None:
            padded.zero_()
        else:
            padded.copy_(self.qkv.bias.expand_as(padded))
        padded[:, :height, :width] = real
        return padded


class ChannelAttention(nn.Module):
    """Attention among the channels of each of `num_groups` groups, the positions as features
    (scaled by 1/√positions)."""

    def __init__(self, config: Any, stage: int) -> None:
        super().__init__()
        dim = config.embed_dim[stage]
        self.groups = config.num_groups[stage]
        self.qkv = nn.Linear(dim, dim * 3, bias=config.qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        rows, tokens, dim = x.shape
        qkv = self.qkv(x).reshape(rows, tokens, 3, self.groups, dim // self.groups)
        q, k, v = qkv.permute(2, 0, 3, 4, 1).unbind(0)  # (B, groups, channels, positions)
        attended = F.scaled_dot_product_attention(q, k, v, scale=tokens**-0.5)
        out: Tensor = self.proj(attended.permute(0, 3, 1, 2).reshape(rows, tokens, dim))
        return out


class VisionSubBlock(nn.Module):
    """x + conv1(x), then x + attention(norm1(x)), then x + conv2(x), then x + ffn(norm2(x));
    `spatial_block` (window attention) or `channel_block` (channel attention)."""

    def __init__(self, config: Any, stage: int, drop_path: float, *, spatial: bool) -> None:
        super().__init__()
        dim = config.embed_dim[stage]
        self.spatial = spatial
        self.conv1 = nn.Conv2d(dim, dim, kernel_size=3, padding=1, groups=dim)
        self.norm1 = nn.LayerNorm(dim)
        attention = (WindowAttention if spatial else ChannelAttention)(config, stage)
        if spatial:
            self.window_attn = attention
        else:
            self.channel_attn = attention
        self.drop_path1 = DropPath(drop_path)
        self.conv2 = nn.Conv2d(dim, dim, kernel_size=3, padding=1, groups=dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = VisionMLP(config, dim)
        self.drop_path2 = DropPath(drop_path)

    def forward(self, x: Tensor, speed: bool = False) -> Tensor:
        rows, dim, height, width = x.shape
        x = self.conv1(x) + x
        tokens = x.flatten(2).transpose(1, 2)
        normed = self.norm1(tokens)
        if self.spatial:
            attended = self.window_attn(normed.view(rows, height, width, dim), speed)
        else:
            attended = self.channel_attn(normed)
        tokens = tokens + self.drop_path1(attended)
        x = tokens.transpose(1, 2).view(rows, dim, height, width)
        x = self.conv2(x) + x
        tokens = x.flatten(2).transpose(1, 2)
        tokens = tokens + self.drop_path2(self.ffn(self.norm2(tokens)))
        return tokens.transpose(1, 2).view(rows, dim, height, width)


class VisionBlock(nn.Module):
    def __init__(self, config: Any, stage: int, spatial_drop: float, channel_drop: float) -> None:
        super().__init__()
        self.spatial_block = VisionSubBlock(config, stage, spatial_drop, spatial=True)
        self.channel_block = VisionSubBlock(config, stage, channel_drop, spatial=False)

    def forward(self, x: Tensor, speed: bool = False) -> Tensor:
        out: Tensor = self.channel_block(self.spatial_block(x, speed))
        return out


class DaViT(nn.Module):
    """Florence-2's vision tower: images (N, 3, H, W) to the last stage's map (N, C, h, w)."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        stages = len(config.embed_dim)
        if not stages == len(config.num_heads) == len(config.num_groups) == len(config.depths):
            raise ConfigError(
                "the vision config's embed_dim, num_heads, num_groups and depths differ in length",
                where="policy.florence_config.vision_config",
            )
        total = sum(config.depths) * 2
        rates = torch.linspace(0, float(config.drop_path_rate), total, device="cpu").tolist()
        offset = 0
        self.convs = nn.ModuleList(ConvEmbed(config, stage) for stage in range(stages))
        blocks = []
        for stage in range(stages):
            depth = config.depths[stage]
            blocks.append(
                nn.ModuleList(
                    VisionBlock(config, stage, rates[offset + 2 * i], rates[offset + 2 * i + 1])
                    for i in range(depth)
                )
            )
            offset += depth * 2
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: Tensor, speed: bool = False) -> Tensor:
        """`speed`: the window attention's speed path (`WindowAttention._padded_qkv`)."""
        x = x.to(self.convs[0].conv.weight.dtype)
        for conv, stage in zip(self.convs, self.blocks, strict=True):
            x = conv(x)
            for block in stage:
                x = block(x, speed)
        return x


# --- the projector ------------------------------------------------------------------------------


class PositionEmbedding2D(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        count, dim = (
            config.vision_config.max_position_embeddings,
            config.vision_config.embed_dim[-1],
        )
        half = dim // 2
        self.row_embeddings = nn.Embedding(count, half, _weight=embedding_weight(count, half))
        self.column_embeddings = nn.Embedding(
            count, dim - half, _weight=embedding_weight(count, dim - half)
        )

    def forward(self, features: Tensor) -> Tensor:
        """The (C, H, W) table for a map (N, C, H, W): column embeddings, then row ones."""
        height, width = features.shape[-2:]
        device = features.device
        columns = self.column_embeddings(torch.arange(width, device=device))
        rows = self.row_embeddings(torch.arange(height, device=device))
        table = torch.cat(
            [
                columns.unsqueeze(0).expand(height, width, -1),
                rows.unsqueeze(1).expand(height, width, -1),
            ],
            dim=-1,
        )
        return table.permute(2, 0, 1)


class TemporalEmbedding(nn.Module):
    """The cosine table of frame positions (sine at even channels, cosine at odd ones)."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        dim = config.vision_config.embed_dim[-1]
        count = config.vision_config.max_temporal_embeddings
        half = dim // 2
        # Made on the CPU even when the model is built on the meta device (a small table).
        cpu = torch.device("cpu")
        exponents = torch.arange(half, dtype=torch.int64, device=cpu).float()
        freqs = torch.exp(exponents * -(math.log(10000) / half))
        angles = torch.arange(count, dtype=torch.float, device=cpu).unsqueeze(1) * freqs[None]
        table = torch.empty((count, dim), device=cpu)
        table[:, 0::2] = torch.sin(angles)
        table[:, 1::2] = torch.cos(angles)
        self.pos_idx_to_embed = nn.Buffer(table)


class Projector(nn.Module):
    """transformers' `Florence2MultiModalProjector`: the map with its 2-D positions and the
    first frame's temporal embedding, as [mean over positions, each position] (1 + h·w
    tokens), projected and normalised."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        width, projection = config.vision_config.embed_dim[-1], config.vision_config.projection_dim
        self.image_projection = nn.Linear(width, projection, bias=False)
        self.image_proj_norm = nn.LayerNorm(projection)
        self.image_position_embed = PositionEmbedding2D(config)
        self.visual_temporal_embed = TemporalEmbedding(config)

    def forward(self, features: Tensor) -> Tensor:
        positioned = (features + self.image_position_embed(features)).flatten(2).transpose(1, 2)
        tokens = positioned + self.visual_temporal_embed.pos_idx_to_embed[:1]
        tokens = torch.cat([tokens.mean(dim=1, keepdim=True), tokens], dim=1)
        out: Tensor = self.image_proj_norm(self.image_projection(tokens))
        return out


# --- BART's encoder -----------------------------------------------------------------------------


class ScaledEmbedding(nn.Embedding):
    """BART's token embedding, times √d_model with `scale_embedding`."""

    def __init__(self, count: int, dim: int, padding_idx: int | None, scale: float) -> None:
        super().__init__(count, dim, padding_idx, _weight=embedding_weight(count, dim, padding_idx))
        self.embed_scale = scale

    def forward(self, ids: Tensor) -> Tensor:
        return super().forward(ids) * self.embed_scale


class BartSelfAttention(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        dim, self.num_heads = config.d_model, config.encoder_attention_heads
        if dim % self.num_heads:
            raise ConfigError(
                f"d_model ({dim}) is not a multiple of encoder_attention_heads ({self.num_heads})",
                where="policy.florence_config.text_config",
            )
        self.dropout = config.attention_dropout
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.q_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        rows, length, dim = x.shape
        shape = (rows, length, self.num_heads, dim // self.num_heads)
        q, k, v = (
            proj(x).view(shape).transpose(1, 2) for proj in (self.q_proj, self.k_proj, self.v_proj)
        )
        out = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0
        )
        result: Tensor = self.out_proj(out.transpose(1, 2).reshape(rows, length, dim))
        return result


class BartEncoderLayer(nn.Module):
    """Post-norm: norm(x + attention(x)), then norm(x + fc2(act(fc1(x))))."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        dim = config.d_model
        self.self_attn = BartSelfAttention(config)
        self.self_attn_layer_norm = nn.LayerNorm(dim)
        self.dropout, self.activation_dropout = config.dropout, config.activation_dropout
        self.act = activation(config.activation_function, "text_config.activation_function")
        self.fc1 = nn.Linear(dim, config.encoder_ffn_dim)
        self.fc2 = nn.Linear(config.encoder_ffn_dim, dim)
        self.final_layer_norm = nn.LayerNorm(dim)

    def forward(self, x: Tensor) -> Tensor:
        drop = self.training
        x = self.self_attn_layer_norm(x + F.dropout(self.self_attn(x), self.dropout, drop))
        hidden = F.dropout(self.act(self.fc1(x)), self.activation_dropout, drop)
        return self.final_layer_norm(x + F.dropout(self.fc2(hidden), self.dropout, drop))


class BartEncoder(nn.Module):
    def __init__(self, config: Any, scale: float) -> None:
        super().__init__()
        dim = config.d_model
        self.dropout, self.layerdrop = config.dropout, config.encoder_layerdrop
        self.embed_tokens = ScaledEmbedding(config.vocab_size, dim, config.pad_token_id, scale)
        count = config.max_position_embeddings + 2  # BART's positions start at 2
        self.embed_positions = nn.Embedding(count, dim, _weight=embedding_weight(count, dim))
        self.layers = nn.ModuleList(BartEncoderLayer(config) for _ in range(config.encoder_layers))
        self.layernorm_embedding = nn.LayerNorm(dim)

    def forward(self, inputs_embeds: Tensor) -> Tensor:
        """Every token attends to every other (no mask): (B, T, d_model) to the same."""
        length = inputs_embeds.shape[1]
        limit = self.embed_positions.num_embeddings - 2
        if length > limit:
            raise ConfigError(
                f"BART's encoder reads at most {limit} tokens, it was given {length}",
                where="policy.tokenizer_max_length",
                hint="read fewer task tokens",
            )
        positions = torch.arange(2, length + 2, device=inputs_embeds.device)
        x = self.layernorm_embedding(inputs_embeds + self.embed_positions(positions))
        x = F.dropout(x, self.dropout, self.training)
        for layer in self.layers:
            if self.training and self.layerdrop > 0.0 and float(torch.rand([])) < self.layerdrop:
                continue
            x = layer(x)
        return x


class BartEncoderModel(nn.Module):
    """BART without its decoder: the shared token embedding and the encoder (tied)."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.shared = ScaledEmbedding(config.vocab_size, config.d_model, config.pad_token_id, scale)
        self.encoder = BartEncoder(config, scale)
        self.encoder.embed_tokens.weight = self.shared.weight


class Florence2Encoder(nn.Module):
    """`Florence2Model`'s vision tower, projector and language model's encoder, under its
    names (`vision_tower`, `multi_modal_projector`, `language_model`)."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.vision_tower = DaViT(config.vision_config)
        self.multi_modal_projector = Projector(config)
        self.language_model = BartEncoderModel(config.text_config)
        init_weights(self.vision_tower, float(config.vision_config.initializer_range))
        init_weights(self.multi_modal_projector, float(config.vision_config.initializer_range))
        init_weights(self.language_model, float(config.text_config.init_std))

    def image_features(self, images: Tensor, speed: bool = False) -> Tensor:
        """(N, 3, H, W) to the projected image tokens (N, 1 + h·w, projection_dim); `speed`:
        the window attention skips multiplying its padding (the same tokens up to rounding)."""
        out: Tensor = self.multi_modal_projector(self.vision_tower(images, speed))
        return out

    def get_input_embeddings(self) -> nn.Embedding:
        return self.language_model.shared
