"""The policy server's guards, on real gRPC over loopback with an in-process server: the token
before the message, bounded work per peer and in all, bounded connections, one-line reasons for
what fails, and no NaN chunk sent."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import structlog
from structlog.testing import capture_logs

from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.adapters.remote import policy_service_pb2 as pb
from rlctl.adapters.remote import wire
from rlctl.adapters.remote.errors import ChunkUnusable, ServerBusy, ServerRefused
from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
from rlctl.adapters.remote.grpc_server import GrpcPolicyServer, read_token
from rlctl.adapters.remote.remote_policy import GrpcPolicyConnector
from rlctl.application.use_cases.serve_policy import PolicyService
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.remote_inference import ChunkRequest, RemotePolicySettings

TOKEN = "a-token-for-the-guard-tests-0123456789"
STEPS = 5
REQUEST = ChunkRequest(observation={"observation.state": np.zeros((1, 2), np.float32)})


def policy(chunker: Any = None, **kwargs: Any) -> PolicyService:
    served = ScriptedPolicy(
        2,
        chunk_size=STEPS,
        chunker=chunker,
        input_features={"observation.state": typed_feature("STATE", (2,), "observation.state")},
        **kwargs,
    )
    return PolicyService({"scripted": served})


@contextmanager
def serving(service: PolicyService, **options: Any) -> Iterator[GrpcPolicyServer]:
    server = GrpcPolicyServer(port=0, **options)
    ready = threading.Event()
    thread = threading.Thread(
        target=server.serve,
        args=(service,),
        kwargs={"on_ready": lambda _: ready.set()},
        daemon=True,
    )
    thread.start()
    try:
        assert ready.wait(30)
        yield server
    finally:
        server.stop()
        thread.join(10)


def address(server: GrpcPolicyServer) -> str:
    return f"127.0.0.1:{server.port}"


def refusal(call: Any) -> ServerRefused:
    with pytest.raises(ServerRefused) as raised:
        call()
    return raised.value


def wait_until(condition: Any, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


# --- the token ---------------------------------------------------------------------------------


def test_a_call_without_the_token_is_refused_before_its_message_is_read() -> None:
    with serving(policy(), token=TOKEN) as server:
        body = bytes(8 << 20)  # 8 MiB nobody should read
        anonymous = GrpcPolicyClient(address(server))
        impostor = GrpcPolicyClient(address(server), token="y" * len(TOKEN))
        for client in (anonymous, impostor):
            assert refusal(lambda c=client: c.send_predict(body, timeout=10)).code == (
                "UNAUTHENTICATED"
            )
            describe = refusal(lambda c=client: c.describe(timeout=10))
            assert describe.code == "UNAUTHENTICATED"
        assert server.bytes_read == 0
        honest = GrpcPolicyClient(address(server), token=TOKEN)
        assert honest.predict(REQUEST, timeout=10).actions.shape == (1, STEPS, 2)
        assert server.bytes_read > 0
        for client in (anonymous, impostor, honest):
            client.close()


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_token_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(mode)
    with pytest.raises(ConfigError, match="open to others") as raised:
        read_token(token)
    assert raised.value.hint == f"chmod 600 {token}"
    token.chmod(0o600)
    assert read_token(token) == TOKEN
    token.chmod(0o400)
    assert read_token(token) == TOKEN


# --- beyond this machine -----------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "gpu-box.local"])
def test_beyond_loopback_without_tls_is_refused_unless_insecure(host: str) -> None:
    with pytest.raises(ConfigError, match="in clear") as raised:
        GrpcPolicyServer(host=host, port=0, token=TOKEN)
    assert "--insecure" in (raised.value.hint or "") and "--tls-cert" in (raised.value.hint or "")
    GrpcPolicyServer(host=host, port=0, token=TOKEN, insecure=True)
    GrpcPolicyServer(host=host, port=0, token=TOKEN, tls_cert="cert.pem", tls_key="key.pem")
    with pytest.raises(ConfigError, match="needs a token"):
        GrpcPolicyServer(host=host, port=0, insecure=True)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_needs_neither(host: str) -> None:
    GrpcPolicyServer(host=host, port=0)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("workers", 0),
        ("workers", -1),
        ("workers", 2.5),
        ("max_per_peer", 0),
        ("max_per_peer", 100),  # above workers
        ("max_connections", 0),
        ("port", 70000),
        ("idle_timeout_s", 0),
        ("idle_timeout_s", float("nan")),
        ("message_timeout_s", 0),
        ("message_timeout_s", -1.0),
        ("max_message_bytes", -5),
    ],
)
def test_limits_out_of_range_are_one_clear_error(option: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=option):
        GrpcPolicyServer(**{"port": 0, option: value})


# --- bounded work ------------------------------------------------------------------------------


class Gate:
    """A chunker that waits until opened, counting who entered."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.entered = 0

    def __call__(self, batch: Mapping[str, Any]) -> np.ndarray:
        self.entered += 1
        assert self.open.wait(30)
        return np.zeros((1, STEPS, 2), np.float32)


