"""`VLAModel`: a VLA as a `PolicyModel`; `VLAPolicy`: a flow-matching one.

What every member does the same way around its model: the model is built on the meta device when
a checkpoint follows (`loading`), and a batch's cameras become the images the vision encoder
reads (placeholders for the missing ones). A flow-matching member (`VLAPolicy`) also makes
`VLAInputs` of a batch (its cameras, the tokenised task, the padded state) and samples a chunk
from noise, guided or not (real-time chunking). A member says how it builds its model, prepares
its cameras and weighs its training loss.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl.adapters.policies.vla.flow_matching import FlowMatching
from rlctl.adapters.policies.vla.inputs import (
    ACTION,
    VLAInputs,
    add_placeholders,
    camera_keys,
    pad_vector,
    present_cameras,
    robot_state,
)
from rlctl.adapters.policies.vla.loading import AssignsOnMeta, building
from rlctl.adapters.policies.vla.rtc import PrefixGuidance
from rlctl.domain.processors.steps.task_text import LANGUAGE_ATTENTION_MASK, LANGUAGE_TOKENS


class GuidedChunking(PolicyModel):
    """A flow-matching policy whose plain chunk is its guided chunk without guidance: one
    sampling path for both (VLAPolicy, GR00T)."""

    @torch.no_grad()
    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        return self.predict_guided_chunk(batch, None, noise)


class VLAModel(AssignsOnMeta, PolicyModel):
    """A VLA on normalised batches; the task arrives tokenised (`observation.language.*`)."""

    model: nn.Module
    # A member's config (SmolVLAConfig, PiConfig...): the fields read here are the ones they
    # share (chunk_size, max_state_dim, max_action_dim, empty_cameras, image_features).
    config: Any

    def __init__(self, config: Any, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        # Without backbone weights the model is about to be loaded from a checkpoint: built on
        # the meta device (no memory, no random init), load_state_dict assigns the file's tensors.
        with building(load_backbone_weights):
            self.model = self.build_model(load_backbone_weights=load_backbone_weights)

    def build_model(self, *, load_backbone_weights: bool) -> nn.Module:
        raise NotImplementedError

    def prepare_camera(self, batch: Batch, key: str) -> tuple[Tensor, Tensor]:
        """One camera's image (B, 3, H, W) in [-1, 1], as the vision encoder takes it, and which
        rows have it (B,)."""
        raise NotImplementedError

    def placeholder_count(self, missing: int) -> int:
        """How many of the `missing` cameras become placeholders (LeRobot's π0: all)."""
        return missing

    def prepare_images(self, batch: Batch) -> tuple[list[Tensor], list[Tensor]]:
        """The images and masks of the cameras the policy reads: those the batch has, then
        placeholders for those it lacks (LeRobot's order)."""
        keys = camera_keys(self.config.image_features, self.config.empty_cameras)
        present = present_cameras(batch, keys, self.config.type_name)
        images, masks = [], []
        for key in present:
            image, mask = self.prepare_camera(batch, key)
            images.append(image)
            masks.append(mask)
        return add_placeholders(images, masks, self.placeholder_count(len(keys) - len(present)))

    def state(self, batch: Batch) -> Tensor | None:
        return robot_state(batch, self.config.max_state_dim)


class VLAPolicy(VLAModel, GuidedChunking):
    """A flow-matching VLA: an expert turns noise into a chunk, reading the VLM's prefix."""

    model: FlowMatching

    def build_model(self, *, load_backbone_weights: bool) -> FlowMatching:
        raise NotImplementedError

    @property
    def dtype(self) -> torch.dtype:
        # Inputs take the dtype of the projections around the backbone (float32), not the VLM's.
        dtype: torch.dtype = self.model.action_in_proj.weight.dtype
        return dtype

    def actions(self, batch: Batch) -> Tensor:
        """The training batch's actions, zero-padded to `max_action_dim`."""
        return pad_vector(batch[ACTION], self.config.max_action_dim)

    def inputs(self, batch: Batch) -> VLAInputs:
        images, masks = self.prepare_images(batch)
        tokens, token_masks = batch[LANGUAGE_TOKENS], batch[LANGUAGE_ATTENTION_MASK]
        return VLAInputs(images, masks, tokens, token_masks, self.state(batch))

    @torch.no_grad()
    def predict_guided_chunk(
        self, batch: Batch, guidance: PrefixGuidance | None, noise: Tensor | None = None
    ) -> Tensor:
        inputs = self.inputs(batch)
        device = inputs.tokens.device
        if noise is None:
            shape = (inputs.tokens.shape[0], self.config.chunk_size, self.config.max_action_dim)
            noise = torch.randn(shape, dtype=torch.float32, device=device)
        noise = noise.to(device=device, dtype=torch.float32)
        actions = self.model.sample_actions(inputs, noise, guidance)
        return actions[:, :, : self.config.action_dim]
