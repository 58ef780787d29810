"""A scripted training backend: no model, no data; losses from a formula, checkpoints in RAM.

It serves the `TrainingBackend` port for tests and dry runs of `TrainPolicy`: every plan, step,
save, restore and evaluation is recorded, checkpoints outlive the session (so a second run can
resume), and `interrupt_at` raises KeyboardInterrupt in the middle of that step, before it
counts, as a Ctrl-C in the data loader would. `nonfinite_at` makes that step's loss NaN (the
update refused, as the port says; `nonfinite` says where it was seen), `skipped` lists steps an
fp16 loss scaler skips, and a save at step `abandon_save_at` ends in KeyboardInterrupt without
a checkpoint, as when a user insists on Ctrl-C while it is written. `ScriptedProcesses` may
play any process of several (`rank`, `size`); off the main one, `share` hands out `shared`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from rlctl.application.ports.training import CheckpointRef, NonFinite, StepResult, TrainingPlan
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.run_layout import CHECKPOINTS_DIR
from rlctl.domain.train_settings import TrainSettings

CHECKPOINTS = CHECKPOINTS_DIR


def scripted_loss(step: int) -> float:
    """The loss the scripted backend reports for its `step`-th update (1-based)."""
    return 1.0 / (1.0 + step)


@attrs.define
class TrainingRecord:
    starts: list[int | None] = attrs.field(factory=list)  # the resumed step, or None
    plans: list[TrainingPlan] = attrs.field(factory=list)
    barriers: int = 0
    steps: list[int] = attrs.field(factory=list)
    saves: list[int] = attrs.field(factory=list)
    evaluations: list[int] = attrs.field(factory=list)
    closed: int = 0


class _ScriptedPolicy:
    """Stands in for the trained policy during an evaluation."""

    def __init__(self, step: int) -> None:
        self.step = step


class ScriptedSession:
    def __init__(
        self, backend: ScriptedTrainingBackend, settings: TrainSettings, start: int
    ) -> None:
        self._backend = backend
        self._settings = settings
        self._steps = start
        self.is_main = True

    @property
    def steps_done(self) -> int:
        return self._steps

    def train_step(self) -> StepResult:
        upcoming = self._steps + 1
        backend = self._backend
        if backend.interrupt_at == upcoming:
            backend.interrupt_at = None
            raise KeyboardInterrupt
        if backend.nonfinite_at == upcoming:
            return StepResult(
                loss=float("nan"),
                grad_norm=float("nan"),
                lr=1e-3,
                samples=0,
                data_s=0.01,
                compute_s=0.09,
                nonfinite=backend.nonfinite,
            )
        self._steps = upcoming
        self._backend.record.steps.append(upcoming)
        return StepResult(
            loss=scripted_loss(upcoming),
            grad_norm=1.0,
            lr=1e-3,
            samples=self._settings.batch_size,
            data_s=0.01,
            compute_s=0.09,
            parts={"l1_loss": scripted_loss(upcoming)},
            skipped=upcoming in backend.skipped,
        )

    def save_checkpoint(self) -> CheckpointRef:
        assert self._settings.output_dir is not None
        if self._backend.abandon_save_at == self._steps:
            raise KeyboardInterrupt
        location = f"{self._settings.output_dir}/{CHECKPOINTS}/{self._steps:06d}"
        ref = CheckpointRef(location, self._steps)
        self._backend.checkpoints[location] = ref
        self._backend.policies[location] = self._settings.policy
        self._backend.record.saves.append(self._steps)
        return ref

    @contextmanager
    def evaluation_policy(self) -> Iterator[Any]:
        self._backend.record.evaluations.append(self._steps)
        yield _ScriptedPolicy(self._steps)

    def barrier(self) -> None:
        pass

    def close(self) -> None:
        self._backend.record.closed += 1


class ScriptedTrainingBackend:
    def __init__(
        self,
        *,
        interrupt_at: int | None = None,
        nonfinite_at: int | None = None,
        nonfinite: NonFinite | None = None,
        skipped: tuple[int, ...] = (),
        abandon_save_at: int | None = None,
    ) -> None:
        self.interrupt_at = interrupt_at
        self.nonfinite_at = nonfinite_at
        self.nonfinite = nonfinite if nonfinite is not None else NonFinite()
        self.skipped = set(skipped)
        self.abandon_save_at = abandon_save_at
        self.checkpoints: dict[str, CheckpointRef] = {}
        self.policies: dict[str, PolicyConfig] = {}
        self.record = TrainingRecord()

    def find_checkpoint(self, location: str) -> CheckpointRef | None:
        if location in self.checkpoints:
            return self.checkpoints[location]
        prefix = f"{location.rstrip('/')}/{CHECKPOINTS}/"
        inside = [ref for loc, ref in self.checkpoints.items() if loc.startswith(prefix)]
        return max(inside, key=lambda ref: ref.step, default=None)

    def checkpoint_policy(self, checkpoint: CheckpointRef) -> PolicyConfig:
        return self.policies[checkpoint.location]

    def join(self, settings: TrainSettings) -> ScriptedProcesses:
        return ScriptedProcesses(self, device_type=settings.policy.device or "cpu")


class ScriptedProcesses:
    """One process of a scripted run: the main one unless `rank` says otherwise; `shared` is
    what `share` returns off the main process (the main's value, as a test knows it)."""

    def __init__(
        self,
        backend: ScriptedTrainingBackend,
        *,
        device_type: str = "cpu",
        rank: int = 0,
        size: int = 1,
        shared: Any = None,
    ) -> None:
        self._backend = backend
        self.device_type = device_type
        self.rank = rank
        self.size = size
        self.shared = shared
        self.closed = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def barrier(self) -> None:
        self._backend.record.barriers += 1

    def share(self, value: Any) -> Any:
        return value if self.is_main else self.shared

    def start(self, plan: TrainingPlan) -> ScriptedSession:
        resume = plan.resume
        self._backend.record.plans.append(plan)
        self._backend.record.starts.append(None if resume is None else resume.step)
        return ScriptedSession(self._backend, plan.settings, 0 if resume is None else resume.step)

    def close(self) -> None:
        self.closed = True
