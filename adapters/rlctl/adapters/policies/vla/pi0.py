"""π0 (Black et al. 2024): a PaliGemma prefix and a Gemma action expert, trained by flow matching.

    prefix:  images (SigLIP) + task tokens                      -> PaliGemma's Gemma
    suffix:  state_proj(state), then per action:                -> the action expert
             action_time_mlp([action_in_proj(x_t), sincos(t)])
    output:  action_out_proj(expert's last chunk_size tokens)   = velocity of the flow

Training draws a time t ~ Beta(1.5, 1) and noise, mixes x_t = t * noise + (1 - t) * actions, and
regresses the velocity noise - actions (`flow_matching`). Inference integrates the velocity from
noise (t=1) to actions (t=0) in `num_inference_steps` Euler steps, running the prefix once and the
expert over its cached keys and values at each step (`backbones.paligemma`). On the speed paths
(`speed_paths`) the prefix leaves out what no token attends to (placeholder cameras, the prompt's
padding) and π0.5's time conditioning is computed for all the steps at once.

Parameter names are LeRobot 0.6.1's (`model.paligemma_with_expert...`, `model.state_proj`, ...),
so a LeRobot `model.safetensors` loads as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from rlctl.adapters.policies.base import Batch
from rlctl.adapters.policies.processors import DeviceStep
from rlctl.adapters.policies.vla import masks
from rlctl.adapters.policies.vla.backbones.paligemma import (
    ATTENTION_MASK_VALUE,
    KVCache,
    PaliGemmaWithExpertModel,
)
from rlctl.adapters.policies.vla.flow_matching import FlowMatching, Velocity, beta_times
from rlctl.adapters.policies.vla.inputs import VLAInputs, openpi_camera
from rlctl.adapters.policies.vla.policy import VLAPolicy
from rlctl.adapters.policies.vla.rotary import Rotary
from rlctl.adapters.policies.vla.tokenizer import (
    PALIGEMMA_TOKENIZER,
    Pi0NewLineTask,
    TokenizerStep,
)
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
from rlctl.domain.processors.steps.task_text import TokenizerConfig


class PI0FlowMatching(FlowMatching):
    """LeRobot's `PI0Pytorch`: the embeddings around the PaliGemma and its expert."""

    adaptive_expert = False

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

    @property
    def euler_steps(self) -> int:
        return self.config.num_inference_steps

    def sample_time(self, batch: int, device: torch.device) -> Tensor:
        config = self.config
        return beta_times(
            batch,
            device,
            config.time_sampling_beta_alpha,
            config.time_sampling_beta_beta,
            config.time_sampling_scale,
            config.time_sampling_offset,
        )

    def _checkpointed(self, function: Callable[..., Tensor], *args: Tensor) -> Tensor:
        if self.config.gradient_checkpointing and self.training:
            out: Tensor = checkpoint(function, *args, use_reentrant=False)
            return out
        return function(*args)

    # -- the sequence: prefix and suffix --------------------------------------------------------

    def embed_prefix(self, inputs: VLAInputs) -> tuple[Tensor, Tensor, Tensor]:
        """Each image's patches, then the task's tokens, all in one block (they see each other).
        Returns (embeddings, padding mask, block starts)."""
        model = self.paligemma_with_expert
        embeds, pads = [], []
        for image, mask in zip(inputs.images, inputs.image_masks, strict=True):
            embedded = self._checkpointed(model.embed_image, image)
            embeds.append(embedded)
            pads.append(mask[:, None].expand(embedded.shape[0], embedded.shape[1]))
        embeds.append(self._checkpointed(model.embed_language_tokens, inputs.tokens))
        pads.append(inputs.token_masks)
        embeds_t, pads_t = torch.cat(embeds, dim=1), torch.cat(pads, dim=1)
        blocks = torch.zeros(pads_t.shape, dtype=torch.bool, device=pads_t.device)
        return embeds_t, pads_t, blocks

    def _time(self, time: Tensor) -> Tensor:
        return self.time_features(time, self.action_in_proj.out_features).type(time.dtype)

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
        return embeds, *self._suffix_masks(embeds), None

    def suffix_blocks(self) -> list[bool]:
        """Where the suffix's blocks start. The state starts a block, the first action another:
        the prefix sees neither, the state does not see the actions, the actions see each
        other."""
        return [True, True] + [False] * (self.config.chunk_size - 1)

    def _suffix_masks(self, embeds: Tensor) -> tuple[Tensor, Tensor]:
        return masks.block_masks(self.suffix_blocks(), embeds.shape[0], embeds.dtype, embeds.device)

    def _action_time_mlp(self, mixed: Tensor) -> Tensor:
        return self.action_time_mlp_out(F.silu(self.action_time_mlp_in(mixed)))

    def _velocity(self, suffix_out: Tensor) -> Tensor:
        out = suffix_out[:, -self.config.chunk_size :].to(torch.float32)
        velocity: Tensor = self._checkpointed(self.action_out_proj, out)
        return velocity

    # -- training ------------------------------------------------------------------------------

    def training_velocity(self, inputs: VLAInputs, x_t: Tensor, time: Tensor) -> Tensor:
        prefix, prefix_pad, prefix_blocks = self.embed_prefix(inputs)
        suffix, suffix_pad, suffix_blocks, cond = self.embed_suffix(inputs.state, x_t, time)
        allowed, at = masks.joint_layout(prefix_pad, prefix_blocks, suffix_pad, suffix_blocks)
        mask = masks.additive_mask(allowed, ATTENTION_MASK_VALUE)
        return self._velocity(self.paligemma_with_expert(prefix, suffix, mask, at, cond))

    # -- inference: the prefix once, then the expert alone at each Euler step -----------------

    def plain_velocity_field(self, inputs: VLAInputs, times: list[Tensor]) -> Velocity:
        """LeRobot's arithmetic: the prefix through the PaliGemma once, filling the cache; each
        call runs the expert over it."""
        return self._cached_velocity(inputs, prepared=[])

    def fast_velocity_field(self, inputs: VLAInputs, times: list[Tensor]) -> Velocity:
        """The prefix without what no token attends to, and what each of the sampler's `times`
        needs that x_t does not change prepared at once (`prepare_times`)."""
        return self._cached_velocity(drop_unseen(inputs), self.prepare_times(times))

    def _cached_velocity(
        self, inputs: VLAInputs, prepared: list[tuple[Tensor, list[Tensor]]]
    ) -> Velocity:
        prefix, prefix_pad, prefix_blocks = self.embed_prefix(inputs)
        allowed = masks.attention_masks_2d(prefix_pad, prefix_blocks)
        mask = masks.additive_mask(allowed, ATTENTION_MASK_VALUE)
        cache = self.paligemma_with_expert.fill_cache(prefix, mask, masks.positions(prefix_pad))
        suffix_mask, rotary = self.suffix_attention(prefix_pad)

        def velocity(x_t: Tensor, time: Tensor) -> Tensor:
            # A time prepared for is the very tensor the sampler passes (and RTC passes on).
            ready = next((mods for t, mods in prepared if t is time), None)
            return self.denoise_step(inputs.state, cache, suffix_mask, rotary, x_t, time, ready)

        return velocity

    def prepare_times(self, times: list[Tensor]) -> list[tuple[Tensor, list[Tensor]]]:
        """What each of the sampler's times needs that x_t does not change, computed for all
        of them at once (π0.5: its norms' modulations); π0 has nothing to prepare."""
        return []

    def suffix_attention(self, prefix_pad: Tensor) -> tuple[Tensor, Rotary]:
        """What the suffix attends to over [prefix, suffix] (an additive mask) and its rotary
        tables: they depend on the prefix's padding only, not on x_t or the time, so a chunk
        computes them once for all its Euler steps."""
        suffix_pad, suffix_blocks = masks.block_masks(
            self.suffix_blocks(), prefix_pad.shape[0], torch.float32, prefix_pad.device
        )
        allowed, at = masks.suffix_layout(prefix_pad, suffix_pad, suffix_blocks)
        rotary = self.paligemma_with_expert.expert_rotary(at)
        return masks.additive_mask(allowed, ATTENTION_MASK_VALUE), rotary

    def denoise_step(
        self,
        state: Tensor | None,
        cache: KVCache,
        mask: Tensor,
        rotary: Rotary,
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


def with_relative_pair(
    config: PolicyConfig, pre: list[ProcessorStep], post: list[ProcessorStep]
) -> tuple[list[ProcessorStep], list[ProcessorStep]]:
    """LeRobot's π0-family pipelines always hold the relative-action pair (disabled unless
    `use_relative_actions`): relative before the normaliser, absolute after the unnormaliser."""
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


def tokens_after_normalizer(
    pre: list[ProcessorStep], prompt: type[ProcessorStep], tokenizers: list[ProcessorStep]
) -> list[ProcessorStep]:
    """The π0.5 / π0-FAST order: rename, batch, relative, normalise, the `prompt` step (the
    state is discretised once normalised into [-1, 1]), the `tokenizers`, then the rest, the
    device move last."""
    prompts = [s for s in pre if isinstance(s, prompt)]
    device = [s for s in pre if isinstance(s, DeviceStep)]
    rest = [s for s in pre if not isinstance(s, (prompt, DeviceStep))]
    at = next(i for i, step in enumerate(rest) if isinstance(step, Normalizer)) + 1
    return [*rest[:at], *prompts, *tokenizers, *rest[at:], *device]


def drop_unseen(inputs: VLAInputs) -> VLAInputs:
    """The prefix's inputs without what no token can attend to: images masked out in every
    batch row (the `empty_cameras` placeholders, absent cameras) and token columns that are
    padding in every row (the tokenizer pads to `tokenizer_max_length`, e.g. 200 for π0.5,
    where a prompt takes tens). What goes is their cost: SigLIP on a placeholder image, the
    PaliGemma's layers on padding, and the expert attending to it at every Euler step."""
    images, image_masks = masks.drop_unseen_images(inputs.images, inputs.image_masks)
    tokens, token_masks = masks.seen_only(inputs.token_masks, inputs.tokens, inputs.token_masks)
    return inputs._replace(
        images=images, image_masks=image_masks, tokens=tokens, token_masks=token_masks
    )


class PiPolicy(VLAPolicy):
    """What the π0 and π0.5 policies share."""

    config_class: ClassVar[type[PolicyConfig]] = PiConfig
    flow_matching: ClassVar[type[PI0FlowMatching]] = PI0FlowMatching
    config: PiConfig

    def build_model(self, *, load_backbone_weights: bool) -> PI0FlowMatching:
        return self.flow_matching(self.config)

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
        """LeRobot's π0 pipelines always hold the relative-action pair (`with_relative_pair`)."""
        return with_relative_pair(config, pre, post)

    def fsdp_units(self) -> list[nn.Module | tuple[nn.Module, ...]]:
        """SigLIP's encoder layers, and each PaliGemma layer with the action expert's layer of
        the same depth: joint attention runs the pair as one step (`GemmaLayer.joint_step`), so
        they are gathered together."""
        backbone = self.model.paligemma_with_expert
        vision = backbone.paligemma.model.vision_tower.vision_model
        units: list[nn.Module | tuple[nn.Module, ...]] = list(vision.encoder.layers)
        units += list(zip(backbone.vlm_layers, backbone.expert_layers, strict=True))
        return units

    def enable_activation_checkpointing(self) -> None:
        """LeRobot's `gradient_checkpointing`: each joint layer step is recomputed."""
        self.model.paligemma_with_expert.gradient_checkpointing = True

    def prepare_camera(self, batch: Batch, key: str) -> tuple[Tensor, Tensor]:
        """The camera resized with padding (centred, openpi's) to `image_resolution`."""
        return openpi_camera(batch, key, self.config.image_resolution, self.device)

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        losses = self.model(self.inputs(batch), self.actions(batch))
        # LeRobot's π0 averages over every step of the chunk, padded ones included.
        loss = losses[:, :, : self.config.action_dim].mean()
        return loss, {"loss": loss.item()}


class PI0Policy(PiPolicy):
    """π0 on normalised batches."""

    config_class = PI0Config

    @classmethod
    def preprocessor_steps(cls, config: PI0Config) -> list[ProcessorStep]:
        """LeRobot's π0 steps between batching and the device move: the task ends with a
        newline, then PaliGemma's tokenizer reads it (padded to tokenizer_max_length)."""
        return [Pi0NewLineTask(), cls.tokenizer_step(config)]
