"""A test that hangs anywhere ends: by its timeout where pytest-timeout can reach it, else by
the watchdog, which ends the run with every thread's stack.

Each case runs a tiny test file in a child pytest with this repository's `tests/conftest.py`
and its pytest-timeout settings, a 1 s limit and a 2 s grace. Were a hang not caught, the child
would wait until `subprocess.run` gives up, and the test fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# The shape CI hung in: the alarm fires once, in the test; the teardown (a server's stop() in a
# `with` block's exit) then blocks again, and no second alarm comes.
BLOCKS_AGAIN_IN_TEARDOWN = """
import threading
import pytest

@pytest.fixture
def server_that_will_not_stop():
    yield
    threading.Event().wait()

@pytest.mark.timeout(1)
def test_hangs(server_that_will_not_stop):
    threading.Event().wait()
"""

# Blocked where the alarm cannot reach Python code in the main thread at all.
SIGNAL_NEVER_REACHES_THE_TEST = """
import signal
import threading
import pytest

@pytest.mark.timeout(1)
def test_hangs_out_of_reach():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    threading.Event().wait()
"""


# A test that fails, then hangs in its teardown: pytest-timeout alone cancels its timer at the
# failure; here the teardown keeps the limit, fails alone, and the run goes on.
FAILS_THEN_TEARDOWN_HANGS = """
import threading
import pytest

@pytest.fixture
def browser_that_will_not_close():
    yield
    threading.Event().wait()

@pytest.mark.timeout(1)
def test_fails(browser_that_will_not_close):
    assert False, "the frame shown was not the cursor's"

def test_next():
    pass
"""


def run_child(tmp_path: Path, source: str) -> tuple[subprocess.CompletedProcess, float]:
    options = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    ini = options["ini_options"]
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\n"
        f"timeout_method = {ini['timeout_method']}\n"
        f"timeout_func_only = {str(ini['timeout_func_only']).lower()}\n"
    )
    (tmp_path / "conftest.py").write_text((REPO_ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "test_hang.py").write_text(source)
    started = time.monotonic()
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_hang.py"],
        cwd=tmp_path,
        env={**os.environ, "RLCTL_TEST_HANG_GRACE_S": "2"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return child, time.monotonic() - started


@pytest.mark.slow
def test_the_teardown_of_a_failed_test_keeps_the_time_limit(tmp_path):
    child, _ = run_child(tmp_path, FAILS_THEN_TEARDOWN_HANGS)
    assert child.returncode == 1, (child.stdout[-2000:], child.stderr[-2000:])
    assert "Failed: Timeout (>1.0s) from pytest-timeout" in child.stdout
    assert "1 failed, 1 passed, 1 error" in child.stdout, child.stdout[-2000:]
    assert "Timeout (0:00" not in child.stderr  # the watchdog was not needed


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "where"),
    [
        (BLOCKS_AGAIN_IN_TEARDOWN, "server_that_will_not_stop"),
        (SIGNAL_NEVER_REACHES_THE_TEST, "test_hangs_out_of_reach"),
    ],
    ids=["teardown-blocks-again", "signal-blocked"],
)
def test_a_hung_test_ends_the_run_with_every_stack(tmp_path, source, where):
    child, elapsed = run_child(tmp_path, source)
    assert child.returncode == 1, (child.returncode, child.stdout[-2000:], child.stderr[-2000:])
    # faulthandler's report, on the real stderr: the limit, then every thread's stack.
    assert "Timeout (0:00:0" in child.stderr, child.stderr[-2000:]
    assert f"in {where}" in child.stderr and "test_hang.py" in child.stderr
    assert elapsed < 100
