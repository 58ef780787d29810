"""What the VLA backbones share: a VLM beside an action expert, and which of them train.

LeRobot's settings: `freeze_vision_encoder` keeps the vision encoder frozen and in eval mode,
`train_expert_only` the whole VLM; `train()` leaves the frozen parts in eval mode.
"""

from __future__ import annotations

from typing import ClassVar

from torch import nn


class VLMWithExpert(nn.Module):
    """A VLM beside an action expert; `vlm_path` and `vision_path` name the VLM's module and its
    vision encoder's inside this one."""

    vlm_path: ClassVar[str]
    vision_path: ClassVar[str]
    freeze_vision_encoder: bool
    train_expert_only: bool

    @property
    def vlm_module(self) -> nn.Module:
        return self.get_submodule(self.vlm_path)

    @property
    def vision_encoder(self) -> nn.Module:
        return self.get_submodule(self.vision_path)

    def freeze(self) -> None:
        if self.freeze_vision_encoder:
            self.vision_encoder.eval()
            self.vision_encoder.requires_grad_(False)
        if self.train_expert_only:
            self.vlm_module.eval()
            self.vlm_module.requires_grad_(False)

    def train(self, mode: bool = True) -> VLMWithExpert:
        super().train(mode)
        if self.freeze_vision_encoder:
            self.vision_encoder.eval()
        if self.train_expert_only:
            self.vlm_module.eval()
        return self
