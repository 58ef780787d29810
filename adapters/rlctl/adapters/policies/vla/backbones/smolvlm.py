"""SmolVLA's backbone: a SmolVLM and an action expert run layer by layer together.

    images ──► SigLIP encoder + connector ─┐
    task tokens ──► token embeddings ──────┼─► prefix ──► VLM text layers ──┐ keys/values
    state ──► state_proj ──────────────────┘                                │ (per layer)
    noise, time ──► action_in_proj + time MLP ──► suffix ──► expert layers ◄┘ ──► velocity

The expert is a narrower copy of the VLM's text model (`expert_width_multiplier`), one expert
layer beside each VLM layer (or every n-th one, `num_expert_layers`). Every
`self_attn_every_n_layers`-th layer the expert's tokens attend jointly with the prefix; the other
layers are cross-attention: the expert reads the VLM layer's keys and values through its own
k/v projections. The prefix attends only to itself, so at inference it runs once and its keys and
values are cached while the Euler steps run the expert over them.

`forward` is LeRobot's `SmolVLMWithExpertModel.forward`, the arithmetic step for step (training,
and inference without the speed paths). Inference's speed paths are the three methods after it
(`fill_cache`, `suffix_attention`, `expert_step`): the same layers, without what no output reads.

Module and parameter names are LeRobot 0.6.1's (`vlm_with_expert.vlm...`,
`vlm_with_expert.lm_expert...`); the VLM is built with `transformers`' SmolVLM classes from
`vlm_model_name`'s config (a local folder or a Hub id), or loaded with its pretrained weights.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.vla.backbones.vlm_with_expert import VLMWithExpert
from rlctl.adapters.policies.vla.loading import require_transformers
from rlctl.adapters.policies.vla.masks import additive_mask
from rlctl.adapters.policies.vla.rotary import Rotary, apply_rope, rope_tables, rotate
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies.smolvla import SmolVLAConfig

# Cached keys and values of the prefix, per VLM layer: (keys, values), each (B, L, heads, dim).
KVCache = list[tuple[Tensor, Tensor]]


class PrefixCache(list[tuple[Tensor, Tensor]]):
    """The prefix's keys and values per VLM layer, and the expert's projections of them in the
    cross-attention layers (`expert_kv`, by layer), made at the first Euler step and reused."""

    def __init__(self) -> None:
        super().__init__()
        self.expert_kv: dict[int, tuple[Tensor, Tensor]] = {}


class SuffixAttention:
    """What the suffix attends to (additive masks) and its rotary tables, in joint and in
    cross-attention layers: the same at every Euler step of a chunk."""

    def __init__(
        self, joint_mask: Tensor, joint_rotary: Rotary, cross_mask: Tensor, cross_rotary: Rotary
    ) -> None:
        self.joint_mask, self.joint_rotary = joint_mask, joint_rotary
        self.cross_mask, self.cross_rotary = cross_mask, cross_rotary


def expert_intermediate_size(hidden: int, multiplier: int = 4, multiple_of: int = 256) -> int:
    hidden = int(multiplier * int(2 * hidden / 3))
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


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


class SmolVLMWithExpertModel(VLMWithExpert):
    """The SmolVLM (`vlm`) and the action expert (`lm_expert`), run layer by layer together."""

    vlm_path, vision_path = "vlm", "vlm.model.vision_model"

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

    def _attends_jointly(self, index: int) -> bool:
        return "cross" not in self.attention_mode or self._joint_layer(index)

    def _set_requires_grad(self) -> None:
        self.freeze()
        if self.train_expert_only:
            return
        # Parameters that get no gradient (the last layer's outputs feed nothing) are frozen,
        # as LeRobot does, so distributed training finds no unused parameter.
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

    def embed_image(self, image: Tensor, *, reuse_buffers: bool = False) -> Tensor:
        """The SigLIP encoder and the connector's tokens of (B, C, H, W) images.

        `reuse_buffers` (inference, without gradients): the encoder's layers run here in place
        (`encode_in_place`), the same kernels and the same numbers as `transformers`'."""
        vision = self.vlm.model.vision_model
        pixels = image.to(dtype=vision.dtype)
        in_place = (
            reuse_buffers
            and not torch.is_grad_enabled()
            and vision.config._attn_implementation == "sdpa"
        )
        hidden = encode_in_place(vision, pixels) if in_place else None
        if hidden is None:
            hidden = vision(pixel_values=pixels).last_hidden_state
        return self.vlm.model.connector(hidden)

    def embed_language_tokens(self, tokens: Tensor) -> Tensor:
        return self.text_model.get_input_embeddings()(tokens)

    # -- LeRobot's forward: the prefix and the suffix layer by layer ---------------------------

    def attention(self, mask: Tensor, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """Eager grouped-query attention, scores in float32, keys and values copied for each
        query head (LeRobot's).

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
            expert_key = project_heads(attn.k_proj, key, attn.head_dim)
            expert_value = project_heads(attn.v_proj, value, attn.head_dim)
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
            if fill_cache or self._attends_jointly(index):
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
                outputs.append(finish_layer(layer, hidden, attention[:, start:end]))
                start = end if len(attended) == 1 else 0
            embeds = outputs
        return [
            None if hidden is None else model.norm(hidden) for model, hidden in zip(models, embeds)
        ]

    # -- inference's speed paths: the prefix once, then the expert alone at each Euler step ----

    def fill_cache(self, prefix: Tensor, mask: Tensor, positions: Tensor) -> PrefixCache:
        """The prefix alone through the VLM's layers (`mask` additive); per layer, what the
        expert reads of it: the keys (after RoPE) and values in joint layers, the expert's own
        projections of them in cross-attention layers (the same at every Euler step).

        The last layer's keys and values are all that is read of it: its queries, attention
        and MLP, which LeRobot runs, feed nothing."""
        rotary = rope_tables(positions, self.head_dim)
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
                    project_heads(expert_attn.k_proj, key, expert_attn.head_dim),
                    project_heads(expert_attn.v_proj, value, expert_attn.head_dim),
                )
            if index == last:
                break
            query = rotate(attn.q_proj(normed).view(shape), rotary)
            hidden = finish_layer(layer, hidden, grouped_attention(query, key, value, mask))
        return cache

    def suffix_attention(self, allowed: Tensor, positions: Tensor) -> SuffixAttention:
        """The suffix's masks and rotary tables from what it sees over [prefix, suffix]
        (`masks.suffix_layout`): in joint layers all of that at its positions after the
        prefix's, in cross-attention layers the prefix alone, the chunk's positions from 0."""
        prefix_len = allowed.shape[2] - positions.shape[1]
        from_zero = positions - positions.min(dim=1, keepdim=True).values
        return SuffixAttention(
            joint_mask=additive_mask(allowed),
            joint_rotary=rope_tables(positions, self.head_dim),
            cross_mask=additive_mask(allowed[:, :, :prefix_len]),
            cross_rotary=rope_tables(from_zero, self.head_dim),
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
            hidden = finish_layer(layer, hidden, attended)
        normed_out: Tensor = self.lm_expert.norm(hidden)
        return normed_out


def finish_layer(layer: nn.Module, hidden: Tensor, attended: Tensor) -> Tensor:
    """A text layer after its attention: the output projection added to the residual stream
    (in place: the stream takes the layer's dtype, as in LeRobot), then the MLP's."""
    o_proj = layer.self_attn.o_proj
    out = o_proj(attended.to(o_proj.weight.dtype))
    out += hidden
    finished: Tensor = out + layer.mlp(layer.post_attention_layernorm(out))
    return finished


def project_heads(projection: nn.Module, heads: Tensor, head_dim: int) -> Tensor:
    """The expert's k/v projection of the VLM's (B, L, Hkv, D) keys or values, per head again."""
    flat = heads.to(projection.weight.dtype).reshape(*heads.shape[:2], -1)
    out: Tensor = projection(flat)
    return out.view(*heads.shape[:2], -1, head_dim)


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


def encode_in_place(vision: nn.Module, pixels: Tensor) -> Tensor:
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