@pytest.mark.parametrize(
    ("workers", "per_peer", "complaint"),
    [(4, 2, "--max-per-peer"), (2, 2, "the server is busy")],
)
def test_requests_past_the_caps_are_refused_at_once(
    workers: int, per_peer: int, complaint: str
) -> None:
    gate = Gate()
    with serving(policy(gate), workers=workers, max_per_peer=per_peer) as server:
        clients = [GrpcPolicyClient(address(server)) for _ in range(3)]
        answers: list[Any] = []
        callers = [
            threading.Thread(target=lambda c=c: answers.append(c.predict(REQUEST, timeout=30)))
            for c in clients[:2]
        ]
        try:
            for caller in callers:
                caller.start()
            # Both admitted: one in the policy, one waiting for it.
            wait_until(lambda: server.in_flight == 2 and gate.entered == 1)
            started = time.monotonic()
            with pytest.raises(ServerBusy, match=complaint):
                clients[2].predict(REQUEST, timeout=20)
            assert time.monotonic() - started < 5
        finally:
            gate.open.set()
            for caller in callers:
                caller.join(30)
        assert len(answers) == 2
        # Answered, the slots are free again.
        assert clients[2].predict(REQUEST, timeout=10).actions.shape == (1, STEPS, 2)
        assert server.in_flight == 0
        for client in clients:
            client.close()


def test_a_robot_told_busy_holds_and_asks_again() -> None:
    gate = Gate()
    with serving(policy(gate), workers=2, max_per_peer=1) as server:
        robot = GrpcPolicyConnector().connect(
            RemotePolicySettings(server=address(server), connect_timeout_s=20), realtime=True
        )
        hog = GrpcPolicyClient(address(server))
        hogging = threading.Thread(target=lambda: hog.predict(REQUEST, timeout=30))
        try:
            hogging.start()
            wait_until(lambda: server.in_flight == 1 and gate.entered == 1)
            threading.Timer(0.5, gate.open.set).start()
            with capture_logs() as logs:
                action = robot.select_action({"observation.state": np.zeros((1, 2), np.float32)})
            assert action.shape == (1, 2)
            busy = [e for e in logs if e["event"] == "policy server busy, asking again"]
            assert len(busy) == 1 and "--max-per-peer" in busy[0]["error"]
        finally:
            gate.open.set()
            hogging.join(30)
            robot.close()
            hog.close()


# --- bounded connections -----------------------------------------------------------------------


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """True when the server closed `sock` (EOF or reset) within `within` seconds."""
    end = time.monotonic() + within
    sock.settimeout(min(0.1, within))
    while time.monotonic() < end:
        try:
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True
    return False


