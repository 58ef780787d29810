"""The fake Hub's server stops within a bound whatever its clients and handlers do.

`serve_forever()` with `shutdown()` waits without a bound for the loop (forever when the loop
never ran), the class of hang CI once met with the viewer. Each test holds the server one way,
then requires `stop()` to return within `BOUND_S`; what the test blocked is released after.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time

import pytest

from .conftest import FakeHub, FakeHubServer

pytestmark = pytest.mark.timeout(60)

BOUND_S = FakeHubServer.STOP_WAIT_S + 5


def timed_stop(server: FakeHubServer) -> float:
    start = time.monotonic()
    server.stop()
    return time.monotonic() - start


def test_stop_returns_while_a_handler_is_stuck_and_a_client_idles():
    hub = FakeHub()
    release = threading.Event()
    entered = threading.Event()
    handle = hub.handle

    def stuck(h):
        entered.set()
        release.wait(30)
        handle(h)

    hub.handle = stuck
    server = FakeHubServer(hub).start()
    host, port = server.server_address[:2]
    idle = socket.create_connection((host, port), timeout=10)  # connected, asks nothing
    asking = http.client.HTTPConnection(host, port, timeout=30)
    asker = threading.Thread(target=lambda: _ask(asking), daemon=True)
    try:
        asker.start()
        assert entered.wait(10)

        assert timed_stop(server) < BOUND_S
        assert not server._thread.is_alive()
        with pytest.raises(OSError):
            socket.create_connection((host, port), timeout=2).recv(1)
    finally:
        release.set()
        idle.close()
        asker.join(10)


def _ask(connection: http.client.HTTPConnection) -> None:
    try:
        connection.request("GET", "/api/datasets/a/b")
        connection.getresponse().read()
    except OSError:
        pass  # the server went away under it: what stop() does


def test_stop_returns_when_the_loop_never_ran_and_twice():
    server = FakeHubServer(FakeHub())  # never started: shutdown() would wait forever

    assert timed_stop(server) < BOUND_S
    assert timed_stop(server) < BOUND_S


def test_a_started_server_answers_then_stops_at_once():
    hub = FakeHub()
    hub.create("dataset", "a/b")
    server = FakeHubServer(hub).start()
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(host, port, timeout=10)
    connection.request("GET", "/api/datasets/a/b/revision/main")
    assert connection.getresponse().status == 200  # kept alive: its handler waits for more

    assert timed_stop(server) < 2
    connection.close()
