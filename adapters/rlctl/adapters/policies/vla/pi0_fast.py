"""π0-FAST (Pertsch et al. 2025): a PaliGemma that writes its action chunk as FAST tokens.

    images (SigLIP) + "Task: ..., State: <256 bins>;\\n" tokens + <bos>   -> PaliGemma's Gemma
    then, one token at a time:  "Action: " <FAST tokens> "|"              -> lm_head, argmax
    FAST tokens  --(inverse DCT of the BPE's coefficients, `fast`)-->  chunk (H, action_dim)

Training is next-token cross-entropy over the action tokens the pre-processor wrote
(`tokenizer.ActionTokenizerStep`: `<bos> Action: <FAST> | <eos>`), which attend to the images and
the prompt and causally to each other. Inference runs the images, the prompt and <bos> once
(they see each other, as LeRobot's decoding has it) and then each new token over their cached
keys and values (`backbones.paligemma.run_vlm`), greedily (stopping once every row wrote "|") or
sampling at `temperature`; `use_kv_cache=false` runs the whole sequence again at each token.
`speed_paths` (on by default; the same logits up to float rounding)
leaves out what no token attends to and decodes over keys and values written in place into
buffers made once, with rotary tables made once and fused attention (`_decode_fast`). The
text is then read as LeRobot reads it: cut at the first "|", "Action: " removed, the rest mapped
back to FAST ids and decoded into a chunk of `n_action_steps` steps (LeRobot's horizon).

Parameter names are LeRobot 0.6.1's (`model.paligemma_with_expert.paligemma...`): a LeRobot
checkpoint loads as it is. As in LeRobot, the lm_head and the token embeddings are two matrices
(PaliGemma ties them; a checkpoint holding the lm_head alone fills the embeddings with it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from rlctl.adapters.policies.base import Batch
from rlctl.adapters.policies.vla import masks
from rlctl.adapters.policies.vla.backbones.paligemma import (
    ATTENTION_MASK_VALUE,
    KVCache,
    PaliGemmaParts,
    build_paligemma,
)
from rlctl.adapters.policies.vla.fast import FASTTokenizer, load_action_tokenizer
from rlctl.adapters.policies.vla.inputs import openpi_camera
from rlctl.adapters.policies.vla.loading import into_process_memory
from rlctl.adapters.policies.vla.pi0 import tokens_after_normalizer, with_relative_pair
from rlctl.adapters.policies.vla.policy import VLAModel
from rlctl.adapters.policies.vla.rotary import gemma_rope_tables
from rlctl.adapters.policies.vla.tokenizer import (
    ACTION_TOKEN_MASK,
    ACTION_TOKENS,
    ActionTextIds,
    ActionTokenizerConfig,
    ActionTokenizerStep,
    Pi0FastStatePrompt,
    Pi05PromptConfig,
    TokenizerStep,
    load_action_text_ids,
)
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.policies.pi0_fast import PI0FastConfig
from rlctl.domain.processors import ProcessorStep
from rlctl.domain.processors.steps.task_text import (
    LANGUAGE_ATTENTION_MASK,
    LANGUAGE_TOKENS,
    TokenizerConfig,
)

EMBED_TOKENS = "model.paligemma_with_expert.paligemma.model.language_model.embed_tokens.weight"
LM_HEAD = "model.paligemma_with_expert.paligemma.lm_head.weight"
# LeRobot's image features are divided and multiplied again by this (a no-op but for rounding).
IMAGE_NORM = 2048**0.5


class PI0FastPaliGemma(PaliGemmaParts):
    """LeRobot's `PI0FastPaliGemma`: the PaliGemma alone."""

    def __init__(self, config: PI0FastConfig) -> None:
        super().__init__()
        sizes = config.vlm_sizes
        self.paligemma = build_paligemma(sizes, config.image_resolution[0])
        self.width = sizes.width
        self.head_dim = sizes.head_dim
        self.gradient_checkpointing = config.gradient_checkpointing
        self.set_precision(config.dtype)

    def embed_image(self, image: Tensor) -> Tensor:
        return super().embed_image(image) / IMAGE_NORM * IMAGE_NORM

    def logits(self, hidden: Tensor) -> Tensor:
        """The last layer's output, normed, through the lm_head."""
        normed, _ = self.paligemma.model.language_model.norm(hidden)
        logits: Tensor = self.paligemma.lm_head(normed)
        return logits


