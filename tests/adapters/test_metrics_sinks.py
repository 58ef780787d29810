"""Metrics sinks: metrics.jsonl always; TensorBoard and W&B skipped with a message when missing."""

from __future__ import annotations

import json

import pytest
from structlog.testing import capture_logs

from rlctl.adapters.telemetry.metrics import (
    JsonlMetricsSink,
    TensorBoardSink,
    WandbSink,
    training_metrics_sink,
)


def test_jsonl_appends_records_and_heals_a_torn_last_line(tmp_path):
    path = tmp_path / "run" / "metrics.jsonl"
    sink = JsonlMetricsSink(path)
    sink.write(1, {"loss": 0.5})
    sink.close()
    with path.open("a") as file:
        file.write('{"step": 2, "lo')  # a run killed mid-write
    again = JsonlMetricsSink(path)
    again.write(3, {"pc_success": 50.0}, phase="eval")
    again.close()
    lines = path.read_text().splitlines()
    first, last = json.loads(lines[0]), json.loads(lines[-1])
    assert (first["step"], first["phase"], first["loss"]) == (1, "train", 0.5)
    assert (last["step"], last["phase"], last["pc_success"]) == (3, "eval", 50.0)


def test_nothing_is_written_without_records(tmp_path):
    sink = training_metrics_sink(tmp_path / "run")
    sink.close()
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(TensorBoardSink.available(), reason="tensorboard is installed here")
def test_missing_tensorboard_is_a_message_not_a_crash(tmp_path):
    with capture_logs() as logs:
        sink = training_metrics_sink(tmp_path, tensorboard=True)
    assert [type(s).__name__ for s in sink.sinks] == ["JsonlMetricsSink"]
    assert any("TensorBoard logging skipped" in entry["event"] for entry in logs)


@pytest.mark.skipif(WandbSink.available(), reason="wandb is installed here")
def test_missing_wandb_is_a_message_not_a_crash(tmp_path):
    with capture_logs() as logs:
        sink = training_metrics_sink(tmp_path, wandb=True)
    assert [type(s).__name__ for s in sink.sinks] == ["JsonlMetricsSink"]
    assert any("W&B logging skipped" in entry["event"] for entry in logs)
