"""Residual vector quantisation with EMA codebooks, as VQ-BeT uses it (LeRobot 0.6.1's
`ResidualVQ`, from lucidrains' vector-quantize-pytorch, reduced to VQ-BeT's settings).

    x ──► VQ layer 1 (nearest code of codebook 1) ──► q1
    x - q1 ──► VQ layer 2 ──► q2                       quantised = q1 + q2, codes = (c1, c2)

While training and not frozen, each codebook follows the vectors assigned to it by an
exponential moving average (decay 0.8) of their sum and count, Laplace-smoothed; gradients
reach the encoder through the straight-through estimator, and a commitment loss pulls the
encoder's output towards its codes. Buffer names are LeRobot's (`layers.<i>._codebook.embed` …,
`freeze_codebook`), so its checkpoints load as they are.

Settings VQ-BeT never changes (k-means initialisation, dead-code expiry, stochastic or learnable
codebooks, projections, several heads) are left out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

DECAY = 0.8
EPS = 1e-5
COMMITMENT_WEIGHT = 1.0


def _distances(x: Tensor, codes: Tensor) -> Tensor:
    """Euclidean distances `(N, C)` written as LeRobot's `cdist` (its rounding, not torch's)."""
    x2 = (x**2).sum(-1, keepdim=True)
    c2 = (codes**2).sum(-1)
    return (x2 + c2 - 2 * x @ codes.T).sqrt()


class EuclideanCodebook(nn.Module):
    """One codebook of `size` vectors of `dim` (kept with a leading axis of 1, as LeRobot's)."""

    def __init__(self, dim: int, size: int) -> None:
        super().__init__()
        embed = torch.empty(1, size, dim)
        nn.init.kaiming_uniform_(embed)
        self.size = size
        # No k-means initialisation: the codebook counts as initialised from the start.
        self.register_buffer("initted", torch.tensor([1.0]))
        self.register_buffer("cluster_size", torch.zeros(1, size))
        self.register_buffer("embed_avg", embed.clone())
        self.register_buffer("embed", embed)

    def forward(self, x: Tensor, *, frozen: bool) -> tuple[Tensor, Tensor]:
        """`(N, dim)` -> the nearest codes `(N, dim)` and their indices `(N,)`."""
        x = x.float()
        codes = self.embed[0].detach()
        indices = (-_distances(x, codes)).argmax(dim=-1)
        quantized = codes[indices]
        if self.training and not frozen:
            self._follow(x, F.one_hot(indices, self.size).type(x.dtype))
        return quantized, indices

    @torch.no_grad()
    def _follow(self, x: Tensor, one_hot: Tensor) -> None:
        self.cluster_size.lerp_(one_hot.sum(0, keepdim=True), 1 - DECAY)
        self.embed_avg.lerp_((one_hot.T @ x).unsqueeze(0), 1 - DECAY)
        total = self.cluster_size.sum(-1, keepdim=True)
        smoothed = (self.cluster_size + EPS) / (total + self.size * EPS) * total
        self.embed.copy_(self.embed_avg / smoothed.unsqueeze(-1))


class VectorQuantize(nn.Module):
    """One quantisation layer: its codebook, the straight-through estimator, the commitment."""

    def __init__(self, dim: int, codebook_size: int) -> None:
        super().__init__()
        self._codebook = EuclideanCodebook(dim, codebook_size)

    def forward(self, x: Tensor, *, frozen: bool) -> tuple[Tensor, Tensor, Tensor]:
        """`(N, dim)` -> quantised `(N, dim)`, codes `(N,)`, commitment loss `(1,)`."""
        quantized, indices = self._codebook(x, frozen=frozen)
        loss = torch.zeros(1, device=x.device, requires_grad=self.training)
        if self.training:
            loss = loss + F.mse_loss(quantized.detach(), x) * COMMITMENT_WEIGHT
            quantized = x + (quantized - x).detach()
        return quantized, indices, loss


class ResidualVQ(nn.Module):
    def __init__(self, *, dim: int, num_quantizers: int, codebook_size: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            [VectorQuantize(dim, codebook_size) for _ in range(num_quantizers)]
        )
        # Saved with the model: once VQ-BeT's first phase ends, the codebooks stop following.
        self.register_buffer("freeze_codebook", torch.tensor(False))

    @property
    def codebooks(self) -> Tensor:
        """`(num_quantizers, codebook_size, dim)`."""
        return torch.stack([layer._codebook.embed[0] for layer in self.layers])

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """`(N, dim)` -> quantised `(N, dim)`, codes `(N, num_quantizers)`, losses
        `(1, num_quantizers)`."""
        frozen = bool(self.freeze_codebook)
        quantized_out = torch.zeros_like(x)
        residual = x
        codes, losses = [], []
        for layer in self.layers:
            quantized, indices, loss = layer(residual, frozen=frozen)
            residual = residual - quantized.detach()
            quantized_out = quantized_out + quantized
            codes.append(indices)
            losses.append(loss)
        return quantized_out, torch.stack(codes, dim=-1), torch.stack(losses, dim=-1)

    def embeddings_of(self, codes: Tensor) -> Tensor:
        """The sum over layers of each layer's code vector: `(N, num_quantizers)` -> `(N, dim)`."""
        books = self.codebooks
        return sum(books[q][codes[:, q]] for q in range(len(self.layers)))  # type: ignore[return-value]
