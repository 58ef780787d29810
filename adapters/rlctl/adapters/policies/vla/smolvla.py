"""SmolVLA (Shukor et al. 2025): a SmolVLM backbone and an action expert, trained by flow matching.

    prefix:  images (SigLIP + connector) + task tokens + state_proj(state)   -> the SmolVLM
    suffix:  action_time_mlp([action_in_proj(x_t), sincos(t)]), per action    -> the expert
    output:  action_out_proj(expert's tokens)                                 = velocity of the flow

The prefix is one block the suffix reads (the state starts a block of its own, so the task does
not see it); the suffix is causal, action by action. Training draws t ~ Beta(1.5, 1) (scaled
into [0.001, 1]) and regresses the velocity noise - actions; inference integrates it from noise
in `num_steps` Euler steps (`flow_matching`), the prefix's keys and values cached. The backbone,
and how the expert reads the VLM layer by layer, is `backbones.smolvlm`.

The speed paths (`speed_paths`, on by default; the same chunks as LeRobot's up to float rounding,
about 1e-6): the prefix without what no token attends to, the VLM's last layer reduced to the
keys and values the expert reads, the expert's projections of the prefix, its masks and rotary
tables made once per chunk instead of once per Euler step, grouped-query attention without
copies of the keys and values, the vision encoder's layers in place. Off, inference runs
LeRobot's arithmetic step for step.

Module and parameter names are LeRobot 0.6.1's (`model.vlm_with_expert.vlm...`,
`model.state_proj`, ...), so a LeRobot `model.safetensors` loads as it is.
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.base import Batch
from rlctl.adapters.policies.vla import masks
from rlctl.adapters.policies.vla.backbones.smolvlm import (
    KVCache,
    PrefixCache,
    SmolVLMWithExpertModel,
)
from rlctl.adapters.policies.vla.flow_matching import FlowMatching, Velocity
from rlctl.adapters.policies.vla.inputs import VLAInputs, last_step, resize_with_pad
from rlctl.adapters.policies.vla.loading import require_transformers
from rlctl.adapters.policies.vla.policy import VLAPolicy
from rlctl.adapters.policies.vla.tokenizer import TokenizerStep
from rlctl.domain.policies.smolvla import SmolVLAConfig
from rlctl.domain.processors import ProcessorStep
from rlctl.domain.processors.steps.task_text import NewLineTask, TokenizerConfig

Embedded = tuple[Tensor, Tensor, Tensor]  # (embeddings, padding mask, block starts)


class SmolVLAFlowMatching(FlowMatching):
    """LeRobot's `VLAFlowMatching`: the prefix (images, task, state) and the suffix (noisy
    actions at a time) embedded around the SmolVLM and its expert, the velocity predicted."""

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

    @property
    def euler_steps(self) -> int:
        return self.config.num_steps

    # -- the sequence: prefix and suffix --------------------------------------------------------

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

    def embed_prefix(self, inputs: VLAInputs, *, reuse_buffers: bool = False) -> Embedded:
        """Each image's tokens (scaled by √width; between SmolVLM's special tokens with
        `add_image_special_tokens`), the task's tokens (scaled alike), then the state's token,
        which starts a block. Padded to `prefix_length` when shorter."""
        embeds, pad_masks, blocks = [], [], []

        def add(embedded: Tensor, pad: Tensor, block: int = 0) -> None:
            embeds.append(embedded)
            pad_masks.append(pad)
            blocks.extend([block] * embedded.shape[1])

        def add_special(ids: list[int], batch: int, device: torch.device) -> None:
            special = self._token_embeds(ids, batch, device)
            add(special, torch.ones(special.shape[:2], dtype=torch.bool, device=device))

        special = self.config.add_image_special_tokens
        for image, image_mask in zip(inputs.images, inputs.image_masks):
            batch = image.shape[0]
            if special:
                add_special(self._special_image_tokens()[0], batch, image.device)
            image_embeds = self.vlm_with_expert.embed_image(image, reuse_buffers=reuse_buffers)
            scale = torch.tensor(
                image_embeds.shape[-1] ** 0.5, dtype=image_embeds.dtype, device=image.device
            )
            image_embeds = image_embeds * scale
            add(image_embeds, image_mask[:, None].expand(batch, image_embeds.shape[1]))
            if special:
                add_special(self._special_image_tokens()[1], batch, image.device)
        lang_embeds = self.vlm_with_expert.embed_language_tokens(inputs.tokens)
        add(lang_embeds * math.sqrt(lang_embeds.shape[-1]), inputs.token_masks)

        assert inputs.state is not None
        state_embeds = self.state_proj(inputs.state)
        state_embeds = state_embeds[:, None, :] if state_embeds.ndim == 2 else state_embeds
        batch, state_len = state_embeds.shape[:2]
        state_pad = torch.ones(batch, state_len, dtype=torch.bool, device=inputs.state.device)
        add(state_embeds, state_pad, block=1)  # the state starts a block: the task cannot see it

        embeds_t = torch.cat(embeds, dim=1)
        pad_t = torch.cat(pad_masks, dim=1)
        blocks_t = torch.tensor(blocks, dtype=torch.bool, device=pad_t.device)[None, :]
        if pad_t.shape[1] < self.config.prefix_length:
            embeds_t = _pad_sequence(embeds_t, self.config.prefix_length)
            pad_t = _pad_sequence(pad_t, self.config.prefix_length)
            blocks_t = _pad_sequence(blocks_t, self.config.prefix_length)
        return embeds_t, pad_t, blocks_t.expand(batch, -1)

    def suffix_blocks(self) -> list[bool]:
        """Each action starts its own block: the chunk is causal."""
        return [True] * self.config.chunk_size

    def embed_suffix(self, noisy_actions: Tensor, time: Tensor) -> Embedded:
        """One token per action: its projection mixed with the time's embedding by an MLP."""
        action_embeds = self.action_in_proj(noisy_actions)
        batch = action_embeds.shape[0]
        width = self.vlm_with_expert.expert_hidden_size
        time_embeds = self.time_features(time, width).type(action_embeds.dtype)
        time_embeds = time_embeds[:, None, :].expand_as(action_embeds)
        hidden = self.action_time_mlp_in(torch.cat([action_embeds, time_embeds], dim=2))
        hidden = self.action_time_mlp_out(F.silu(hidden))
        return hidden, *masks.block_masks(self.suffix_blocks(), batch, hidden.dtype, hidden.device)

    def velocity(self, suffix_out: Tensor) -> Tensor:
        return self.action_out_proj(suffix_out[:, -self.config.chunk_size :].to(torch.float32))

    # -- training ------------------------------------------------------------------------------

    def training_velocity(self, inputs: VLAInputs, x_t: Tensor, time: Tensor) -> Tensor:
        prefix, prefix_pad, prefix_blocks = self.embed_prefix(inputs)
        suffix, suffix_pad, suffix_blocks = self.embed_suffix(x_t, time)
        mask, at = masks.joint_layout(prefix_pad, prefix_blocks, suffix_pad, suffix_blocks)
        _, suffix_out = self.vlm_with_expert([prefix, suffix], mask, at)
        assert suffix_out is not None
        return self.velocity(suffix_out)

    # -- inference -----------------------------------------------------------------------------

    def plain_velocity_field(self, inputs: VLAInputs, times: list[Tensor]) -> Velocity:
        """LeRobot's arithmetic: the prefix through the layers once, filling the cache; each
        call runs the suffix through all of them again over it (`denoise_step`)."""
        prefix, prefix_pad, prefix_blocks = self.embed_prefix(inputs)
        mask = masks.attention_masks_2d(prefix_pad, prefix_blocks)
        cache = PrefixCache()
        self.vlm_with_expert(
            [prefix, None], mask, masks.positions(prefix_pad), cache=cache, fill_cache=True
        )
        return partial(self.denoise_step, prefix_pad, cache)

    def denoise_step(self, prefix_pad: Tensor, cache: KVCache, x_t: Tensor, time: Tensor) -> Tensor:
        suffix, suffix_pad, suffix_blocks = self.embed_suffix(x_t, time)
        mask, at = masks.suffix_layout(prefix_pad, suffix_pad, suffix_blocks)
        _, suffix_out = self.vlm_with_expert([None, suffix], mask, at, cache=cache)
        assert suffix_out is not None
        return self.velocity(suffix_out)

    def fast_velocity_field(self, inputs: VLAInputs, times: list[Tensor]) -> Velocity:
        """The prefix runs once here, without what no token attends to, and each call runs
        the expert alone over what it reads of the prefix."""
        if not self.config.add_image_special_tokens:
            # Cameras masked out in every row (`empty_cameras` placeholders) go; not with
            # special tokens, which are seen even around a placeholder.
            images, image_masks = masks.drop_unseen_images(inputs.images, inputs.image_masks)
            inputs = inputs._replace(images=images, image_masks=image_masks)
        prefix, prefix_pad, prefix_blocks = self.embed_prefix(inputs, reuse_buffers=True)
        prefix, prefix_pad, prefix_blocks = masks.seen_only(
            prefix_pad, prefix, prefix_pad, prefix_blocks
        )
        experts = self.vlm_with_expert
        mask = masks.additive_mask(masks.attention_masks_2d(prefix_pad, prefix_blocks))
        cache = experts.fill_cache(prefix, mask, masks.positions(prefix_pad))
        suffix_pad, suffix_blocks = masks.block_masks(
            self.suffix_blocks(), prefix_pad.shape[0], torch.float32, prefix_pad.device
        )
        plan = experts.suffix_attention(*masks.suffix_layout(prefix_pad, suffix_pad, suffix_blocks))

        def velocity(x_t: Tensor, time: Tensor) -> Tensor:
            suffix, _, _ = self.embed_suffix(x_t, time)
            return self.velocity(experts.expert_step(suffix, cache, plan))

        return velocity


