"""The training speed paths for the CPU, chosen for one model when its training session is built.

The model files build plain torch modules (`nn.Conv2d`, `nn.Dropout`, `nn.MultiheadAttention`).
With `--cpu_kernels=auto` (the default) the training backend turns some of them into
subclasses that compute the same functions with less work on a CPU; each module says how and
what it saves:

- 3x3 convolutions: weight gradients as im2col matrix products (`conv_training.Conv3x3`);
- dropout: masks drawn by numpy on every core (`dropout.ThreadedDropout`);
- attention: one projection for queries and keys, that dropout (`attention.TrainingAttention`);
- ACT: its ReLU folded into the feed-forward dropout, its first decoder layer's self-attention
  from positions alone (`act_training`).

The subclasses hold no parameters or buffers, so the state dict, the checkpoints and
config.json are what torch's modules give; at inference each one is its parent. Only the
dropout draws differ from torch's (same distribution), the rest by rounding. With `torch` the
model stays as built: torch's kernels and draws.
"""

from __future__ import annotations

from typing import Literal, cast

from torch import nn

from rlctl.adapters.policies.act_training import use_act_kernels
from rlctl.adapters.policies.attention import TrainingAttention
from rlctl.adapters.policies.conv_training import Conv3x3
from rlctl.adapters.policies.dropout import DrawThreads, ThreadedDropout

CpuKernels = Literal["auto", "torch"]


def use_cpu_kernels(model: nn.Module, kernels: CpuKernels = "auto") -> DrawThreads | None:
    """Give `model` the speed paths (`auto`) and return the threads its dropouts draw with,
    for the caller to close when training ends; with `torch`, leave it alone (None)."""
    if kernels == "torch":
        return None
    if kernels != "auto":
        raise ValueError(f"cpu_kernels is 'auto' or 'torch', not {kernels!r}")
    threads = DrawThreads()
    # A module becomes its subclass in place (`__class__`): the same parameters, buffers and
    # hooks, and the optimiser and the parent modules keep referring to it.
    for module in list(model.modules()):
        if type(module) is nn.Conv2d and module.kernel_size == (3, 3):
            module.__class__ = Conv3x3
        elif type(module) is nn.Dropout:
            module.__class__ = ThreadedDropout
            cast(ThreadedDropout, module).threads = threads
        elif type(module) is nn.MultiheadAttention and _projects_like_torch(module):
            module.__class__ = TrainingAttention
            cast(TrainingAttention, module).threads = threads
    for module in list(model.modules()):
        use_act_kernels(module, threads)
    return threads


def _projects_like_torch(attention: nn.MultiheadAttention) -> bool:
    """The layout `TrainingAttention`'s pass assumes: batch first, one packed projection."""
    return (
        attention.batch_first
        and attention._qkv_same_embed_dim
        and attention.in_proj_bias is not None
        and attention.bias_k is None
        and not attention.add_zero_attn
    )
