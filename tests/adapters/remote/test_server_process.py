"""A real `rlctl policy serve` process on loopback: chunks flow, refusals get their status while
another client is served, a paused server holds the arm, a killed one is reconnected to."""

from __future__ import annotations

import ast
import os
import pickle
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.remote import wire
from rlctl.adapters.remote.errors import ServerRefused
from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
from rlctl.adapters.remote.remote_policy import GrpcPolicyConnector, RemotePolicy
from rlctl.domain.remote_inference import ChunkRequest, RemotePolicySettings
from tests.adapters.remote.server_process import (
    STATE_DIM,
    ServerProcess,
    free_port,
    tiny_mlp,
    write_token,
)

TOKEN = "a-token-for-the-loopback-tests-0123456789"
OBSERVATION = {"observation.state": np.zeros((1, STATE_DIM), np.float32), "task": ["reach"]}


class CreatesAFile:
    """Unpickling this opens (creates) `path`: proof that a server never unpickles."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.path), "w"))


class Loop(threading.Thread):
    """A robot's control loop at `hz`, recording each tick's action and whether it was held."""

    def __init__(self, policy: RemotePolicy, hz: float = 50.0) -> None:
        super().__init__(daemon=True)
        self.policy, self.period = policy, 1.0 / hz
        self.ticks: list[tuple[np.ndarray, bool]] = []
        self.error: BaseException | None = None
        self.running = True

    def run(self) -> None:
        try:
            while self.running:
                held_before = self.policy.held_ticks
                action = self.policy.select_action(OBSERVATION)
                self.ticks.append((action.copy(), self.policy.held_ticks > held_before))
                time.sleep(self.period)
        except BaseException as err:
            self.error = err

    def fresh_since(self, start: int) -> int:
        return sum(1 for _, held in self.ticks[start:] if not held)

    def stop(self) -> None:
        self.running = False
        self.join(timeout=10)
        assert self.error is None, self.error


def wait_until(condition, loop: Loop | None = None, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    # Generous: a server process starts in seconds, or in tens of them on busy shared cores.
    end = time.monotonic() + timeout
    while not condition():
        assert loop is None or loop.error is None, loop.error
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tiny_mlp(tmp_path / "mlp", chunk=20)


@pytest.mark.slow
def test_refusals_get_their_status_while_another_client_is_served(
    tmp_path: Path, checkpoint: Path
) -> None:
    token_file = write_token(tmp_path / "token", TOKEN)
    server = ServerProcess(
        tmp_path / "server.log",
        f"--policy.path={checkpoint}",
        "--port=0",
        f"--token-file={token_file}",
        "--max-message-mb=1",
    )
    settings = RemotePolicySettings(server=server.address, token_file=str(token_file))
    policy = GrpcPolicyConnector().connect(settings)
    loop = Loop(policy)
    try:
        loop.start()
        wait_until(lambda: policy.chunks_received >= 2, loop)
        good = ChunkRequest(observation={"observation.state": OBSERVATION["observation.state"]})

        def refused(client: GrpcPolicyClient, body: bytes) -> str:
            with pytest.raises(ServerRefused) as raised:
                client.send_predict(body, timeout=5.0)
            return raised.value.code

        anonymous = GrpcPolicyClient(server.address)
        impostor = GrpcPolicyClient(server.address, token="x" * len(TOKEN))
        honest = GrpcPolicyClient(server.address, token=TOKEN, max_message_bytes=8 << 20)
        assert refused(anonymous, wire.encode_request(good)) == "UNAUTHENTICATED"
        assert refused(impostor, wire.encode_request(good)) == "UNAUTHENTICATED"
        assert refused(honest, bytes(2 << 20)) == "RESOURCE_EXHAUSTED"

        marker, armed = tmp_path / "unpickled", tmp_path / "armed"
        # The payload is live: unpickled here, it creates its file.
        pickle.loads(pickle.dumps(CreatesAFile(armed)))
        assert armed.exists()
        assert refused(honest, pickle.dumps(CreatesAFile(marker))) == "INVALID_ARGUMENT"
        # A safetensors header announcing more than its bytes: refused before an array is built.
        lying = wire.encode_request(good).replace(b'"shape":[1,6]', b'"shape":[2,6]')
        assert lying != wire.encode_request(good)
        assert refused(honest, lying) == "INVALID_ARGUMENT"
        nan = ChunkRequest(observation={"observation.state": np.full((1, 6), np.nan, np.float32)})
        assert refused(honest, wire.encode_request(nan)) == "INVALID_ARGUMENT"
        wrong_name = ChunkRequest(observation=good.observation, policy="nope")
        assert refused(honest, wire.encode_request(wrong_name)) == "NOT_FOUND"

        assert honest.predict(good, timeout=5.0).actions.shape == (1, 20, 6)
        served = policy.chunks_received
        wait_until(lambda: policy.chunks_received > served + 2, loop)
        assert not marker.exists()
        log = server.log.read_text()
        assert "refused: no valid token" in log and "not an rlctl ChunkRequest message" in log
    finally:
        loop.stop()
        policy.close()
        server.stop()


@pytest.mark.slow
def test_a_paused_server_holds_the_arm_and_a_killed_one_is_reconnected_to(
    tmp_path: Path, checkpoint: Path
) -> None:
    port = free_port()
    args = (f"--policy.path={checkpoint}", f"--port={port}")
    server = ServerProcess(tmp_path / "server.log", *args)
    settings = RemotePolicySettings(
        server=server.address, chunk_deadline_s=0.3, reconnect_max_s=0.2
    )
    policy = GrpcPolicyConnector().connect(settings)
    loop = Loop(policy)
    try:
        loop.start()
        wait_until(lambda: policy.chunks_received >= 2, loop)

        os.kill(server.process.pid, signal.SIGSTOP)
        stalls, held = policy.stalls, policy.held_ticks
        wait_until(lambda: policy.held_ticks >= held + 20, loop)
        # The last 15 ticks were all held, on the last action commanded before them.
        window = len(loop.ticks) - 15
        last_fresh = next(a for a, was_held in reversed(loop.ticks[:window]) if not was_held)
        for action, was_held in loop.ticks[window:]:
            assert was_held
            np.testing.assert_array_equal(action, last_fresh)
        assert policy.stalls > stalls
        os.kill(server.process.pid, signal.SIGCONT)
        resumed_at = len(loop.ticks)
        wait_until(lambda: loop.fresh_since(resumed_at) >= 10, loop)

        server.process.kill()
        server.stop()
        killed_at, received = len(loop.ticks), policy.chunks_received
        wait_until(lambda: policy.held_ticks > 0 and loop.ticks[-1][1], loop)
        server = ServerProcess(tmp_path / "server.log", *args)
        wait_until(
            lambda: policy.chunks_received > received and loop.fresh_since(killed_at) > 0, loop
        )
        assert policy.stalls > stalls + 1
    finally:
        loop.stop()
        policy.close()
        server.stop()


ATTACKER = """
import sys, threading, time
import grpc
address, seconds = sys.argv[1], float(sys.argv[2])
body = bytes(48 << 20)
end = time.monotonic() + seconds
calls = []
def attack():
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
    predict = channel.unary_unary("/rlctl.policy.v1.PolicyService/Predict")
    while time.monotonic() < end:
        try:
            predict(body, timeout=10)
        except grpc.RpcError as err:
            calls.append(err.code().name)
