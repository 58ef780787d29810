import io
import json

import structlog

from rlctl.adapters.memory.progress import RecordingProgress, SilentProgress
from rlctl.adapters.telemetry.logging import configure_logging
from rlctl.adapters.telemetry.progress import RichProgress, terminal_progress


def test_json_lines_when_asked():
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    structlog.get_logger().info("encoded", episode=3, fps=30.0)
    structlog.get_logger().debug("hidden")
    record = json.loads(out.getvalue().strip())
    assert record["event"] == "encoded" and record["episode"] == 3 and record["level"] == "info"


def test_key_value_on_console():
    out = io.StringIO()
    configure_logging("debug", "console", stream=out)
    structlog.get_logger().debug("saved", episode=1)
    assert "saved" in out.getvalue() and "episode=1" in out.getvalue()


def test_stdlib_logging_goes_through_the_same_renderer():
    import logging

    out = io.StringIO()
    configure_logging("warning", "json", stream=out)
    logging.getLogger("somelib").warning("careful %s", "now")
    assert json.loads(out.getvalue().strip())["event"] == "careful now"


def test_logging_follows_stderr_and_outlives_a_closed_one(monkeypatch):
    """A command run under a test runner or inside a service configures logging while stderr is
    a stream that is closed afterwards: later records go to the stderr of their moment."""
    import logging

    first = io.StringIO()
    monkeypatch.setattr("sys.stderr", first)
    configure_logging("info", "console")
    structlog.get_logger().info("during the command")
    first.close()
    later = io.StringIO()
    monkeypatch.setattr("sys.stderr", later)
    structlog.get_logger().info("after it", step=2)
    logging.getLogger("somelib").warning("and the stdlib too")
    assert "after it" in later.getvalue() and "step=2" in later.getvalue()
    assert "and the stdlib too" in later.getvalue()


def test_progress_is_silent_off_a_terminal():
    assert isinstance(terminal_progress(io.StringIO()), SilentProgress)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal():
    stream = _Tty()
    progress = terminal_progress(stream)
    assert isinstance(progress, RichProgress)
    with progress.task("encoding", total=3) as task:
        task.advance(3)
        task.update(loss=0.5)
    assert "encoding" in stream.getvalue()


def test_recording_progress_keeps_what_was_reported():
    progress = RecordingProgress()
    with progress.task("train", total=10) as task:
        task.advance(4)
        task.update(loss=1.0)
    assert progress.tasks[0].done == 4 and progress.tasks[0].closed
