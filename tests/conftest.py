"""Shared test settings: where LeRobot's fixtures live, hypothesis profiles, LeRobot's Python,
and the watchdog that ends a test run stuck where pytest-timeout cannot reach it."""

from __future__ import annotations

import faulthandler
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# As every rlctl process does (importing the entrypoints layer), before any test imports torch;
# the tests' subprocesses inherit it.
import rlctl.entrypoints  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RLCTL_SHARED", REPO_ROOT.parent / "shared"))
FIXTURES = SHARED / "fixtures" / "lerobot-0.6.1"

# No test reaches the real Hub: by default the Hub is a closed port on loopback; tests that
# exercise the Hub start their own server there and point HF_ENDPOINT at it.
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Per-test limits (pytest-timeout), fixtures included, for a test that sets none: the
# `timeout` in pyproject.toml (300 s) for the rest; a `slow` test, seconds to minutes of real
# encoders, simulators or subprocesses, 600 s; one running LeRobot's own Python (the `lerobot`
# fixture gives each call up to 600 s) 900 s.
SLOW_TEST_TIMEOUT_S = 600
LEROBOT_TEST_TIMEOUT_S = 900
# How long after a test's pytest-timeout limit the watchdog ends the whole run.
HANG_GRACE_S = float(os.environ.get("RLCTL_TEST_HANG_GRACE_S", "60"))
_WATCHDOG_FD = pytest.StashKey[int]()
_FAILING = pytest.StashKey[bool]()
_WATCHDOG_DEADLINE = pytest.StashKey[float | None]()


def pytest_configure(config: pytest.Config) -> None:
    # The real stderr, kept before output capture redirects file descriptor 2 during tests:
    # the watchdog's stack dump must reach the CI log, not a capture file that dies with us.
    config.stash[_WATCHDOG_FD] = os.dup(2)


def pytest_unconfigure(config: pytest.Config) -> None:
    _disarm_watchdog(config)
    fd = config.stash.get(_WATCHDOG_FD, None)
    if fd is not None:
        os.close(fd)


# Every torchrun launch costs a minute or two of imports on a 2-core machine: CI keeps one
# multi-process sharded run (fsdp on two ranks, accumulation, resume); the other topologies
# (four ranks, hsdp, ddp to fsdp, π0's layer pairs, ACT with activation checkpointing) run when
# RLCTL_RANKS_TESTS=1, as the LeRobot interop tests run when RLCTL_LEROBOT_PYTHON is set.
RANKS_TESTS = os.environ.get("RLCTL_RANKS_TESTS") == "1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("ranks") and not RANKS_TESTS:
            item.add_marker(
                pytest.mark.skip(reason="set RLCTL_RANKS_TESTS=1 to run every sharded topology")
            )
        if item.get_closest_marker("timeout") is not None:
            continue
        if item.get_closest_marker("lerobot") or "lerobot" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(LEROBOT_TEST_TIMEOUT_S))
        elif item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT_S))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> None:
    """Arm the watchdog beside pytest-timeout's own timer (which is still set: None returned).

    Why pytest-timeout alone let CI hang for a quarter of an hour in the viewer's browser test:
    it stopped its timer at every failure (see `pytest_exception_interact` below), so the
    teardown of a failed test, closing its browser and its server, ran without a limit; and
    its signal method fires once, raising only when Python code next runs in the main thread,
    so a teardown that blocks again after the alarm, or a C call that does not return on a
    signal, is never interrupted. faulthandler's watchdog is a C thread that needs neither the
    main thread nor the GIL: `HANG_GRACE_S` after the test's limit it writes every thread's
    stack to the CI log and exits the run.
    """
    if settings.timeout and not _debugging(item.config):
        deadline = time.monotonic() + settings.timeout + HANG_GRACE_S
        item.config.stash[_WATCHDOG_DEADLINE] = deadline
        _arm_watchdog(item.config)


def _arm_watchdog(config: pytest.Config) -> None:
    deadline = config.stash.get(_WATCHDOG_DEADLINE, None)
    if deadline is not None:
        fd = config.stash.get(_WATCHDOG_FD, 2)
        left = max(deadline - time.monotonic(), 0.1)
        faulthandler.dump_traceback_later(left, exit=True, file=fd)


def _disarm_watchdog(config: pytest.Config) -> None:
    config.stash[_WATCHDOG_DEADLINE] = None
    faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    # Setup, call and teardown are over (pass or fail): the watchdog has nothing left to watch.
    try:
        return (yield)
    finally:
        _disarm_watchdog(item.config)


@pytest.hookimpl(wrapper=True)
def pytest_exception_interact(node: pytest.Item | pytest.Collector, call: Any, report: Any) -> Any:
    """A failure is not the end of a test: its teardown is still to come, and still watched.

    pytest calls this hook for every failure, and both pytest-timeout (see below) and pytest's
    own faulthandler plugin stop their timers in it, meant for a pdb session; the teardown of
    a failed test then ran with no limit at all. The watchdog is armed again for what is left.
    """
    node.config.stash[_FAILING] = True
    try:
        return (yield)
    finally:
        node.config.stash[_FAILING] = False
        if not _debugging(node.config):
            _arm_watchdog(node.config)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> bool | None:
    """Keep the limit through the teardown of a test that failed.

    pytest-timeout cancels its timer from `pytest_exception_interact`, there to spare a pdb
    session, but pytest calls that hook for every failure: the teardown of a failed test (a
    browser or a server to close) then ran without any limit. Unless a debugger is in use,
    the cancel asked for there is skipped (True ends this first-result hook); the one at the
    end of the test still happens.
    """
    if item.config.stash.get(_FAILING, False) and not _debugging(item.config):
        return True
    return None


@pytest.hookimpl
def pytest_enter_pdb(config: pytest.Config) -> None:
    _disarm_watchdog(config)  # a person is debugging: no limit


def _debugging(config: pytest.Config) -> bool:
    if config.getoption("usepdb", False) or config.getoption("trace", False):
        return True
    tracer = sys.gettrace()
    module = getattr(tracer, "__module__", "") or ""
    return any(name in module for name in ("pydevd", "bdb", "pdb", "debugpy"))


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"LeRobot fixtures not found at {FIXTURES} (set RLCTL_SHARED to ../shared)")
    return FIXTURES


@pytest.fixture(scope="session")
def lerobot() -> Callable[..., Any]:
    """Runs a script (or `-c CODE`) with LeRobot 0.6.1's own Python, named by
    RLCTL_LEROBOT_PYTHON, and returns the JSON it printed last; skips when none is named."""
    python = os.environ.get("RLCTL_LEROBOT_PYTHON")
    if not python:
        pytest.skip("set RLCTL_LEROBOT_PYTHON to a Python with lerobot==0.6.1")

    def run(*args: object, timeout: float = 600, env: dict[str, str] | None = None) -> Any:
        result = subprocess.run(
            [python, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(result.stdout.strip().splitlines()[-1])

    return run
