"""X-VLA (Zheng et al. 2025): Florence-2's encoder and a soft-prompted transformer over actions.

    cameras ──► DaViT + projector (Florence-2) ─┬─ first camera's tokens ─┐
    task tokens ──► BART token embeddings ──────┼────────────────────────►├─► BART encoder ─► vlm
                                                └─ other cameras' tokens ───────────────────► aux
    [noisy actions, state, sincos(t)] ─► action_encoder ─┐
    vlm ─► vlm_proj, aux ─► aux_visual_proj ──────────────┼─► + pos_emb, + soft prompts of the
                                                          │   domain ─► 24 transformer blocks
                                                          └─► action_decoder(action tokens) = chunk

Each domain (`domain_id`: an embodiment, a dataset) owns `len_soft_prompts` learned tokens and its
own action encoder and decoder (and, with `use_hetero_proj`, its own projections of the VLM's
features). The transformer predicts the clean chunk, not a velocity: training mixes
x_t = t · noise + (1 - t) · actions at stratified times t and regresses the actions in the action
space's terms (`action_space`: MSE on positions and rotations, BCE on gripper logits, …);
sampling starts from noise x1 and, for t = 1, (n-1)/n, …, 1/n, re-mixes x1 with the last
prediction and predicts again.

On the speed paths (`XVLAModel.speed_paths`, on by default; the same chunks up to float rounding)
the denoising steps multiply by weights packed for MKL's GEMM (packed ahead while a checkpoint
loads, and kept from chunk to chunk while the weights hold: `PackedWeights`), the last block
computes the action tokens only (nothing reads the others), and DaViT's window attention does not
multiply the zero padding of its maps (`xvla_florence.WindowAttention`).

Parameter names are LeRobot 0.6.1's (`model.vlm...` is transformers' `Florence2Model` without its
text decoder, written here in `xvla_florence` so that loading imports no transformers modelling
code; `model.transformer...`); the Florence-2 tied token embedding is stored once, under
`model.vlm.language_model.encoder.embed_tokens.weight`, as LeRobot's files have it, and X-VLA's
Hub checkpoints saved with the original remote-code Florence-2 layout are renamed on loading.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl.adapters.policies.vla.action_spaces import ActionSpace, action_space
from rlctl.adapters.policies.vla.inputs import (
    ACTION,
    OBS_STATE,
    fit_vector,
    last_step,
    present_cameras,
    resize_with_pad,
)
from rlctl.adapters.policies.vla.loading import (
    building,
    built_dtypes,
    finish_meta_load,
    is_on_meta,
    map_in,
    require_transformers,
)
from rlctl.adapters.policies.vla.tokenizer import TokenizerStep
from rlctl.adapters.policies.vla.xvla_florence import Florence2Encoder, embedding_weight, normal_
from rlctl.adapters.policies.vla.xvla_processors import (
    DOMAIN_ID,
    AddDomainId,
    ImageNetNormalize,
    ImageToFloat,
    xvla_libero_processors,
)
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies.xvla import XVLAConfig
from rlctl.domain.processors import ProcessorPipeline, ProcessorStep
from rlctl.domain.processors.steps.task_text import LANGUAGE_TOKENS, TokenizerConfig

VLM = "model.vlm."
SHARED_EMBEDDING = f"{VLM}language_model.shared.weight"
ENCODER_EMBEDDING = f"{VLM}language_model.encoder.embed_tokens.weight"


# --- Florence-2 ------------------------------------------------------------------------------


def _vision_config(vision: Mapping[str, Any]) -> dict[str, Any]:
    """The vision config in transformers' native fields; the original remote-code layout of
    X-VLA's Hub checkpoints (`dim_embed`, `image_pos_embed` …) translated (LeRobot's rules)."""
    out = dict(vision)
    kind = out.pop("model_type", None)
    if kind not in (None, "davit", "florence_vision"):
        raise ConfigError(
            f"unsupported Florence-2 vision backbone {kind!r}",
            where="policy.florence_config.vision_config.model_type",
        )
    out.pop("enable_checkpoint", None)
    position = out.pop("image_pos_embed", None)
    if position is not None:
        if position.get("type") != "learned_abs_2d":
            raise ConfigError(
                f"unsupported image_pos_embed type {position.get('type')!r}",
                where="policy.florence_config.vision_config.image_pos_embed",
            )
        out["max_position_embeddings"] = position["max_pos_embeddings"]
    temporal = out.pop("visual_temporal_embedding", None)
    if temporal is not None:
        if temporal.get("type") != "COSINE":
            raise ConfigError(
                f"unsupported visual_temporal_embedding type {temporal.get('type')!r}",
                where="policy.florence_config.vision_config.visual_temporal_embedding",
            )
        out["max_temporal_embeddings"] = temporal["max_temporal_embeddings"]
    source = out.pop("image_feature_source", None)
    if source is not None and list(source) != ["spatial_avg_pool", "temporal_avg_pool"]:
        raise ConfigError(
            f"unsupported image_feature_source {source!r}",
            where="policy.florence_config.vision_config.image_feature_source",
        )
    if "dim_embed" in out:
        out["embed_dim"] = out.pop("dim_embed")
    return out


FLORENCE_KEYS = (
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "image_token_id",
    "is_encoder_decoder",
    "tie_word_embeddings",
)


def florence_config(config: XVLAConfig) -> Any:
    """transformers' `Florence2Config` for `config.florence_config` (LeRobot's
    `get_florence_config`)."""
    transformers = require_transformers("X-VLA")
    data = config.florence_config
    for part in ("vision_config", "text_config"):
        if data.get(part) is None:
            raise ConfigError(
                f"the Florence-2 config has no {part}",
                where=f"policy.florence_config.{part}",
                hint="X-VLA's config.json holds the whole Florence-2 config (vision_config and "
                "text_config); copy it from the checkpoint the model comes from",
            )
    text = dict(data["text_config"])
    if text.get("model_type", "florence2_language") == "florence2_language":
        text["model_type"] = "bart"  # the remote-code language model is BART, field for field
    kwargs = {key: data[key] for key in FLORENCE_KEYS if key in data}
    try:
        return transformers.Florence2Config(
            vision_config=_vision_config(data["vision_config"]), text_config=text, **kwargs
        )
    except (TypeError, ValueError) as err:
        raise ConfigError(
            f"cannot build the Florence-2 config: {err}", where="policy.florence_config"
        ) from err


# --- the soft-prompted transformer -----------------------------------------------------------


class DomainAwareLinear(nn.Module):
    """A linear layer whose weight and bias are chosen per row by its domain id."""

    def __init__(self, input_size: int, output_size: int, num_domains: int) -> None:
        super().__init__()
        self.input_size, self.output_size = input_size, output_size
        size = output_size * input_size
        self.fc = nn.Embedding(num_domains, size, _weight=embedding_weight(num_domains, size))
        self.bias = nn.Embedding(
            num_domains, output_size, _weight=embedding_weight(num_domains, output_size)
        )
        nn.init.xavier_uniform_(self.fc.weight)
        nn.init.zeros_(self.bias.weight)

    def forward(self, x: Tensor, domain_id: Tensor) -> Tensor:
        rows = domain_id.shape[0]
        flat = x.dim() == 2
        if flat:
            x = x.unsqueeze(1)
        weight = self.fc(domain_id).view(rows, self.input_size, self.output_size)
        bias = self.bias(domain_id).view(rows, 1, self.output_size)
        y = torch.matmul(x, weight) + bias
        return y.squeeze(1) if flat else y


def plain_linear(layer: nn.Linear, x: Tensor) -> Tensor:
    out: Tensor = layer(x)
    return out


class Linears:
    """The speed paths' Linear layers of the transformer blocks over the denoising steps of one
    chunk: the steps multiply inputs of one shape by the same weights, so on a CPU with MKL each
    weight is packed for MKL's GEMM once (`torch.ops.mkl`, as torch.compile's frozen CPU graphs
    do; kept across chunks by `PackedWeights`) rather than by each product; the products are
    those of `nn.Linear`. Inputs of another row count, and every other device or dtype, take
    `nn.Linear` itself."""

    def __init__(self, blocks: nn.ModuleList, tokens: int) -> None:
        self.tokens = tokens
        self.packed: dict[nn.Linear, Tensor] = {}
        self.sources: list[tuple[nn.Linear, int, int]] = []
        if not self.available(blocks):
            return
        for layer in blocks.modules():
            if isinstance(layer, nn.Linear):
                self.sources.append(self._source(layer))
                self.packed[layer] = torch.ops.mkl._mkl_reorder_linear_weight(layer.weight, tokens)

    @staticmethod
    def _source(layer: nn.Linear) -> tuple[nn.Linear, int, int]:
        # A weight replaced (moved, cast) has another address; one changed in place (an
        # optimiser's step) another version.
        try:
            version = layer.weight._version
        except RuntimeError:  # an inference tensor keeps no version (and trains in no step)
            version = -1
        return layer, layer.weight.data_ptr(), version

    def current(self, blocks: nn.ModuleList, tokens: int) -> bool:
        """Whether these are `tokens`-row packings of the blocks' weights as they are now."""
        layers = [layer for layer in blocks.modules() if isinstance(layer, nn.Linear)]
        return (
            tokens == self.tokens
            and len(layers) == len(self.sources)
            and all(
                self._source(layer) == source
                for layer, source in zip(layers, self.sources, strict=True)
            )
        )

    @staticmethod
    def available(blocks: nn.ModuleList) -> bool:
        weight = next(blocks.parameters(), None)
        return (
            weight is not None
            and weight.device.type == "cpu"
            and weight.dtype == torch.float32
            and torch.backends.mkl.is_available()
            and hasattr(torch.ops.mkl, "_mkl_reorder_linear_weight")
        )

    def __call__(self, layer: nn.Linear, x: Tensor) -> Tensor:
        packed = self.packed.get(layer)
        flat = x.reshape(-1, x.shape[-1])
        if packed is None or flat.shape[0] != self.tokens:
            return plain_linear(layer, x)
        out: Tensor = torch.ops.mkl._mkl_linear(flat, packed, layer.weight, layer.bias, self.tokens)
        return out.view(*x.shape[:-1], out.shape[-1])


