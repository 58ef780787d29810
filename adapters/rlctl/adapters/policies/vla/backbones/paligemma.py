"""π0's and π0.5's backbone: a PaliGemma and a Gemma action expert run layer by layer together;
π0-FAST's: the PaliGemma alone, decoding tokens over its cached keys and values (`run_vlm`).

    images ──► SigLIP + projector ─┐
    task tokens ──► embeddings ────┴─► prefix ──► PaliGemma's Gemma layers ──┐ keys/values
    state, noisy actions, time ──► suffix ──► action expert's Gemma layers ◄─┘ ──► velocity

At every layer the prefix (images and text) and the suffix (the expert's tokens) are projected
by their own Gemma layer and attend together: the prefix sees only itself, the suffix sees the
prefix and, block-causally, itself. So at inference the prefix runs once, its keys and values are
kept, and each Euler step of the sampler runs the expert alone over them.

Module and parameter names are LeRobot 0.6.1's (`paligemma_with_expert.paligemma.model...`,
`paligemma_with_expert.gemma_expert.model.layers...`): the PaliGemma is `transformers`'
`PaliGemmaForConditionalGeneration` whose Gemma layers are replaced by the ones below (same
names; their norms may be adaptive, π0.5's expert), and the expert is a `GemmaForCausalLM`-shaped
module without token embeddings. Both `lm_head`s are kept, unused, because LeRobot's checkpoints
hold them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from rlctl.adapters.policies.vla.backbones.vlm_with_expert import VLMWithExpert
from rlctl.adapters.policies.vla.loading import require_transformers
from rlctl.adapters.policies.vla.rotary import Rotary, gemma_rope_tables, gemma_rotate
from rlctl.domain.policies.pi0 import GemmaSizes, PiConfig

# openpi's mask value for positions a token may not attend to (added to the scores).
ATTENTION_MASK_VALUE = -2.3819763e38
RMS_EPS = 1e-6
# Parameters kept in float32 when the model runs in bfloat16 (LeRobot's list).
KEEP_FLOAT32 = (
    "vision_tower",
    "multi_modal_projector",
    "input_layernorm",
    "post_attention_layernorm",
    "model.norm",
)
# Cached keys and values of the prefix, per layer: (keys, values), each (B, kv_heads, L, dim).
KVCache = list[tuple[Tensor, Tensor]]


class KVBuffers:
    """The speed path's cache: each layer's keys and values (B, kv_heads, capacity, dim) in
    buffers made once for the whole sequence, the first `length` tokens filled; a new token is
    written in place instead of the cache being concatenated anew."""

    def __init__(self, keys: list[Tensor], values: list[Tensor]) -> None:
        self.keys, self.values, self.length = keys, values, 0


# --- Gemma layers ------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    """Gemma's RMSNorm (`x * (1 + weight)`) or, with `cond_dim`, the adaptive one of π0.5:
    scale, shift and a residual gate computed from a condition (the time embedding)."""

    def __init__(self, dim: int, eps: float = RMS_EPS, cond_dim: int | None = None) -> None:
        super().__init__()
        self.eps = eps
        self.cond_dim = cond_dim
        if cond_dim is not None:
            self.dense = nn.Linear(cond_dim, dim * 3, bias=True)
            nn.init.zeros_(self.dense.weight)
        else:
            self.weight = nn.Parameter(torch.zeros(dim))

    def forward(
        self, x: Tensor, cond: Tensor | None = None, modulation: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """`modulation`, when given, is `dense(cond)` computed beforehand (`expert_modulations`)."""
        dtype = x.dtype
        normed = x * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + self.eps)
        if self.cond_dim is None:
            return (normed * (1.0 + self.weight.float())).type_as(x), None
        if modulation is None:
            if cond is None:
                raise ValueError("an adaptive RMSNorm needs its condition")
            modulation = self.dense(cond)
        if x.ndim == 3:
            modulation = modulation[:, None, :]
        scale, shift, gate = modulation.chunk(3, dim=-1)
        normed = normed * (1 + scale.float()) + shift.float()
        return normed.to(dtype), gate.to(dtype)


def gated_residual(x: Tensor, y: Tensor, gate: Tensor | None) -> Tensor:
    return x + y if gate is None else x + y * gate


class GemmaAttention(nn.Module):
    def __init__(self, sizes: GemmaSizes) -> None:
        super().__init__()
        width, heads, kv, dim = sizes.width, sizes.num_heads, sizes.num_kv_heads, sizes.head_dim
        self.head_dim = dim
        self.q_proj = nn.Linear(width, heads * dim, bias=False)
        self.k_proj = nn.Linear(width, kv * dim, bias=False)
        self.v_proj = nn.Linear(width, kv * dim, bias=False)
        self.o_proj = nn.Linear(heads * dim, width, bias=False)


class GemmaMLP(nn.Module):
    def __init__(self, sizes: GemmaSizes) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(sizes.width, sizes.mlp_dim, bias=False)
        self.up_proj = nn.Linear(sizes.width, sizes.mlp_dim, bias=False)
        self.down_proj = nn.Linear(sizes.mlp_dim, sizes.width, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class GemmaLayer(nn.Module):
    # Sharded training gathers the pair of layers around `joint_step` (it is their forward).
    fsdp_forward_methods = ("joint_step",)

    def __init__(self, sizes: GemmaSizes, cond_dim: int | None) -> None:
        super().__init__()
        self.self_attn = GemmaAttention(sizes)
        self.mlp = GemmaMLP(sizes)
        self.input_layernorm = RMSNorm(sizes.width, cond_dim=cond_dim)
        self.post_attention_layernorm = RMSNorm(sizes.width, cond_dim=cond_dim)

    def qkv(
        self, x: Tensor, cond: Tensor | None, modulation: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """Queries, keys, values (B, heads, L, dim) of the normed input, and the residual gate."""
        hidden, gate = self.input_layernorm(x, cond, modulation)
        attn = self.self_attn
        shape = (*hidden.shape[:-1], -1, attn.head_dim)
        query = attn.q_proj(hidden).view(shape).transpose(1, 2)
        key = attn.k_proj(hidden).view(shape).transpose(1, 2)
        value = attn.v_proj(hidden).view(shape).transpose(1, 2)
        return query, key, value, gate

    def joint_step(
        self,
        partner: GemmaLayer,
        streams: list[Tensor],
        conds: list[Tensor | None],
        mask: Tensor,
        positions: Tensor,
    ) -> list[Tensor]:
        """This layer and the other expert's `partner` over both streams, attending jointly."""
        return _joint_layer((self, partner), streams, conds, mask, positions)

    def finish(
        self,
        x: Tensor,
        attended: Tensor,
        gate: Tensor | None,
        cond: Tensor | None,
        modulation: Tensor | None = None,
    ) -> Tensor:
        """The attention's output projected and added, then the MLP's (gated residuals)."""
        o_proj = self.self_attn.o_proj
        x = gated_residual(x, o_proj(attended.to(o_proj.weight.dtype)), gate)
        hidden, gate = self.post_attention_layernorm(x, cond, modulation)
        if self.mlp.up_proj.weight.dtype == torch.bfloat16:
            hidden = hidden.to(torch.bfloat16)
        return gated_residual(x, self.mlp(hidden), gate)


