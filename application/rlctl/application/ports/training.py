"""Ports for training: the backend that does the mechanics, and where metrics go.

`TrainPolicy` decides *what* and *when*: which dataset and pretrained checkpoint (resolved
once), the policy's final config, relative-action statistics and the optimiser preset — handed
to the backend as one `TrainingPlan` — then steps, checkpoint and evaluation cadence, logging,
resume and Ctrl-C. A `TrainingBackend` knows *how*: it joins the run's processes, builds the
dataset reader, model, optimiser and loader from the plan, runs one optimisation step, and
writes or reads a checkpoint. Under a multi-process launcher every process runs the same use
case; `TrainingProcesses` says whether it is the main one, and only the main one pulls from the
Hub first, writes checkpoints and metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import attrs

from rlctl.application.ports.policy import Policy
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import RlctlError
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.train_presets import OptimizerSpec, SchedulerSpec
from rlctl.domain.train_settings import TrainSettings


class TrainingDiverged(RlctlError):
    """The loss, a gradient or the weights stopped being finite; nothing non-finite is saved."""


@attrs.frozen
class NonFinite:
    """Where a step that went non-finite first saw NaN or inf; each entry names a feature or a
    parameter and, for data, the dataset rows of the samples holding it."""

    # Features of the batch as the dataset gave it: the data itself holds NaN or inf.
    data: tuple[str, ...] = ()
    # Features finite in the data but not once pre-processed (normalisation statistics).
    processed: tuple[str, ...] = ()
    # Parameters whose gradient is NaN or inf (the first few).
    gradients: tuple[str, ...] = ()


@attrs.frozen
class StepResult:
    """What one optimisation step reports."""

    loss: float
    grad_norm: float
    lr: float
    # Samples this step consumed across all processes.
    samples: int
    # Seconds waiting for the batch (loader and pre-processing), then computing the update.
    data_s: float
    compute_s: float
    # The policy's own loss parts (l1_loss, kld_loss …).
    parts: Mapping[str, float] = attrs.field(factory=dict)
    # Set when the loss or the gradients were NaN or inf: the update was *not* applied (weights,
    # optimiser, scheduler and step count are as they were) and this says where it was seen.
    nonfinite: NonFinite | None = None
    # An fp16 loss scaler skipped the update because the gradients overflowed while the loss was
    # finite: it lowers its scale and the step counts, as in LeRobot. Not a failure unless it
    # keeps happening.
    skipped: bool = False


@attrs.frozen
class CheckpointRef:
    """A saved checkpoint: where it is, and after how many optimisation steps it was taken."""

    location: str
    step: int


class TrainingSession(Protocol):
    """A run being trained: model, optimiser and data, ready to step."""

    @property
    def is_main(self) -> bool:
        """True in the process that writes checkpoints, metrics and progress."""
        ...

    @property
    def steps_done(self) -> int:
        """Optimisation steps completed so far, those of a resumed checkpoint included.

        After an interrupt this is the truth: a step is counted once its update is applied.
        """
        ...

    def train_step(self) -> StepResult:
        """Fetch one batch and apply one update — unless its loss or gradients are not finite
        (then `nonfinite` is set and nothing changed). Raises KeyboardInterrupt on Ctrl-C (or
        SIGTERM), also one that came while a checkpoint was being saved."""
        ...

    def save_checkpoint(self) -> CheckpointRef | None:
        """Save model, processors, optimiser, scheduler, RNG states and step; point `last` at it.

        Called by every process (it may synchronise them); returns the checkpoint in the main
        process, None elsewhere. The checkpoint appears whole or not at all; an interrupt while
        it is written is held until it is complete (and raised by the next `train_step` or
        `evaluation_policy`), unless the user insists, which raises KeyboardInterrupt here and
        leaves the previous checkpoint and `last` as they were. Raises `TrainingDiverged`, and
        writes nothing, when the weights are not finite.
        """
        ...

    def evaluation_policy(self) -> AbstractContextManager[Policy]:
        """The current policy for evaluation, in inference mode; the training RNG stream is
        left as it was when the block ends, so evaluating does not change what follows."""
        ...

    def barrier(self) -> None:
        """Wait for every process (a no-op with one)."""
        ...

    def close(self) -> None: ...


@attrs.frozen(kw_only=True)
class TrainingPlan:
    """Everything a run trains with, decided once by `TrainPolicy` before a model is built.

    Every location is local and final: the backend pulls nothing and decides nothing."""

    # The run's settings; for a new run the policy config is complete (features from the
    # dataset, the action names relative actions need, the device), for a resumed run it is
    # the checkpoint's.
    settings: TrainSettings
    # The local dataset folder (streaming: the local copy of its `meta/`) and its metadata.
    dataset_root: Path
    dataset: DatasetMeta
    # A mixture's local folders, in the order given (the first is `dataset_root`), and `dataset`
    # is their shared metadata; empty for one dataset.
    dataset_roots: tuple[Path, ...] = ()
    # The checkpoint to restore (model, optimiser, scheduler, RNG states, step), if resuming.
    resume: CheckpointRef | None = None
    # Fine-tuning: the local folder of the pretrained policy whose weights the run starts from.
    pretrained: Path | None = None
    # Relative actions: the statistics of `action - state` over every action window: the
    # `action` ones that replace the dataset's for normalisation, or, for a policy with a
    # `relative_stats_horizon`, its per-step `relative_action` ones beside them.
    action_stats: Mapping[str, Any] | None = None
    # The optimiser and learning-rate schedule: the policy's preset under the overrides.
    optimizer: OptimizerSpec = attrs.field(factory=OptimizerSpec)
    scheduler: SchedulerSpec | None = None


class TrainingProcesses(Protocol):
    """The processes a run trains in (one, or those a launcher such as torchrun started),
    joined before the plan is made so that only the main one pulls from the Hub."""

    @property
    def is_main(self) -> bool:
        """True in the process that pulls first, writes checkpoints, metrics and progress."""
        ...

    @property
    def distributed(self) -> bool:
        """More than one process trains."""
        ...

    @property
    def device_type(self) -> str:
        """The kind of device this process trains on: cpu, cuda, mps."""
        ...

    def barrier(self) -> None:
        """Wait for every process (a no-op with one)."""
        ...

    def share(self, value: Any) -> Any:
        """The main process's `value` (plain JSON data), in every process."""
        ...

    def start(self, plan: TrainingPlan) -> TrainingSession:
        """Build everything the plan says; with `plan.resume`, restore the model, optimiser,
        scheduler, RNG states and step from it. The session then owns the processes."""
        ...

    def close(self) -> None:
        """Leave the processes' group when no session was started (idempotent)."""
        ...


class TrainingBackend(Protocol):
    def find_checkpoint(self, location: str) -> CheckpointRef | None:
        """The checkpoint to resume from: `location` itself, or a run folder's last one."""
        ...

    def checkpoint_policy(self, checkpoint: CheckpointRef) -> PolicyConfig:
        """The policy config `checkpoint` was trained with (what a resumed run trains)."""
        ...

    def join(self, settings: TrainSettings) -> TrainingProcesses:
        """Join the run's processes and pick this one's device (`settings.policy.device`)."""
        ...


class MetricsSink(Protocol):
    """Where logged figures go: a metrics.jsonl, TensorBoard, W&B …"""

    def write(self, step: int, metrics: Mapping[str, float], *, phase: str = "train") -> None: ...

    def close(self) -> None: ...
