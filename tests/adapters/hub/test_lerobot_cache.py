"""LeRobot 0.6.1 and rlctl share one cache: what either pulled, the other reads without a transfer.

Runs LeRobot in its own Python (RLCTL_LEROBOT_PYTHON) against the same fake Hub and cache folders.
"""

from __future__ import annotations

import os
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


def test_lerobot_and_rlctl_reuse_each_others_pulls(
    lerobot, fake_hub, hub_env, sim_video_copy, monkeypatch
):
    def lerobot_opens(repo_id: str) -> dict:
        # The Hub settings this test gave the process (offline mode, cache folders) go along.
        return lerobot(CLIENT, repo_id, timeout=240, env=os.environ.copy())

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
