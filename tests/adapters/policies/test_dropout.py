"""The training speed path's dropout: nn.Dropout's distribution and scaling, torch's generator."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rlctl.adapters.policies import dropout as threaded
from rlctl.adapters.policies.dropout import PARALLEL_MIN_ELEMENTS, DrawThreads, ThreadedDropout

THREADS = DrawThreads()


@pytest.fixture(autouse=True, scope="module")
def stop_threads():
    yield
    THREADS.close()


def Dropout(p: float = 0.5) -> ThreadedDropout:  # noqa: N802
    layer = nn.Dropout(p)
    layer.__class__ = ThreadedDropout
    layer.threads = THREADS
    return layer  # type: ignore[return-value]


def dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    return threaded.dropout(x, p, True, THREADS)


def relu_dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    return threaded.relu_dropout(x, p, training, THREADS)


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


def test_large_masks_drawn_on_every_core_follow_torchs_generator() -> None:
    x = torch.ones(PARALLEL_MIN_ELEMENTS * 3 + 5)
    layer = Dropout(0.1).train()
    torch.manual_seed(4)
    first = layer(x)
    state = torch.get_rng_state()
    second = layer(x)
    torch.set_rng_state(state)  # as a resumed run restores it
    assert torch.equal(layer(x), second)
    assert not torch.equal(first, second)
    torch.manual_seed(4)
    assert torch.equal(layer(x), first)
    kept = first != 0
    assert abs(kept.float().mean().item() - 0.9) < 0.003
    assert torch.allclose(first[kept], torch.full_like(first[kept], 1 / 0.9))
    # Every slice of the mask is random on its own (no slice repeats another).
    half = x.numel() // 2
    assert not torch.equal(first[:1000], first[half : half + 1000])


def test_functional_dropout_refuses_a_bad_probability() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        dropout(torch.ones(3), -0.1)


@pytest.mark.parametrize("n", [1000, PARALLEL_MIN_ELEMENTS * 2 + 3])
def test_relu_dropout_is_dropout_of_relu_with_the_same_draws(n) -> None:
    base = torch.randn(n)
    base[:10] = 0.0  # ReLU's gradient at 0 is 0, as in torch
    grads, outputs = [], []
    for fused in (False, True):
        x = base.clone().requires_grad_(True)
        torch.manual_seed(5)
        y = relu_dropout(x, 0.1) if fused else dropout(torch.relu(x), 0.1)
        (y * torch.linspace(-1, 1, n)).sum().backward()
        outputs.append(y.detach())
        grads.append(x.grad)
    # Equal values (a dropped negative input may give -0.0 instead of 0.0).
    assert torch.equal(outputs[0], outputs[1])
    assert torch.equal(grads[0], grads[1])
    assert torch.equal(relu_dropout(base, 0.1, training=False), torch.relu(base))
