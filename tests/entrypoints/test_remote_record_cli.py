"""`rlctl record --policy.server=HOST:PORT`: a recording driven by a policy in another process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.entrypoints.cli.main import cli
from tests.adapters.remote.server_process import ServerProcess, tiny_mlp


@pytest.mark.slow
def test_record_with_a_served_policy(tmp_path: Path) -> None:
    server = ServerProcess(
        tmp_path / "server.log", f"--policy.path={tiny_mlp(tmp_path / 'mlp')}", "--port=0"
    )
    try:
        result = CliRunner().invoke(
            cli,
            [
                "record",
                "--robot.type=scripted",
                '--robot.joints=["a", "b", "c", "d", "e", "f"]',
                f"--policy.server={server.address}",
                "--policy.aggregate=average",
                f"--dataset.root={tmp_path / 'ds'}",
                "--dataset.single_task=reach",
                "--dataset.num_episodes=2",
                "--dataset.episode_time_s=0.5",
                "--dataset.reset_time_s=0",
                "--dataset.fps=20",
                "--controls=off",
                "--progress=silent",
            ],
            catch_exceptions=False,
        )
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    assert "recorded 2 episode(s), 20 frames" in result.output
    reader = LeRobotDatasetReader(tmp_path / "ds")
    actions = np.stack([np.asarray(reader[i]["action"]) for i in range(len(reader))])
    # The MLP's actions, not the scripted robot's zeros: the served policy drove the arm.
    assert actions.shape == (20, 6) and np.abs(actions).sum() > 0