class PI0FastModel(nn.Module):
    """LeRobot's `PI0FastPytorch`: the prefix, the loss over action tokens, the decoding."""

    def __init__(self, config: PI0FastConfig) -> None:
        super().__init__()
        self.config = config
        self.paligemma_with_expert = PI0FastPaliGemma(config)
        # Inference leaves out what no token attends to (placeholder cameras, the prompt's
        # padding): the same tokens, less work. False runs LeRobot's sequence as it is.
        self.speed_paths = True

    def embed_prefix(
        self, images: list[Tensor], image_masks: list[Tensor], tokens: Tensor, token_masks: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Each image's patches, then the tokens: (embeddings, padding mask)."""
        model = self.paligemma_with_expert
        embeds, pads = [], []
        for image, mask in zip(images, image_masks, strict=True):
            embedded = self._checkpointed(model.embed_image, image)
            embeds.append(embedded)
            pads.append(mask[:, None].expand(embedded.shape[0], embedded.shape[1]))
        embeds.append(self._checkpointed(model.embed_language_tokens, tokens))
        pads.append(token_masks)
        return torch.cat(embeds, dim=1), torch.cat(pads, dim=1)

    def _checkpointed(self, function: Any, *args: Tensor) -> Tensor:
        if self.config.gradient_checkpointing and self.training:
            out: Tensor = checkpoint(function, *args, use_reentrant=False)
            return out
        result: Tensor = function(*args)
        return result

    # -- training ------------------------------------------------------------------------------

    def loss(
        self,
        images: list[Tensor],
        image_masks: list[Tensor],
        tokens: Tensor,
        token_masks: Tensor,
        action_tokens: Tensor,
        action_masks: Tensor,
    ) -> Tensor:
        """Mean cross-entropy of each action token given those before it (padding left out)."""
        model = self.paligemma_with_expert
        prefix, prefix_pad = self.embed_prefix(images, image_masks, tokens, token_masks)
        actions = self._checkpointed(model.embed_language_tokens, action_tokens)
        embeds = torch.cat([prefix, actions], dim=1)
        pads = torch.cat([prefix_pad, action_masks.to(torch.bool)], dim=1)
        # The prefix is one block; each action token starts its own (causal among them).
        blocks = torch.cat(
            [torch.zeros_like(prefix_pad, dtype=torch.int64), torch.ones_like(action_tokens)],
            dim=1,
        )
        allowed = masks.attention_masks_2d(pads, blocks)
        mask = masks.additive_mask(allowed, ATTENTION_MASK_VALUE)
        hidden, _ = model.run_vlm(
            embeds, mask.to(model.vlm_dtype(embeds).dtype), masks.positions(pads)
        )
        count = action_tokens.shape[1]
        logits = model.logits(hidden[:, -count:])[:, :-1]
        targets, weights = action_tokens[:, 1:], action_masks[:, 1:].float()
        per_token = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
        ).reshape(targets.shape)
        return (per_token * weights).sum() / weights.sum().clamp(min=1)

    # -- inference ------------------------------------------------------------------------------

    @torch.no_grad()
    def generate(
        self,
        images: list[Tensor],
        image_masks: list[Tensor],
        tokens: Tensor,
        token_masks: Tensor,
        text: ActionTextIds,
    ) -> Tensor:
        """(B, max_decoding_steps) generated ids; with greedy decoding over the cache, the
        columns after every row wrote "|" stay 0 (LeRobot's)."""
        rows, device = tokens.shape[0], tokens.device
        if self.speed_paths:
            images, image_masks = masks.drop_unseen_images(images, image_masks)
            tokens, token_masks = masks.seen_only(token_masks, tokens, token_masks)
        bos = torch.full((rows, 1), text.bos, dtype=torch.long, device=device)
        tokens = torch.cat([tokens, bos], dim=1)
        token_masks = torch.cat(
            [token_masks.to(torch.bool), torch.ones_like(bos, dtype=torch.bool)], dim=1
        )
        embeds, pads = self.embed_prefix(images, image_masks, tokens, token_masks)
        # Images, prompt and <bos> all see each other.
        allowed = masks.attention_masks_2d(pads, torch.zeros_like(pads, dtype=torch.int64))
        if self.config.use_kv_cache and self.speed_paths:
            return self._decode_fast(embeds, pads, text)
        if self.config.use_kv_cache:
            return self._decode_cached(embeds, pads, allowed, text)
        return self._decode_whole(embeds, pads, allowed)

    def _pick(self, logits: Tensor) -> Tensor:
        temperature = self.config.temperature
        if temperature > 0:
            probs = torch.softmax(logits / temperature, dim=-1)
            return torch.multinomial(probs, num_samples=1)
        return torch.argmax(logits, dim=-1, keepdim=True)

    def _decode_cached(
        self, embeds: Tensor, pads: Tensor, allowed: Tensor, text: ActionTextIds
    ) -> Tensor:
        model = self.paligemma_with_expert
        steps, rows = self.config.max_decoding_steps, embeds.shape[0]
        generated = torch.zeros((rows, steps), dtype=torch.long, device=embeds.device)
        hidden = model.vlm_dtype(embeds)
        mask = masks.additive_mask(allowed, ATTENTION_MASK_VALUE).to(hidden.dtype)
        hidden, cache = model.run_vlm(hidden, mask, masks.positions(pads))
        # Stopping early changes nothing greedy decoding writes; sampling runs every step, so
        # the random numbers it draws stay those of LeRobot's.
        greedy = self.config.temperature == 0
        finished = torch.zeros(rows, dtype=torch.bool, device=embeds.device)
        for step in range(steps):
            next_token = self._pick(model.logits(hidden[:, -1:])[:, -1])
            generated[:, step] = next_token[:, 0]
            finished |= next_token[:, 0] == text.end_of_action
            if (greedy and bool(finished.all())) or step == steps - 1:
                break
            hidden, cache, pads = self._step(next_token, cache, pads)
        return generated

    def _decode_fast(self, embeds: Tensor, pads: Tensor, text: ActionTextIds) -> Tensor:
        """`_decode_cached`'s speed path, the same tokens up to float rounding: the keys and
        values go into buffers made once for the whole sequence (`run_vlm_into`), the rotary
        tables are made once for every position, attention is one fused kernel, and no mask is
        built where every token is real (one row, or rows without padding)."""
        model = self.paligemma_with_expert
        steps, (rows, length) = self.config.max_decoding_steps, pads.shape
        generated = torch.zeros((rows, steps), dtype=torch.long, device=embeds.device)
        hidden = model.vlm_dtype(embeds)
        capacity = length + steps
        buffers = model.key_value_buffers(rows, capacity, hidden)
        table = torch.arange(capacity, device=embeds.device)[None]
        cos, sin = gemma_rope_tables(table, model.head_dim, hidden.dtype)

        def rotary(positions: Tensor) -> tuple[Tensor, Tensor]:
            # Padding's positions (-1 before the first real token) are clamped: no one sees it.
            at = positions.clamp(min=0)
            return cos[0, 0][at][:, None], sin[0, 0][at][:, None]

        if bool(pads.all()):
            prefix_mask = key_mask = None
        else:
            allowed = masks.attention_masks_2d(pads, torch.zeros_like(pads, dtype=torch.int64))
            prefix_mask = masks.additive_mask(allowed, ATTENTION_MASK_VALUE).to(hidden.dtype)
            seen = torch.cat([pads, pads.new_ones((rows, steps))], dim=1)
            key_mask = masks.additive_mask(seen[:, None], ATTENTION_MASK_VALUE).to(hidden.dtype)
        hidden = model.run_vlm_into(hidden, prefix_mask, rotary(masks.positions(pads)), buffers)
        first = pads.sum(dim=1, keepdim=True)
        greedy = self.config.temperature == 0
        finished = torch.zeros(rows, dtype=torch.bool, device=embeds.device)
        for step in range(steps):
            next_token = self._pick(model.logits(hidden[:, -1:])[:, -1])
            generated[:, step] = next_token[:, 0]
            finished |= next_token[:, 0] == text.end_of_action
            if (greedy and bool(finished.all())) or step == steps - 1:
                break
            embedded = model.embed_language_tokens(next_token)
            mask = None if key_mask is None else key_mask[..., : length + step + 1]
            hidden = model.run_vlm_into(embedded, mask, rotary(first + step), buffers)
        return generated

    def _step(self, token: Tensor, cache: KVCache, pads: Tensor) -> tuple[Tensor, KVCache, Tensor]:
        """One new token over the cache: it sees every real token before it and itself."""
        model = self.paligemma_with_expert
        embedded = model.vlm_dtype(model.embed_language_tokens(token))
        pads = torch.cat([pads, torch.ones_like(token, dtype=torch.bool)], dim=1)
        position = pads.sum(dim=1, keepdim=True) - 1
        mask = masks.additive_mask(pads[:, None, :], ATTENTION_MASK_VALUE).to(embedded.dtype)
        hidden, cache = model.run_vlm(embedded, mask, position, past=cache)
        return hidden, cache, pads

    def _decode_whole(self, embeds: Tensor, pads: Tensor, allowed: Tensor) -> Tensor:
        """LeRobot's decoding without a cache: the whole sequence at every token."""
        model = self.paligemma_with_expert
        steps, rows = self.config.max_decoding_steps, embeds.shape[0]
        generated = torch.zeros((rows, steps), dtype=torch.long, device=embeds.device)
        embeds = model.vlm_dtype(embeds)
        for step in range(steps):
            mask = masks.additive_mask(allowed, ATTENTION_MASK_VALUE).to(embeds.dtype)
            hidden, _ = model.run_vlm(embeds, mask, masks.positions(pads))
            next_token = self._pick(model.logits(hidden[:, -1:])[:, -1])
            generated[:, step] = next_token[:, 0]
            if step == steps - 1:
                break
            embedded = model.vlm_dtype(model.embed_language_tokens(next_token))
            embeds = torch.cat([embeds, embedded], dim=1)
            pads = torch.cat([pads, torch.ones_like(next_token, dtype=torch.bool)], dim=1)
            grown = torch.zeros(
                (rows, pads.shape[1], pads.shape[1]), dtype=torch.bool, device=pads.device
            )
            grown[:, :-1, :-1] = allowed
            grown[:, -1, :] = pads
            allowed = grown
        return generated