threads = [threading.Thread(target=attack) for _ in range(6)]
[t.start() for t in threads]
[t.join() for t in threads]
print(len(calls), sorted(set(calls)))
"""


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_flood_of_unauthenticated_messages_is_refused_unread(
    tmp_path: Path, checkpoint: Path
) -> None:
    import subprocess
    import sys

    token_file = write_token(tmp_path / "token", TOKEN)
    server = ServerProcess(
        tmp_path / "server.log",
        f"--policy.path={checkpoint}",
        "--port=0",
        f"--token-file={token_file}",
    )
    honest = GrpcPolicyClient(server.address, token=TOKEN)
    good = ChunkRequest(observation={"observation.state": OBSERVATION["observation.state"]})
    try:
        honest.predict(good, timeout=10)
        before = peak_rss_mb(server.process.pid)
        attacker = subprocess.Popen(
            [sys.executable, "-c", ATTACKER, server.address, "4"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            # The honest robot is answered all along.
            while attacker.poll() is None:
                assert honest.predict(good, timeout=5).actions.shape == (1, 20, STATE_DIM)
                time.sleep(0.02)
            out, _ = attacker.communicate(timeout=30)
        finally:
            if attacker.poll() is None:
                attacker.kill()
                attacker.wait(10)
        refused, codes = out.split(" ", 1)
        # Refused by the token gate; a call whose 48 MiB were still being sent when the server
        # answered and reset the stream may end as UNAVAILABLE on a loaded machine instead.
        seen = set(ast.literal_eval(codes.strip()))
        assert int(refused) > 6 and "UNAUTHENTICATED" in seen, out
        assert seen <= {"UNAUTHENTICATED", "UNAVAILABLE"}, out
        # Six 48 MiB messages at a time, read, would have cost the server 288 MiB at least.
        assert peak_rss_mb(server.process.pid) - before < 100
    finally:
        honest.close()
        server.stop()
