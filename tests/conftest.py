"""Shared test settings: where LeRobot's fixtures live, hypothesis profiles, LeRobot's Python."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

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
