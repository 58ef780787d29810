"""The camera encoder Diffusion Policy and VQ-BeT share: (resize,) crop, a ResNet trunk, spatial
softmax keypoints, a linear layer. Attribute names follow LeRobot's (`backbone`, `pool`, `out`)
so that its weights load without renaming."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.backbones import resnet
from rlctl.adapters.policies.denoising import crop_images, resize_images
from rlctl.domain.errors import ConfigError


class KeypointEncoderSettings(Protocol):
    """The policy settings the encoder reads (DiffusionConfig and VQBeTConfig both have them)."""

    @property
    def vision_backbone(self) -> str: ...
    @property
    def pretrained_backbone_weights(self) -> str | None: ...
    @property
    def use_group_norm(self) -> bool: ...
    @property
    def spatial_softmax_num_keypoints(self) -> int: ...
    @property
    def crop_is_random(self) -> bool: ...
    @property
    def image_features(self) -> Mapping[str, Any]: ...


class SpatialSoftmax(nn.Module):
    """Keypoints from a feature map (Finn et al. 2016): per channel, the softmax-weighted mean of
    the pixel coordinates in [-1, 1]. A 1x1 convolution first maps the channels to `num_kp`."""

    def __init__(self, channels: int, height: int, width: int, num_kp: int | None) -> None:
        super().__init__()
        self.height, self.width = height, width
        self.nets = nn.Conv2d(channels, num_kp, kernel_size=1) if num_kp else None
        self.num_kp = num_kp or channels
        # numpy's linspace, not torch's: pretrained weights were fitted to its exact grid.
        pos_x, pos_y = np.meshgrid(np.linspace(-1.0, 1.0, width), np.linspace(-1.0, 1.0, height))
        grid = np.stack([pos_x.reshape(-1), pos_y.reshape(-1)], axis=1)
        self.register_buffer("pos_grid", torch.from_numpy(grid).float())  # (H*W, 2)

    def forward(self, features: Tensor) -> Tensor:
        """`(B, C, H, W)` -> `(B, num_kp, 2)` expected (x, y) of each keypoint."""
        if self.nets is not None:
            features = self.nets(features)
        attention = F.softmax(features.reshape(-1, self.height * self.width), dim=-1)
        return (attention @ self.pos_grid).view(-1, self.num_kp, 2)


class KeypointEncoder(nn.Module):
    """One camera image `(B, C, H, W)` in [0, 1] (normalised) -> a feature vector `(B, 2K)`."""

    def __init__(
        self,
        config: KeypointEncoderSettings,
        *,
        crop_shape: tuple[int, int] | None,
        resize_shape: tuple[int, int] | None = None,
        load_backbone_weights: bool = True,
    ) -> None:
        super().__init__()
        self.resize_shape = resize_shape
        self.crop_shape = crop_shape
        self.crop_is_random = config.crop_is_random
        norm_layer = None
        if config.use_group_norm:
            if config.pretrained_backbone_weights and load_backbone_weights:
                raise ConfigError(
                    "use_group_norm replaces the BatchNorm layers, which would ruin pretrained "
                    "backbone weights",
                    where="policy.use_group_norm",
                    hint="set --policy.pretrained_backbone_weights=null to train from scratch",
                )
            norm_layer = _group_norm
        net = resnet(
            config.vision_backbone,
            config.pretrained_backbone_weights,
            load_weights=load_backbone_weights,
            norm_layer=norm_layer,
        )
        # Everything up to layer4: drop the global pooling and the classifier.
        self.backbone = nn.Sequential(*list(net.children())[:-2])

        image_shape = next(iter(config.image_features.values())).shape
        height, width = self.crop_shape or self.resize_shape or tuple(image_shape[1:])
        channels, fh, fw = _output_shape(self.backbone, (1, image_shape[0], height, width))
        keypoints = config.spatial_softmax_num_keypoints
        self.pool = SpatialSoftmax(channels, fh, fw, num_kp=keypoints)
        self.feature_dim = keypoints * 2
        self.out = nn.Linear(keypoints * 2, self.feature_dim)
        self.relu = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        if self.resize_shape is not None:
            x = resize_images(x, self.resize_shape)
        if self.crop_shape is not None:
            x = crop_images(x, self.crop_shape, random=self.training and self.crop_is_random)
        x = torch.flatten(self.pool(self.backbone(x)), start_dim=1)
        return self.relu(self.out(x))


def _group_norm(channels: int) -> nn.Module:
    return nn.GroupNorm(num_groups=channels // 16, num_channels=channels)


def _output_shape(module: nn.Module, input_shape: tuple[int, ...]) -> tuple[int, ...]:
    # Evaluated in eval mode so that the dry run leaves BatchNorm's running statistics alone.
    was_training = module.training
    module.eval()
    with torch.no_grad():
        # On the parameters' device: the meta device where a sharded rank builds (no compute).
        device = next(module.parameters()).device
        shape = tuple(module(torch.zeros(input_shape, device=device)).shape[1:])
    module.train(was_training)
    return shape
