"""The policies' dropout: nn.Dropout's distribution and scaling, torch's generator."""

from __future__ import annotations

import pytest
import torch

from rlctl.adapters.policies.dropout import Dropout


def test_keeps_one_minus_p_and_scales_the_kept_ones() -> None:
    torch.manual_seed(0)
    layer = Dropout(0.1).train()
    x = torch.ones(400_000)
    y = layer(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.9) < 0.003
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.9))
    assert abs(y.mean().item() - 1.0) < 0.005  # unbiased, as nn.Dropout


def test_identity_in_eval_mode_and_at_zero() -> None:
    x = torch.randn(5, 7)
    assert Dropout(0.3).eval()(x) is x
    assert Dropout(0.0).train()(x) is x
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))


def test_gradients_flow_through_the_kept_elements_only() -> None:
    torch.manual_seed(1)
    x = torch.randn(50, 40, requires_grad=True)
    y = Dropout(0.5).train()(x)
    y.sum().backward()
    assert x.grad is not None
    assert torch.equal(x.grad != 0, y != 0)
    assert torch.allclose(x.grad[y != 0], torch.full_like(x.grad[y != 0], 2.0))


def test_same_seed_same_mask() -> None:
    x = torch.ones(1000)
    torch.manual_seed(3)
    first = Dropout(0.2).train()(x)
    torch.manual_seed(3)
    assert torch.equal(Dropout(0.2).train()(x), first)


def test_a_probability_outside_zero_one_is_refused() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        Dropout(1.5)
