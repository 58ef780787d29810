"""The diffusion transformer (DiT) of GR00T's action head, in plain torch, with the parameter names
of the `diffusers` modules LeRobot 0.6.1 builds it from (`Attention`'s `to_q`/`to_k`/`to_v`/
`to_out.0`, `FeedForward`'s `ff.net.0.proj`/`ff.net.2`, `TimestepEmbedding`'s `linear_1`/
`linear_2`), so a LeRobot checkpoint loads as it is and rlctl needs no `diffusers`.

    DiT                       blocks of [AdaLayerNorm(t) -> attention -> LayerNorm -> MLP], each
                              attending to the context (cross-attention) or, every other block
                              with `interleave_self_attention`, to itself; the output is
                              modulated by the time once more (shift, scale) and projected
    DiT(alternate_vl=True)    LeRobot's `AlternateVLDiT`: the cross-attention blocks attend to the
                              text tokens every `attend_text_every_n_blocks`-th time, to the image
                              tokens otherwise
    SelfAttentionTransformer  plain pre-norm self-attention blocks (the VL tokens' refiner)

Speed paths (`DiT.context`): what a cross-attention block reads of the context (its keys and
values) does not depend on the noisy actions or the time, so a sampler computes it once per
chunk (`DiT.context`) and each Euler step reuses it; and a block attends only to the tokens its
mask lets it see (text or image, without padding), so the others are left out of its keys
altogether. The outputs are those of the plain path up to float rounding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.domain.errors import ConfigError

ACTIVATIONS = ("gelu", "gelu-approximate", "geglu")


class Attention(nn.Module):
    """`diffusers.models.attention.Attention` with its default (SDPA) processor, as GR00T uses
    it: no norms on queries or keys, a boolean key mask (B, S) when given."""

    def __init__(
        self,
        query_dim: int,
        heads: int,
        dim_head: int,
        dropout: float,
        bias: bool,
        cross_attention_dim: int | None,
        out_bias: bool = True,
    ) -> None:
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.to_q = nn.Linear(query_dim, inner, bias=bias)
        self.to_k = nn.Linear(cross_attention_dim or query_dim, inner, bias=bias)
        self.to_v = nn.Linear(cross_attention_dim or query_dim, inner, bias=bias)
        self.to_out = nn.ModuleList(
            [nn.Linear(inner, query_dim, bias=out_bias), nn.Dropout(dropout)]
        )

    def _heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.heads, -1).transpose(1, 2)

    def keys_values(self, context: Tensor) -> tuple[Tensor, Tensor]:
        return self._heads(self.to_k(context)), self._heads(self.to_v(context))

    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        mask: Tensor | None = None,
        keys_values: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        query = self._heads(self.to_q(x))
        key, value = keys_values or self.keys_values(x if context is None else context)
        attn_mask = None if mask is None else mask[:, None, None, :]
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask)
        out = out.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1).to(query.dtype)
        return self.to_out[1](self.to_out[0](out))


class GELUProjection(nn.Module):
    """`diffusers`' GELU / GEGLU: a projection, then the activation (gated for GEGLU)."""

    def __init__(self, dim_in: int, dim_out: int, activation: str) -> None:
        super().__init__()
        self.gated = activation == "geglu"
        self.approximate = "tanh" if activation == "gelu-approximate" else "none"
        self.proj = nn.Linear(dim_in, dim_out * (2 if self.gated else 1))

    def forward(self, x: Tensor) -> Tensor:
        x = self.proj(x)
        if self.gated:
            x, gate = x.chunk(2, dim=-1)
            return x * F.gelu(gate)
        return F.gelu(x, approximate=self.approximate)


class FeedForward(nn.Module):
    """`diffusers`' FeedForward: activation projection, dropout, linear (, dropout)."""

    def __init__(self, dim: int, dropout: float, activation: str, final_dropout: bool) -> None:
        super().__init__()
        inner = 4 * dim
        layers: list[nn.Module] = [
            GELUProjection(dim, inner, activation),
            nn.Dropout(dropout),
            nn.Linear(inner, dim),
        ]
        if final_dropout:
            layers.append(nn.Dropout(dropout))
        self.net = nn.ModuleList(layers)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.net:
            x = layer(x)
        return x


class AdaLayerNorm(nn.Module):
    """A LayerNorm without affine weights, scaled and shifted by the time embedding."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, 2 * dim)
        self.norm = nn.LayerNorm(dim, eps, elementwise_affine=False)

    def forward(self, x: Tensor, temb: Tensor) -> Tensor:
        scale, shift = self.linear(F.silu(temb)).chunk(2, dim=1)
        return self.norm(x) * (1 + scale[:, None]) + shift[:, None]


class SinusoidalPositions(nn.Module):
    """`diffusers`' SinusoidalPositionalEmbedding (adds fixed sines and cosines; a buffer `pe`)."""

    def __init__(self, dim: int, max_length: int) -> None:
        super().__init__()
        position = torch.arange(max_length).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
        pe = torch.zeros(1, max_length, dim)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.pe[:, : x.shape[1]]


