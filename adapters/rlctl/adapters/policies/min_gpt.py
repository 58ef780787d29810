"""minGPT (Karpathy's nanoGPT) as VQ-BeT uses it: continuous tokens in, features out.

    tokens (B, T, gpt_input_dim) ──wte + wpe──► n x [x + attn(ln(x)); x + mlp(ln(x))] ──ln_f──►
    lm_head ──► (B, T, gpt_output_dim)

The attention is causal. Attribute names (and the saved causal `bias` mask) are LeRobot's.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.domain.policies.vqbet import VQBeTConfig


class CausalSelfAttention(nn.Module):
    def __init__(self, config: VQBeTConfig) -> None:
        super().__init__()
        dim, block = config.gpt_hidden_dim, config.gpt_block_size
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)
        # Unused by the computation (the attention is told it is causal), but part of
        # LeRobot's state dict, which it loads strictly.
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))
        self.n_head = config.gpt_n_head

    def forward(self, x: Tensor) -> Tensor:
        batch, length, dim = x.shape
        q, k, v = self.c_attn(x).split(dim, dim=2)
        q, k, v = (t.view(batch, length, self.n_head, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        y = y.transpose(1, 2).reshape(batch, length, dim)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, config: VQBeTConfig) -> None:
        super().__init__()
        dim = config.gpt_hidden_dim
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(config.dropout)
        )

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config: VQBeTConfig) -> None:
        super().__init__()
        self.block_size = config.gpt_block_size
        dim = config.gpt_hidden_dim
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Linear(config.gpt_input_dim, dim),
                "wpe": nn.Embedding(config.gpt_block_size, dim),
                "drop": nn.Dropout(config.dropout),
                "h": nn.ModuleList([Block(config) for _ in range(config.gpt_n_layer)]),
                "ln_f": nn.LayerNorm(dim),
            }
        )
        self.lm_head = nn.Linear(dim, config.gpt_output_dim, bias=False)
        self.apply(_init_weights)
        # GPT-2's scaled init of the residual projections.
        for name, param in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * config.gpt_n_layer))

    def forward(self, tokens: Tensor) -> Tensor:
        length = tokens.shape[1]
        positions = torch.arange(length, device=tokens.device).unsqueeze(0)
        x = self.transformer.drop(self.transformer.wte(tokens) + self.transformer.wpe(positions))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))

    def decay_groups(self) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
        """(weights decayed, parameters not decayed): linear weights decay; biases, layer-norm
        and embedding weights do not. Each list in name order, as LeRobot's."""
        decay: dict[str, nn.Parameter] = {}
        no_decay: dict[str, nn.Parameter] = {}
        for module_name, module in self.named_modules():
            for name, param in module.named_parameters(recurse=False):
                full = f"{module_name}.{name}" if module_name else name
                linear_weight = name.endswith("weight") and isinstance(module, nn.Linear)
                (decay if linear_weight else no_decay)[full] = param
        return [decay[k] for k in sorted(decay)], [no_decay[k] for k in sorted(no_decay)]


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