def action_ids(sequence: list[int], text: ActionTextIds, *, validate: bool) -> list[int]:
    """The FAST part of a generated sequence, as LeRobot reads it: cut at the first "|", every
    "Action: " removed. With `validate`, a sequence that does not start with the tokens
    "Action" and ":" is refused."""
    if validate and (len(sequence) < 2 or (sequence[0], sequence[1]) != text.action_word):
        raise InvalidInput(
            "π0-FAST generated text that does not start with 'Action:', so it holds no "
            "action chunk",
            where="policy.validate_action_token_prefix",
            hint="the model is not trained enough for these inputs (train longer, check the "
            "task text and cameras); --policy.validate_action_token_prefix=false decodes such "
            "text anyway (as a chunk of zeros at worst)",
        )
    if text.end_of_action in sequence:
        sequence = sequence[: sequence.index(text.end_of_action)]
    prefix, at = list(text.prefix), 0
    while prefix and at <= len(sequence) - len(prefix):
        if sequence[at : at + len(prefix)] == prefix:
            sequence = sequence[:at] + sequence[at + len(prefix) :]
        else:
            at += 1
    return sequence


class PI0FastPolicy(VLAModel):
    """π0-FAST on normalised batches whose prompt already holds the state."""

    config_class: ClassVar[type[PI0FastConfig]] = PI0FastConfig
    config: PI0FastConfig
    model: PI0FastModel

    def __init__(
        self,
        config: PI0FastConfig,
        *,
        load_backbone_weights: bool = True,
        action_tokenizer: FASTTokenizer | None = None,
        text_ids: ActionTextIds | None = None,
    ) -> None:
        if config.rtc_config is not None and config.rtc_config.enabled:
            raise ConfigError(
                "π0-FAST cannot use real-time chunking: it decodes tokens, it does not generate "
                "its chunks by flow matching",
                where="policy.rtc_config",
                hint="drop --policy.rtc_config, or set its enabled to false",
            )
        # What decoding needs, loaded once (before the model is built, so a missing tokenizer is
        # named at once): the FAST tokenizer, and PaliGemma's ids for the text around it.
        fast = action_tokenizer or load_action_tokenizer(config.action_tokenizer_name)
        text = text_ids or load_action_text_ids(config.text_tokenizer_name)
        super().__init__(config, load_backbone_weights=load_backbone_weights)
        self.action_tokenizer = fast
        self.text_ids = text

    def build_model(self, *, load_backbone_weights: bool) -> PI0FastModel:
        return PI0FastModel(self.config)

    @property
    def dtype(self) -> torch.dtype:
        # Inputs are images (the vision tower stays float32) and token ids.
        return torch.float32

    def prepare_camera(self, batch: Batch, key: str) -> tuple[Tensor, Tensor]:
        return openpi_camera(batch, key, self.config.image_resolution, self.device)

    # -- processors ----------------------------------------------------------------------------

    @classmethod
    def preprocessor_steps(cls, config: PI0FastConfig) -> list[ProcessorStep]:
        return [Pi0FastStatePrompt(Pi05PromptConfig(max_state_dim=config.max_state_dim))]

    @classmethod
    def arrange_processors(
        cls, config: PI0FastConfig, pre: list[ProcessorStep], post: list[ProcessorStep]
    ) -> tuple[list[ProcessorStep], list[ProcessorStep]]:
        """LeRobot's π0-FAST order: rename, batch, relative, normalise, state prompt, text
        tokenizer, action tokenizer, device; unnormalise, absolute, cpu."""
        pre, post = with_relative_pair(config, pre, post)
        text = TokenizerStep(
            TokenizerConfig(
                tokenizer_name=config.text_tokenizer_name,
                max_length=config.tokenizer_max_length,
                padding="max_length",
                padding_side="right",
            )
        )
        actions = ActionTokenizerStep(
            ActionTokenizerConfig(
                max_action_tokens=config.max_action_tokens,
                action_tokenizer_name=config.action_tokenizer_name,
                fast_skip_tokens=config.fast_skip_tokens,
                paligemma_tokenizer_name=config.text_tokenizer_name,
            )
        )
        return tokens_after_normalizer(pre, Pi0FastStatePrompt, [text, actions]), post

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        """A checkpoint holding only the lm_head (PaliGemma's tied matrix) fills the token
        embeddings with it, as LeRobot's loading does."""
        state = dict(state_dict)
        if LM_HEAD in state and EMBED_TOKENS not in state:
            state[EMBED_TOKENS] = state[LM_HEAD]
        result = super().load_state_dict(state, strict=strict, assign=assign)
        if self.model.speed_paths:
            # Decoding reads the language model's weights once per token: from the process's
            # memory rather than the checkpoint's file mapping (`into_process_memory`).
            # (The token embeddings, read a row per token, stay mapped.)
            parts = self.model.paligemma_with_expert
            into_process_memory(parts.vlm_layers)
            into_process_memory(parts.paligemma.lm_head)
        return result

    # -- training and inference ----------------------------------------------------------------

    def _prompt(self, batch: Batch) -> tuple[list[Tensor], list[Tensor], Tensor, Tensor]:
        images, image_masks = self.prepare_images(batch)
        if LANGUAGE_TOKENS not in batch:
            raise ConfigError(
                f"π0-FAST reads its prompt tokenised, but the batch has no {LANGUAGE_TOKENS}",
                where="policy_preprocessor",
                hint="run the batch through the policy's pre-processor (its tokenizer_processor)",
            )
        tokens = batch[LANGUAGE_TOKENS].to(self.device)
        token_masks = batch[LANGUAGE_ATTENTION_MASK].to(self.device, torch.bool)
        return images, image_masks, tokens, token_masks

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        if ACTION_TOKENS not in batch or ACTION_TOKEN_MASK not in batch:
            raise ConfigError(
                f"π0-FAST trains on action tokens, but the batch has no {ACTION_TOKENS}",
                where="policy_preprocessor",
                hint="the pre-processor's action_tokenizer_processor writes them from the "
                "batch's action chunk",
            )
        loss = self.model.loss(
            *self._prompt(batch),
            batch[ACTION_TOKENS].to(self.device),
            batch[ACTION_TOKEN_MASK].to(self.device, torch.bool),
        )
        # LeRobot's parts are "loss" and "ce_loss" (the same number); the training loop adds
        # the loss itself, so only the cross-entropy is a part here.
        return loss, {"ce_loss": loss.item()}

    @torch.no_grad()
    def generate(self, batch: Batch) -> Tensor:
        """The generated token ids (B, max_decoding_steps)."""
        return self.model.generate(*self._prompt(batch), self.text_ids)

    @torch.no_grad()
    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        """A normalised chunk (B, n_action_steps, action_dim) decoded from the generated tokens
        (`noise` is for flow-matching policies; π0-FAST has none)."""
        return self.detokenize(self.generate(batch))

    def detokenize(self, generated: Tensor) -> Tensor:
        """(B, n_action_steps, action_dim): as LeRobot 0.6.1 decodes, over `n_action_steps` steps
        (the first n_action_steps x action_dim coefficients); with n_action_steps = chunk_size
        (the default) that is the whole chunk the tokens were written for."""
        horizon, dim = self.config.n_action_steps, self.config.action_dim
        chunks = []
        for row in generated.tolist():
            kept = action_ids(row, self.text_ids, validate=self.config.validate_action_token_prefix)
            fast = self.text_ids.fast_to_text(
                torch.tensor(kept, dtype=torch.long), self.config.fast_skip_tokens
            )
            chunks.append(
                torch.from_numpy(self.action_tokenizer.decode(fast.tolist(), horizon, dim))
            )
        return torch.stack(chunks).to(device=generated.device, dtype=torch.float32)

    def fsdp_units(self) -> list[nn.Module | tuple[nn.Module, ...]]:
        """SigLIP's encoder layers, and each PaliGemma layer as its parts (the layers run part
        by part: queries, keys and values, then the output and the MLP)."""
        from rlctl.adapters.policies.wrap_units import decoder_layer_parts, layer_stacks

        backbone = self.model.paligemma_with_expert
        vision = backbone.paligemma.model.vision_tower.vision_model
        units: list[nn.Module | tuple[nn.Module, ...]] = list(layer_stacks(vision))
        units += [decoder_layer_parts(layer) for layer in backbone.vlm_layers]
        return units