class TransformerBlock(nn.Module):
    """`BasicTransformerBlock` of LeRobot's GR00T: norm, attention, residual; norm, MLP,
    residual (the block GR00T wrote on diffusers' parts)."""

    def __init__(
        self,
        dim: int,
        heads: int,
        head_dim: int,
        *,
        dropout: float,
        cross_attention_dim: int | None,
        activation: str,
        attention_bias: bool,
        norm_type: str,
        elementwise_affine: bool,
        norm_eps: float,
        final_dropout: bool,
        positional_embeddings: str | None,
        max_positions: int,
    ) -> None:
        super().__init__()
        self.ada = norm_type == "ada_norm"
        self.norm1: nn.Module = (
            AdaLayerNorm(dim) if self.ada else nn.LayerNorm(dim, norm_eps, elementwise_affine)
        )
        self.pos_embed = (
            SinusoidalPositions(dim, max_positions)
            if positional_embeddings == "sinusoidal"
            else None
        )
        self.attn1 = Attention(dim, heads, head_dim, dropout, attention_bias, cross_attention_dim)
        self.norm3 = nn.LayerNorm(dim, norm_eps, elementwise_affine)
        self.ff = FeedForward(dim, dropout, activation, final_dropout)
        self.final_dropout = nn.Dropout(dropout) if final_dropout else None

    @classmethod
    def from_settings(
        cls,
        s: Mapping[str, Any],
        *,
        cross_attention_dim: int | None,
        norm_type: str,
        elementwise_affine: bool,
        norm_eps: float,
    ) -> TransformerBlock:
        """A block as a `dit_settings` mapping (a DiT's or the VL self-attention's) sizes it."""
        return cls(
            s["num_attention_heads"] * s["attention_head_dim"],
            s["num_attention_heads"],
            s["attention_head_dim"],
            dropout=s["dropout"],
            cross_attention_dim=cross_attention_dim,
            activation=s["activation_fn"],
            attention_bias=s["attention_bias"],
            norm_type=norm_type,
            elementwise_affine=elementwise_affine,
            norm_eps=norm_eps,
            final_dropout=s["final_dropout"],
            positional_embeddings=s["positional_embeddings"],
            max_positions=s["max_num_positional_embeddings"],
        )

    def forward(
        self,
        x: Tensor,
        temb: Tensor | None = None,
        context: Tensor | None = None,
        mask: Tensor | None = None,
        keys_values: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        normed = self.norm1(x, temb) if self.ada else self.norm1(x)
        if self.pos_embed is not None:
            normed = self.pos_embed(normed)
        out = self.attn1(normed, context, mask, keys_values)
        if self.final_dropout is not None:
            out = self.final_dropout(out)
        x = out + x
        return self.ff(self.norm3(x)) + x


def diffusers_timestep_features(timesteps: Tensor, channels: int = 256) -> Tensor:
    """`diffusers`' `Timesteps(256, flip_sin_to_cos=True, downscale_freq_shift=1)`."""
    half = channels // 2
    exponent = -math.log(10000) * torch.arange(half, dtype=torch.float32, device=timesteps.device)
    exponent = exponent / (half - 1)
    emb = timesteps[:, None].float() * torch.exp(exponent)[None, :]
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    return torch.cat([emb[:, half:], emb[:, :half]], dim=-1)


class TimestepEmbedding(nn.Module):
    """`diffusers`' TimestepEmbedding: linear, SiLU, linear."""

    def __init__(self, channels: int, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(channels, dim)
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear_2(F.silu(self.linear_1(x)))


class TimestepEncoder(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.timestep_embedder = TimestepEmbedding(256, dim)

    def forward(self, timesteps: Tensor) -> Tensor:
        dtype = self.timestep_embedder.linear_1.weight.dtype
        return self.timestep_embedder(diffusers_timestep_features(timesteps).to(dtype))


DIT_DEFAULTS: dict[str, Any] = {
    "num_attention_heads": 8,
    "attention_head_dim": 64,
    "output_dim": 26,
    "num_layers": 12,
    "dropout": 0.1,
    "attention_bias": True,
    "activation_fn": "gelu-approximate",
    "num_embeds_ada_norm": 1000,
    "upcast_attention": False,
    "norm_type": "ada_norm",
    "norm_elementwise_affine": False,
    "norm_eps": 1e-5,
    "max_num_positional_embeddings": 512,
    "compute_dtype": None,
    "final_dropout": True,
    "positional_embeddings": "sinusoidal",
    "interleave_self_attention": False,
}


def dit_settings(given: Mapping[str, Any], where: str, **extra: Any) -> dict[str, Any]:
    """The DiT's keyword settings as diffusers' config gives them, with its defaults; a key it
    does not know is refused."""
    known = {**DIT_DEFAULTS, **extra}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ConfigError(
            f"unknown {where} setting(s): {', '.join(unknown)}",
            where=f"the base model's config.json: {where}",
            hint=f"known settings: {', '.join(sorted(known))}",
        )
    settings = {**known, **given}
    if settings["activation_fn"] not in ACTIVATIONS:
        raise ConfigError(
            f"{where}.activation_fn {settings['activation_fn']!r} is not supported",
            where=f"the base model's config.json: {where}",
            hint=f"use one of {', '.join(ACTIVATIONS)}",
        )
    if settings["positional_embeddings"] not in (None, "sinusoidal"):
        raise ConfigError(
            f"{where}.positional_embeddings {settings['positional_embeddings']!r} is not supported",
            where=f"the base model's config.json: {where}",
            hint="use null or sinusoidal",
        )
    return settings


class BlockContext(NamedTuple):
    """What one cross-attention block reads of the context, prepared once per chunk."""

    keys_values: tuple[Tensor, Tensor]
    mask: Tensor | None


class DiT(nn.Module):
    """LeRobot's `DiT` and (with `alternate_vl`) `AlternateVLDiT`."""

    def __init__(
        self,
        settings: Mapping[str, Any],
        *,
        cross_attention_dim: int,
        alternate_vl: bool = False,
        attend_text_every_n_blocks: int = 2,
    ) -> None:
        super().__init__()
        s = dit_settings(settings, "diffusion_model_cfg")
        if alternate_vl and not s["interleave_self_attention"]:
            raise ConfigError(
                "the alternating VL DiT needs interleave_self_attention=true",
                where="the base model's config.json: diffusion_model_cfg",
            )
        self.interleave = bool(s["interleave_self_attention"])
        self.alternate_vl = alternate_vl
        self.attend_text_every_n_blocks = attend_text_every_n_blocks
        inner = s["num_attention_heads"] * s["attention_head_dim"]
        self.inner_dim = inner
        self.timestep_encoder = TimestepEncoder(inner)
        self.transformer_blocks = nn.ModuleList(
            TransformerBlock.from_settings(
                s,
                cross_attention_dim=None if self.self_block(i) else cross_attention_dim,
                norm_type=s["norm_type"],
                elementwise_affine=s["norm_elementwise_affine"],
                norm_eps=s["norm_eps"],
            )
            for i in range(s["num_layers"])
        )
        self.norm_out = nn.LayerNorm(inner, eps=1e-6, elementwise_affine=False)
        self.proj_out_1 = nn.Linear(inner, 2 * inner)
        self.proj_out_2 = nn.Linear(inner, s["output_dim"])

    def self_block(self, index: int) -> bool:
        return self.interleave and index % 2 == 1

    def block_mask(
        self, index: int, image_mask: Tensor | None, attention_mask: Tensor | None
    ) -> Tensor | None:
        """The keys block `index` may see: text or image tokens (AlternateVLDiT), else all."""
        if not self.alternate_vl:
            return None
        assert image_mask is not None and attention_mask is not None
        if index % (2 * self.attend_text_every_n_blocks) == 0:
            return (~image_mask) & attention_mask
        return image_mask & attention_mask

    def context(
        self, context: Tensor, image_mask: Tensor | None, attention_mask: Tensor | None
    ) -> list[BlockContext | None]:
        """Each cross-attention block's keys and values over the context tokens its mask lets
        some row see (the others dropped), computed once for every Euler step of a chunk."""
        prepared: list[BlockContext | None] = []
        for index, block in enumerate(self.transformer_blocks):
            if self.self_block(index):
                prepared.append(None)
                continue
            mask = self.block_mask(index, image_mask, attention_mask)
            seen = context
            if mask is not None:
                keep = mask.any(dim=0)
                seen, mask = context[:, keep], mask[:, keep]
                if bool(mask.all()):
                    mask = None
            prepared.append(BlockContext(block.attn1.keys_values(seen), mask))
        return prepared

    def forward(
        self,
        hidden_states: Tensor,
        context: Tensor,
        timestep: Tensor,
        image_mask: Tensor | None = None,
        attention_mask: Tensor | None = None,
        prepared: list[BlockContext | None] | None = None,
    ) -> Tensor:
        temb = self.timestep_encoder(timestep)
        x = hidden_states.contiguous()
        for index, block in enumerate(self.transformer_blocks):
            if self.self_block(index):
                x = block(x, temb)
            elif prepared is not None:
                ready = prepared[index]
                assert ready is not None
                x = block(x, temb, mask=ready.mask, keys_values=ready.keys_values)
            else:
                mask = self.block_mask(index, image_mask, attention_mask)
                x = block(x, temb, context.contiguous(), mask)
        shift, scale = self.proj_out_1(F.silu(temb)).chunk(2, dim=1)
        x = self.norm_out(x) * (1 + scale[:, None]) + shift[:, None]
        out: Tensor = self.proj_out_2(x)
        return out


class SelfAttentionTransformer(nn.Module):
    """LeRobot's `SelfAttentionTransformer`: layer-normed self-attention blocks, no mask."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        super().__init__()
        s = dit_settings(settings, "vl_self_attention_cfg")
        self.transformer_blocks = nn.ModuleList(
            TransformerBlock.from_settings(
                s,
                cross_attention_dim=None,
                norm_type="layer_norm",
                elementwise_affine=True,
                norm_eps=1e-5,
            )
            for _ in range(s["num_layers"])
        )

    def forward(self, x: Tensor) -> Tensor:
        x = x.contiguous()
        for block in self.transformer_blocks:
            x = block(x)
        return x
