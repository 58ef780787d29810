"""`rlctl policy serve` as a user types it: what it refuses before loading anything (the token in
clear beyond this machine, a token file others can read, limits out of range), and `--insecure`
said on purpose."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
from rlctl.domain.remote_inference import ChunkRequest
from rlctl.entrypoints.cli.main import cli
from tests.adapters.remote.server_process import (
    STATE_DIM,
    ServerProcess,
    free_port,
    tiny_mlp,
    write_token,
)

TOKEN = "a-token-for-the-serve-cli-test-0123456789"


def serve(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["policy", "serve", "--policy.path=nowhere", *args])
    return result.exit_code, result.output


def test_beyond_this_machine_without_tls_is_refused(tmp_path: Path) -> None:
    token = write_token(tmp_path / "token", TOKEN)
    code, output = serve("--host=0.0.0.0", f"--token-file={token}", "--port=0")
    assert code == 1, output
    first, *rest = output.strip().splitlines()
    assert "without TLS sends the token, the observations and the actions in clear" in first
    assert "--insecure" in " ".join(rest) and "--tls-cert" in " ".join(rest)
    assert "Traceback" not in output


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_token_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(mode)
    code, output = serve(f"--token-file={token}", "--port=0")
    assert code == 1, output
    assert "the token file is open to others" in output and f"chmod 600 {token}" in output


@pytest.mark.parametrize(
    ("option", "complaint"),
    [
        ("--workers=0", "workers must be a whole number within [1, 1024], got 0"),
        ("--workers=-3", "workers must be"),
        ("--max-per-peer=0", "max_per_peer must be"),
        ("--max-connections=0", "max_connections must be"),
        ("--max-message-mb=0", "max_message_mb must be within"),
        ("--max-message-mb=-1", "max_message_mb must be within"),
        ("--idle-timeout-s=0", "idle_timeout_s must be a positive number"),
        ("--port=70000", "port must be"),
        ("--message_timeout_s=0", "message_timeout_s must be a positive, finite number"),
        ("--message_timeout_s=-1", "message_timeout_s must be a positive, finite number"),
        ("--message_timeout_s=nan", "message_timeout_s must be a positive, finite number"),
        ("--message_timeout_s=inf", "message_timeout_s must be a positive, finite number"),
    ],
)
def test_limits_out_of_range_are_one_clear_error(option: str, complaint: str) -> None:
    code, output = serve(option)
    assert code == 1, output
    assert complaint in output and "Traceback" not in output


@pytest.mark.slow
def test_insecure_serves_beyond_this_machine_when_said(tmp_path: Path) -> None:
    token = write_token(tmp_path / "token", TOKEN)
    port = free_port()
    server = ServerProcess(
        tmp_path / "server.log",
        f"--policy.path={tiny_mlp(tmp_path / 'mlp')}",
        "--host=0.0.0.0",
        f"--port={port}",
        f"--token-file={token}",
        "--insecure",
    )
    try:
        client = GrpcPolicyClient(f"127.0.0.1:{port}", token=TOKEN)
        request = ChunkRequest(observation={"observation.state": np.zeros((1, STATE_DIM))})
        assert client.predict(request, timeout=20).actions.shape == (1, 10, STATE_DIM)
        client.close()
    finally:
        server.stop()


@pytest.mark.parametrize(("args", "expected"), [([], 30.0), (["--message_timeout_s=2.5"], 2.5)])
def test_the_message_timeout_reaches_the_server(
    args: list[str], expected: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A robot stalled mid-send is cut off after `--message_timeout_s`, as the learner's actors
    are (the watchdog itself: tests/adapters/rl/test_actor_fleet.py)."""
    from rlctl.adapters.remote import grpc_server
    from rlctl.domain.errors import ConfigError

    given: list[dict[str, object]] = []

    def server(**kwargs: object) -> None:
        given.append(kwargs)
        raise ConfigError("stopped after the server's settings", where="test")

    monkeypatch.setattr(grpc_server, "GrpcPolicyServer", server)
    folder = tiny_mlp(tmp_path / "mlp")
    result = CliRunner().invoke(
        cli, ["policy", "serve", f"--policy.path={folder}", "--port=0", *args]
    )
    assert result.exit_code == 1 and "stopped after the server's settings" in result.output
    assert [g["message_timeout_s"] for g in given] == [expected]
