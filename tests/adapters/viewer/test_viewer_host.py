"""Who may talk to the viewer: requests naming its own address only (a web page of another site
that makes its name resolve to 127.0.0.1, DNS rebinding, is refused), and an address other
machines reach only when the caller asked for it."""

from __future__ import annotations

import http.client
import socket
from types import SimpleNamespace

import pytest

from rlctl.adapters.viewer.server import ViewerServer, is_loopback
from rlctl.domain.errors import InvalidInput


class _Viewer:
    def __init__(self, root) -> None:
        self.root = str(root)
        self.page = SimpleNamespace(episodes=(), to_dict=lambda: {"episodes": ["ok"]})

    def episode(self, index: int):
        raise InvalidInput(f"no episode {index}")


def get(port: int, path: str, host: str | None):
    """A request whose Host header is exactly `host` (None: no Host header at all)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("GET", path, skip_host=True)
        if host is not None:
            connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.fixture
def viewer(tmp_path):
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "a.mp4").write_bytes(b"\x00\x00\x00\x18ftypisom-the-dataset")
    return _Viewer(tmp_path)


def test_a_loopback_server_answers_its_own_names_only(viewer):
    with ViewerServer(viewer) as server:
        port = server.port
        for name in ("127.0.0.1", "localhost", "[::1]", "LOCALHOST", "localhost."):
            host = f"{name}:{port}"
            assert get(port, "/data/dataset.json", host)[0] == 200, host
        for host in (
            f"evil.example:{port}",  # a rebound name
            f"127.0.0.1.nip.io:{port}",
            f"localhost.evil.example:{port}",
            f"evil@127.0.0.1:{port}",
            f"127.0.0.1:{port + 1 if port < 65535 else port - 1}",  # another port
            "127.0.0.1",  # port 80 implied
            f"127.0.0.1:{port} extra",
            "",
            None,
        ):
            for path in ("/data/dataset.json", "/media/videos/a.mp4", "/"):
                status, body = get(port, path, host)
                assert status == 421, (host, path)
                assert b"ftyp" not in body and b"episodes" not in body
                assert body.startswith(b"this viewer serves http://127.0.0.1:")


def test_an_address_other_machines_reach_needs_to_be_asked_for(viewer):
    for host in ("0.0.0.0", "", "::"):
        with pytest.raises(InvalidInput, match="reachable from other machines") as err:
            ViewerServer(viewer, host=host)
        assert "--insecure" in (err.value.hint or "")


def test_every_interface_when_asked_still_refuses_rebound_names(viewer):
    with ViewerServer(viewer, host="0.0.0.0", allow_remote=True) as server:
        port = server.port
        assert server.reaches_network
        assert server.url == f"http://127.0.0.1:{port}/"
        for host in (f"127.0.0.1:{port}", f"192.168.1.20:{port}", f"{socket.gethostname()}:{port}"):
            assert get(port, "/data/dataset.json", host)[0] == 200, host
        assert get(port, "/data/dataset.json", f"evil.example:{port}")[0] == 421


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.168.1.20", False),
        ("10.0.0.1", False),
    ],
)
def test_loopback_addresses(host, loopback):
    assert is_loopback(host) is loopback


def test_ipv6_loopback_is_served_and_named_in_brackets(viewer):
    try:
        server = ViewerServer(viewer, host="::1")
    except InvalidInput as error:
        pytest.skip(f"no IPv6 loopback here: {error.message}")
    with server:
        assert server.url == f"http://[::1]:{server.port}/"
        connection = http.client.HTTPConnection("::1", server.port, timeout=10)
        try:
            connection.request("GET", "/data/dataset.json")  # Host: [::1]:port
            assert connection.getresponse().status == 200
        finally:
            connection.close()