class PackedWeights:
    """The speed paths' packed weights (`Linears`), kept from one chunk to the next while the
    blocks' weights and the chunk's token count stay the same (at real size, packing is some
    0.5 s of each chunk), and packed ahead in a background thread while a checkpoint's loading
    goes on (`start`). A copy of the model starts with none; the packings are freed for
    training (`clear`)."""

    def __init__(self) -> None:
        self.linears: Linears | None = None
        self.thread: threading.Thread | None = None

    def start(self, blocks: nn.ModuleList, tokens: int, model: nn.Module) -> None:
        """In a background thread, beside the rest of the load (the processors, the tokenizer
        and its imports: about a second on one core): maps in the pages of `model`'s weights
        from the checkpoint's file mapping (`loading.map_in`, not one page fault at a time in
        the first chunk), then packs the blocks' weights for `tokens` rows. Both run outside
        Python's lock."""

        def pack() -> None:
            try:
                map_in(model)
                with torch.no_grad():
                    self.linears = Linears(blocks, tokens)
            except Exception:  # a warm-up only: the first chunk packs again
                self.linears = None

        # Not a daemon: a process that exits while the thread is inside torch's packing (a
        # script that loads and ends) would abort ("terminate called without an active
        # exception"); the exit waits for the packing instead, a second or two at real size.
        self.thread = threading.Thread(target=pack, name="xvla-pack-weights", daemon=False)
        self.thread.start()

    def get(self, blocks: nn.ModuleList, tokens: int) -> Linears:
        """The packings for a chunk of `tokens` rows: the kept ones if current, else new."""
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        if self.linears is None or not self.linears.current(blocks, tokens):
            self.linears = None  # freed before the new packing is made
            self.linears = Linears(blocks, tokens)
        return self.linears

    def clear(self) -> None:
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        self.linears = None

    def __deepcopy__(self, memo: dict[int, Any]) -> PackedWeights:
        return PackedWeights()

    def __getstate__(self) -> dict[str, Any]:
        return {"linears": None, "thread": None}