def _pad_sequence(tensor: Tensor, length: int) -> Tensor:
    padded = tensor.new_zeros((tensor.shape[0], length, *tensor.shape[2:]))
    padded[:, : tensor.shape[1]] = tensor
    return padded


class SmolVLAPolicy(VLAPolicy):
    """SmolVLA on normalised batches; the task arrives tokenised (`observation.language.*`)."""

    config_class = SmolVLAConfig
    config: SmolVLAConfig

    def build_model(self, *, load_backbone_weights: bool) -> SmolVLAFlowMatching:
        load_vlm_weights = self.config.load_vlm_weights and load_backbone_weights
        return SmolVLAFlowMatching(self.config, load_vlm_weights=load_vlm_weights)

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

    def prepare_camera(self, batch: Batch, key: str) -> tuple[Tensor, Tensor]:
        """The camera resized with padding (top and left) to `resize_imgs_with_padding`, its
        rows masked by `<camera>_padding_mask` when the batch has one."""
        image = last_step(batch[key], 4)
        if self.config.resize_imgs_with_padding is not None:
            # LeRobot passes the pair's second number as the height (its images are square).
            width, height = self.config.resize_imgs_with_padding
            image = resize_with_pad(image, height, width, centred=False)
        mask_key = f"{key}_padding_mask"
        if mask_key in batch:
            return image * 2.0 - 1.0, batch[mask_key].bool()
        return image * 2.0 - 1.0, torch.ones(image.shape[0], dtype=torch.bool, device=image.device)

    def placeholder_count(self, missing: int) -> int:
        """Placeholders for the cameras the batch lacks, up to `empty_cameras` of them."""
        return min(missing, self.config.empty_cameras)

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        losses = self.model(self.inputs(batch), self.actions(batch))
        losses = losses[:, :, : self.config.action_dim]
        is_pad = batch.get("action_is_pad")
        if is_pad is None:
            loss = losses.mean()
        else:
            losses = losses * (~is_pad).unsqueeze(-1)
            valid = ((~is_pad).sum() * losses.shape[-1]).clamp_min(1)
            loss = losses.sum() / valid
        return loss, {"loss": loss.item()}

    def fsdp_units(self) -> list[nn.Module | tuple[nn.Module, ...]]:
        """The vision encoder's layers, and at each depth the VLM's text layer with the expert
        layer beside it: joint and cross attention run the two as one step, part by part."""
        from rlctl.adapters.policies.wrap_units import decoder_layer_parts, layer_stacks

        backbone = self.model.vlm_with_expert
        units: list[nn.Module | tuple[nn.Module, ...]] = list(
            layer_stacks(backbone.vlm.model.vision_model)
        )
        for index, layer in enumerate(backbone.text_model.layers):
            expert = backbone._expert_at[index]
            pair = [layer] if expert is None else [layer, backbone.lm_expert.layers[expert]]
            units.append(decoder_layer_parts(*pair))
        return units
