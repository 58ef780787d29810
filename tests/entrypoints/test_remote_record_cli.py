"""`rlctl record --policy.server=HOST:PORT`: a recording driven by a policy in another process."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.entrypoints.cli.main import cli
from tests.adapters.remote.server_process import ServerProcess, tiny_mlp, write_token

TOKEN = "a-token-for-the-remote-record-test-0123456789"


def record(server: str, root: Path, *extra: str, joints: int = 6) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli,
        [
            "record",
            "--robot.type=scripted",
            f"--robot.joints={json.dumps([f'j{i}' for i in range(joints)])}",
            f"--policy.server={server}",
            "--policy.aggregate=average",
            "--policy.connect_timeout_s=20",
            f"--dataset.root={root}",
            "--dataset.single_task=reach",
            "--dataset.num_episodes=2",
            "--dataset.episode_time_s=0.5",
            "--dataset.reset_time_s=0",
            "--dataset.fps=20",
            "--controls=off",
            "--progress=silent",
            *extra,
        ],
    )
    return result.exit_code, result.output


@pytest.mark.slow
def test_record_with_a_served_policy(tmp_path: Path) -> None:
    token = write_token(tmp_path / "token", TOKEN)
    paths = json.dumps({"arm": str(tiny_mlp(tmp_path / "mlp"))})
    server = ServerProcess(
        tmp_path / "server.log", f"--policy.paths={paths}", "--port=0", f"--token-file={token}"
    )
    try:
        code, output = record(server.address, tmp_path / "ds", f"--policy.token_file={token}")
        assert code == 0, output
        assert "recorded 2 episode(s), 20 frames" in output
        reader = LeRobotDatasetReader(tmp_path / "ds")
        actions = np.stack([np.asarray(reader[i]["action"]) for i in range(len(reader))])
        # The MLP's actions, not the scripted robot's zeros: the served policy drove the arm.
        assert actions.shape == (20, 6) and np.abs(actions).sum() > 0

        # A robot of 3 joints sends a state the 6-joint policy cannot read: one clear refusal.
        code, output = record(
            server.address, tmp_path / "ds3", f"--policy.token_file={token}", joints=3
        )
        assert code == 1, output
        assert "Traceback" not in output and "INTERNAL" not in output
        assert "INVALID_ARGUMENT" in output
        assert "it reads observation.state as (6,), the request has (3,)" in output
    finally:
        server.stop()
    log = server.log.read_text()
    assert "Traceback" not in log and "refused a request" in log


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o640)
    code, output = record("127.0.0.1:9", tmp_path / "ds", f"--policy.token_file={token}")
    assert code == 1, output
    assert "open to others" in output and f"chmod 600 {token}" in output
    assert not (tmp_path / "ds").exists()
