"""Metrics sinks: `metrics.jsonl` always, TensorBoard and W&B when asked and installed.

Every sink opens its files on the first record, so a process that never writes (a non-main
rank) leaves nothing behind. The optional ones degrade to a logged message, never a crash: a
run is not lost because a dashboard library is missing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import structlog

from rlctl.application.ports.training import MetricsSink
from rlctl.domain.run_layout import METRICS_FILE

log = structlog.get_logger(__name__)


class JsonlMetricsSink:
    """One JSON object per record: `{"step", "phase", "time", <metrics>}`, appended (a resumed
    run continues the file)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: IO[str] | None = None

    def write(self, step: int, metrics: Mapping[str, float], *, phase: str = "train") -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
            if _ends_mid_line(self.path):
                self._file.write("\n")  # a killed run may have left half a record
        record = {"step": step, "phase": phase, "time": time.time(), **metrics}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _ends_mid_line(path: Path) -> bool:
    with path.open("rb") as file:
        if file.seek(0, 2) == 0:
            return False
        file.seek(-1, 2)
        return file.read(1) != b"\n"


class TensorBoardSink:
    """Scalars under `<phase>/<name>` in `log_dir`, through `torch.utils.tensorboard`."""

    def __init__(self, log_dir: str | Path) -> None:
        self.log_dir = Path(log_dir)
        self._writer: Any = None

    @staticmethod
    def available() -> bool:
        try:
            import torch.utils.tensorboard  # noqa: F401
        except ImportError:
            return False
        return True

    def write(self, step: int, metrics: Mapping[str, float], *, phase: str = "train") -> None:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(self.log_dir))
        for name, value in metrics.items():
            self._writer.add_scalar(f"{phase}/{name}", value, step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class WandbSink:
    """A W&B run (offline by default: `wandb sync` uploads it later)."""

    def __init__(
        self, *, project: str, directory: str | Path, mode: str = "offline", config: Any = None
    ) -> None:
        self.options = {"project": project, "dir": str(directory), "mode": mode, "config": config}
        self._run: Any = None

    @staticmethod
    def available() -> bool:
        try:
            import wandb  # noqa: F401
        except ImportError:
            return False
        return True

    def write(self, step: int, metrics: Mapping[str, float], *, phase: str = "train") -> None:
        if self._run is None:
            import wandb

            self._run = wandb.init(**self.options)
        self._run.log({f"{phase}/{k}": v for k, v in metrics.items()}, step=step)

    def close(self) -> None:
        if self._run is not None:
            self._run.finish()
            self._run = None


class FanOutSink:
    def __init__(self, sinks: Sequence[MetricsSink]) -> None:
        self.sinks = list(sinks)

    def write(self, step: int, metrics: Mapping[str, float], *, phase: str = "train") -> None:
        for sink in self.sinks:
            sink.write(step, metrics, phase=phase)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


def training_metrics_sink(
    output_dir: str | Path,
    *,
    tensorboard: bool = False,
    wandb: bool = False,
    wandb_project: str = "rlctl",
    wandb_mode: str = "offline",
    config: Any = None,
) -> FanOutSink:
    """`<output_dir>/metrics.jsonl`, plus TensorBoard (`<output_dir>/tensorboard`) and W&B
    when asked for — each skipped, with a message saying how to get it, when not installed."""
    out = Path(output_dir)
    sinks: list[MetricsSink] = [JsonlMetricsSink(out / METRICS_FILE)]
    if tensorboard:
        if TensorBoardSink.available():
            sinks.append(TensorBoardSink(out / "tensorboard"))
        else:
            log.warning(
                "TensorBoard logging skipped: the tensorboard package is not installed",
                hint="pip install tensorboard (metrics still go to metrics.jsonl)",
            )
    if wandb:
        if WandbSink.available():
            sinks.append(
                WandbSink(project=wandb_project, directory=out, mode=wandb_mode, config=config)
            )
        else:
            log.warning(
                "W&B logging skipped: the wandb package is not installed",
                hint="pip install wandb (metrics still go to metrics.jsonl)",
            )
    return FanOutSink(sinks)
