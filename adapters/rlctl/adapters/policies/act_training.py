"""ACT's own CPU speed paths for training, beside the plain model in `act.py`.

`cpu_kernels` applies them when a training session is built (after turning the attention and
the dropouts into `TrainingAttention` and `ThreadedDropout`):

- the feed-forward's ReLU folds into its dropout's mask (`dropout.relu_dropout`): one pass
  over ACT's largest activations fewer, forward and backward;
- the first decoder layer's self-attention works from the queries' positions alone: its input
  is ACT's zeros (`TrainingAttention.attend_from_positions`).

No parameters or buffers change, so the state dict and checkpoints stay LeRobot's.
"""

from __future__ import annotations

from typing import cast

from torch import Tensor, nn

from rlctl.adapters.policies.act import DecoderLayer, EncoderLayer, TransformerDecoder
from rlctl.adapters.policies.attention import TrainingAttention
from rlctl.adapters.policies.dropout import DrawThreads, ReluDropout


class ZeroInputDecoderLayer(DecoderLayer):
    """ACT's first decoder layer: its input is all zeros, which only their positions tell
    apart (post-norm only: a pre-norm layer attends over `norm1(0)`, not zeros)."""

    self_attn: TrainingAttention

    def attend_to_queries(self, x: Tensor, positions: Tensor) -> Tensor:
        if not self.training:
            return super().attend_to_queries(x, positions)
        return self.self_attn.attend_from_positions(positions, batch=x.shape[0])


def use_act_kernels(module: nn.Module, threads: DrawThreads) -> None:
    """ACT's speed paths for `module`, if it is one of ACT's layers."""
    if isinstance(module, (EncoderLayer, DecoderLayer)) and type(module.activation) is nn.ReLU:
        module.activation = nn.Identity()
        module.dropout.__class__ = ReluDropout
        cast(ReluDropout, module.dropout).threads = threads
    if isinstance(module, TransformerDecoder):
        first = module.layers[0]
        plain = type(first) is DecoderLayer and not first.pre_norm
        if plain and isinstance(first.self_attn, TrainingAttention):
            first.__class__ = ZeroInputDecoderLayer
