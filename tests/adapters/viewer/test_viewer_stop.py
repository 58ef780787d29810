"""`ViewerServer.stop()` returns within a bound whatever clients and handlers are doing.

CI once hung for a quarter of an hour in `stop()` (`BaseServer.shutdown()` waits without a bound
for the accept loop). Each test here holds the server in one way a real client or a slow
dataset can, then requires `stop()` to return within `BOUND_S`; whatever the test blocked is
released in a `finally`, so a failure never leaves a thread waiting.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rlctl.adapters.viewer.server import ViewerServer
from rlctl.domain.errors import InvalidInput

# Far above what `stop()` takes (about the accept loop's 0.2 s poll) and far below a hang.
BOUND_S = 15.0
BIG = "videos/big.mp4"


class _Viewer:
    """The little of a DatasetViewer the server uses; `episode()` blocks until released."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.page = SimpleNamespace(episodes=(), to_dict=lambda: {"episodes": []})
        self.entered = threading.Event()
        self.release = threading.Event()

    def episode(self, index: int):
        self.entered.set()
        self.release.wait(120)
        raise InvalidInput(f"episode {index} was held by the test")


def handler_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if "process_request_thread" in t.name]


@pytest.fixture
def viewer(tmp_path):
    (tmp_path / "videos").mkdir()
    with (tmp_path / BIG).open("wb") as file:
        file.truncate(64 * 1024 * 1024)  # more than any socket buffer holds
    viewer = _Viewer(tmp_path)
    before = set(handler_threads())  # other servers' (earlier tests') are not this test's
    try:
        yield viewer
    finally:
        viewer.release.set()
        # Let released handlers finish inside this test (bounded), not print into the next.
        deadline = time.monotonic() + 10
        while set(handler_threads()) - before and time.monotonic() < deadline:
            time.sleep(0.05)


def stops_in_time(server: ViewerServer) -> float:
    """Calls `stop()` in a thread; fails if it has not returned within BOUND_S."""
    stopper = threading.Thread(target=server.stop, daemon=True)
    started = time.monotonic()
    stopper.start()
    stopper.join(BOUND_S)
    assert not stopper.is_alive(), f"stop() still running after {BOUND_S} s"
    return time.monotonic() - started


def connect(server: ViewerServer) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return client


def test_stop_returns_while_a_client_keeps_its_connection_open(viewer):
    server = ViewerServer(viewer).start()
    idle = connect(server)
    half = connect(server)
    clients = [idle, half]
    try:
        idle.sendall(b"GET /data/dataset.json HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % server.port)
        answer = b""
        while not answer.endswith(b'{"episodes":[]}'):
            chunk = idle.recv(4096)  # the whole answer; the connection stays open (HTTP/1.1)
            assert chunk, answer
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200")
        half.sendall(b"GET /data/datas")  # a request line that never ends
        time.sleep(0.3)
        stops_in_time(server)
        # The connections were shut, not left to their handlers' idle timeout.
        for client in clients:
            client.settimeout(5)
            assert client.recv(4096) == b""
        with pytest.raises(OSError):
            connect(server)
    finally:
        for client in clients:
            client.close()


def test_stop_returns_while_a_handler_is_stuck_in_the_dataset(viewer):
    server = ViewerServer(viewer).start()
    client = connect(server)
    try:
        request = f"GET /data/episode-0.json HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n"
        client.sendall(request.encode())
        assert viewer.entered.wait(10), "the request never reached the dataset"
        stops_in_time(server)
    finally:
        viewer.release.set()
        client.close()


def test_stop_returns_while_a_client_does_not_read_what_it_asked_for(viewer):
    server = ViewerServer(viewer).start()
    client = connect(server)
    try:
        request = f"GET /media/{BIG} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n"
        client.sendall(request.encode())
        client.recv(1024)  # the answer began; the rest fills the buffers and the writer blocks
        time.sleep(0.5)
        stops_in_time(server)
    finally:
        client.close()


def test_stop_returns_when_the_accept_loop_does_not_come_back(viewer, monkeypatch):
    """Even a loop starved of the interpreter (as on a machine at load 147) cannot hold stop():
    the wait for it is bounded and the socket is closed anyway."""
    server = ViewerServer(viewer)
    stuck = threading.Event()
    release = threading.Event()

    def never_returns() -> None:
        stuck.set()
        release.wait(120)

    monkeypatch.setattr(server._http, "handle_request", never_returns)
    server.start()
    try:
        assert stuck.wait(10)
        stops_in_time(server)
        with pytest.raises(OSError):
            connect(server)
    finally:
        release.set()


def test_stop_twice_and_stop_before_start(viewer):
    with ViewerServer(viewer) as server:
        stops_in_time(server)
    stops_in_time(server)  # __exit__ stopped it again: nothing to wait for
    stops_in_time(ViewerServer(viewer))
