"""`rlctl eval --policy.server=HOST:PORT` as a user types it, against a real `rlctl policy serve`
process: a served policy that fits the env is evaluated, one that does not is one clear message
(never `'dict' object has no attribute 'shape'`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlctl.entrypoints.cli.main import cli
from tests.adapters.remote.server_process import ServerProcess, tiny_mlp, write_token

TOKEN = "a-token-for-the-remote-eval-test-0123456789"


def evaluate(server: str, name: str, out: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "--env.type=pusht",
            f"--policy.server={server}",
            f"--policy.server_policy={name}",
            "--policy.connect_timeout_s=20",
            "--eval.n_episodes=1",
            "--eval.batch_size=1",
            "--eval.use_async_envs=false",
            "--eval.max_episode_steps=5",
            "--eval.max_episodes_rendered=0",
            f"--output_dir={out}",
            "--progress=silent",
            *extra,
        ],
    )
    return result.exit_code, result.output


@pytest.mark.slow
def test_eval_with_a_served_policy(tmp_path: Path) -> None:
    pytest.importorskip("gym_pusht")
    fits = tiny_mlp(tmp_path / "pusht", state_dim=2, action_dim=2)  # PushT's state and action
    other_arm = tiny_mlp(tmp_path / "arm")  # a 6-joint arm's
    token = write_token(tmp_path / "token", TOKEN)
    paths = json.dumps({"pusht": str(fits), "arm": str(other_arm)})
    server = ServerProcess(
        tmp_path / "server.log", f"--policy.paths={paths}", "--port=0", f"--token-file={token}"
    )
    try:
        code, output = evaluate(
            server.address, "pusht", tmp_path / "fits", f"--policy.token_file={token}"
        )
        assert code == 0, output
        assert "1 episodes: success" in output
        info = json.loads((tmp_path / "fits" / "eval_info.json").read_text())
        assert info["overall"]["n_episodes"] == 1

        code, output = evaluate(
            server.address, "arm", tmp_path / "arm", f"--policy.token_file={token}"
        )
        assert code == 1, output
        assert "AttributeError" not in output and "Traceback" not in output
        assert "the policy does not fit this env" in output
        assert "it reads observation.state as (6,), the env provides (2,)" in output
        assert not (tmp_path / "arm" / "eval_info.json").exists()

        code, output = evaluate(server.address, "pusht", tmp_path / "anonymous")
        assert code == 1 and "UNAUTHENTICATED" in output and "Traceback" not in output
    finally:
        server.stop()


def test_a_token_file_others_can_read_is_refused_before_connecting(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o644)
    code, output = evaluate(
        "127.0.0.1:9", "pusht", tmp_path / "out", f"--policy.token_file={token}"
    )
    assert code == 1, output
    assert "open to others" in output and f"chmod 600 {token}" in output
