"""ResNets (He et al. 2015) as torchvision builds them, without importing torchvision.

`import torchvision` pulls in torch._dynamo and torch._inductor, which costs more than torch
itself; loading a policy only needs the network. Module, parameter and buffer names, shapes,
construction order and initialisation follow torchvision 0.2x (`torchvision.models.resnet`, the
"V1.5" variant with the stride on the 3x3 convolution), so that torchvision's and LeRobot's state
dicts load unchanged and the same seed draws the same initial weights.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

NormLayer = Callable[[int], nn.Module]


class FrozenBatchNorm2d(nn.Module):
    """BatchNorm2d with fixed statistics and affine parameters, all four of them buffers
    (torchvision.ops.FrozenBatchNorm2d): DETR-style backbones keep ImageNet's statistics."""

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def _load_from_state_dict(
        self,
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        # A BatchNorm2d's state dict (ImageNet weights) carries a counter this module lacks.
        state_dict.pop(prefix + "num_batches_tracked", None)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def scale_and_shift(self) -> tuple[Tensor, Tensor]:
        """Per-channel `(scale, shift)` with `forward(x) == x * scale + shift`."""
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        return scale, self.bias - self.running_mean * scale

    def forward(self, x: Tensor) -> Tensor:
        # torchvision's formula, step for step, so that outputs match it to the bit.
        scale, shift = self.scale_and_shift()
        return x * scale.reshape(1, -1, 1, 1) + shift.reshape(1, -1, 1, 1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.weight.shape[0]}, eps={self.eps})"


def conv_norm(conv: nn.Conv2d, norm: nn.Module, x: Tensor) -> Tensor:
    """`norm(conv(x))`; in training a frozen norm is folded into the convolution.

    A frozen norm is a per-channel affine map, so the convolution with its weights scaled and
    the shift as bias gives the same result (up to rounding) in one pass over the activations,
    where the norm alone reads and writes them twice forward and once backward: a tenth of
    a ResNet's training time on a CPU. Inference keeps torchvision's order of operations, so
    pretrained backbones give its outputs to the bit.
    """
    if not conv.training or not isinstance(norm, FrozenBatchNorm2d):
        return norm(conv(x))
    scale, shift = norm.scale_and_shift()
    if conv.bias is not None:
        shift = shift + conv.bias * scale
    weight = conv.weight * scale.reshape(-1, *([1] * (conv.weight.dim() - 1)))
    return conv._conv_forward(x, weight, shift)  # what conv(x) does with its own weights


def stem(conv: nn.Conv2d, norm: nn.Module, relu: nn.Module, pool: nn.Module, x: Tensor) -> Tensor:
    """`pool(relu(norm(conv(x))))`, with the ReLU after a max-pool.

    Max and ReLU commute (both keep order), so the values are the same to the bit and every
    gradient goes to the same pixel; the ReLU then works on a quarter of the pixels, where
    before the pool it was the costliest elementwise step of a ResNet's training pass.
    """
    x = conv_norm(conv, norm, x)
    if isinstance(pool, nn.MaxPool2d) and isinstance(relu, nn.ReLU):
        return relu(pool(x))
    return pool(relu(x))


def _downsampled(downsample: nn.Module | None, x: Tensor) -> Tensor:
    if downsample is None:
        return x
    if isinstance(downsample, nn.Sequential) and len(downsample) == 2:
        conv, norm = downsample
        if isinstance(conv, nn.Conv2d):
            return conv_norm(conv, norm, x)
    return downsample(x)


def _conv3x3(
    in_planes: int, out_planes: int, stride: int = 1, groups: int = 1, dilation: int = 1
) -> nn.Conv2d:
    return nn.Conv2d(
        in_planes,
        out_planes,
        kernel_size=3,
        stride=stride,
        padding=dilation,
        groups=groups,
        bias=False,
        dilation=dilation,
    )


def _conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions and the shortcut (resnet18, resnet34)."""

    expansion = 1

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        downsample: nn.Module | None = None,
        groups: int = 1,
        base_width: int = 64,
        dilation: int = 1,
        norm_layer: NormLayer | None = None,
    ) -> None:
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        self.conv1 = _conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = _downsampled(self.downsample, x)
        out = self.relu(conv_norm(self.conv1, self.bn1, x))
        out = conv_norm(self.conv2, self.bn2, out)
        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    """1x1 down, 3x3 (strided, grouped, dilated), 1x1 up, and the shortcut (resnet50 and up)."""

    expansion = 4

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        downsample: nn.Module | None = None,
        groups: int = 1,
        base_width: int = 64,
        dilation: int = 1,
        norm_layer: NormLayer | None = None,
    ) -> None:
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = _conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = _conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = _conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = _downsampled(self.downsample, x)
        out = self.relu(conv_norm(self.conv1, self.bn1, x))
        out = self.relu(conv_norm(self.conv2, self.bn2, out))
        out = conv_norm(self.conv3, self.bn3, out)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    """Stem (7x7 conv, norm, relu, max-pool), four stages, global average pool, classifier."""

    def __init__(
        self,
        block: type[BasicBlock | Bottleneck],
        layers: list[int],
        num_classes: int = 1000,
        zero_init_residual: bool = False,
        groups: int = 1,
        width_per_group: int = 64,
        replace_stride_with_dilation: list[bool] | None = None,
        norm_layer: NormLayer | None = None,
    ) -> None:
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        self._norm_layer = norm_layer
        self.inplanes = 64
        self.dilation = 1
        dilate = replace_stride_with_dilation or [False, False, False]
        if len(dilate) != 3:
            raise ValueError(
                "replace_stride_with_dilation should be None "
                f"or a 3-element tuple, got {replace_stride_with_dilation}"
            )
        self.groups = groups
        self.base_width = width_per_group
        # Built in torchvision's order: each layer draws its default initialisation from the
        # global generator as it is created, so a seed gives torchvision's weights.
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2, dilate=dilate[0])
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2, dilate=dilate[1])
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2, dilate=dilate[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            # Each residual branch starts at zero: every block begins as the identity.
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    nn.init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(
        self,
        block: type[BasicBlock | Bottleneck],
        planes: int,
        blocks: int,
        stride: int = 1,
        dilate: bool = False,
    ) -> nn.Sequential:
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                _conv1x1(self.inplanes, planes * block.expansion, stride),
                norm_layer(planes * block.expansion),
            )
        layers = [
            block(
                self.inplanes,
                planes,
                stride,
                downsample,
                self.groups,
                self.base_width,
                previous_dilation,
                norm_layer,
            )
        ]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(
                block(
                    self.inplanes,
                    planes,
                    groups=self.groups,
                    base_width=self.base_width,
                    dilation=self.dilation,
                    norm_layer=norm_layer,
                )
            )
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        x = stem(self.conv1, self.bn1, self.relu, self.maxpool, x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# torchvision's builders: the block and the number of blocks in each stage.
ARCHITECTURES: dict[str, tuple[type[BasicBlock | Bottleneck], list[int]]] = {
    "resnet18": (BasicBlock, [2, 2, 2, 2]),
    "resnet34": (BasicBlock, [3, 4, 6, 3]),
    "resnet50": (Bottleneck, [3, 4, 6, 3]),
    "resnet101": (Bottleneck, [3, 4, 23, 3]),
    "resnet152": (Bottleneck, [3, 8, 36, 3]),
}
