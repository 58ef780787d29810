"""A CPU speed path for training: a 3x3 convolution whose weight gradient is one matrix
product per slab of images.

oneDNN computes a channels-last 3x3 convolution's forward and input gradient at about 190
GFLOP/s on an AVX2 CPU, but its weight gradient at 85-135: the weight gradient is half the
backward pass of a ResNet, the largest single cost of training ACT on a CPU. Written as
`dW = dYᵀ · im2col(X)`, a few images at a time so that the unfolded patches stay in cache, it
runs at the speed of a matrix product: for ACT's ResNet-18 on a batch of eight 240x320 images,
the 3x3 weight gradients take about 0.3 s instead of 0.4-0.45 s, the whole forward and
backward about a tenth less. The sums are the same; only their order, so the rounding,
differs from oneDNN's. The 7x7 stem and the 1x1 shortcuts gain nothing this way.

`Conv3x3` is an `nn.Conv2d` with no state of its own: `cpu_kernels` turns a model's 3x3
convolutions into it when a training session is built, and it takes this path where it applies
(training, float32 channels-last input on the CPU), torch's everywhere else.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

# Bytes of unfolded patches per matrix product: small enough to stay in a core's share of the
# last-level cache between the unfold and the product, large enough for an efficient product.
_PATCH_SLAB_BYTES = 6_000_000


class Conv3x3(nn.Conv2d):
    def _conv_forward(self, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        # Where `forward` and `resnet.conv_norm` (with a norm folded into weight and bias) go.
        if _fast_weight_grad_applies(self, x, weight):
            return _Conv3x3.apply(x, weight, bias, self.stride, self.padding)
        return super()._conv_forward(x, weight, bias)


def _fast_weight_grad_applies(conv: nn.Conv2d, x: Tensor, weight: Tensor) -> bool:
    return (
        conv.training
        and weight.requires_grad
        and torch.is_grad_enabled()
        and x.device.type == "cpu"
        and x.dtype == torch.float32
        and weight.dtype == torch.float32
        and x.dim() == 4
        and conv.kernel_size == (3, 3)
        and conv.dilation == (1, 1)
        and conv.groups == 1
        and conv.padding_mode == "zeros"
        and not isinstance(conv.padding, str)
        and x.is_contiguous(memory_format=torch.channels_last)
    )


class _Conv3x3(torch.autograd.Function):
    """Channels-last input; oneDNN forward and input gradient."""

    @staticmethod
    def forward(
        ctx: Any,
        x: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        stride: tuple[int, int],
        padding: tuple[int, int],
    ) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.stride, ctx.padding = stride, padding
        return F.conv2d(x, weight, bias, stride, padding)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        needs_input, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        grad_input = grad_weight = grad_bias = None
        if needs_input:
            grad_input = torch.ops.aten.convolution_backward(
                grad, x, weight, None, list(ctx.stride), list(ctx.padding), [1, 1], False,
                [0, 0], 1, [True, False, False],
            )[0]  # fmt: skip
        if needs_weight:
            grad_weight = weight_grad_3x3(grad, x, ctx.stride, ctx.padding)
        if needs_bias:
            grad_bias = grad.sum((0, 2, 3))
        return grad_input, grad_weight, grad_bias, None, None


def weight_grad_3x3(
    grad: Tensor, x: Tensor, stride: tuple[int, int], padding: tuple[int, int]
) -> Tensor:
    """The weight gradient of a 3x3 convolution of `x` (N, C, H, W) whose output gradient is
    `grad` (N, Co, Ho, Wo); (Co, C, 3, 3), laid out channels-last."""
    n, c = x.shape[:2]
    c_out, h_out, w_out = grad.shape[1:]
    per_slab = max(1, min(n, _PATCH_SLAB_BYTES // (h_out * w_out * 9 * c * x.element_size())))
    pad_h, pad_w = padding
    padded = F.pad(x, (pad_w, pad_w, pad_h, pad_h)).permute(0, 2, 3, 1)  # (N, Hp, Wp, C)
    rows = grad.permute(0, 2, 3, 1)  # (N, Ho, Wo, Co)
    out = grad.new_zeros(c_out, 9 * c)
    patches = x.new_empty(per_slab, h_out, w_out, 3, 3, c)
    for start in range(0, n, per_slab):
        count = min(per_slab, n - start)
        slab = patches[:count]
        # (count, Ho, Wo, C, 3, 3) windows, copied as (kh, kw, C) per pixel: the weight's
        # channels-last order, so the product lands in the layout the weight has. Rows and
        # columns a stride leaves over past the last window are never read, as in the forward.
        windows = padded[start : start + count].unfold(1, 3, stride[0]).unfold(2, 3, stride[1])
        slab.copy_(windows[:, :h_out, :w_out].permute(0, 1, 2, 4, 5, 3))
        out.addmm_(rows[start : start + count].reshape(-1, c_out).t(), slab.view(-1, 9 * c))
    return out.view(c_out, 3, 3, c).permute(0, 3, 1, 2)
