"""ResNets for the vision encoders, with pretrained weights only when asked for.

The networks are our own (`resnet.py`, torchvision's layout); torchvision is imported only to
fetch pretrained weights, since importing it costs seconds (it pulls torch._dynamo).
"""

from __future__ import annotations

from rlctl.adapters.policies.resnet import ARCHITECTURES, NormLayer, ResNet
from rlctl.domain.errors import ConfigError


def resnet(
    name: str,
    weights: str | None,
    *,
    load_weights: bool,
    norm_layer: NormLayer | None = None,
    replace_stride_with_dilation: list[bool] | None = None,
) -> ResNet:
    """The ResNet `name` as `torchvision.models.<name>` builds it; `weights` (e.g.
    "ResNet18_Weights.IMAGENET1K_V1") are only fetched when `load_weights` is set: a checkpoint
    being loaded brings its own weights."""
    if name not in ARCHITECTURES:
        raise ConfigError(
            f"unknown vision backbone {name!r}",
            where="policy.vision_backbone",
            hint="use a torchvision ResNet: " + ", ".join(ARCHITECTURES),
        )
    block, layers = ARCHITECTURES[name]
    net = ResNet(
        block,
        layers,
        norm_layer=norm_layer,
        replace_stride_with_dilation=replace_stride_with_dilation,
    )
    if load_weights and weights is not None:
        _load_pretrained(net, name, weights)
    return net


def _load_pretrained(net: ResNet, name: str, weights: str) -> None:
    try:
        import torchvision  # seconds to import: only pretrained weights need it

        enum = torchvision.models.get_model_weights(name).verify(weights)
        net.load_state_dict(enum.get_state_dict(progress=True, check_hash=True))
    except (OSError, RuntimeError, ValueError, KeyError) as err:
        raise ConfigError(
            f"cannot load the backbone weights {weights!r}: {err}",
            where="policy.pretrained_backbone_weights",
            hint="check the network or torchvision's weight cache, "
            "or train from scratch with --policy.pretrained_backbone_weights=null",
        ) from err
