"""torchvision ResNets for the vision encoders, with pretrained weights only when asked for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torchvision
from torch import nn

from rlctl.domain.errors import ConfigError


def resnet(
    name: str,
    weights: str | None,
    *,
    load_weights: bool,
    norm_layer: Callable[[int], nn.Module] | None = None,
    replace_stride_with_dilation: list[bool] | None = None,
) -> torchvision.models.ResNet:
    """`torchvision.models.<name>`; `weights` (e.g. "ResNet18_Weights.IMAGENET1K_V1") are only
    fetched when `load_weights` is set: a checkpoint being loaded brings its own weights."""
    factory = getattr(torchvision.models, name, None)
    if factory is None or not name.startswith("resnet"):
        raise ConfigError(
            f"unknown vision backbone {name!r}",
            where="policy.vision_backbone",
            hint="use a torchvision ResNet: resnet18, resnet34, resnet50, …",
        )
    kwargs: dict[str, Any] = {"weights": weights if load_weights else None}
    if norm_layer is not None:
        kwargs["norm_layer"] = norm_layer
    if replace_stride_with_dilation is not None:
        kwargs["replace_stride_with_dilation"] = replace_stride_with_dilation
    try:
        return factory(**kwargs)
    except (OSError, RuntimeError, ValueError) as err:
        raise ConfigError(
            f"cannot load the backbone weights {weights!r}: {err}",
            where="policy.pretrained_backbone_weights",
            hint="check the network or torchvision's weight cache, "
            "or train from scratch with --policy.pretrained_backbone_weights=null",
        ) from err
