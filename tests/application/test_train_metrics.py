"""The training log's window of figures."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.application.ports.training import StepResult
from rlctl.application.use_cases.train_metrics import MetricsWindow

finite = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)


def step(loss: float, parts: dict[str, float]) -> StepResult:
    return StepResult(
        loss=loss, grad_norm=1.0, lr=1e-4, samples=8, data_s=0.01, compute_s=0.09, parts=parts
    )


@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=20))
def test_the_loss_is_the_mean_of_the_steps_losses_even_when_a_policy_reports_it_too(values):
    # π0 and SmolVLA report their loss among their parts, as LeRobot's do: counted once.
    window = MetricsWindow()
    for loss, l1 in values:
        window.add(step(loss, {"loss": loss, "l1_loss": l1}))
    summary = window.flush()
    assert summary["loss"] == pytest.approx(sum(v[0] for v in values) / len(values))
    assert summary["l1_loss"] == pytest.approx(sum(v[1] for v in values) / len(values))
    assert summary["grad_norm"] == pytest.approx(1.0)
    assert window.flush() == {}