class GemmaStack(nn.Module):
    """A Gemma's decoder layers and final norm (`GemmaModel` without embeddings)."""

    def __init__(self, sizes: GemmaSizes, cond_dim: int | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(GemmaLayer(sizes, cond_dim) for _ in range(sizes.depth))
        self.norm = RMSNorm(sizes.width, cond_dim=cond_dim)


class GemmaExpert(nn.Module):
    """The action expert, shaped as LeRobot's `PiGemmaForCausalLM` (its lm_head is unused)."""

    def __init__(self, sizes: GemmaSizes, cond_dim: int | None) -> None:
        super().__init__()
        self.model = GemmaStack(sizes, cond_dim)
        self.lm_head = nn.Linear(sizes.width, sizes.vocab_size, bias=False)


# --- attention arithmetic ------------------------------------------------------------------------


def attend(query: Tensor, key: Tensor, value: Tensor, mask: Tensor) -> Tensor:
    """Eager grouped-query attention as Gemma's: (B, H, Lq, D) queries, (B, Hkv, Lk, D) keys
    and values, an additive (B, 1, Lq, Lk) mask -> (B, Lq, H*D)."""
    batch, heads, length, dim = query.shape
    kv_heads = key.shape[1]
    # The query heads that share a key/value head are stacked into one (groups * Lq, D) matrix:
    # one product per key/value head, the same products as repeating the keys and values for
    # each query head, without copying them or running a product per query head.
    grouped = query.reshape(batch, kv_heads, heads // kv_heads * length, dim)
    scores = torch.matmul(grouped, key.transpose(2, 3)).view(batch, heads, length, -1)
    scores = scores * dim**-0.5 + mask
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    out = torch.matmul(probs.view(batch, kv_heads, heads // kv_heads * length, -1), value)
    return out.view(batch, heads, length, dim).transpose(1, 2).reshape(batch, length, -1)


def attend_sdpa(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
    """`attend` as one fused kernel (torch's scaled_dot_product_attention, which LeRobot's Gemma
    runs too): the same function up to float rounding; `mask` None when every key is seen."""
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, enable_gqa=key.shape[1] != query.shape[1]
    ).transpose(1, 2)
    return out.reshape(*out.shape[:2], -1)


# --- the PaliGemma and the expert ----------------------------------------------------------------


def paligemma_config(sizes: GemmaSizes, image_size: int) -> Any:
    """transformers' PaliGemmaConfig for these sizes (LeRobot's, with the sizes read from the
    variant instead of fixed)."""
    transformers = require_transformers("π0")
    text = {
        "hidden_size": sizes.width,
        "intermediate_size": sizes.mlp_dim,
        "num_attention_heads": sizes.num_heads,
        "head_dim": sizes.head_dim,
        "num_hidden_layers": sizes.depth,
        "num_key_value_heads": sizes.num_kv_heads,
        "hidden_activation": "gelu_pytorch_tanh",
        "vocab_size": sizes.vocab_size,
        "tie_word_embeddings": False,
    }
    vision = {
        "hidden_size": sizes.vision_width,
        "num_hidden_layers": sizes.vision_depth,
        "intermediate_size": sizes.vision_mlp_dim,
        "num_attention_heads": sizes.vision_heads,
        "patch_size": sizes.patch_size,
        "image_size": image_size,
        "projection_dim": sizes.width,
        "hidden_act": "gelu_pytorch_tanh",
        "vision_use_head": False,
    }
    return transformers.PaliGemmaConfig(
        text_config=text,
        vision_config=vision,
        image_token_index=sizes.vocab_size,
        projection_dim=sizes.width,
        tie_word_embeddings=False,
    )


def build_paligemma(sizes: GemmaSizes, image_size: int) -> nn.Module:
    """transformers' `PaliGemmaForConditionalGeneration` whose Gemma layers are the ones above
    (same parameter names; the rotary table and the causal masks of transformers' GemmaModel go
    unused), with SigLIP's `vision_model` level kept as LeRobot's checkpoints name it."""
    transformers = require_transformers("PaliGemma")
    paligemma = transformers.PaliGemmaForConditionalGeneration(paligemma_config(sizes, image_size))
    tower = paligemma.model.vision_tower
    if not hasattr(tower, "vision_model"):
        # Newer transformers flatten SigLIP's `vision_model` level; LeRobot's checkpoints
        # (transformers 5.5) name it, so it is kept.
        holder = nn.Module()
        holder.vision_model = tower
        paligemma.model.vision_tower = holder
    language = paligemma.model.language_model
    language.layers = GemmaStack(sizes).layers
    language.norm = RMSNorm(sizes.width)
    del language.rotary_emb
    return paligemma


class PaliGemmaParts(nn.Module):
    """What runs the PaliGemma (`self.paligemma`, from `build_paligemma`): its embeddings, its
    precision, and its Gemma layers over a sequence, with or without cached keys and values."""

    paligemma: nn.Module
    width: int
    head_dim: int
    gradient_checkpointing: bool

    @property
    def vlm_layers(self) -> nn.ModuleList:
        layers: nn.ModuleList = self.paligemma.model.language_model.layers
        return layers

    def set_precision(self, precision: str) -> None:
        if precision == "float32":
            self.to(dtype=torch.float32)
            return
        self.to(dtype=torch.bfloat16)
        for name, param in self.named_parameters():
            if any(part in name for part in KEEP_FLOAT32):
                param.data = param.data.to(torch.float32)

    def embed_image(self, image: Tensor) -> Tensor:
        """(B, 3, H, W) in [-1, 1] -> (B, patches, width): SigLIP, then the projector (float32)."""
        dtype = image.dtype
        vision = self.paligemma.model.vision_tower.vision_model
        hidden = vision(pixel_values=image.to(torch.float32)).last_hidden_state
        return self.paligemma.model.multi_modal_projector(hidden).to(dtype)

    def embed_language_tokens(self, tokens: Tensor) -> Tensor:
        weight = self.paligemma.model.language_model.embed_tokens.weight
        scale = torch.tensor(self.width**0.5, dtype=torch.float32).to(weight.dtype)
        return F.embedding(tokens, weight) * scale.to(weight.device)

    def vlm_dtype(self, hidden: Tensor) -> Tensor:
        """`hidden` in the dtype the Gemma layers compute in (bfloat16 weights take bfloat16)."""
        if self.vlm_layers[0].self_attn.q_proj.weight.dtype == torch.bfloat16:
            return hidden.to(torch.bfloat16)
        return hidden

    def run_vlm(
        self,
        hidden: Tensor,
        mask: Tensor,
        positions: Tensor,
        past: KVCache | None = None,
    ) -> tuple[Tensor, KVCache]:
        """`hidden` (B, L, width) through the PaliGemma's layers, attending (additive `mask`,
        (B, 1, L, past + L)) over the `past` keys and values and itself, at `positions` (B, L).
        Returns the last layer's output (before the final norm) and every layer's keys and
        values (after RoPE), the past's followed by these: the cache a next step extends."""
        hidden = self.vlm_dtype(hidden)
        rotary = gemma_rope_tables(positions, self.head_dim, hidden.dtype)
        cache: KVCache = []
        for index, layer in enumerate(self.vlm_layers):
            cached = None if past is None else past[index]
            if self.gradient_checkpointing and self.training:
                hidden, key, value = checkpoint(
                    _vlm_layer, layer, hidden, mask, rotary, cached, use_reentrant=False
                )
            else:
                hidden, key, value = _vlm_layer(layer, hidden, mask, rotary, cached)
            cache.append((key, value))
        return hidden, cache

    # -- the speed path of decoding ------------------------------------------------------------

    def key_value_buffers(self, rows: int, capacity: int, like: Tensor) -> KVBuffers:
        """Empty buffers for every layer's keys and values, `capacity` tokens long."""
        attn = self.vlm_layers[0].self_attn
        kv_heads = attn.k_proj.out_features // attn.head_dim
        shape = (rows, kv_heads, capacity, attn.head_dim)
        return KVBuffers(
            [torch.empty(shape, dtype=like.dtype, device=like.device) for _ in self.vlm_layers],
            [torch.empty(shape, dtype=like.dtype, device=like.device) for _ in self.vlm_layers],
        )

    def run_vlm_into(
        self, hidden: Tensor, mask: Tensor | None, rotary: Rotary, buffers: KVBuffers
    ) -> Tensor:
        """`run_vlm`'s speed path: `hidden` (B, L, width) through the layers, each writing its
        keys and values into `buffers` after the `buffers.length` there already and attending
        over all of them (`attend_sdpa`; `mask` (B, 1, L, length + L) additive, or None when
        every key is seen), at `rotary`'s positions. Returns the last layer's output."""
        hidden = self.vlm_dtype(hidden)
        start, end = buffers.length, buffers.length + hidden.shape[1]
        for layer, keys, values in zip(self.vlm_layers, buffers.keys, buffers.values, strict=True):
            query, key, value, gate = layer.qkv(hidden, None)
            keys[:, :, start:end] = gemma_rotate(key, rotary)
            values[:, :, start:end] = value
            attended = attend_sdpa(
                gemma_rotate(query, rotary), keys[:, :, :end], values[:, :, :end], mask
            )
            hidden = layer.finish(hidden, attended, gate, None)
        buffers.length = end
        return hidden


class PaliGemmaWithExpertModel(VLMWithExpert, PaliGemmaParts):
    """The PaliGemma (`paligemma`) and the action expert (`gemma_expert`), run together."""

    vlm_path, vision_path = "paligemma", "paligemma.model.vision_tower"

    def __init__(self, config: PiConfig, *, adaptive_expert: bool) -> None:
        super().__init__()
        vlm, expert = config.vlm_sizes, config.expert_sizes
        self.paligemma = build_paligemma(vlm, config.image_resolution[0])
        self.gemma_expert = GemmaExpert(expert, expert.width if adaptive_expert else None)
        self.width = vlm.width
        self.head_dim = vlm.head_dim
        self.freeze_vision_encoder = config.freeze_vision_encoder
        self.train_expert_only = config.train_expert_only
        self.gradient_checkpointing = config.gradient_checkpointing
        self.set_precision(config.dtype)
        self.freeze()
        # The lm_heads read nothing here.
        self.paligemma.lm_head.requires_grad_(False)
        self.gemma_expert.lm_head.requires_grad_(False)

    @property
    def expert_layers(self) -> nn.ModuleList:
        layers: nn.ModuleList = self.gemma_expert.model.layers
        return layers

    # -- the layers ---------------------------------------------------------------------------

    def forward(
        self,
        prefix: Tensor,
        suffix: Tensor,
        mask: Tensor,
        positions: Tensor,
        expert_cond: Tensor | None = None,
    ) -> Tensor:
        """Training: the prefix and the suffix through every layer, attending jointly; returns
        the suffix's output, normed. `mask` is additive (B, 1, L, L) over [prefix, suffix]."""
        if self.vlm_layers[0].self_attn.q_proj.weight.dtype == torch.bfloat16:
            prefix, suffix = prefix.to(torch.bfloat16), suffix.to(torch.bfloat16)
        streams = [prefix, suffix]
        conds = [None, expert_cond]
        for vlm_layer, expert_layer in zip(self.vlm_layers, self.expert_layers, strict=True):
            if self.gradient_checkpointing and self.training:
                streams = checkpoint(
                    vlm_layer.joint_step,
                    expert_layer,
                    streams,
                    conds,
                    mask,
                    positions,
                    use_reentrant=False,
                )
            else:
                streams = vlm_layer.joint_step(expert_layer, streams, conds, mask, positions)
        out, _ = self.gemma_expert.model.norm(streams[1], expert_cond)
        return out

    def fill_cache(self, prefix: Tensor, mask: Tensor, positions: Tensor) -> KVCache:
        """Inference: the prefix alone through the PaliGemma's layers; each layer's keys and
        values (after RoPE) for the expert to attend to."""
        return self.run_vlm(prefix, mask, positions)[1]

    def expert_rotary(self, positions: Tensor) -> Rotary:
        """The rotary tables (cos, sin) of `expert_step` at the suffix's positions: the same at
        every Euler step of a chunk, so the sampler computes them once."""
        dtype = self.expert_layers[0].self_attn.q_proj.weight.dtype
        return gemma_rope_tables(
            positions, self.head_dim, torch.bfloat16 if dtype == torch.bfloat16 else torch.float32
        )

    def expert_step(
        self,
        suffix: Tensor,
        cache: KVCache,
        mask: Tensor,
        rotary: Rotary,
        expert_cond: Tensor | None = None,
        modulations: Sequence[Tensor] | None = None,
    ) -> Tensor:
        """Inference: the suffix alone through the expert's layers, attending to the cached
        prefix and itself (`mask`, `rotary`: see `expert_rotary`); returns its output, normed.
        `modulations`, when given, replace the adaptive norms' `dense(expert_cond)`
        (`expert_modulations`, in its order)."""
        hidden = suffix
        if self.expert_layers[0].self_attn.q_proj.weight.dtype == torch.bfloat16:
            hidden = hidden.to(torch.bfloat16)
        mods: Sequence[Tensor | None] = modulations or [None] * (2 * len(cache) + 1)
        for index, (layer, (cached_key, cached_value)) in enumerate(
            zip(self.expert_layers, cache, strict=True)
        ):
            query, key, value, gate = layer.qkv(hidden, expert_cond, mods[2 * index])
            query, key = gemma_rotate(query, rotary), gemma_rotate(key, rotary)
            key = torch.cat([cached_key, key], dim=2)
            value = torch.cat([cached_value, value], dim=2)
            attended = attend(query, key, value, mask)
            hidden = layer.finish(hidden, attended, gate, expert_cond, mods[2 * index + 1])
        out, _ = self.gemma_expert.model.norm(hidden, expert_cond, mods[-1])
        return out

    def expert_modulations(self, cond: Tensor) -> list[Tensor]:
        """The expert's adaptive norms' `dense(cond)` for many conditions at once (N, width) ->
        one (N, 3 * width) per norm: each layer's input and post-attention norms, then the final
        one. Their weights are read once for all the conditions instead of once per step."""
        norms = [
            n
            for layer in self.expert_layers
            for n in (layer.input_layernorm, layer.post_attention_layernorm)
        ]
        norms.append(self.gemma_expert.model.norm)
        return [norm.dense(cond) for norm in norms]


def _vlm_layer(
    layer: GemmaLayer,
    hidden: Tensor,
    mask: Tensor,
    rotary: Rotary,
    past: tuple[Tensor, Tensor] | None,
) -> tuple[Tensor, Tensor, Tensor]:
    """One PaliGemma layer over `hidden`, its keys and values appended to `past`'s."""
    query, key, value, gate = layer.qkv(hidden, None)
    query, key = gemma_rotate(query, rotary), gemma_rotate(key, rotary)
    if past is not None:
        key = torch.cat([past[0], key], dim=2)
        value = torch.cat([past[1], value], dim=2)
    return layer.finish(hidden, attend(query, key, value, mask), gate, None), key, value


def _joint_layer(
    layers: tuple[GemmaLayer, GemmaLayer],
    streams: list[Tensor],
    conds: list[Tensor | None],
    mask: Tensor,
    positions: Tensor,
) -> list[Tensor]:
    """One layer of both models: each stream projects its own queries, keys and values, they
    attend over the concatenation, and each stream finishes with its own layer."""
    parts = [layer.qkv(x, cond) for layer, x, cond in zip(layers, streams, conds)]
    query = torch.cat([p[0] for p in parts], dim=2)
    key = torch.cat([p[1] for p in parts], dim=2)
    value = torch.cat([p[2] for p in parts], dim=2)
    rotary = gemma_rope_tables(positions, query.shape[-1], query.dtype)
    attended = attend(gemma_rotate(query, rotary), gemma_rotate(key, rotary), value, mask)
    outputs, start = [], 0
    for layer, x, part, cond in zip(layers, streams, parts, conds):
        end = start + x.shape[1]
        outputs.append(layer.finish(x, attended[:, start:end], part[3], cond))
        start = end
    return outputs