class Attention(nn.Module):
    def __init__(self, dim: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor, linear: Linears | None = None, keep: int | None = None) -> Tensor:
        """Self-attention over x (B, T, C); with `keep`, the outputs of the first `keep` tokens
        only (each still attends to all T); `linear` applies the layers (the speed paths')."""
        apply = linear or plain_linear
        rows, length, channels = x.shape
        qkv = apply(self.qkv, x).reshape(rows, length, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        if keep is not None:
            q, length = q[:, :, :keep], keep
        out = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0
        )
        return apply(self.proj, out.transpose(1, 2).reshape(rows, length, channels))


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, linear: Linears | None = None) -> Tensor:
        apply = linear or plain_linear
        hidden = self.drop(F.gelu(apply(self.fc1, x), approximate="tanh"))
        return self.drop(apply(self.fc2, hidden))


class TransformerBlock(nn.Module):
    """Pre-norm: x + attention(norm1(x)), then x + mlp(norm2(x)); dropout 0.1 in both."""

    def __init__(self, hidden: int, num_heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.attn = Attention(hidden, num_heads, dropout=0.1)
        self.mlp = Mlp(hidden, int(hidden * mlp_ratio), dropout=0.1)

    def forward(self, x: Tensor, linear: Linears | None = None, keep: int | None = None) -> Tensor:
        """With `keep`, only the first `keep` tokens' outputs (B, keep, C): a last block whose
        other outputs nothing reads."""
        residual = x if keep is None else x[:, :keep]
        x = residual + self.attn(self.norm1(x), linear, keep)
        return x + self.mlp(self.norm2(x), linear)


def timestep_embedding(t: Tensor, dim: int, max_period: int = 100) -> Tensor:
    """[cos, sin] of t (B,) at `dim // 2` frequencies from 1 down to 1/max_period: (B, dim)."""
    half = dim // 2
    exponents = torch.arange(half, dtype=t.dtype, device=t.device) / half
    freqs = torch.exp(-math.log(max_period) * exponents)
    args = t[:, None] * freqs[None]
    embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
    return embedding


class Context:
    """What a chunk's denoising steps share: the projected VLM and camera tokens with their
    positions, and the soft prompts (computed once; the steps differ only in the actions)."""

    def __init__(self, tokens: Tensor, prompts: Tensor | None) -> None:
        self.tokens, self.prompts = tokens, prompts


class SoftPromptedTransformer(nn.Module):
    """LeRobot's `SoftPromptedTransformer`: action tokens, then the VLM's and the other
    cameras' tokens, with learned positions, then the domain's soft prompts."""

    def __init__(
        self, config: XVLAConfig, vlm_width: int, dim_action: int, dim_proprio: int
    ) -> None:
        super().__init__()
        hidden, domains = config.hidden_size, config.num_domains
        self.hidden_size, self.dim_time = hidden, config.dim_time
        self.len_soft_prompts, self.use_hetero_proj = (
            config.len_soft_prompts,
            config.use_hetero_proj,
        )
        self.blocks = nn.ModuleList(
            TransformerBlock(hidden, config.num_heads, config.mlp_ratio)
            for _ in range(config.depth)
        )
        self.vlm_proj: nn.Module
        self.aux_visual_proj: nn.Module
        if self.use_hetero_proj:
            self.vlm_proj = DomainAwareLinear(vlm_width, hidden, domains)
            self.aux_visual_proj = DomainAwareLinear(vlm_width, hidden, domains)
        else:
            self.vlm_proj = nn.Linear(vlm_width, hidden)
            self.aux_visual_proj = nn.Linear(vlm_width, hidden)
        self.pos_emb = nn.Parameter(torch.zeros(1, config.max_len_seq, hidden))
        normal_(self.pos_emb, std=0.02)
        self.norm = nn.LayerNorm(hidden)
        self.action_encoder = DomainAwareLinear(
            dim_action + config.dim_time + dim_proprio, hidden, domains
        )
        self.action_decoder = DomainAwareLinear(hidden, dim_action, domains)
        if self.len_soft_prompts > 0:
            size = self.len_soft_prompts * hidden
            self.soft_prompt_hub = nn.Embedding(
                domains, size, _weight=embedding_weight(domains, size)
            )
            normal_(self.soft_prompt_hub.weight, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def _project(self, layer: nn.Module, x: Tensor, domain_id: Tensor) -> Tensor:
        out: Tensor = layer(x, domain_id) if self.use_hetero_proj else layer(x)
        return out

    def context(
        self, domain_id: Tensor, vlm_features: Tensor, aux_visual_inputs: Tensor, num_actions: int
    ) -> Context:
        tokens = torch.cat(
            [
                self._project(self.vlm_proj, vlm_features, domain_id),
                self._project(self.aux_visual_proj, aux_visual_inputs, domain_id),
            ],
            dim=1,
        )
        length = num_actions + tokens.shape[1]
        if length > self.pos_emb.shape[1]:
            raise ConfigError(
                f"the sequence of {length} tokens (actions, VLM, cameras) is longer than "
                f"max_len_seq={self.pos_emb.shape[1]}",
                where="policy.max_len_seq",
                hint="raise max_len_seq (a new model), or read fewer cameras or task tokens",
            )
        tokens = tokens + self.pos_emb[:, num_actions:length]
        prompts = None
        if self.len_soft_prompts > 0:
            prompts = self.soft_prompt_hub(domain_id).view(
                domain_id.shape[0], self.len_soft_prompts, self.hidden_size
            )
        return Context(tokens, prompts)

    def forward(
        self,
        domain_id: Tensor,
        context: Context,
        actions: Tensor,
        proprio: Tensor,
        t: Tensor,
        linear: Linears | None = None,
    ) -> Tensor:
        """The predicted chunk; `linear` (the speed paths, at inference): how the blocks apply
        their Linear layers, and the last block computes only the action tokens."""
        rows, num_actions = actions.shape[:2]
        time = timestep_embedding(t, self.dim_time).unsqueeze(1).expand(rows, num_actions, -1)
        state = proprio.unsqueeze(1).expand(rows, num_actions, proprio.shape[-1])
        x = self.action_encoder(torch.cat([actions, state, time], dim=-1), domain_id)
        x = x + self.pos_emb[:, :num_actions]
        parts = [x, context.tokens] + ([context.prompts] if context.prompts is not None else [])
        x = torch.cat(parts, dim=1)
        if linear is None or not self.blocks:  # the reference's arithmetic
            for block in self.blocks:
                x = block(x)
        else:  # the speed paths: the last block computes the action tokens' outputs only
            *first, last = self.blocks
            for block in first:
                x = block(x, linear)
            x = last(x, linear, keep=num_actions)
        out: Tensor = self.action_decoder(self.norm(x[:, :num_actions]), domain_id)
        return out


# --- the model ---------------------------------------------------------------------------------


class XVLAModel(nn.Module):
    """LeRobot's `XVLAModel`: Florence-2's encoder side and the soft-prompted transformer."""

    # The family's one switch of the inference speed paths (`flow_matching.speed_paths`): the
    # blocks' weights packed for MKL's GEMM (`Linears`, kept by `PackedWeights`), and the last
    # block computing the action tokens only; the same chunks up to float rounding. Set it False
    # on a loaded model (`policy.model.model.speed_paths = False`) for LeRobot's arithmetic.
    speed_paths = True
    # True once `PolicyModel.compute_in_float32` upcast a bfloat16 model (`vla.compute_dtype`):
    # inputs and noise then take float32, whatever the config's dtype.
    float32_compute = False

    def __init__(self, config: XVLAConfig, proprio_dim: int) -> None:
        super().__init__()
        self.config = config
        self.chunk_size = config.chunk_size
        real_dim = config.action_feature.shape[-1] if config.action_feature else None
        self.action_space: ActionSpace = action_space(
            config.action_mode,
            real_dim=real_dim or config.max_action_dim,
            max_dim=config.max_action_dim,
        )
        self.dim_action = self.action_space.dim_action
        self.dim_proprio = proprio_dim
        florence = florence_config(config)
        # X-VLA reads Florence-2's encoder side only (`xvla_florence`: transformers' modules and
        # names, without importing its modelling code).
        self.vlm = Florence2Encoder(florence)
        width = getattr(florence.vision_config, "projection_dim", None)
        if width is None:
            raise ConfigError(
                "the Florence-2 vision config gives no projection_dim",
                where="policy.florence_config.vision_config.projection_dim",
            )
        self.transformer = SoftPromptedTransformer(config, width, self.dim_action, proprio_dim)
        self._freeze()
        self.to(dtype=self.target_dtype)
        self.packed = PackedWeights()

    def one_row_tokens(self) -> int | None:
        """The transformer's token count for a chunk of one row, from the config alone (None
        where the task's token count varies: text not padded to its maximum length): the
        actions, the first camera's image tokens and the task's, the other cameras' and the
        soft prompts."""
        config = self.config
        if config.pad_language_to != "max_length" or not config.image_features:
            return None
        size = config.resize_imgs_with_padding or tuple(
            next(iter(config.image_features.values())).shape[-2:]
        )
        height, width = int(size[0]), int(size[1])
        for embed in self.vlm.vision_tower.convs:
            conv = embed.conv
            height = (height + 2 * conv.padding[0] - conv.kernel_size[0]) // conv.stride[0] + 1
            width = (width + 2 * conv.padding[1] - conv.kernel_size[1]) // conv.stride[1] + 1
        image = 1 + height * width
        return (
            config.chunk_size
            + image * config.image_views
            + config.tokenizer_max_length
            + config.len_soft_prompts
        )

    def warm_up(self) -> None:
        """After a checkpoint's weights are in, where the model will run on this CPU (no
        accelerator here): its weights mapped in and the speed paths' packings for a one-row
        chunk made, in the background (`PackedWeights.start`)."""
        tokens = self.one_row_tokens()
        blocks = self.transformer.blocks
        if (
            not self.speed_paths
            or tokens is None
            or not Linears.available(blocks)
            or torch.cuda.is_available()
            or torch.backends.mps.is_available()
        ):
            return
        self.packed.start(blocks, tokens, self)

    @property
    def target_dtype(self) -> torch.dtype:
        bfloat16 = self.config.dtype == "bfloat16" and not self.float32_compute
        return torch.bfloat16 if bfloat16 else torch.float32

    def _freeze(self) -> None:
        config = self.config
        if config.freeze_vision_encoder:
            self.vlm.vision_tower.requires_grad_(False)
        if config.freeze_language_encoder:
            self.vlm.language_model.encoder.requires_grad_(False)
            self.vlm.language_model.shared.requires_grad_(False)
        if not config.train_policy_transformer:
            for name, param in self.transformer.named_parameters():
                if "soft_prompt" not in name:
                    param.requires_grad_(False)
        if not config.train_soft_prompts and hasattr(self.transformer, "soft_prompt_hub"):
            self.transformer.soft_prompt_hub.requires_grad_(False)

    def encode(
        self, input_ids: Tensor, images: Tensor, image_mask: Tensor
    ) -> tuple[Tensor, Tensor]:
        """(the BART encoder's output over [first camera's tokens, task tokens], the other
        cameras' tokens), from images (B, V, 3, H, W) and which are real (B, V)."""
        rows, views = images.shape[:2]
        flat_mask = image_mask.reshape(-1).to(torch.bool)
        if not bool(flat_mask.any()):
            raise ConfigError("every camera of the batch is masked out", where="observation.images")
        flat = images.flatten(0, 1)
        speed = self.speed_paths and not self.training
        features = self.vlm.image_features(flat[flat_mask], speed)
        tokens, width = features.shape[1:]
        if bool(flat_mask.all()):
            per_view = features
        else:
            per_view = features.new_zeros((rows * views, tokens, width))
            per_view[flat_mask] = features
        per_view = per_view.view(rows, views, tokens, width)
        embeds = self.vlm.get_input_embeddings()(input_ids)
        merged = torch.cat([per_view[:, 0], embeds], dim=1)
        # Everything attends to everything (the task's padding too, as in LeRobot): no mask.
        encoded = self.vlm.language_model.encoder(merged)
        return encoded, per_view[:, 1:].reshape(rows, -1, width)

    def context(self, inputs: XVLAInputs) -> Context:
        vlm, aux = self.encode(inputs.input_ids, inputs.images, inputs.image_mask)
        return self.transformer.context(inputs.domain_id, vlm, aux, self.chunk_size)

    def forward(self, inputs: XVLAInputs, actions: Tensor) -> dict[str, Tensor]:
        self.packed.clear()  # training changes the weights: their packings go
        dtype = self.target_dtype
        inputs = inputs.cast(dtype)
        actions = actions.to(dtype)
        context = self.context(inputs)
        rows = actions.shape[0]
        device = actions.device
        # Stratified times: one uniform draw shifted by i / B for row i.
        t = (
            torch.rand(1, device=device, dtype=dtype)
            + torch.arange(rows, device=device, dtype=dtype) / rows
        ) % (1 - 1e-5)
        noisy = torch.randn_like(actions) * t.view(-1, 1, 1) + actions * (1 - t).view(-1, 1, 1)
        proprio, noisy = self.action_space.preprocess(inputs.proprio, noisy)
        predicted = self.transformer(inputs.domain_id, context, noisy, proprio, t)
        return self.action_space.loss(predicted, actions)

    @torch.no_grad()
    def sample(self, inputs: XVLAInputs, noise: Tensor, steps: int) -> Tensor:
        """The chunk from noise x1 (B, chunk, dim_action) in `steps` steps."""
        dtype = self.target_dtype
        inputs = inputs.cast(dtype)
        x1 = noise.to(dtype)
        context = self.context(inputs)
        linear = None
        if self.speed_paths:
            tokens = x1.shape[1] + context.tokens.shape[1]
            tokens += context.prompts.shape[1] if context.prompts is not None else 0
            linear = self.packed.get(self.transformer.blocks, x1.shape[0] * tokens)
        action = torch.zeros_like(x1)
        steps = max(1, int(steps))
        for i in range(steps, 0, -1):
            t = torch.full((x1.shape[0],), i / steps, device=x1.device, dtype=dtype)
            x_t = x1 * t.view(-1, 1, 1) + action * (1 - t).view(-1, 1, 1)
            proprio, x_t = self.action_space.preprocess(inputs.proprio, x_t)
            action = self.transformer(inputs.domain_id, context, x_t, proprio, t, linear)
        return self.action_space.postprocess(action)


class XVLAInputs:
    """A batch as the model reads it."""

    def __init__(
        self,
        input_ids: Tensor,
        images: Tensor,
        image_mask: Tensor,
        domain_id: Tensor,
        proprio: Tensor,
    ) -> None:
        self.input_ids, self.images, self.image_mask = input_ids, images, image_mask
        self.domain_id, self.proprio = domain_id, proprio

    def cast(self, dtype: torch.dtype) -> XVLAInputs:
        return XVLAInputs(
            self.input_ids,
            self.images.to(dtype),
            self.image_mask,
            self.domain_id,
            self.proprio.to(dtype),
        )


# --- the policy --------------------------------------------------------------------------------


class XVLAPolicy(PolicyModel):
    """X-VLA on normalised batches: the task tokenised (BART), images ImageNet-normalised,
    `domain_id` beside them (the pre-processor's steps)."""

    config_class = XVLAConfig
    config: XVLAConfig

    def __init__(self, config: XVLAConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        if not config.image_features:
            raise ConfigError(
                "X-VLA reads at least one camera, and the policy has none",
                where="policy.input_features",
                hint="train on a dataset with camera images",
            )
        if config.use_proprio and config.robot_state_feature is None:
            raise ConfigError(
                "use_proprio=true needs an observation.state input",
                where="policy.use_proprio",
                hint="set --policy.use_proprio=false, or train on a dataset with a state",
            )
        if config.use_relative_actions:
            raise ConfigError(
                "X-VLA learns absolute actions (LeRobot offers no relative actions for it)",
                where="policy.use_relative_actions",
                hint="drop --policy.use_relative_actions",
            )
        proprio_dim = config.max_state_dim if config.use_proprio else 0
        # A checkpoint's weights follow (load_backbone_weights False): build on the meta device.
        with building(load_backbone_weights):
            self.model = XVLAModel(config, proprio_dim)

    # --- processors ----------------------------------------------------------------------------

    @classmethod
    def preprocessor_steps(cls, config: XVLAConfig) -> list[ProcessorStep]:
        """LeRobot's X-VLA steps between batching and the device move."""
        tokenizer = TokenizerStep(
            TokenizerConfig(
                tokenizer_name=config.tokenizer_name,
                max_length=config.tokenizer_max_length,
                padding=config.pad_language_to,
                padding_side=config.tokenizer_padding_side,
            )
        )
        return [tokenizer, ImageToFloat(), ImageNetNormalize(), AddDomainId()]

    @classmethod
    def env_processors(
        cls, config: XVLAConfig, env_type: str
    ) -> tuple[ProcessorPipeline, ProcessorPipeline] | None:
        """On LIBERO, X-VLA's own (LeRobot's `make_xvla_libero_pre_post_processors`)."""
        return xvla_libero_processors() if env_type == "libero" else None

    def parameter_groups(self) -> list[dict[str, Any]]:
        """The groups LeRobot's `xvla-adamw` names: "vlm" (trained at a tenth of the lr and
        weight decay), "soft_prompts" (at `optimizer_soft_prompt_lr_scale`, or its warm-up
        scale), "other"; the optimiser spec sets their rates (`OptimizerSpec.group_lr_scales`)."""
        groups: dict[str, list[nn.Parameter]] = {"vlm": [], "soft_prompts": [], "other": []}
        for name, param in self.named_parameters():
            if param.requires_grad:
                lowered = name.lower()
                kind = (
                    "vlm"
                    if "vlm" in lowered
                    else "soft_prompts"
                    if "soft_prompt" in lowered
                    else "other"
                )
                groups[kind].append(param)
        return [{"params": params, "name": kind} for kind, params in groups.items()]

    # --- inputs --------------------------------------------------------------------------------

    def prepare_images(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """(B, views, 3, H, W) and which are real (B, views): the cameras the batch has, then
        black images masked out up to `image_views`."""
        present = present_cameras(batch, list(self.config.image_features), "xvla")
        images = []
        for key in present:
            image = last_step(batch[key], 4).to(self.device)
            if self.config.resize_imgs_with_padding is not None:
                image = resize_with_pad(image, *self.config.resize_imgs_with_padding, centred=False)
            images.append(image)
        sizes = {tuple(image.shape[1:]) for image in images}
        if len(sizes) > 1:
            raise ConfigError(
                "X-VLA's cameras differ in size: "
                + ", ".join(
                    f"{k} {tuple(i.shape[1:])}" for k, i in zip(present, images, strict=True)
                ),
                where="policy.resize_imgs_with_padding",
                hint="set --policy.resize_imgs_with_padding=[H,W] to bring them to one size",
            )
        stacked = torch.stack(images, dim=1)
        rows = stacked.shape[0]
        mask = torch.ones((rows, len(images)), dtype=torch.bool, device=stacked.device)
        missing = self.config.image_views - len(images)
        if missing > 0:
            stacked = torch.cat(
                [stacked, stacked.new_zeros((rows, missing, *stacked.shape[2:]))], dim=1
            )
            mask = torch.cat([mask, mask.new_zeros((rows, missing))], dim=1)
        return stacked, mask

    def domain_ids(self, batch: Batch, rows: int) -> Tensor:
        key = self.config.domain_feature_key
        value = batch.get(key) if key else None
        if value is None:
            value = batch.get(DOMAIN_ID)
        if value is None:
            return torch.zeros(rows, dtype=torch.long, device=self.device)
        ids = torch.as_tensor(value, device=self.device)
        if ids.ndim == 0:
            ids = ids.expand(rows)
        if ids.ndim > 1:
            ids = ids.reshape(ids.shape[0], -1)[:, 0]
        if ids.shape[0] != rows:
            if ids.shape[0] != 1:
                raise ConfigError(
                    f"{ids.shape[0]} domain ids for a batch of {rows}",
                    where=key or DOMAIN_ID,
                    hint="give one domain id, or one per row of the batch",
                )
            ids = ids.expand(rows)
        ids = ids.to(torch.long)
        if bool(((ids < 0) | (ids >= self.config.num_domains)).any()):
            raise ConfigError(
                f"domain ids {sorted(set(ids.tolist()))} outside the model's "
                f"{self.config.num_domains} domains",
                where=key or DOMAIN_ID,
                hint="set xvla_add_domain_id's domain_id (or the batch's domain ids) below "
                "num_domains",
            )
        return ids

    def inputs(self, batch: Batch) -> XVLAInputs:
        input_ids = batch[LANGUAGE_TOKENS].to(self.device)
        rows = input_ids.shape[0]
        images, mask = self.prepare_images(batch)
        if self.config.use_proprio:
            if OBS_STATE not in batch:
                raise ConfigError(
                    "X-VLA reads the robot state (use_proprio) and the batch has no "
                    "observation.state",
                    where=OBS_STATE,
                    hint="give the state, or use a policy trained with use_proprio=false",
                )
            state = last_step(batch[OBS_STATE], 2).to(self.device)
            proprio = fit_vector(state, self.model.dim_proprio)
        else:
            proprio = torch.zeros((rows, 0), device=self.device)
        return XVLAInputs(input_ids, images, mask, self.domain_ids(batch, rows), proprio)

    def action_targets(self, batch: Batch) -> Tensor:
        if ACTION not in batch:
            raise ConfigError("the training batch has no actions", where="action")
        actions = batch[ACTION].to(self.device)
        if actions.ndim == 2:
            actions = actions.unsqueeze(1)
        chunk = self.config.chunk_size
        if actions.shape[1] > chunk:
            actions = actions[:, :chunk]
        elif actions.shape[1] < chunk:
            pad = actions.new_zeros((actions.shape[0], chunk - actions.shape[1], actions.shape[2]))
            actions = torch.cat([actions, pad], dim=1)
        return fit_vector(actions, self.model.dim_action)

    # --- training and inference ------------------------------------------------------------------

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        losses = self.model(self.inputs(batch), self.action_targets(batch))
        total = torch.stack(list(losses.values())).sum()
        logs = {name: float(value.detach().item()) for name, value in losses.items()}
        logs["loss"] = float(total.detach().item())
        return total, logs

    @torch.no_grad()
    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        """The chunk (B, chunk_size, action size of the action space); `noise` is x1
        (B, chunk_size, the model's action size)."""
        inputs = self.inputs(batch)
        rows = inputs.input_ids.shape[0]
        shape = (rows, self.config.chunk_size, self.model.dim_action)
        if noise is None:
            noise = torch.randn(shape, device=self.device, dtype=self.model.target_dtype)
        elif tuple(noise.shape) != shape:
            raise ConfigError(
                f"the noise has shape {tuple(noise.shape)}, X-VLA samples from {shape}",
                where="noise",
            )
        actions = self.model.sample(inputs, noise.to(self.device), self.config.num_denoising_steps)
        return actions.to(torch.float32)

    @property
    def dtype(self) -> torch.dtype:
        return self.model.target_dtype

    # --- checkpoints ---------------------------------------------------------------------------

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        state = dict(state_dict)
        if is_vendored_florence(state):
            state = remap_vendored_florence(state)
        # The token embedding is tied: one name in the file stands for both.
        if SHARED_EMBEDDING in state and ENCODER_EMBEDDING not in state:
            state[ENCODER_EMBEDDING] = state[SHARED_EMBEDDING]
        elif ENCODER_EMBEDDING in state and SHARED_EMBEDDING not in state:
            state[SHARED_EMBEDDING] = state[ENCODER_EMBEDDING]
        on_meta = is_on_meta(self)
        dtypes = built_dtypes(self)
        result = super().load_state_dict(state, strict=strict, assign=assign or on_meta)
        language = self.model.vlm.language_model
        language.encoder.embed_tokens.weight = language.shared.weight
        if on_meta:
            finish_meta_load(self, dtypes, "xvla")
        self.model.warm_up()
        return result

    def fsdp_units(self) -> list[nn.Module | tuple[nn.Module, ...]]:
        """Florence-2's vision stages (each patch embedding and its blocks) and encoder
        layers, and the soft-prompted transformer's blocks."""
        from rlctl.adapters.policies.wrap_units import layer_stacks

        vision = self.model.vlm.vision_tower
        units: list[nn.Module | tuple[nn.Module, ...]] = list(getattr(vision, "convs", ()))
        return units + layer_stacks(self.model)


def is_vendored_florence(state: Mapping[str, Any]) -> bool:
    """A checkpoint saved with the original remote-code Florence-2 module layout."""
    return f"{VLM}image_projection" in state or any(
        key.startswith(f"{VLM}language_model.model.") for key in state
    )


_VISION = re.escape(VLM) + r"vision_tower\."
_BLOCK = _VISION + r"blocks\.(\d+)\.(\d+)\.(spatial_block|channel_block)\."
_NEW_BLOCK = VLM + r"vision_tower.blocks.\1.\2.\3."
_REMAP_RULES = [
    (_VISION + r"convs\.(\d+)\.proj\.", VLM + r"vision_tower.convs.\1.conv."),
    (_BLOCK + r"conv1\.fn\.dw\.", _NEW_BLOCK + "conv1."),
    (_BLOCK + r"conv2\.fn\.dw\.", _NEW_BLOCK + "conv2."),
    (_BLOCK + r"(window_attn|channel_attn)\.norm\.", _NEW_BLOCK + "norm1."),
    (_BLOCK + r"(window_attn|channel_attn)\.fn\.", _NEW_BLOCK + r"\4."),
    (_BLOCK + r"ffn\.norm\.", _NEW_BLOCK + "norm2."),
    (_BLOCK + r"ffn\.fn\.net\.", _NEW_BLOCK + "ffn."),
    (re.escape(VLM) + r"image_proj_norm\.", VLM + "multi_modal_projector.image_proj_norm."),
    (re.escape(VLM) + r"image_pos_embed\.", VLM + "multi_modal_projector.image_position_embed."),
    (
        re.escape(VLM) + r"visual_temporal_embed\.",
        VLM + "multi_modal_projector.visual_temporal_embed.",
    ),
    (re.escape(VLM) + r"language_model\.model\.", VLM + "language_model."),
]


def remap_vendored_florence(state: Mapping[str, Any]) -> dict[str, Any]:
    """The remote-code Florence-2 names as transformers' (LeRobot 0.6.1's rules); the image
    projection, a bare (in, out) matrix there, becomes a Linear's (out, in) weight."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        if key == f"{VLM}language_model.final_logits_bias":
            continue  # generation only
        if key == f"{VLM}image_projection":
            out[f"{VLM}multi_modal_projector.image_projection.weight"] = value.transpose(
                0, 1
            ).contiguous()
            continue
        new = key
        for pattern, replacement in _REMAP_RULES:
            new, count = re.subn(pattern, replacement, new, count=1)
            if count:
                break
        out[new] = value
    return out
