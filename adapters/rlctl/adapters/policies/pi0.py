"""π0 (Black et al. 2024): a PaliGemma prefix and a Gemma action expert, trained by flow matching.

    prefix:  images (SigLIP) + task tokens                      -> PaliGemma's Gemma
    suffix:  state_proj(state), then per action:                -> the action expert
             action_time_mlp([action_in_proj(x_t), sincos(t)])
    output:  action_out_proj(expert's last chunk_size tokens)   = velocity of the flow

Training draws a time t ~ Beta(1.5, 1) and noise, mixes x_t = t * noise + (1 - t) * actions, and
regresses the velocity noise - actions. Inference integrates the velocity from noise (t=1) to
actions (t=0) in `num_inference_steps` Euler steps, running the prefix once and the expert over
its cached keys and values at each step (see `paligemma`). The prefix leaves out what no token
attends to (placeholder cameras, the prompt's padding), what the suffix attends to is laid out
once per chunk, not per step, and π0.5's time conditioning is computed for all the steps at once
(`speed_paths`).

Parameter names are LeRobot 0.6.1's (`model.paligemma_with_expert...`, `model.state_proj`, ...),
so a LeRobot `model.safetensors` loads as it is. Loading a checkpoint builds the model on the
meta device and takes the file's tensors as its parameters: no random weights are made first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import Any, ClassVar

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl.adapters.policies.paligemma import (
    KVCache,
    PaliGemmaWithExpertModel,
    Velocity,
    additive_mask,
    drop_unseen,
    euler_integrate,
    euler_times,
    prefix_blocks,
    prepare_images,
    sample_time,
)
from rlctl.adapters.policies.rtc import PrefixGuidance, guided
from rlctl.adapters.policies.smolvla import attention_masks_2d, pad_vector, time_embedding
from rlctl.adapters.policies.tokenizer import PALIGEMMA_TOKENIZER, Pi0NewLineTask, TokenizerStep
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.policies.pi0 import PI0Config, PiConfig
from rlctl.domain.processors import (
    AbsoluteActions,
    Normalizer,
    ProcessorStep,
    RelativeActions,
    RelativeActionsConfig,
    Unnormalizer,
)
from rlctl.domain.processors.steps.task_text import (
    LANGUAGE_ATTENTION_MASK,
    LANGUAGE_TOKENS,
    TokenizerConfig,
)

OBS_STATE = "observation.state"
ACTION = "action"


class PI0FlowMatching(nn.Module):
    """LeRobot's `PI0Pytorch`: the embeddings around the PaliGemma and its expert, the training
    loss and the sampler."""

    adaptive_expert = False
    # Inference's speed paths, which give LeRobot's chunks up to float rounding (about 1e-6):
    # the prefix without what no token attends to (`drop_unseen`: a third less work for
    # π0.5's padded prompt), and what π0.5's expert needs of each Euler step's time computed
    # for all the steps at once (`prepare_times`: its norms' weights read once per chunk, not
    # once per step). False runs LeRobot's arithmetic step for step (the same chunks to the
    # bit).
    speed_paths = True

    def __init__(self, config: PiConfig) -> None:
        super().__init__()
        self.config = config
        self.paligemma_with_expert = PaliGemmaWithExpertModel(
            config, adaptive_expert=self.adaptive_expert
        )
        width = config.expert_sizes.width
        self.action_in_proj = nn.Linear(config.max_action_dim, width)
        self.action_out_proj = nn.Linear(width, config.max_action_dim)
        self._time_layers(width)

    def _time_layers(self, width: int) -> None:
        self.state_proj = nn.Linear(self.config.max_state_dim, width)
        self.action_time_mlp_in = nn.Linear(2 * width, width)
        self.action_time_mlp_out = nn.Linear(width, width)

    def _checkpointed(self, function: Callable[..., Tensor], *args: Tensor) -> Tensor:
        if self.config.gradient_checkpointing and self.training:
            out: Tensor = checkpoint(function, *args, use_reentrant=False)
            return out
        return function(*args)

    def embed_prefix(
        self, images: list[Tensor], image_masks: list[Tensor], tokens: Tensor, token_masks: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        return prefix_blocks(
            self.paligemma_with_expert, images, image_masks, tokens, token_masks, self._checkpointed
        )

    def _time(self, time: Tensor) -> Tensor:
        width = self.action_in_proj.out_features
        return time_embedding(time, width, self.config.min_period, self.config.max_period).type(
            time.dtype
        )

    def embed_suffix(
        self, state: Tensor | None, x_t: Tensor, time: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """The state token, then one token per action mixing it with the time. Returns
        (embeddings, padding mask, block starts, the experts' norm condition: none for π0)."""
        assert state is not None
        if self.state_proj.weight.dtype == torch.float32:
            state = state.to(torch.float32)
        state_embeds = self._checkpointed(self.state_proj, state)[:, None, :]
        actions = self._checkpointed(self.action_in_proj, x_t)
        time_embeds = self._time(time)[:, None, :].expand_as(actions)
        mixed = torch.cat([actions, time_embeds], dim=2)
        mixed = self._checkpointed(self._action_time_mlp, mixed)
        embeds = torch.cat([state_embeds, mixed], dim=1)
        return embeds, *self._masks(embeds, self.suffix_blocks()), None

    def suffix_blocks(self) -> list[bool]:
        """Where the suffix's blocks start. The state starts a block, the first action another:
        the prefix sees neither, the state does not see the actions, the actions see each
        other."""
        return [True, True] + [False] * (self.config.chunk_size - 1)

    def _action_time_mlp(self, mixed: Tensor) -> Tensor:
        return self.action_time_mlp_out(F.silu(self.action_time_mlp_in(mixed)))

    @staticmethod
    def _masks(embeds: Tensor, blocks: list[bool]) -> tuple[Tensor, Tensor]:
        return suffix_masks(blocks, embeds.shape[0], embeds.dtype, embeds.device)

    def _velocity(self, suffix_out: Tensor) -> Tensor:
        out = suffix_out[:, -self.config.chunk_size :].to(torch.float32)
        velocity: Tensor = self._checkpointed(self.action_out_proj, out)
        return velocity

    def forward(
        self,
        images: list[Tensor],
        image_masks: list[Tensor],
        tokens: Tensor,
        token_masks: Tensor,
        state: Tensor | None,
        actions: Tensor,
        noise: Tensor,
        time: Tensor,
    ) -> Tensor:
        """Per-element squared error (B, chunk, max_action_dim) of the predicted velocity."""
        t = time[:, None, None]
        x_t = t * noise + (1 - t) * actions
        target = noise - actions
        prefix, prefix_pad, prefix_starts = self.embed_prefix(
            images, image_masks, tokens, token_masks
        )
        suffix, suffix_pad, suffix_starts, cond = self.embed_suffix(state, x_t, time)
        pads = torch.cat([prefix_pad, suffix_pad], dim=1)
        starts = torch.cat([prefix_starts.to(suffix_starts.dtype), suffix_starts], dim=1)
        mask = additive_mask(attention_masks_2d(pads, starts))
        positions = torch.cumsum(pads, dim=1) - 1
        suffix_out = self.paligemma_with_expert(prefix, suffix, mask, positions, cond)
        return F.mse_loss(target, self._velocity(suffix_out), reduction="none")

    @torch.no_grad()
    def sample_actions(
        self,
        images: list[Tensor],
        image_masks: list[Tensor],
        tokens: Tensor,
        token_masks: Tensor,
        state: Tensor | None,
        noise: Tensor,
        guidance: PrefixGuidance | None = None,
    ) -> Tensor:
        """Integrate the velocity from noise (t=1) to actions (t=0); with `guidance`, towards
        the previous chunk's leftover (real-time chunking)."""
        steps = self.config.num_inference_steps
        times = euler_times(noise, steps)
        velocity = self.velocity_field(images, image_masks, tokens, token_masks, state, times)
        return euler_integrate(guided(velocity, guidance), noise, steps, times)

    def velocity_field(
        self,
        images: list[Tensor],
        image_masks: list[Tensor],
        tokens: Tensor,
        token_masks: Tensor,
        state: Tensor | None,
        times: list[Tensor] | None = None,
    ) -> Velocity:
        """The observation's velocity field `velocity(x_t, time)`: the prefix runs once here,
        each call runs the expert over its cached keys and values. `times`, the sampler's
        times if known, may be prepared for (`prepare_times`)."""
        if self.speed_paths:
            images, image_masks, tokens, token_masks = drop_unseen(
                images, image_masks, tokens, token_masks
            )
        prefix, prefix_pad, prefix_starts = self.embed_prefix(
            images, image_masks, tokens, token_masks
        )
        mask = additive_mask(attention_masks_2d(prefix_pad, prefix_starts))
        positions = torch.cumsum(prefix_pad, dim=1) - 1
        cache = self.paligemma_with_expert.fill_cache(prefix, mask, positions)
        suffix_mask, rotary = self.suffix_attention(prefix_pad)
        prepared = self.prepare_times(times) if self.speed_paths and times else []

        def velocity(x_t: Tensor, time: Tensor) -> Tensor:
            # A time prepared for is the very tensor the sampler passes (and RTC passes on).
            ready = next((mods for t, mods in prepared if t is time), None)
            return self.denoise_step(state, cache, suffix_mask, rotary, x_t, time, ready)

        return velocity

    def prepare_times(self, times: list[Tensor]) -> list[tuple[Tensor, list[Tensor]]]:
        """What each of the sampler's times needs that x_t does not change, computed for all
        of them at once (π0.5: its norms' modulations); π0 has nothing to prepare."""
        return []

    def suffix_attention(self, prefix_pad: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """What the suffix attends to over [prefix, suffix] (an additive mask) and its rotary
        tables: they depend on the prefix's padding only, not on x_t or the time, so a chunk
        computes them once for all its Euler steps."""
        batch = prefix_pad.shape[0]
        suffix_pad, suffix_starts = suffix_masks(
            self.suffix_blocks(), batch, torch.float32, prefix_pad.device
        )
        suffix_len = suffix_pad.shape[1]
        prefix_mask = prefix_pad[:, None, :].expand(batch, suffix_len, prefix_pad.shape[1])
        allowed = torch.cat([prefix_mask, attention_masks_2d(suffix_pad, suffix_starts)], dim=2)
        positions = prefix_pad.sum(dim=-1)[:, None] + torch.cumsum(suffix_pad, dim=1) - 1
        rotary = self.paligemma_with_expert.expert_rotary(positions)
        return additive_mask(allowed), rotary

    def denoise_step(
        self,
        state: Tensor | None,
        cache: KVCache,
        mask: Tensor,
        rotary: tuple[Tensor, Tensor],
        x_t: Tensor,
        time: Tensor,
        modulations: list[Tensor] | None = None,
    ) -> Tensor:
        """One evaluation of the velocity at (x_t, time) over the cached prefix."""
        suffix, _, _, cond = self.embed_suffix(state, x_t, time)
        suffix_out = self.paligemma_with_expert.expert_step(
            suffix, cache, mask, rotary, cond, modulations
        )
        return self._velocity(suffix_out)


def suffix_masks(
    blocks: list[bool], batch: int, dtype: torch.dtype, device: torch.device
) -> tuple[Tensor, Tensor]:
    """The suffix's padding (none) and block starts, (batch, len(blocks)) each."""
    pads = torch.ones(batch, len(blocks), dtype=torch.bool, device=device)
    starts = torch.tensor(blocks, dtype=dtype, device=device)
    return pads, starts[None, :].expand(batch, -1)


class PiPolicy(PolicyModel):
    """What the π0 and π0.5 policies share; the task arrives tokenised
    (`observation.language.*`)."""

    config_class: ClassVar[type[PolicyConfig]] = PiConfig
    flow_matching: ClassVar[type[PI0FlowMatching]] = PI0FlowMatching

    def __init__(self, config: PiConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        # Without backbone weights the model is about to be loaded from a checkpoint: build it
        # on the meta device (no memory, no random init); load_state_dict assigns the file's
        # tensors.
        building = nullcontext() if load_backbone_weights else torch.device("meta")
        with building:
            self.model = self.flow_matching(config)
        self.config: PiConfig = config

    @classmethod
    def tokenizer_step(cls, config: PiConfig) -> TokenizerStep:
        return TokenizerStep(
            TokenizerConfig(
                tokenizer_name=PALIGEMMA_TOKENIZER,
                max_length=config.tokenizer_max_length,
                padding="max_length",
                padding_side="right",
            )
        )

    @classmethod
    def arrange_processors(
        cls, config: PiConfig, pre: list[ProcessorStep], post: list[ProcessorStep]
    ) -> tuple[list[ProcessorStep], list[ProcessorStep]]:
        """LeRobot's π0 pipelines always hold the relative-action pair (disabled unless
        `use_relative_actions`): relative before the normaliser, absolute after the
        unnormaliser."""
        if not any(isinstance(step, RelativeActions) for step in pre):
            relative = RelativeActionsConfig(
                enabled=False,
                exclude_joints=config.relative_exclude_joints,
                action_names=config.action_feature_names,
            )
            at = next(i for i, step in enumerate(pre) if isinstance(step, Normalizer))
            pre = [*pre[:at], RelativeActions(relative), *pre[at:]]
            at = next(i for i, step in enumerate(post) if isinstance(step, Unnormalizer))
            post = [*post[: at + 1], AbsoluteActions(relative), *post[at + 1 :]]
        return pre, post

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
                f"the checkpoint left {len(left)} tensors unset: {', '.join(left[:8])}",
                where="model.safetensors",
            )
        # Assigned tensors come in the file's dtype; each takes the one the model was built
        # with (`dtype`). requires_grad is the module's (assign keeps it).
        for name, param in self.named_parameters():
            if param.dtype != dtypes[name]:
                param.data = param.data.to(dtypes[name])
        self.model.paligemma_with_expert.materialize_buffers()

    @property
    def dtype(self) -> torch.dtype:
        # Inputs take the dtype of the projections around the Gemmas (float32).
        return self.model.action_in_proj.weight.dtype

    def _state(self, batch: Batch) -> Tensor | None:
        state = batch[OBS_STATE]
        state = state[:, -1, :] if state.ndim > 2 else state
        return pad_vector(state, self.config.max_state_dim)

    def _inputs(
        self, batch: Batch
    ) -> tuple[list[Tensor], list[Tensor], Tensor, Tensor, Tensor | None]:
        images, masks = prepare_images(self.config, batch, self.device)
        return (
            images,
            masks,
            batch[LANGUAGE_TOKENS],
            batch[LANGUAGE_ATTENTION_MASK],
            self._state(batch),
        )

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        images, masks, tokens, token_masks, state = self._inputs(batch)
        actions = pad_vector(batch[ACTION], self.config.max_action_dim)
        noise = torch.randn(actions.shape, dtype=torch.float32, device=actions.device)
        time = sample_time(self.config, actions.shape[0], actions.device)
        losses = self.model(images, masks, tokens, token_masks, state, actions, noise, time)
        # LeRobot's π0 averages over every step of the chunk, padded ones included.
        loss = losses[:, :, : self.config.action_dim].mean()
        return loss, {"loss": loss.item()}

    @torch.no_grad()
    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        return self.predict_guided_chunk(batch, None, noise)

    @torch.no_grad()
    def predict_guided_chunk(
        self, batch: Batch, guidance: PrefixGuidance | None, noise: Tensor | None = None
    ) -> Tensor:
        images, masks, tokens, token_masks, state = self._inputs(batch)
        batch_size = tokens.shape[0]
        if noise is None:
            shape = (batch_size, self.config.chunk_size, self.config.max_action_dim)
            noise = torch.randn(shape, dtype=torch.float32, device=tokens.device)
        noise = noise.to(device=tokens.device, dtype=torch.float32)
        actions = self.model.sample_actions(
            images, masks, tokens, token_masks, state, noise, guidance
        )
        return actions[:, :, : self.config.action_dim]


class PI0Policy(PiPolicy):
    """π0 on normalised batches."""

    config_class = PI0Config

    @classmethod
    def preprocessor_steps(cls, config: PI0Config) -> list[ProcessorStep]:
        """LeRobot's π0 steps between batching and the device move: the task ends with a
        newline, then PaliGemma's tokenizer reads it (padded to tokenizer_max_length)."""
        return [Pi0NewLineTask(), cls.tokenizer_step(config)]
