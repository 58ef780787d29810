"""SmolVLA (Shukor et al. 2025): a SmolVLM backbone and an action expert, trained by flow matching.

    images ──► SigLIP encoder + connector ─┐
    task tokens ──► token embeddings ──────┼─► prefix ──► VLM text layers ──┐ keys/values
    state ──► state_proj ──────────────────┘                                │ (per layer)
    noise, time ──► action_in_proj + time MLP ──► suffix ──► expert layers ◄┘ ──► velocity

The expert is a narrower copy of the VLM's text model (`expert_width_multiplier`), one expert
layer beside each VLM layer (or every n-th one, `num_expert_layers`). Every
`self_attn_every_n_layers`-th layer the expert's tokens attend jointly with the prefix; the other
layers are cross-attention: the expert reads the VLM layer's keys and values through its own
k/v projections. The prefix attends only to itself, so at inference it runs once and its keys and
values are cached while `num_steps` Euler steps integrate the velocity from noise (t=1) to
actions (t=0).

Module and parameter names are LeRobot 0.6.1's (`model.vlm_with_expert.vlm...`,
`model.state_proj`, ...), so a LeRobot `model.safetensors` loads as it is. The VLM is built
with `transformers`' SmolVLM classes from `vlm_model_name`'s config (a local folder or a Hub id),
or loaded with its pretrained weights when `load_vlm_weights` is set. Loading a checkpoint builds
the model on the meta device and takes the file's tensors as its parameters: no random weights are
made first.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl.adapters.policies.rtc import PrefixGuidance, guided
from rlctl.adapters.policies.tokenizer import TokenizerStep, require_transformers
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies.smolvla import SmolVLAConfig
from rlctl.domain.processors import ProcessorStep
from rlctl.domain.processors.steps.task_text import (
    LANGUAGE_ATTENTION_MASK,
    LANGUAGE_TOKENS,
    NewLineTask,
    TokenizerConfig,
)

OBS_STATE = "observation.state"
ACTION = "action"
EMPTY_CAMERA_PREFIX = "observation.images.empty_camera_"
# Cached keys and values of the prefix, per VLM layer: (keys, values), each (B, L, heads, dim).
KVCache = list[tuple[Tensor, Tensor]]
Rotary = tuple[Tensor, Tensor]


class PrefixCache(list[tuple[Tensor, Tensor]]):
    """The prefix's keys and values per VLM layer, and the expert's projections of them in the
    cross-attention layers (`expert_kv`, by layer), made at the first Euler step and reused."""

    def __init__(self) -> None:
        super().__init__()
        self.expert_kv: dict[int, tuple[Tensor, Tensor]] = {}


class SuffixAttention:
    """`SmolVLMWithExpertModel.suffix_attention`: additive masks and rotary tables of the
    suffix in joint and in cross-attention layers."""

    def __init__(
        self, joint_mask: Tensor, joint_rotary: Rotary, cross_mask: Tensor, cross_rotary: Rotary
    ) -> None:
        self.joint_mask, self.joint_rotary = joint_mask, joint_rotary
        self.cross_mask, self.cross_rotary = cross_mask, cross_rotary


def _project_heads(projection: nn.Module, heads: Tensor) -> Tensor:
    """The expert's k/v projection of the VLM's (B, L, Hkv, D) keys or values, per head again."""
    flat = heads.to(projection.weight.dtype).reshape(*heads.shape[:2], -1)
    out: Tensor = projection(flat)
    return out.view(*heads.shape[:2], -1, heads.shape[-1])


def _encode_in_place(vision: nn.Module, pixels: Tensor) -> Tensor:
    """SmolVLM's vision transformer on all-real patches, as `transformers` runs it with SDPA,
    but the residual stream updated in place and one buffer for every layer's MLP activations
    (fc1, then GELU in place). `transformers` allocates a new 1024 x 3072 activation twice per
    layer; on a CPU each fresh allocation of that size is paged in again, which cost about a
    tenth of the encoder's time (1.6 s -> 1.4 s for two 512 px images on 2 cores)."""
    batch = pixels.shape[0]
    patch = vision.patch_size
    patches = torch.ones(
        (batch, pixels.shape[2] // patch, pixels.shape[3] // patch),
        dtype=torch.bool,
        device=pixels.device,
    )
    hidden = vision.embeddings(pixel_values=pixels, patch_attention_mask=patches).contiguous()
    length, width = hidden.shape[1:]
    flat = hidden.view(batch * length, width)
    layers = vision.encoder.layers
    activations = hidden.new_empty((batch * length, layers[0].mlp.fc1.out_features))
    for layer in layers:
        attn, mlp = layer.self_attn, layer.mlp
        normed = layer.layer_norm1(hidden)
        shape = (batch, length, -1, attn.head_dim)
        query = attn.q_proj(normed).view(shape).transpose(1, 2)
        key = attn.k_proj(normed).view(shape).transpose(1, 2)
        value = attn.v_proj(normed).view(shape).transpose(1, 2)
        attended = F.scaled_dot_product_attention(query, key, value, scale=attn.scale)
        hidden += attn.out_proj(attended.transpose(1, 2).reshape(batch, length, width))
        normed = layer.layer_norm2(hidden).view(batch * length, width)
        torch.addmm(mlp.fc1.bias, normed, mlp.fc1.weight.t(), out=activations)
        torch.ops.aten.gelu_(activations, approximate="tanh")
        flat += mlp.fc2(activations)
    out: Tensor = vision.post_layernorm(hidden)
    return out


# --- small functions, as openpi and LeRobot define them -------------------------------------


def apply_rope(x: Tensor, positions: Tensor, max_wavelength: float = 10_000) -> Tensor:
    """Rotary position embedding of positions (B, L) applied to x (B, L, heads, dim)."""
    d_half = x.shape[-1] // 2
    dtype = x.dtype
    x = x.to(torch.float32)
    freq_exponents = (2.0 / x.shape[-1]) * torch.arange(
        d_half, dtype=torch.float32, device=x.device
    )
    timescale = max_wavelength**freq_exponents
    radians = positions[..., None].to(torch.float32) / timescale[None, None, :]
    radians = radians[..., None, :]
    sin, cos = torch.sin(radians), torch.cos(radians)
    x1, x2 = x.split(d_half, dim=-1)
    out = torch.empty_like(x)
    out[..., :d_half] = x1 * cos - x2 * sin
    out[..., d_half:] = x2 * cos + x1 * sin
    return out.to(dtype)


def rotary_tables(positions: Tensor, head_dim: int, max_wavelength: float = 10_000) -> Rotary:
    """`apply_rope`'s (cos, sin) at positions (B, L), each (B, L, 1, head_dim / 2): a chunk
    computes them once for all the layers and Euler steps that share the positions."""
    d_half = head_dim // 2
    freq_exponents = (2.0 / head_dim) * torch.arange(
        d_half, dtype=torch.float32, device=positions.device
    )
    timescale = max_wavelength**freq_exponents
    radians = positions[..., None].to(torch.float32) / timescale[None, None, :]
    radians = radians[..., None, :]
    return torch.cos(radians), torch.sin(radians)


def rotate(x: Tensor, rotary: Rotary) -> Tensor:
    """`apply_rope(x, positions)` from `rotary_tables(positions)`: the same numbers."""
    cos, sin = rotary
    dtype = x.dtype
    x1, x2 = x.to(torch.float32).split(x.shape[-1] // 2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(dtype)


def additive_mask(allowed: Tensor) -> Tensor:
    """(B, Lq, Lk) booleans -> the (B, 1, Lq, Lk) float32 mask added to attention scores
    (LeRobot replaces the scores of hidden keys by float32's lowest: the same probabilities)."""
    return torch.where(allowed[:, None], 0.0, torch.finfo(torch.float32).min)


def grouped_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor) -> Tensor:
    """LeRobot's eager grouped-query attention (scores in float32) without copying the keys
    and values once per query head: the query heads that share a key/value head are stacked
    and multiplied by it at once.

    (B, Lq, H, D) queries, (B, Lk, Hkv, D) keys and values, an additive (B, 1, Lq, Lk) mask ->
    (B, Lq, H*D)."""
    batch, q_len, heads, dim = query.shape
    k_len, kv_heads = key.shape[1], key.shape[2]
    groups = heads // kv_heads
    # Query head h reads key/value head h // groups, as LeRobot's expansion lays them out.
    q = query.to(torch.float32).transpose(1, 2).reshape(batch, kv_heads, groups * q_len, dim)
    k = key.to(torch.float32).permute(0, 2, 3, 1)
    scores = torch.matmul(q, k).view(batch, heads, q_len, k_len) * dim**-0.5 + mask
    probs = F.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(probs.view(batch, kv_heads, groups * q_len, k_len), value.transpose(1, 2))
    return out.view(batch, heads, q_len, dim).transpose(1, 2).reshape(batch, q_len, heads * dim)


def time_embedding(time: Tensor, dimension: int, min_period: float, max_period: float) -> Tensor:
    """Sine-cosine embedding (B, dimension) of the flow-matching time (B,)."""
    if dimension % 2:
        raise ValueError(f"dimension ({dimension}) must be even")
    # float64 where the device has it (not on Apple's MPS), as LeRobot computes it.
    dtype = torch.float32 if time.device.type == "mps" else torch.float64
    fraction = torch.linspace(0.0, 1.0, dimension // 2, dtype=dtype, device=time.device)
    period = min_period * (max_period / min_period) ** fraction
    sin_input = (1.0 / period * 2 * math.pi)[None, :] * time[:, None]
    return torch.cat([torch.sin(sin_input), torch.cos(sin_input)], dim=1)


def attention_masks_2d(pad_masks: Tensor, att_masks: Tensor) -> Tensor:
    """(B, N, N) booleans: token i sees token j when j is real and its block starts no later.

    `att_masks` (B, N) is 1 where a new block starts: 0 0 0 1 1 is prefix-LM attention (the first
    three tokens see each other, the last two are causal)."""
    cumsum = torch.cumsum(att_masks, dim=1)
    blocks = cumsum[:, None, :] <= cumsum[:, :, None]
    return blocks & (pad_masks[:, None, :] * pad_masks[:, :, None])


def pad_vector(vector: Tensor, new_dim: int) -> Tensor:
    """Zero-pad the last dimension to `new_dim` (longer vectors are left as they are)."""
    if vector.shape[-1] >= new_dim:
        return vector
    return F.pad(vector, (0, new_dim - vector.shape[-1]))


def resize_with_pad(img: Tensor, height: int, width: int, pad_value: float = 0.0) -> Tensor:
    """Resize (B, C, H, W) to fit (height, width) keeping the aspect ratio; pad top and left."""
    current_height, current_width = img.shape[2:]
    if (current_height, current_width) == (height, width):
        return img
    ratio = max(current_width / width, current_height / height)
    resized_height, resized_width = int(current_height / ratio), int(current_width / ratio)
    resized = F.interpolate(
        img, size=(resized_height, resized_width), mode="bilinear", align_corners=False
    )
    pad_height, pad_width = max(0, height - resized_height), max(0, width - resized_width)
    return F.pad(resized, (pad_width, 0, pad_height, 0), value=pad_value)


def expert_intermediate_size(hidden: int, multiplier: int = 4, multiple_of: int = 256) -> int:
    hidden = int(multiplier * int(2 * hidden / 3))
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


# --- the VLM and its action expert -------------------------------------------------------------


def vlm_config(name: str) -> Any:
    transformers = require_transformers("SmolVLA")
    try:
        return transformers.AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"cannot read the VLM's config: {err}",
            where="policy.vlm_model_name",
            hint="give a SmolVLM folder (config.json, tokenizer) or a Hub repository id such as "
            "HuggingFaceTB/SmolVLM2-500M-Video-Instruct",
        ) from err


class SmolVLMWithExpertModel(nn.Module):
    """The SmolVLM (`vlm`) and the action expert (`lm_expert`), run layer by layer together."""

    def __init__(self, config: SmolVLAConfig, *, load_vlm_weights: bool) -> None:
        super().__init__()
        transformers = require_transformers("SmolVLA")
        if load_vlm_weights:
            self.vlm = transformers.AutoModelForImageTextToText.from_pretrained(
                config.vlm_model_name, dtype=torch.bfloat16
            )
            vlm_cfg = self.vlm.config
        elif config.load_vlm_weights:
            # About to receive a checkpoint of a SmolVLA on a pretrained VLM: built with the
            # dtypes loading the pretrained VLM gives (bfloat16, and so the expert copied from it).
            vlm_cfg = vlm_config(config.vlm_model_name)
            self.vlm = transformers.AutoModelForImageTextToText.from_config(
                vlm_cfg, dtype=torch.bfloat16
            )
        else:
            vlm_cfg = vlm_config(config.vlm_model_name)
            self.vlm = transformers.SmolVLMForConditionalGeneration(vlm_cfg)
        text_model = self.vlm.model.text_model
        if config.num_vlm_layers > 0:
            text_model.layers = text_model.layers[: config.num_vlm_layers]
        self.num_vlm_layers = len(text_model.layers)
        self.config = vlm_cfg

        text_cfg = vlm_cfg.text_config
        expert_cfg = copy.deepcopy(text_cfg)
        expert_cfg.hidden_size = int(text_cfg.hidden_size * config.expert_width_multiplier)
        expert_cfg.intermediate_size = expert_intermediate_size(expert_cfg.hidden_size)
        expert_cfg.num_hidden_layers = self.num_vlm_layers
        if config.num_expert_layers > 0:
            if self.num_vlm_layers % config.num_expert_layers:
                raise ConfigError(
                    f"the VLM's {self.num_vlm_layers} layers are not a multiple of "
                    f"num_expert_layers ({config.num_expert_layers})",
                    where="policy.num_expert_layers",
                )
            expert_cfg.num_hidden_layers = config.num_expert_layers
        self.lm_expert = transformers.AutoModel.from_config(expert_cfg)
        self.num_expert_layers = len(self.lm_expert.layers)
        self.self_attn_every_n_layers = config.self_attn_every_n_layers
        self.attention_mode = config.attention_mode
        if "cross" in self.attention_mode:
            # In cross-attention layers the expert projects the VLM's keys and values.
            vlm_kv = text_cfg.num_key_value_heads * text_cfg.head_dim
            expert_kv = expert_cfg.num_key_value_heads * expert_cfg.head_dim
            for index, layer in enumerate(self.lm_expert.layers):
                if self._joint_layer(index):
                    continue
                bias = expert_cfg.attention_bias
                layer.self_attn.k_proj = nn.Linear(vlm_kv, expert_kv, bias=bias)
                layer.self_attn.v_proj = nn.Linear(vlm_kv, expert_kv, bias=bias)
        # The expert reads no tokens; and both text models' rotary tables go unused (the layers
        # are driven here with SmolVLA's own RoPE), so neither is kept.
        self.lm_expert.embed_tokens = None
        del self.lm_expert.rotary_emb
        del text_model.rotary_emb

        self.num_attention_heads = text_cfg.num_attention_heads
        self.num_key_value_heads = text_cfg.num_key_value_heads
        self.head_dim = text_cfg.head_dim
        self.expert_hidden_size = expert_cfg.hidden_size
        self.freeze_vision_encoder = config.freeze_vision_encoder
        self.train_expert_only = config.train_expert_only
        self._set_requires_grad()
        # Which expert layer runs beside each VLM layer (None: the suffix passes unchanged).
        every = self.num_vlm_layers // self.num_expert_layers
        self._expert_at = [
            None if every > 0 and i > 0 and i % every else (i // every if every > 0 else i)
            for i in range(self.num_vlm_layers)
        ]

    @property
    def text_model(self) -> nn.Module:
        return self.vlm.model.text_model

    def _joint_layer(self, index: int) -> bool:
        every = self.self_attn_every_n_layers
        return every > 0 and index % every == 0

    def _set_requires_grad(self) -> None:
        vision = self.vlm.model.vision_model
        if self.freeze_vision_encoder:
            vision.eval()
            vision.requires_grad_(False)
        if self.train_expert_only:
            self.vlm.eval()
            self.vlm.requires_grad_(False)
        else:
            # Parameters that get no gradient (the last layer's outputs feed nothing) are
            # frozen, as LeRobot does, so distributed training finds no unused parameter.
            last = [self.num_vlm_layers - 1]
            if (
                self.num_vlm_layers != self.num_expert_layers
                and self.num_vlm_layers % self.num_expert_layers == 0
            ):
                last.append(self.num_vlm_layers - 2)
            frozen = ["lm_head", "text_model.norm.weight"]
            frozen += [f"text_model.layers.{layer}." for layer in last]
            for name, param in self.vlm.named_parameters():
                if any(pattern in name for pattern in frozen):
                    param.requires_grad = False

    def train(self, mode: bool = True) -> SmolVLMWithExpertModel:
        super().train(mode)
        if self.freeze_vision_encoder:
            self.vlm.model.vision_model.eval()
        if self.train_expert_only:
            self.vlm.eval()
        return self

    def embed_image(self, image: Tensor, *, reuse_buffers: bool = False) -> Tensor:
        """The SigLIP encoder and the connector's tokens of (B, C, H, W) images.

        `reuse_buffers` (inference, without gradients): the encoder's layers run here in place
        (`_encode_in_place`), the same kernels and the same numbers as `transformers`'."""
        vision = self.vlm.model.vision_model
        pixels = image.to(dtype=vision.dtype)
        in_place = (
            reuse_buffers
            and not torch.is_grad_enabled()
            and vision.config._attn_implementation == "sdpa"
        )
        hidden = _encode_in_place(vision, pixels) if in_place else None
        if hidden is None:
            hidden = vision(pixel_values=pixels).last_hidden_state
        return self.vlm.model.connector(hidden)

    def embed_language_tokens(self, tokens: Tensor) -> Tensor:
        return self.text_model.get_input_embeddings()(tokens)

    # -- attention ----------------------------------------------------------------------------

    def attention(self, mask: Tensor, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """Eager grouped-query attention, scores in float32.

        (B, Lq, H, D) queries, (B, Lk, Hkv, D) keys and values -> (B, Lq, H*D)."""
        batch, length = key.shape[:2]
        groups = self.num_attention_heads // self.num_key_value_heads
        shape = (batch, length, self.num_key_value_heads * groups, self.head_dim)
        key = key[:, :, :, None, :].expand(*key.shape[:3], groups, self.head_dim).reshape(shape)
        value = value[:, :, :, None, :].expand(*value.shape[:3], groups, self.head_dim)
        value = value.reshape(shape)
        query = query.to(torch.float32).transpose(1, 2)
        key = key.to(torch.float32).transpose(1, 2)
        weights = torch.matmul(query, key.transpose(2, 3)) * self.head_dim**-0.5
        weights = torch.where(mask[:, None, :, :], weights, torch.finfo(weights.dtype).min)
        probs = F.softmax(weights, dim=-1).to(value.dtype)
        out = torch.matmul(probs, value.permute(0, 2, 1, 3)).permute(0, 2, 1, 3)
        return out.reshape(batch, -1, self.num_attention_heads * self.head_dim)

    @staticmethod
    def _qkv(layer: nn.Module, hidden: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        attn = layer.self_attn
        hidden = layer.input_layernorm(hidden).to(attn.q_proj.weight.dtype)
        shape = (*hidden.shape[:-1], -1, attn.head_dim)
        return (
            attn.q_proj(hidden).view(shape),
            attn.k_proj(hidden).view(shape),
            attn.v_proj(hidden).view(shape),
        )

    def _joint_attention(
        self,
        layers: list[nn.Module | None],
        embeds: list[Tensor | None],
        index: int,
        positions: Tensor,
        mask: Tensor,
        cache: KVCache | None,
        fill_cache: bool,
    ) -> list[Tensor]:
        """The prefix and the suffix attend over both (and over the cached prefix)."""
        queries, keys, values = [], [], []
        for layer, hidden in zip(layers, embeds):
            if hidden is None or layer is None:
                continue
            query, key, value = self._qkv(layer, hidden)
            queries.append(query)
            keys.append(key)
            values.append(value)
        if not queries:  # the suffix alone, beside a VLM layer without an expert layer
            return []
        query, key, value = torch.cat(queries, 1), torch.cat(keys, 1), torch.cat(values, 1)
        length = query.shape[1]
        if length < positions.shape[1]:
            positions, mask = positions[:, :length], mask[:, :length, :length]
        query, key = apply_rope(query, positions), apply_rope(key, positions)
        if cache is not None:
            if fill_cache:
                cache.append((key, value))
            else:
                cached_key, cached_value = cache[index]
                key, value = torch.cat([cached_key, key], 1), torch.cat([cached_value, value], 1)
        return [self.attention(mask, query, key, value)]

    def _cross_attention(
        self,
        layers: list[nn.Module | None],
        embeds: list[Tensor | None],
        index: int,
        positions: Tensor,
        mask: Tensor,
        cache: KVCache | None,
    ) -> list[Tensor | None]:
        """The prefix attends to itself; the expert's queries read the VLM layer's keys/values."""
        outputs: list[Tensor | None] = []
        prefix, suffix = embeds
        if prefix is not None:
            length = prefix.shape[1]
            prefix_positions, expert_positions = positions[:, :length], positions[:, length:]
            query, key, value = self._qkv(layers[0], prefix)
            query, key = apply_rope(query, prefix_positions), apply_rope(key, prefix_positions)
            outputs.append(self.attention(mask[:, :length, :length], query, key, value))
        else:
            if cache is None:
                raise ValueError("cross-attention without the prefix needs its cached keys")
            expert_positions = positions
            key, value = cache[index]
        expert = layers[1]
        if expert is None or suffix is None:
            outputs.append(None)
            return outputs
        attn = expert.self_attn
        hidden = expert.input_layernorm(suffix).to(attn.q_proj.weight.dtype)
        query = attn.q_proj(hidden).view(*hidden.shape[:-1], -1, attn.head_dim)
        reused = cache.expert_kv if isinstance(cache, PrefixCache) and prefix is None else None
        if reused is not None and index in reused:
            expert_key, expert_value = reused[index]
        else:
            flat_key = key.to(attn.k_proj.weight.dtype).reshape(*key.shape[:2], -1)
            flat_value = value.to(attn.v_proj.weight.dtype).reshape(*value.shape[:2], -1)
            expert_key = attn.k_proj(flat_key).view(*flat_key.shape[:-1], -1, attn.head_dim)
            expert_value = attn.v_proj(flat_value).view(*flat_value.shape[:-1], -1, attn.head_dim)
            if reused is not None:
                # The same at every Euler step (LeRobot projects them again each time); no
                # gradient flows to the noise through them, so they are kept detached.
                reused[index] = (expert_key.detach(), expert_value.detach())
        expert_positions = expert_positions - expert_positions.min(dim=1, keepdim=True).values
        expert_mask = mask[:, -suffix.shape[1] :, : expert_key.shape[1]]
        query = apply_rope(query, expert_positions)
        outputs.append(self.attention(expert_mask, query, expert_key, expert_value))
        return outputs

    def forward(
        self,
        embeds: list[Tensor | None],
        mask: Tensor,
        positions: Tensor,
        cache: KVCache | None = None,
        fill_cache: bool = False,
    ) -> list[Tensor | None]:
        """Run [prefix, suffix] (either may be None) through every layer; returns them normed.

        `fill_cache` (prefix only) stores each layer's keys and values in `cache`; a filled
        `cache` given with the suffix alone is read instead of the prefix."""
        models = [self.text_model, self.lm_expert]
        for index in range(self.num_vlm_layers):
            expert_index = self._expert_at[index]
            layers = [
                self.text_model.layers[index],
                None if expert_index is None else self.lm_expert.layers[expert_index],
            ]
            if fill_cache or "cross" not in self.attention_mode or self._joint_layer(index):
                attended: list[Tensor | None] = list(
                    self._joint_attention(layers, embeds, index, positions, mask, cache, fill_cache)
                )
            else:
                attended = self._cross_attention(layers, embeds, index, positions, mask, cache)
            outputs: list[Tensor | None] = []
            start = 0
            for stream, (layer, hidden) in enumerate(zip(layers, embeds)):
                if hidden is None:
                    outputs.append(None)
                    continue
                if layer is None:
                    outputs.append(hidden)
                    continue
                attention = attended[stream] if stream < len(attended) else attended[0]
                assert attention is not None
                end = start + hidden.shape[1]
                o_proj = layer.self_attn.o_proj
                out = o_proj(attention[:, start:end].to(o_proj.weight.dtype))
                out += hidden  # in place: the stream takes the layer's dtype, as in LeRobot
                hidden = out
                hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
                outputs.append(hidden)
                start = end if len(attended) == 1 else 0
            embeds = outputs
        return [
            None if hidden is None else model.norm(hidden) for model, hidden in zip(models, embeds)
        ]

    # -- inference: the prefix once, then the expert alone at each Euler step ------------------

    def _attends_jointly(self, index: int) -> bool:
        return "cross" not in self.attention_mode or self._joint_layer(index)

    def fill_cache(self, prefix: Tensor, mask: Tensor, positions: Tensor) -> PrefixCache:
        """The prefix alone through the VLM's layers (`mask` additive); per layer, what the
        expert reads of it: the keys (after RoPE) and values in joint layers, the expert's own
        projections of them in cross-attention layers (the same at every Euler step).

        The last layer's keys and values are all that is read of it: its queries, attention
        and MLP, which LeRobot runs, feed nothing."""
        rotary = rotary_tables(positions, self.head_dim)
        cache = PrefixCache()
        hidden = prefix
        last = self.num_vlm_layers - 1
        for index, layer in enumerate(self.text_model.layers):
            attn = layer.self_attn
            normed = layer.input_layernorm(hidden).to(attn.q_proj.weight.dtype)
            shape = (*normed.shape[:-1], -1, attn.head_dim)
            key = rotate(attn.k_proj(normed).view(shape), rotary)
            value = attn.v_proj(normed).view(shape)
            cache.append((key, value))
            expert_index = self._expert_at[index]
            if expert_index is not None and not self._attends_jointly(index):
                expert_attn = self.lm_expert.layers[expert_index].self_attn
                cache.expert_kv[index] = (
                    _project_heads(expert_attn.k_proj, key),
                    _project_heads(expert_attn.v_proj, value),
                )
            if index == last:
                break
            query = rotate(attn.q_proj(normed).view(shape), rotary)
            attended = grouped_attention(query, key, value, mask)
            out = attn.o_proj(attended.to(attn.o_proj.weight.dtype))
            out += hidden
            hidden = out + layer.mlp(layer.post_attention_layernorm(out))
        return cache

    def suffix_attention(self, prefix_pad: Tensor, suffix_len: int) -> SuffixAttention:
        """What the suffix attends to and its rotary tables, in joint layers (the prefix, then
        the causal chunk, at positions after the prefix's) and in cross-attention layers (the
        prefix, the chunk's positions from 0): the same at every Euler step of a chunk."""
        batch, prefix_len = prefix_pad.shape
        device = prefix_pad.device
        causal = torch.ones(suffix_len, suffix_len, dtype=torch.bool, device=device).tril()
        sees_prefix = prefix_pad[:, None, :].expand(batch, suffix_len, prefix_len)
        joint = torch.cat([sees_prefix, causal.expand(batch, -1, -1)], dim=2)
        steps = torch.arange(suffix_len, device=device)[None, :]
        joint_positions = prefix_pad.sum(dim=-1)[:, None] + steps
        return SuffixAttention(
            joint_mask=additive_mask(joint),
            joint_rotary=rotary_tables(joint_positions, self.head_dim),
            cross_mask=additive_mask(sees_prefix),
            cross_rotary=rotary_tables(steps.expand(batch, -1), self.head_dim),
        )

    def expert_step(self, suffix: Tensor, cache: PrefixCache, plan: SuffixAttention) -> Tensor:
        """The suffix alone through the expert's layers over the cached prefix; returns its
        output, normed."""
        hidden = suffix
        for index in range(self.num_vlm_layers):
            expert_index = self._expert_at[index]
            if expert_index is None:
                continue
            layer = self.lm_expert.layers[expert_index]
            attn = layer.self_attn
            normed = layer.input_layernorm(hidden).to(attn.q_proj.weight.dtype)
            shape = (*normed.shape[:-1], -1, attn.head_dim)
            query = attn.q_proj(normed).view(shape)
            if self._attends_jointly(index):
                query = rotate(query, plan.joint_rotary)
                key = rotate(attn.k_proj(normed).view(shape), plan.joint_rotary)
                value = attn.v_proj(normed).view(shape)
                cached_key, cached_value = cache[index]
                key = torch.cat([cached_key, key], dim=1)
                value = torch.cat([cached_value, value], dim=1)
                attended = grouped_attention(query, key, value, plan.joint_mask)
            else:
                key, value = cache.expert_kv[index]
                query = rotate(query, plan.cross_rotary)
                attended = grouped_attention(query, key, value, plan.cross_mask)
            out = attn.o_proj(attended.to(attn.o_proj.weight.dtype))
            out += hidden
            hidden = out + layer.mlp(layer.post_attention_layernorm(out))
        normed_out: Tensor = self.lm_expert.norm(hidden)
        return normed_out


# --- flow matching over the VLM and the expert -------------------------------------------------


class VLAFlowMatching(nn.Module):
    """The prefix (images, task, state) and the suffix (noisy actions at a time) embedded, the
    velocity predicted, the loss of training and the Euler integration of inference."""

    # Inference's speed paths, which give LeRobot's chunks up to float rounding (about 1e-6):
    # the prefix without what no token attends to, the VLM's last layer reduced to the keys and
    # values the expert reads, the expert's projections of the prefix, its masks and rotary
    # tables made once per chunk instead of once per Euler step, grouped-query attention
    # without copies of the keys and values, the vision encoder's layers in place (see
    # `_encode_in_place`). False runs LeRobot's arithmetic step for step.
    speed_paths = True

    def __init__(self, config: SmolVLAConfig, *, load_vlm_weights: bool) -> None:
        super().__init__()
        self.config = config
        self.vlm_with_expert = SmolVLMWithExpertModel(config, load_vlm_weights=load_vlm_weights)
        vlm_hidden = self.vlm_with_expert.config.text_config.hidden_size
        expert_hidden = self.vlm_with_expert.expert_hidden_size
        self.state_proj = nn.Linear(config.max_state_dim, vlm_hidden)
        self.action_in_proj = nn.Linear(config.max_action_dim, expert_hidden)
        self.action_out_proj = nn.Linear(expert_hidden, config.max_action_dim)
        self.action_time_mlp_in = nn.Linear(expert_hidden * 2, expert_hidden)
        self.action_time_mlp_out = nn.Linear(expert_hidden, expert_hidden)
        self.state_proj.requires_grad_(config.train_state_proj)
        self._image_tokens: tuple[list[int], list[int]] | None = None

    def _special_image_tokens(self) -> tuple[list[int], list[int]]:
        """(start, end) token ids around each image: SmolVLM's fake-image and global-image
        tokens, read from the VLM's tokenizer (only with `add_image_special_tokens`)."""
        if self._image_tokens is None:
            transformers = require_transformers("SmolVLA")
            tokenizer = transformers.AutoTokenizer.from_pretrained(self.config.vlm_model_name)
            fake, global_image = tokenizer.fake_image_token_id, tokenizer.global_image_token_id
            self._image_tokens = ([fake, global_image], [fake])
        return self._image_tokens

    def _token_embeds(self, ids: list[int], batch: int, device: torch.device) -> Tensor:
        tokens = torch.tensor(ids, dtype=torch.long, device=device)
        return self.vlm_with_expert.embed_language_tokens(tokens)[None].expand(batch, -1, -1)

    def embed_prefix(
        self,
        images: list[Tensor],
        image_masks: list[Tensor],
        lang_tokens: Tensor,
        lang_masks: Tensor,
        state: Tensor,
        *,
        reuse_buffers: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor]:
        embeds, pad_masks, blocks = [], [], []
        for image, image_mask in zip(images, image_masks):
            batch = image.shape[0]
            if self.config.add_image_special_tokens:
                start_ids, _ = self._special_image_tokens()
                start = self._token_embeds(start_ids, batch, image.device)
                embeds.append(start)
                pad_masks.append(torch.ones(start.shape[:2], dtype=torch.bool, device=image.device))
                blocks += [0] * start.shape[1]
            image_embeds = self.vlm_with_expert.embed_image(image, reuse_buffers=reuse_buffers)
            scale = torch.tensor(
                image_embeds.shape[-1] ** 0.5, dtype=image_embeds.dtype, device=image.device
            )
            image_embeds = image_embeds * scale
            embeds.append(image_embeds)
            pad_masks.append(image_mask[:, None].expand(batch, image_embeds.shape[1]))
            blocks += [0] * image_embeds.shape[1]
            if self.config.add_image_special_tokens:
                _, end_ids = self._special_image_tokens()
                end = self._token_embeds(end_ids, batch, image.device)
                embeds.append(end)
                pad_masks.append(torch.ones(end.shape[:2], dtype=torch.bool, device=image.device))
                blocks += [0] * end.shape[1]
        lang_embeds = self.vlm_with_expert.embed_language_tokens(lang_tokens)
        embeds.append(lang_embeds * math.sqrt(lang_embeds.shape[-1]))
        pad_masks.append(lang_masks)
        blocks += [0] * lang_embeds.shape[1]

        state_embeds = self.state_proj(state)
        state_embeds = state_embeds[:, None, :] if state_embeds.ndim == 2 else state_embeds
        embeds.append(state_embeds)
        batch, state_len = state_embeds.shape[:2]
        pad_masks.append(torch.ones(batch, state_len, dtype=torch.bool, device=state.device))
        blocks += [1] * state_len  # the state starts a block: the language cannot see it

        embeds_t = torch.cat(embeds, dim=1)
        pad_t = torch.cat(pad_masks, dim=1)
        blocks_t = torch.tensor(blocks, dtype=torch.bool, device=pad_t.device)[None, :]
        if pad_t.shape[1] < self.config.prefix_length:
            embeds_t = _pad_sequence(embeds_t, self.config.prefix_length)
            pad_t = _pad_sequence(pad_t, self.config.prefix_length)
            blocks_t = _pad_sequence(blocks_t, self.config.prefix_length)
        return embeds_t, pad_t, blocks_t.expand(batch, -1)

    def embed_suffix(self, noisy_actions: Tensor, time: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        action_embeds = self.action_in_proj(noisy_actions)
        batch = action_embeds.shape[0]
        time_embeds = time_embedding(
            time,
            self.vlm_with_expert.expert_hidden_size,
            self.config.min_period,
            self.config.max_period,
        ).type(action_embeds.dtype)
        time_embeds = time_embeds[:, None, :].expand_as(action_embeds)
        hidden = self.action_time_mlp_in(torch.cat([action_embeds, time_embeds], dim=2))
        hidden = self.action_time_mlp_out(F.silu(hidden))
        pad_masks = torch.ones(hidden.shape[:2], dtype=torch.bool, device=hidden.device)
        # Each action starts its own block: the chunk is causal.
        blocks = torch.ones(self.config.chunk_size, dtype=hidden.dtype, device=hidden.device)
        return hidden, pad_masks, blocks[None, :].expand(batch, -1)

    def velocity(self, suffix_out: Tensor) -> Tensor:
        return self.action_out_proj(suffix_out[:, -self.config.chunk_size :].to(torch.float32))

    def forward(
        self,
        images: list[Tensor],
        image_masks: list[Tensor],
        lang_tokens: Tensor,
        lang_masks: Tensor,
        state: Tensor,
        actions: Tensor,
        noise: Tensor | None = None,
        time: Tensor | None = None,
    ) -> Tensor:
        """Per-element squared error (B, chunk, max_action_dim) of the predicted velocity."""
        if noise is None:
            noise = torch.randn(actions.shape, dtype=torch.float32, device=actions.device)
        if time is None:
            time = sample_time(actions.shape[0], actions.device)
        t = time[:, None, None]
        x_t = t * noise + (1 - t) * actions
        target = noise - actions
        prefix, prefix_pad, prefix_blocks = self.embed_prefix(
            images, image_masks, lang_tokens, lang_masks, state
        )
        suffix, suffix_pad, suffix_blocks = self.embed_suffix(x_t, time)
        pad_masks = torch.cat([prefix_pad, suffix_pad], dim=1)
        blocks = torch.cat([prefix_blocks, suffix_blocks], dim=1)
        mask = attention_masks_2d(pad_masks, blocks)
        positions = torch.cumsum(pad_masks, dim=1) - 1
        _, suffix_out = self.vlm_with_expert([prefix, suffix], mask, positions)
        assert suffix_out is not None
        return F.mse_loss(target, self.velocity(suffix_out), reduction="none")

    def sample_actions(
        self,
        images: list[Tensor],
        image_masks: list[Tensor],
        lang_tokens: Tensor,
        lang_masks: Tensor,
        state: Tensor,
        noise: Tensor | None = None,
        guidance: PrefixGuidance | None = None,
    ) -> Tensor:
        """Integrate the velocity from noise (t=1) to actions (t=0) in `num_steps` Euler steps;
        with `guidance`, towards the previous chunk's leftover (real-time chunking)."""
        batch, device = state.shape[0], state.device
        if noise is None:
            shape = (batch, self.config.chunk_size, self.config.max_action_dim)
            noise = torch.randn(shape, dtype=torch.float32, device=device)
        if self.speed_paths:
            velocity = self.velocity_field(images, image_masks, lang_tokens, lang_masks, state)
        else:
            prefix, prefix_pad, prefix_blocks = self.embed_prefix(
                images, image_masks, lang_tokens, lang_masks, state
            )
            prefix_mask = attention_masks_2d(prefix_pad, prefix_blocks)
            prefix_positions = torch.cumsum(prefix_pad, dim=1) - 1
            cache = PrefixCache()
            self.vlm_with_expert(
                [prefix, None], prefix_mask, prefix_positions, cache=cache, fill_cache=True
            )
            velocity = partial(self.denoise_step, prefix_pad, cache)
        velocity = guided(velocity, guidance)
        dt = -1.0 / self.config.num_steps
        x_t = noise
        for step in range(self.config.num_steps):
            time = torch.tensor(1.0 + step * dt, dtype=torch.float32, device=device).expand(batch)
            x_t = x_t + dt * velocity(x_t, time)
        return x_t

    def velocity_field(
        self,
        images: list[Tensor],
        image_masks: list[Tensor],
        lang_tokens: Tensor,
        lang_masks: Tensor,
        state: Tensor,
    ) -> Callable[[Tensor, Tensor], Tensor]:
        """The observation's velocity field `velocity(x_t, time)` on the speed paths: the
        prefix runs once here, without what no token attends to, and each call runs the expert
        alone over what it reads of the prefix."""
        kept = [(image, mask) for image, mask in zip(images, image_masks) if bool(mask.any())]
        if kept and not self.config.add_image_special_tokens:
            # Cameras masked out in every row (`empty_cameras` placeholders) go; not with
            # special tokens, which are seen even around a placeholder.
            images, image_masks = [image for image, _ in kept], [mask for _, mask in kept]
        prefix, prefix_pad, prefix_blocks = self.embed_prefix(
            images, image_masks, lang_tokens, lang_masks, state, reuse_buffers=True
        )
        seen = prefix_pad.any(dim=0)
        if not bool(seen.all()):  # padding in every row (the prompt's, `prefix_length`'s)
            prefix, prefix_pad, prefix_blocks = (
                prefix[:, seen],
                prefix_pad[:, seen],
                prefix_blocks[:, seen],
            )
        experts = self.vlm_with_expert
        mask = additive_mask(attention_masks_2d(prefix_pad, prefix_blocks))
        cache = experts.fill_cache(prefix, mask, torch.cumsum(prefix_pad, dim=1) - 1)
        plan = experts.suffix_attention(prefix_pad, self.config.chunk_size)

        def velocity(x_t: Tensor, time: Tensor) -> Tensor:
            suffix, _, _ = self.embed_suffix(x_t, time)
            return self.velocity(experts.expert_step(suffix, cache, plan))

        return velocity

    def denoise_step(self, prefix_pad: Tensor, cache: KVCache, x_t: Tensor, time: Tensor) -> Tensor:
        suffix, suffix_pad, suffix_blocks = self.embed_suffix(x_t, time)
        batch, suffix_len = suffix_pad.shape
        prefix_len = prefix_pad.shape[1]
        prefix_mask = prefix_pad[:, None, :].expand(batch, suffix_len, prefix_len)
        mask = torch.cat([prefix_mask, attention_masks_2d(suffix_pad, suffix_blocks)], dim=2)
        positions = prefix_pad.sum(dim=-1)[:, None] + torch.cumsum(suffix_pad, dim=1) - 1
        _, suffix_out = self.vlm_with_expert([None, suffix], mask, positions, cache=cache)
        assert suffix_out is not None
        return self.velocity(suffix_out)


def sample_time(batch: int, device: torch.device) -> Tensor:
    """Flow-matching times from Beta(1.5, 1) scaled into [0.001, 1] (openpi's convention)."""
    beta = torch.distributions.Beta(torch.tensor(1.5), torch.tensor(1.0))
    return (beta.sample((batch,)).to(device) * 0.999 + 0.001).to(torch.float32)


def _pad_sequence(tensor: Tensor, length: int) -> Tensor:
    padded = tensor.new_zeros((tensor.shape[0], length, *tensor.shape[2:]))
    padded[:, : tensor.shape[1]] = tensor
    return padded


# --- the policy ----------------------------------------------------------------------------


class SmolVLAPolicy(PolicyModel):
    """SmolVLA on normalised batches; the task arrives tokenised (`observation.language.*`)."""

    config_class = SmolVLAConfig

    def __init__(self, config: SmolVLAConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        # Without backbone weights the model is about to be loaded from a checkpoint: build
        # it on the meta device (no memory, no random init); load_state_dict assigns the file's
        # tensors.
        building = nullcontext() if load_backbone_weights else torch.device("meta")
        with building:
            self.model = VLAFlowMatching(
                config, load_vlm_weights=config.load_vlm_weights and load_backbone_weights
            )
        self.config: SmolVLAConfig = config

    @classmethod
    def preprocessor_steps(cls, config: SmolVLAConfig) -> list[ProcessorStep]:
        """LeRobot's SmolVLA steps between batching and the device move: the task ends with a
        newline, then the VLM's tokenizer reads it."""
        tokenizer = TokenizerStep(
            TokenizerConfig(
                tokenizer_name=config.vlm_model_name,
                max_length=config.tokenizer_max_length,
                padding=config.pad_language_to,
                padding_side="right",
            )
        )
        return [NewLineTask(), tokenizer]

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        on_meta = any(p.is_meta for p in self.parameters())
        dtypes = {name: t.dtype for name, t in self.state_dict().items()}
        result = super().load_state_dict(state_dict, strict=strict, assign=assign or on_meta)
        if on_meta:
            self._after_meta_load(dtypes)
        return result

    def _after_meta_load(self, dtypes: Mapping[str, torch.dtype]) -> None:
        left = [name for name, t in self.state_dict().items() if t.is_meta]
        if left:
            raise ConfigError(
                f"the checkpoint left {len(left)} SmolVLA tensors unset: {', '.join(left[:8])}",
                where="model.safetensors",
            )
        # Assigned tensors come in the file's dtype; each takes the one the model was built
        # with (a pretrained VLM runs in bfloat16, as LeRobot loads it). requires_grad is the
        # module's (assign keeps it), so frozen parts stay frozen.
        for name, param in self.named_parameters():
            if param.dtype != dtypes[name]:
                param.data = param.data.to(dtypes[name])

    @property
    def dtype(self) -> torch.dtype:
        # Inputs take the dtype of the projections around the VLM (float32), not the VLM's.
        return self.model.state_proj.weight.dtype

    def _inputs(self, batch: Batch) -> tuple[list[Tensor], list[Tensor], Tensor, Tensor, Tensor]:
        images, masks = self.prepare_images(batch)
        state = batch[OBS_STATE]
        state = state[:, -1, :] if state.ndim > 2 else state
        state = pad_vector(state, self.config.max_state_dim)
        return images, masks, batch[LANGUAGE_TOKENS], batch[LANGUAGE_ATTENTION_MASK], state

    def prepare_images(self, batch: Batch) -> tuple[list[Tensor], list[Tensor]]:
        """Each camera resized with padding and scaled to [-1, 1] (SigLIP's range); cameras the
        batch lacks become black images masked out, up to `empty_cameras` of them."""
        keys = list(self.config.image_features)
        keys += [
            key
            for key in (f"{EMPTY_CAMERA_PREFIX}{i}" for i in range(self.config.empty_cameras))
            if key not in keys
        ]
        present = [key for key in keys if key in batch]
        missing = [key for key in keys if key not in batch]
        if not present:
            raise ConfigError(
                f"the batch has none of SmolVLA's cameras ({', '.join(keys)})",
                where="observation.images",
            )
        images, masks = [], []
        for key in present:
            img = batch[key][:, -1] if batch[key].ndim == 5 else batch[key]
            if self.config.resize_imgs_with_padding is not None:
                # LeRobot passes the pair's second number as the height (its images are square).
                first, second = self.config.resize_imgs_with_padding
                img = resize_with_pad(img, second, first, pad_value=0)
            img = img * 2.0 - 1.0
            mask_key = f"{key}_padding_mask"
            mask = (
                batch[mask_key].bool()
                if mask_key in batch
                else torch.ones(img.shape[0], dtype=torch.bool, device=img.device)
            )
            images.append(img)
            masks.append(mask)
        for _ in missing[: self.config.empty_cameras]:
            images.append(torch.ones_like(images[-1]) * -1)
            masks.append(torch.zeros_like(masks[-1]))
        return images, masks

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        images, masks, tokens, token_masks, state = self._inputs(batch)
        actions = pad_vector(batch[ACTION], self.config.max_action_dim)
        losses = self.model(images, masks, tokens, token_masks, state, actions)
        losses = losses[:, :, : self.config.action_dim]
        is_pad = batch.get("action_is_pad")
        if is_pad is None:
            loss = losses.mean()
        else:
            losses = losses * (~is_pad).unsqueeze(-1)
            valid = ((~is_pad).sum() * losses.shape[-1]).clamp_min(1)
            loss = losses.sum() / valid
        return loss, {"loss": loss.item()}

    @torch.no_grad()
    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        return self.predict_guided_chunk(batch, None, noise)

    @torch.no_grad()
    def predict_guided_chunk(
        self, batch: Batch, guidance: PrefixGuidance | None, noise: Tensor | None = None
    ) -> Tensor:
        images, masks, tokens, token_masks, state = self._inputs(batch)
        if noise is not None:
            noise = noise.to(device=state.device, dtype=torch.float32)
        actions = self.model.sample_actions(
            images, masks, tokens, token_masks, state, noise, guidance
        )
        return actions[:, :, : self.config.action_dim]
