"""`rlctl policy serve` as a real process on loopback, and a tiny policy checkpoint for it."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from rlctl.adapters.policies.loaded_policy import create_policy
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import MLPConfig

STATE_DIM, ACTION_DIM = 6, 6


def tiny_mlp(
    folder: Path,
    chunk: int = 10,
    *,
    state_dim: int = STATE_DIM,
    action_dim: int = ACTION_DIM,
    state_std: float = 1.0,
) -> Path:
    """A small MLP policy; a tiny `state_std` makes extreme states overflow to NaN actions."""
    torch.manual_seed(0)
    config = MLPConfig(
        input_features={"observation.state": typed_feature("STATE", (state_dim,))},
        output_features={"action": typed_feature("ACTION", (action_dim,))},
        chunk_size=chunk,
        n_action_steps=chunk,
        hidden_dims=(16,),
        device="cpu",
    )
    stats = {
        "observation.state": {"mean": np.zeros(state_dim), "std": np.full(state_dim, state_std)},
        "action": {"mean": np.zeros(action_dim), "std": np.ones(action_dim)},
    }
    return create_policy(config, stats, device="cpu").save(folder)


def write_token(path: Path, token: str) -> Path:
    """A token file only its owner reads: the server and the robot refuse any other."""
    path.write_text(token)
    path.chmod(0o600)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    def __init__(self, log: Path, *args: str, ready_timeout: float = 180.0) -> None:
        self.log = log
        self._seen = len(self._ready_lines()) if log.exists() else 0
        self._out = log.open("a")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from rlctl.entrypoints.cli.main import main; main()",
                "policy",
                "serve",
                *args,
            ],
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )
        try:
            self.address = self._wait_ready(ready_timeout)
        except BaseException:
            self.stop()  # never left running when it failed to start
            raise

    def _wait_ready(self, timeout: float = 180.0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            found = self._ready_lines()
            if len(found) > self._seen:
                return str(found[-1])
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited:\n{self.log.read_text()}")
            time.sleep(0.05)
        raise AssertionError(f"the server did not start:\n{self.log.read_text()}")

    def _ready_lines(self) -> list[str]:
        return re.findall(r"serving .+ on (\S+:\d+)", self.log.read_text())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self._out.close()
