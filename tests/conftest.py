"""Shared test settings: where LeRobot's fixtures live, hypothesis profiles."""

from __future__ import annotations

import os
from pathlib import Path

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
# No test reaches the real Hub: by default the Hub is a closed port on loopback; tests that
# exercise the Hub start their own server there and point HF_ENDPOINT at it.
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"

settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"LeRobot fixtures not found at {FIXTURES} (set RLCTL_SHARED to ../shared)")
    return FIXTURES
