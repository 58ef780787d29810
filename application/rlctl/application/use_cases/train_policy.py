"""TrainPolicy: the schedule of a training run; the backend does the arithmetic.

The policy of the work:
- what the run trains with (dataset, pretrained checkpoint, final policy config, relative
  action statistics, optimiser preset) is decided once, by `PlanTraining`, after the run's
  processes are joined and before anything is built; the backend gets it as a `TrainingPlan`;
- a run counts optimisation steps up to `settings.steps`; a resumed run continues from the
  checkpoint's step, and a run whose checkpoint is already at `steps` does nothing;
- a new run refuses an output dir that already holds checkpoints (resume it, or pick another);
- after step s: log when `s % log_freq == 0`, checkpoint when `s % save_freq == 0` or s is the
  last step, evaluate in the simulator when an evaluator is given and `s % eval_freq == 0` —
  in that order, so a checkpoint never includes what an evaluation did;
- Ctrl-C (or SIGTERM) stops at once and checkpoints the steps completed since the last
  checkpoint, then the report says `interrupted`; more Ctrl-C while that checkpoint is written
  do not lose it (the session holds them), and only a user who insists abandons it — the
  previous checkpoint is then the one reported;
- a step whose loss or gradients are NaN or inf stops the run at that step with
  `TrainingDiverged`, naming the likely cause (the data, its statistics, or the learning rate);
  no checkpoint is written then, so `last` stays the last good one. An fp16 loss scaler may skip
  an overflowing step now and then; `MAX_SKIPPED_IN_A_ROW` in a row is divergence too;
- only the main process logs metrics, draws progress and evaluates; all of them checkpoint
  together (the backend lets only the main one write).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import attrs
import structlog

from rlctl.application.ports.policy import Policy
from rlctl.application.ports.progress import Progress, ProgressTask
from rlctl.application.ports.simulation import Simulation
from rlctl.application.ports.training import (
    CheckpointRef,
    MetricsSink,
    NonFinite,
    StepResult,
    TrainingBackend,
    TrainingDiverged,
    TrainingPlan,
    TrainingProcesses,
    TrainingSession,
)
from rlctl.application.use_cases.train_metrics import MetricsWindow
from rlctl.domain.errors import ConfigError
from rlctl.domain.eval_metrics import EvalReport
from rlctl.domain.eval_settings import EvalSettings
from rlctl.domain.train_settings import TrainSettings

log = structlog.get_logger(__name__)

# Runs an evaluation of a policy; the composition root binds it to a simulation.
Evaluator = Callable[[Policy, EvalSettings], EvalReport]
# Decides what a run trains with (`train_plan.PlanTraining`), once, in every process.
Planner = Callable[[TrainSettings, CheckpointRef | None, TrainingProcesses], TrainingPlan]

# Consecutive steps an fp16 loss scaler may skip before the run counts as diverged: each skip
# halves the scale, so by then it is ~2**-32 of where it started and no longer the cause.
MAX_SKIPPED_IN_A_ROW = 32


class SimulationEvaluator:
    """An `Evaluator` over one simulation: each call runs `EvaluatePolicy` on the given policy."""

    def __init__(
        self,
        simulation: Simulation,
        evaluate: Callable[[Simulation, Policy], Callable[[EvalSettings], EvalReport]],
    ) -> None:
        self._simulation = simulation
        self._evaluate = evaluate

    def __call__(self, policy: Policy, settings: EvalSettings) -> EvalReport:
        return self._evaluate(self._simulation, policy)(settings)


def is_due(step: int, every: int) -> bool:
    return every > 0 and step % every == 0


def is_save_step(step: int, settings: TrainSettings) -> bool:
    if not settings.save_checkpoint:
        return False
    return is_due(step, settings.save_freq) or step == settings.steps


@attrs.frozen
class TrainReport:
    start_step: int
    steps_done: int
    interrupted: bool = False
    last_checkpoint: CheckpointRef | None = None
    # The figures of the last logging window.
    metrics: dict[str, float] = attrs.field(factory=dict)
    # (step, overall eval figures) per evaluation.
    evaluations: list[tuple[int, dict[str, Any]]] = attrs.field(factory=list)


class _NoTask:
    def advance(self, n: int = 1) -> None:
        pass

    def update(self, **fields: Any) -> None:
        pass

    def close(self) -> None:
        pass


class TrainPolicy:
    def __init__(
        self,
        backend: TrainingBackend,
        progress: Progress,
        metrics: MetricsSink,
        evaluator: Evaluator | None = None,
        *,
        plan: Planner,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._backend = backend
        self._plan = plan
        self._progress = progress
        self._metrics = metrics
        self._evaluator = evaluator
        self._clock = clock

    def __call__(self, settings: TrainSettings) -> TrainReport:
        resume = self._checkpoint_to_resume(settings)
        start = resume.step if resume is not None else 0
        if start >= settings.steps:
            log.info("nothing to train", checkpoint_step=start, steps=settings.steps)
            return TrainReport(start, start, last_checkpoint=resume)
        if settings.eval_freq > 0 and self._evaluator is None:
            log.info("no simulator configured: evaluation during training is off")
        if resume is not None:
            # The checkpoint's policy config: what its weights and statistics were made for.
            settings = attrs.evolve(settings, policy=self._backend.checkpoint_policy(resume))
        processes = self._backend.join(settings)
        try:
            session = processes.start(self._plan(settings, resume, processes))
        except BaseException:
            processes.close()
            raise
        try:
            return self._run(session, settings, resume)
        finally:
            session.close()
            self._metrics.close()

    def _checkpoint_to_resume(self, settings: TrainSettings) -> CheckpointRef | None:
        if settings.output_dir is None:
            raise ConfigError("no output dir given", where="output_dir", hint="pass --output_dir")
        if settings.resume is None:
            existing = self._backend.find_checkpoint(settings.output_dir)
            if existing is not None:
                raise ConfigError(
                    f"the output dir already holds a training run (step {existing.step})",
                    where=settings.output_dir,
                    hint=f"continue it with --resume={settings.output_dir}, "
                    "or choose another --output_dir",
                )
            return None
        found = self._backend.find_checkpoint(settings.resume)
        if found is None:
            raise ConfigError(
                "no checkpoint to resume from",
                where=settings.resume,
                hint="give a run's output dir or one of its checkpoints/<step> folders",
            )
        log.info("resuming", checkpoint=found.location, step=found.step)
        return found

    def _run(
        self, session: TrainingSession, settings: TrainSettings, resume: CheckpointRef | None
    ) -> TrainReport:
        start = session.steps_done
        last_saved = resume
        window = MetricsWindow()
        logged: dict[str, float] = {}
        evaluations: list[tuple[int, dict[str, Any]]] = []
        bar: ProgressTask = (
            self._progress.task("train", total=settings.steps - start)
            if session.is_main
            else _NoTask()
        )
        skipped_in_a_row = 0
        saving = False  # an interrupt inside a save means the user abandoned that checkpoint
        try:
            while session.steps_done < settings.steps:
                result = session.train_step()
                skipped_in_a_row = skipped_in_a_row + 1 if result.skipped else 0
                if _diverged(result) or skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW:
                    if window.steps and session.is_main:
                        self._log(session, session.steps_done, window.flush())
                    raise _divergence(result, session, settings, last_saved, skipped_in_a_row)
                step = session.steps_done
                window.add(result)
                if session.is_main:
                    bar.advance()
                    bar.update(**_bar_fields(result, window))
                if is_due(step, settings.log_freq):
                    logged = self._log(session, step, window.flush())
                if is_save_step(step, settings):
                    saving = True
                    last_saved = session.save_checkpoint() or last_saved
                    saving = False
                if self._evaluator is not None and is_due(step, settings.eval_freq):
                    figures = self._evaluate(session, step, settings)
                    if figures is not None:
                        evaluations.append((step, figures))
        except KeyboardInterrupt:
            step = session.steps_done
            unsaved = step > (last_saved.step if last_saved else 0)
            if saving:
                _abandoned(step, last_saved)
            elif settings.save_checkpoint and unsaved:
                log.warning("interrupted: saving a checkpoint, please wait", step=step)
                try:
                    last_saved = session.save_checkpoint() or last_saved
                except KeyboardInterrupt:
                    _abandoned(step, last_saved)
            else:
                log.warning("interrupted", step=step)
            return TrainReport(start, step, True, last_saved, logged, evaluations)
        finally:
            bar.close()
        if window.steps and session.is_main:
            logged = self._log(session, session.steps_done, window.flush())
        return TrainReport(start, session.steps_done, False, last_saved, logged, evaluations)

    def _log(
        self, session: TrainingSession, step: int, figures: dict[str, float]
    ) -> dict[str, float]:
        if session.is_main and figures:
            self._metrics.write(step, figures, phase="train")
            log.info("train", step=step, **{k: float(f"{v:.6g}") for k, v in figures.items()})
        return figures

    def _evaluate(
        self, session: TrainingSession, step: int, settings: TrainSettings
    ) -> dict[str, Any] | None:
        assert self._evaluator is not None
        figures = None
        if session.is_main:
            eval_settings = settings.eval
            if eval_settings.max_episodes_rendered > 0:
                base = eval_settings.videos_dir or f"{settings.output_dir}/eval"
                eval_settings = attrs.evolve(eval_settings, videos_dir=f"{base}/videos_step_{step}")
            started = self._clock()
            with session.evaluation_policy() as policy:
                report = self._evaluator(policy, eval_settings)
            overall = report.overall()
            figures = {k: v for k, v in overall.items() if isinstance(v, (int, float))}
            figures.setdefault("eval_s", self._clock() - started)
            self._metrics.write(step, figures, phase="eval")
            log.info("eval", step=step, **figures)
        session.barrier()
        return figures


def _abandoned(step: int, kept: CheckpointRef | None) -> None:
    log.warning(
        "checkpoint abandoned; the previous one is kept",
        step=step,
        kept=kept.location if kept is not None else None,
    )


def _diverged(result: StepResult) -> bool:
    if result.nonfinite is not None:
        return True
    finite = math.isfinite(result.loss) and math.isfinite(result.grad_norm)
    return not result.skipped and not finite


def _divergence(
    result: StepResult,
    session: TrainingSession,
    settings: TrainSettings,
    last_saved: CheckpointRef | None,
    skipped_in_a_row: int,
) -> TrainingDiverged:
    """The error that stops a run whose step went non-finite: what, at which step, the likely
    cause, and what to do (the last good checkpoint stays `last`)."""
    # A refused update leaves the step count as it was; a backend that applied it counted it.
    step = session.steps_done + 1 if result.nonfinite is not None else session.steps_done
    seen = result.nonfinite or NonFinite()
    dataset = ", ".join(settings.dataset.locations_given) or "DATASET"
    kept = (
        f"the last good checkpoint (step {last_saved.step}) is kept; "
        f"rlctl train --resume={settings.output_dir} continues from it"
        if last_saved is not None
        else "no checkpoint was saved before it"
    )
    if skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW:
        what = (
            f"the gradients overflowed in {skipped_in_a_row} steps in a row under mixed "
            "precision (the loss scaler skipped them all)"
        )
        hint = "train without --use_amp, or lower --optimizer.lr"
    elif seen.data:
        what = f"the loss is {_figure(result.loss)}: the data holds NaN or inf in " + "; ".join(
            seen.data
        )
        hint = (
            f"find the damaged rows with `rlctl dataset check {dataset}`, fix the episodes or "
            "drop them (`rlctl dataset delete-episodes`)"
        )
    elif seen.processed:
        what = (
            f"the loss is {_figure(result.loss)}: pre-processing (normalisation) made "
            + ", ".join(seen.processed)
            + " non-finite although the data is finite"
        )
        hint = (
            f"check the statistics in meta/stats.json (`rlctl dataset check {dataset}`) and "
            f"recompute them with `rlctl dataset recompute-stats {dataset}`"
        )
    else:
        grads = f"; non-finite gradients in {', '.join(seen.gradients)}" if seen.gradients else ""
        what = (
            f"the loss is {_figure(result.loss)} and the gradient norm "
            f"{_figure(result.grad_norm)} although the batch was finite: the update "
            f"overflowed{grads}"
        )
        hint = (
            f"lower the learning rate (--optimizer.lr, now {result.lr:.3g}), set "
            "--grad_clip_norm, or train without --use_amp (mixed-precision overflow)"
        )
        if last_saved is not None:
            kept = (
                f"the last checkpoint (step {last_saved.step}) is kept, but its weights may "
                "already be drifting: start again with a lower rate rather than resume it"
            )
    return TrainingDiverged(
        f"training stopped at step {step}: {what}",
        where=f"{settings.output_dir}",
        hint=f"{hint}; {kept}",
    )


def _figure(value: float) -> str:
    return f"{value:.4g}"


def _bar_fields(result: StepResult, window: MetricsWindow) -> dict[str, Any]:
    current = window.summary()
    return {
        "loss": f"{result.loss:.4f}",
        "lr": f"{result.lr:.1e}",
        "smp/s": f"{current.get('samples_per_s', 0.0):.1f}",
        "data": f"{100 * current.get('data_wait', 0.0):.0f}%",
    }
