"""LeRobot 0.6.1 and rlctl share one cache: what either pulled, the other reads without a transfer.

Runs LeRobot in its own Python (RLCTL_LEROBOT_PYTHON) against the same fake Hub and cache folders.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.adapters.hub.layout import LeRobotLayout
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.application.use_cases.pull_dataset import PullDataset, PullDatasetRequest
from rlctl.application.use_cases.push_dataset import PushDataset, PushDatasetRequest

pytestmark = [pytest.mark.slow, pytest.mark.lerobot, pytest.mark.timeout(300)]

CLIENT = Path(__file__).with_name("lerobot_hub_client.py")


def pull(request: PullDatasetRequest):
    # A new adapter each time: it reads HF_HUB_OFFLINE when built.
    return PullDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())(request)


def lerobot_opens(repo_id: str) -> dict:
    python = os.environ.get("RLCTL_LEROBOT_PYTHON")
    if not python:
        pytest.skip("set RLCTL_LEROBOT_PYTHON to a Python with lerobot==0.6.1")
    result = subprocess.run(
        [python, str(CLIENT), repo_id],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env=os.environ.copy(),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_lerobot_and_rlctl_reuse_each_others_pulls(fake_hub, hub_env, sim_video_copy, monkeypatch):
    for repo_id in ("alice/first", "alice/second"):
        PushDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())(
            PushDatasetRequest(str(sim_video_copy), repo_id)
        )

    mine = pull(PullDatasetRequest("alice/first"))
    fetched = len(fake_hub.file_gets())
    theirs = lerobot_opens("alice/first")

    assert Path(theirs["root"]) == mine.root
    assert theirs["frames"] == 75
    assert len(fake_hub.file_gets()) == fetched  # LeRobot transferred no file

    opened = lerobot_opens("alice/second")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    requests = len(fake_hub.requests)
    again = pull(PullDatasetRequest("alice/second"))  # offline: the cache alone answers

    assert again.root == Path(opened["root"])
    assert len(fake_hub.requests) == requests