def test_connections_past_the_cap_are_closed_on_arrival() -> None:
    with serving(policy(), max_connections=3) as server:
        socks = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(8)]
        try:
            closed: set[int] = set()
            end = time.monotonic() + 5
            while len(closed) < 5 and time.monotonic() < end:
                closed |= {i for i, s in enumerate(socks) if closed_by_server(s, within=0.01)}
            time.sleep(0.3)  # and no more than those
            closed |= {i for i, s in enumerate(socks) if closed_by_server(s, within=0.01)}
            assert len(closed) == 5, closed
        finally:
            for sock in socks:
                sock.close()
        # Their slots freed, a robot connects and is served.
        client = GrpcPolicyClient(address(server))
        end = time.monotonic() + 10
        while True:
            try:
                assert client.predict(REQUEST, timeout=5).actions.shape == (1, STEPS, 2)
                break
            except Exception:
                if time.monotonic() > end:
                    raise
                time.sleep(0.1)
        client.close()


def test_a_connection_that_never_speaks_is_closed() -> None:
    with serving(policy(), handshake_timeout_s=0.5) as server:
        silent = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        try:
            assert closed_by_server(silent, within=8.0)
        finally:
            silent.close()


# --- what fails, said in one line --------------------------------------------------------------


def nan_when_far_out(batch: Mapping[str, Any]) -> np.ndarray:
    state = np.asarray(batch["observation.state"])
    value = np.nan if np.abs(state).max() > 1e30 else 0.0
    return np.full((state.shape[0], STEPS, 2), value, np.float32)


def test_a_non_finite_chunk_is_never_sent_and_the_server_goes_on() -> None:
    with serving(policy(nan_when_far_out)) as server:
        client = GrpcPolicyClient(address(server))
        far = ChunkRequest(observation={"observation.state": np.full((1, 2), 3e38, np.float32)})
        with pytest.raises(ChunkUnusable) as raised:
            client.predict(far, timeout=10)
        assert "NaN or infinite actions" in raised.value.message
        assert "observation.state reaches 3e+38" in raised.value.message
        assert "\n" not in raised.value.message
        assert np.isfinite(client.predict(REQUEST, timeout=10).actions).all()
        client.close()


def test_a_robot_holds_through_unusable_chunks_and_acts_again_after() -> None:
    def echo_or_nan(batch: Mapping[str, Any]) -> np.ndarray:
        state = np.asarray(batch["observation.state"], np.float32)
        value = np.where(np.abs(state[:, :1]) > 1e30, np.nan, state[:, :1])
        return np.repeat(np.repeat(value[:, None, :], STEPS, axis=1), 2, axis=2)

    with serving(policy(echo_or_nan)) as server:
        robot = GrpcPolicyConnector().connect(
            RemotePolicySettings(server=address(server)), realtime=True
        )
        try:

            def act(value: float) -> float:
                state = np.full((1, 2), value, np.float32)
                action = float(robot.select_action({"observation.state": state})[0, 0])
                time.sleep(0.005)
                return action

            assert act(1.0) == 1.0
            far = [act(3e38) for _ in range(40)]
            assert robot.chunks_unusable > 0 and robot.held_ticks > 0
            assert far == [1.0] * len(far)  # held on the last fresh action, never NaN
            back = [act(7.0) for _ in range(40)]
            assert np.isfinite(back).all() and back[-1] == 7.0
        finally:
            robot.close()


def test_non_finite_observations_are_refused_with_the_key() -> None:
    with serving(policy()) as server:
        client = GrpcPolicyClient(address(server))
        for bad in (np.nan, np.inf, -np.inf):
            state = np.array([[0.0, bad]], np.float32)
            request = ChunkRequest(observation={"observation.state": state})
            refused = refusal(lambda r=request: client.predict(r, timeout=10))
            assert refused.code == "INVALID_ARGUMENT"
            assert "observation.state holds NaN or infinite values" in refused.message
        client.close()


