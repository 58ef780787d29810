"""A speed path for training: `nn.MultiheadAttention` with a quicker training pass.

`TrainingAttention` is an `nn.MultiheadAttention` with no state of its own (`cpu_kernels`
turns a model's batch-first attention into one when a training session is built), so its
parameters and checkpoints are torch's. At inference the forward pass is torch's own. In
training it computes the same function, batch first, with less work on a CPU:

- queries and keys read the same tensor in self-attention, so they come from one matrix
  product of twice the width (torch makes two);
- the attention weights' dropout takes its mask from `dropout.keep_mask` (drawn on every core)
  instead of torch's single-threaded `bernoulli_`;
- self-attention over zero tokens that carry only positions (ACT's first decoder layer) is
  `attend_from_positions`: see there.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.dropout import DrawThreads, dropout


class TrainingAttention(nn.MultiheadAttention):
    """A batch-first `nn.MultiheadAttention` whose training pass takes `threads`' dropout."""

    threads: DrawThreads

    def forward(  # type: ignore[override]
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        **options: Any,
    ) -> tuple[Tensor, Tensor | None]:
        if not self.training or need_weights or options:
            return super().forward(
                query, key, value, key_padding_mask, need_weights=need_weights, **options
            )
        dim, heads = self.embed_dim, self.num_heads
        weight, bias = self.in_proj_weight, self.in_proj_bias
        if query is key:
            q, k = F.linear(query, weight[: 2 * dim], bias[: 2 * dim]).chunk(2, dim=-1)
        else:
            q = F.linear(query, weight[:dim], bias[:dim])
            k = F.linear(key, weight[dim : 2 * dim], bias[dim : 2 * dim])
        v = F.linear(value, weight[2 * dim :], bias[2 * dim :])
        batch, n_queries, _ = q.shape
        n_keys = k.shape[1]
        head_dim = dim // heads
        # (batch * heads, tokens, head_dim), as torch lays the heads out.
        q = q.reshape(batch, n_queries, heads, head_dim).transpose(1, 2)
        k = k.reshape(batch, n_keys, heads, head_dim).transpose(1, 2)
        v = v.reshape(batch, n_keys, heads, head_dim).transpose(1, 2)
        scores = torch.matmul(q * (1.0 / math.sqrt(head_dim)), k.transpose(-2, -1))
        if key_padding_mask is not None:
            ignored = key_padding_mask.bool().reshape(batch, 1, 1, n_keys)
            scores = scores.masked_fill(ignored, float("-inf"))
        weights = dropout(torch.softmax(scores, dim=-1), self.dropout, True, self.threads)
        out = torch.matmul(weights, v).transpose(1, 2).reshape(batch, n_queries, dim)
        return self.out_proj(out), None

    def attend_from_positions(self, positions: Tensor, batch: int) -> Tensor:
        """In training, `self(q, q, zeros)` with `q = positions (1, T, D)` for each of `batch`.

        Queries and keys are the same for every sample, so they are projected once; the values
        are all the value bias, so each output row is that bias weighted by the row's sum of
        (dropped-out) attention weights, and the output projection of it is a `(heads, D)`
        table. Same function and the same dropout draws as the general pass, without its
        `batch`-fold projections of queries, keys and values.
        """
        dim, heads = self.embed_dim, self.num_heads
        head_dim = dim // heads
        weight, bias = self.in_proj_weight, self.in_proj_bias
        q, k = F.linear(positions, weight[: 2 * dim], bias[: 2 * dim]).chunk(2, dim=-1)
        n = q.shape[1]
        q = q.reshape(1, n, heads, head_dim).transpose(1, 2)
        k = k.reshape(1, n, heads, head_dim).transpose(1, 2)
        scores = torch.matmul(q * (1.0 / math.sqrt(head_dim)), k.transpose(-2, -1))
        weights = torch.softmax(scores, dim=-1).expand(batch, heads, n, n)
        totals = dropout(weights, self.dropout, True, self.threads).sum(dim=-1)  # (batch, heads, T)
        value_bias = bias[2 * dim :].reshape(heads, head_dim)
        per_head = torch.einsum(
            "dhe,he->hd", self.out_proj.weight.reshape(dim, heads, head_dim), value_bias
        )
        return torch.matmul(totals.transpose(1, 2), per_head) + self.out_proj.bias
