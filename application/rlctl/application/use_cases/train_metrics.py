"""Figures over a logging window: mean loss and grad norm, samples/s and the data-wait share.

Throughput counts the time the steps themselves took (waiting for data plus computing), as
LeRobot's `samples_per_s` does, so checkpoints and evaluations do not dent it.
"""

from __future__ import annotations

from collections import defaultdict

from rlctl.application.ports.training import StepResult

_STEP_FIGURES = frozenset({"loss", "grad_norm"})


class MetricsWindow:
    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.steps = 0
        self._samples = 0
        self._data_s = 0.0
        self._compute_s = 0.0
        self._sums: dict[str, float] = defaultdict(float)
        self._lr = 0.0

    def add(self, result: StepResult) -> None:
        self.steps += 1
        self._samples += result.samples
        self._data_s += result.data_s
        self._compute_s += result.compute_s
        self._sums["loss"] += result.loss
        self._sums["grad_norm"] += result.grad_norm
        for name, value in result.parts.items():
            # A policy may report its loss among its parts too (LeRobot's π0 and SmolVLA do):
            # the step's own figure is the one counted, once.
            if name not in _STEP_FIGURES:
                self._sums[name] += value
        self._lr = result.lr

    def summary(self) -> dict[str, float]:
        """The window's figures; empty when no step was added."""
        if not self.steps:
            return {}
        busy = self._data_s + self._compute_s
        out = {name: total / self.steps for name, total in self._sums.items()}
        out.update(
            lr=self._lr,
            samples_per_s=self._samples / busy if busy > 0 else 0.0,
            data_wait=self._data_s / busy if busy > 0 else 0.0,
            update_s=self._compute_s / self.steps,
            dataloading_s=self._data_s / self.steps,
        )
        return out

    def flush(self) -> dict[str, float]:
        """The figures so far, and a fresh window."""
        out = self.summary()
        self._reset()
        return out
