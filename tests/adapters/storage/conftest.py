"""Storage tests' LeRobot helper: jobs for `lerobot_datasets.py` run in LeRobot's Python."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

DATASETS_SCRIPT = Path(__file__).with_name("lerobot_datasets.py")


@pytest.fixture
def lerobot_jobs(lerobot, tmp_path: Path) -> Callable[[list[dict[str, Any]]], list[Any]]:
    """Runs `lerobot_datasets.py` on a list of jobs; their results, in order (skips without
    RLCTL_LEROBOT_PYTHON)."""

    def run(jobs: list[dict[str, Any]]) -> list[Any]:
        path = tmp_path / "jobs.json"
        path.write_text(json.dumps(jobs))
        return lerobot(DATASETS_SCRIPT, path)

    return run