@pytest.fixture
def debug_logging() -> Iterator[None]:
    """Debug events kept, whatever an earlier test (a CLI run) set the level to."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        yield
    finally:
        structlog.configure(**saved)


def test_a_policy_failure_reaches_the_robot_as_its_reason_and_the_log_as_one_line(
    debug_logging: None,
) -> None:
    def broken(batch: Mapping[str, Any]) -> np.ndarray:
        raise RuntimeError(
            "The size of tensor a (5) must match the size of tensor b (6) at \n"
            "non-singleton dimension 1"
        )

    with serving(policy(broken)) as server, capture_logs() as logs:
        client = GrpcPolicyClient(address(server))
        refused = refusal(lambda: client.predict(REQUEST, timeout=10))
        client.close()
    assert refused.code == "INTERNAL"
    assert (
        "the policy failed on this request: RuntimeError: The size of tensor a (5) must match "
        "the size of tensor b (6) at non-singleton dimension 1" in refused.message
    )
    errors = [e for e in logs if e["log_level"] == "error"]
    assert len(errors) == 1 and "exc_info" not in errors[0]
    assert errors[0]["reason"].startswith("RuntimeError: The size of tensor a (5)")
    # The traceback is there for --log-level=debug, and only there.
    assert [e["log_level"] for e in logs if e.get("exc_info")] == ["debug"]


def test_features_that_do_not_fit_are_refused_with_every_difference() -> None:
    with serving(policy()) as server:
        client = GrpcPolicyClient(address(server))
        short = ChunkRequest(observation={"observation.state": np.zeros((1, 5), np.float32)})
        refused = refusal(lambda: client.predict(short, timeout=10))
        assert refused.code == "INVALID_ARGUMENT"
        assert "it reads observation.state as (2,), the request has (5,)" in refused.message
        other = ChunkRequest(observation={"observation.velocity": np.zeros((1, 2), np.float32)})
        refused = refusal(lambda: client.predict(other, timeout=10))
        assert "it reads observation.state (2,), which the request lacks" in refused.message
        client.close()


# --- max_actions and the other counts ----------------------------------------------------------


def raw_request(extra: bytes = b"", **fields: Any) -> bytes:
    """A Predict message as any client could write it: `fields` set, `extra` bytes appended."""
    observation = wire.encode_tensors({"observation.state": np.zeros((1, 2), np.float32)})
    message = pb.ChunkRequest(observation=observation, **fields)
    return message.SerializeToString() + extra


@pytest.mark.parametrize(
    ("fields", "complaint"),
    [
        ({"max_actions": -3}, "max_actions must be between 0 and 10000, got -3"),
        ({"max_actions": 2**62}, "max_actions must be between 0 and 10000"),
        # max_actions as a double 2.5, and as the string "3": a known field of another type.
        ({"extra": b"\x29" + struct.pack("<d", 2.5)}, "max_actions of the wrong type"),
        ({"extra": b"\x2a\x013"}, "max_actions of the wrong type"),
        ({"timestep": -1}, "timestep must be between 0"),
        ({"timestep": 2**60}, "timestep must be between 0"),
    ],
)
def test_counts_out_of_range_are_refused_with_the_reason(
    fields: dict[str, Any], complaint: str
) -> None:
    with serving(policy()) as server:
        client = GrpcPolicyClient(address(server))
        refused = refusal(lambda: client.send_predict(raw_request(**fields), timeout=10))
        assert refused.code == "INVALID_ARGUMENT" and complaint in refused.message
        client.close()


def test_max_actions_keeps_the_first_actions_and_zero_keeps_all() -> None:
    with serving(policy()) as server:
        client = GrpcPolicyClient(address(server))
        for asked, steps in ((0, STEPS), (3, 3), (1, 1), (STEPS + 10, STEPS)):
            reply = wire.decode_reply(
                client.send_predict(raw_request(max_actions=asked), timeout=10.0)
            )
            assert reply.actions.shape == (1, steps, 2)
        client.close()
