"""The dataset viewer's local web server: the page, its data as JSON, the dataset's own videos.

A `ThreadingHTTPServer` on 127.0.0.1 in a daemon thread. Routes (all relative, so the static
export in `site.py` serves the same page from files):

- `/` and `/static/<file>`: the hand-written page (package data next to this module);
- `/data/dataset.json`: the episode list, cameras and plot groups;
- `/data/episode-<i>.json`: one episode's series, timestamps, charts and video clips;
- `/frames/<i>/<key>/<frame>`: one picture of a camera stored as images (no video);
- `/media/<path>`: a video file of the dataset, relative to its root, with HTTP range requests
  (browsers seek inside an mp4 by asking for byte ranges); never re-encoded.

Only a request naming the address the viewer serves on is answered (`Host`: a web page of another
site cannot reach the viewer through a name of its own, DNS rebinding), and an address other
machines can reach is served only when asked for (`allow_remote`). `stop()` returns within a few
seconds whatever the clients and handlers are doing.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import mimetypes
import os
import re
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

import structlog

from rlctl.adapters.storage.lerobot_v3.identity import DatasetChanged, FolderIdentity
from rlctl.adapters.viewer.charts import episode_data
from rlctl.application.dataset_pages import DatasetPage, EpisodePage
from rlctl.domain.errors import InvalidInput, RlctlError

log = structlog.get_logger(__name__)


class DatasetPages(Protocol):
    """What the viewer shows (the application's `DatasetViewer`): the dataset's page, an
    episode's page, and a frame of a camera stored as images."""

    @property
    def root(self) -> str: ...

    @property
    def page(self) -> DatasetPage: ...

    def episode(self, index: int) -> EpisodePage: ...

    def frame_image(self, index: int, key: str, frame: int) -> bytes: ...


STATIC_FILES = ("index.html", "viewer.js", "viewer.css")
MEDIA_SUFFIXES = frozenset({".mp4", ".webm", ".mkv", ".mov"})
_CHUNK = 256 * 1024
_EPISODE = re.compile(r"^/data/episode-(\d+)\.json$")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_FRAME = re.compile(r"^/frames/(\d+)/([^/]+)/(\d+)$")
# A Host header: a name or an IPv4 address, or an IPv6 address in brackets; an optional port.
_HOST = re.compile(r"^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.\-]+))(?::(\d{1,5}))?$")
# How long the accept loop waits before looking at the stop flag again.
_POLL_S = 0.2
# A client connection idle (or not reading) this long is closed; the browser opens another.
_CONNECTION_IDLE_S = 60.0
# How long `stop()` waits for the accept loop to end before closing its socket anyway.
_STOP_WAIT_S = 2.0


def static_asset(name: str) -> bytes:
    return resources.files("rlctl.adapters.viewer").joinpath("static", name).read_bytes()


def content_type(name: str) -> str:
    if name.endswith(".js"):
        return "text/javascript; charset=utf-8"
    if name.endswith((".html", ".css")):
        kind = "html" if name.endswith(".html") else "css"
        return f"text/{kind}; charset=utf-8"
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def picture_type(data: bytes) -> str:
    if data.startswith(b"\x89PNG"):
        return "image/png"
    if data.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """`Range: bytes=a-b` → (first, last) inclusive, clamped to the file; None: the whole file.

    Raises ValueError when the range cannot be satisfied (the caller answers 416). Several
    ranges in one header are answered with the whole file, which HTTP allows.
    """
    if not header:
        return None
    match = _RANGE.match(header.strip())
    if match is None:
        return None
    first_text, last_text = match.groups()
    if not first_text and not last_text:
        return None
    if not first_text:  # the last N bytes
        count = int(last_text)
        if count == 0:
            raise ValueError(header)
        return max(0, size - count), size - 1
    first = int(first_text)
    last = min(int(last_text), size - 1) if last_text else size - 1
    if first >= size or last < first:
        raise ValueError(header)
    return first, last


def hub_blobs(root: Path) -> Path | None:
    """The `blobs/` folder of the Hub-cache repo whose snapshot `root` is, else None.

    huggingface_hub keeps a repo as `<cache>/datasets--org--name/` with each file's content in
    `blobs/<hash>` and each revision as `snapshots/<rev>/...`, whose files are links into it.
    """
    snapshots = root.parent
    repo = snapshots.parent
    if snapshots.name != "snapshots" or not repo.name.startswith("datasets--"):
        return None
    blobs = repo / "blobs"
    return blobs if blobs.is_dir() else None


def media_path(root: Path, relative: str) -> Path | None:
    """The video file `relative` names inside the dataset at `root` (resolved), else None.

    Contained by name first: `relative` must be a plain relative path (no `..`, `.`, empty or
    absolute part, no backslash or NUL) ending in a video suffix, so it names a place under the
    root. Links on the way are then followed only where they land inside the root itself, or,
    for a snapshot of the Hub's cache, inside that same repo's `blobs/` folder (where every
    file of a snapshot points); a link to anywhere else is refused.
    """
    parts = relative.split("/")
    if not relative or "\\" in relative or "\x00" in relative:
        return None
    if any(part in ("", ".", "..") for part in parts):
        return None
    if PurePosixPath(parts[-1]).suffix.lower() not in MEDIA_SUFFIXES:
        return None
    try:
        target = root.joinpath(*parts).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, a loop of links, a name the system refuses
        return None
    allowed = [root]
    blobs = hub_blobs(root)
    if blobs is not None:
        allowed.append(blobs.resolve())
    if not any(target.is_relative_to(folder) for folder in allowed) or not target.is_file():
        return None
    return target


def is_loopback(host: str) -> bool:
    """Whether an address (or a name, resolved) reaches this machine only from itself."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    if not name:
        return False  # "" binds every interface
    try:
        found = socket.getaddrinfo(name, None)
    except (OSError, UnicodeError):
        return False
    addresses = {str(info[4][0]).split("%")[0] for info in found}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def refuse_remote(host: str) -> None:
    """Raise unless `host` is a loopback address: any other is served to other machines."""
    if is_loopback(host):
        return
    raise InvalidInput(
        f"--host {host or '(empty)'} is reachable from other machines: the viewer would serve "
        "the dataset to every one of them, without a password",
        where=f"--host {host}",
        hint="keep --host 127.0.0.1 (the default; from elsewhere, `ssh -L PORT:127.0.0.1:PORT`), "
        "or add --insecure to serve it to the network anyway",
    )


class _Handler(BaseHTTPRequestHandler):
    server: ViewerHTTPServer
    protocol_version = "HTTP/1.1"
    # Reads and writes on the client's connection time out: a handler never waits for ever.
    timeout = _CONNECTION_IDLE_S

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("viewer request", line=format % args)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, head: bool) -> None:
        host = self.headers.get("Host")
        if not self.server.host_allowed(host):
            self.close_connection = True
            self._error(
                HTTPStatus.MISDIRECTED_REQUEST,
                f"this viewer serves {self.server.url}; a request for host {host!r} is refused",
            )
            return
        path = unquote(urlsplit(self.path).path)
        try:
            if path in ("/", "/index.html"):
                self._bytes(static_asset("index.html"), content_type("index.html"), head)
            elif path.startswith("/static/") and path[len("/static/") :] in STATIC_FILES:
                name = path[len("/static/") :]
                self._bytes(static_asset(name), content_type(name), head)
            elif path == "/data/dataset.json":
                self._json(self.server.viewer.page.to_dict(), head)
            elif match := _EPISODE.match(path):
                viewer = self.server.viewer
                self._json(episode_data(viewer.page, viewer.episode(int(match.group(1)))), head)
            elif match := _FRAME.match(path):
                episode, key, frame = int(match.group(1)), match.group(2), int(match.group(3))
                picture = self.server.viewer.frame_image(episode, key, frame)
                self._bytes(picture, picture_type(picture), head, cache=True)
            elif path.startswith("/media/"):
                self._media(path[len("/media/") :], head)
            else:
                self._error(HTTPStatus.NOT_FOUND, f"no such page: {path}")
        except DatasetChanged as error:
            self._error(HTTPStatus.CONFLICT, error.message)
        except RlctlError as error:
            self._error(HTTPStatus.NOT_FOUND, error.message)
        except (ConnectionError, TimeoutError):
            # The browser dropped a request it no longer needs (seeking does this), stopped
            # reading, or the server is stopping: this connection is done.
            self.close_connection = True

    def _bytes(
        self, body: bytes, kind: str, head: bool, status: int = HTTPStatus.OK, cache: bool = False
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        # Pictures of a frame do not change while the page is open; the page and data may.
        self.send_header("Cache-Control", "max-age=3600" if cache else "no-cache")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, data: Any, head: bool) -> None:
        body = json.dumps(data, separators=(",", ":")).encode()
        self._bytes(body, "application/json", head)

    def _error(self, status: int, message: str) -> None:
        self._bytes(message.encode(), "text/plain; charset=utf-8", False, status)

    def _media(self, relative: str, head: bool) -> None:
        file = self.server.media_file(relative)
        if file is None:
            self._error(HTTPStatus.NOT_FOUND, f"no video file {relative}")
            return
        with file.open("rb") as stream:
            # Opened first, then checked: a file opened before an edit swapped the folder is
            # the old dataset's, the one the page shows; after, the page is stale.
            self.server.identity.check()
            self._send_media(stream, relative, head)

    def _send_media(self, stream: Any, relative: str, head: bool) -> None:
        size = os.fstat(stream.fileno()).st_size
        # The type comes from the name asked for: in the Hub's cache the file is a blob
        # without a suffix.
        kind = content_type(PurePosixPath(relative).name)
        try:
            span = parse_range(self.headers.get("Range"), size)
        except ValueError:
            self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        first, last = span if span is not None else (0, size - 1)
        self.send_response(HTTPStatus.PARTIAL_CONTENT if span is not None else HTTPStatus.OK)
        self.send_header("Content-Type", kind)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(last - first + 1))
        if span is not None:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.end_headers()
        if head:
            return
        stream.seek(first)
        left = last - first + 1
        while left > 0:
            chunk = stream.read(min(_CHUNK, left))
            if not chunk:
                break
            self.wfile.write(chunk)
            left -= len(chunk)


class ViewerHTTPServer(ThreadingHTTPServer):
    # Handler threads never keep the process alive, and closing the server joins none of them:
    # a handler stuck on a client cannot hold up `stop()`.
    daemon_threads = True
    block_on_close = False
    # `handle_request()` waits this long for a connection, so the loop sees the stop flag.
    timeout = _POLL_S

    def __init__(self, viewer: DatasetPages, host: str, port: int) -> None:
        self.viewer = viewer
        self.root = Path(viewer.root).resolve()
        # An edit in place puts another folder here; the page's videos would be its episodes.
        self.identity = FolderIdentity.of(self.root)
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__((host.strip("[]"), port), _Handler)
        self.host = host.strip("[]").lower().rstrip(".")
        self.port = int(self.server_address[1])
        self.wildcard = self.host == "" or (_is_ip(self.host) and _ip(self.host).is_unspecified)
        self.loopback = not self.wildcard and is_loopback(self.host)
        self._names = {self.host, str(self.server_address[0]).lower()}
        if self.wildcard:  # `server_name` is this machine's full name, found by `server_bind`
            self._names |= {socket.gethostname().lower(), self.server_name.lower()}

    @property
    def url(self) -> str:
        """The page's address; for a server on every interface, its address on this machine."""
        host = str(self.server_address[0])
        if self.wildcard:
            host = "::1" if self.address_family == socket.AF_INET6 else "127.0.0.1"
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/"

    def host_allowed(self, header: str | None) -> bool:
        """Whether a request's `Host` names this server: a loopback name or address when it
        serves on loopback, its own address or name, and (serving on every interface) any IP
        address or this machine's name. Any other name is a page of another site that made
        its name resolve to this machine (DNS rebinding): refused."""
        match = _HOST.match(header.strip()) if header else None
        if match is None:
            return False
        literal, name, port = match.groups()
        if port is not None and int(port) != self.port:
            return False
        if port is None and self.port != 80:
            return False
        host = (literal or name).lower().rstrip(".")
        if host in self._names:
            return True
        if _is_ip(host):
            address = _ip(host)
            return self.wildcard or (self.loopback and address.is_loopback)
        return host == "localhost" and (self.loopback or self.wildcard)

    def media_file(self, relative: str) -> Path | None:
        """A video file inside the dataset (see `media_path`); None for anything else."""
        return media_path(self.root, relative)

    # Open client connections, so that `close_connections()` can wake their handlers.
    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Shut every open client connection: a handler waiting to read the next request or
        to write to a client that stopped reading wakes at once and ends."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that vanished mid-answer is not the server's error; log, print nothing.
        log.debug("viewer connection ended", client=str(client_address), exc_info=True)


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


class ViewerServer:
    """`start()` serves in a background thread; `url` is the page's address; `stop()` ends it.

    Loopback unless `allow_remote`: an address other machines reach serves the dataset to all
    of them, without a password, so it is refused unless the caller asked for it.
    """

    def __init__(
        self,
        viewer: DatasetPages,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        allow_remote: bool = False,
    ) -> None:
        if not allow_remote:
            refuse_remote(host)
        try:
            self._http = ViewerHTTPServer(viewer, host, port)
        except (OSError, OverflowError) as error:
            raise InvalidInput(
                f"cannot listen on {host}:{port} ({getattr(error, 'strerror', None) or error})",
                where=f"{host}:{port}",
                hint="pick another --port, or --port 0 for any free one",
            ) from error
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="rlctl-viewer", daemon=True)

    @property
    def url(self) -> str:
        return self._http.url

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def reaches_network(self) -> bool:
        """Whether other machines can reach the page (a non-loopback address)."""
        return not self._http.loopback

    def start(self) -> ViewerServer:
        self._thread.start()
        # The page asks for the first episode at once: have it read while the browser loads.
        episodes = self._http.viewer.page.episodes
        if episodes:
            threading.Thread(target=self._warm, args=(episodes[0].index,), daemon=True).start()
        return self

    def _serve(self) -> None:
        # Not `serve_forever()`: its `shutdown()` waits without a bound for the loop to notice.
        while not self._stopping.is_set():
            try:
                self._http.handle_request()
            except (OSError, ValueError):  # the socket was closed under the loop
                if not self._stopping.is_set():
                    log.warning("viewer stopped accepting connections", exc_info=True)
                return

    def _warm(self, index: int) -> None:
        with contextlib.suppress(RlctlError):  # the page's own request reports it
            self._http.viewer.episode(index)

    def stop(self) -> None:
        """End serving within a few seconds, whatever clients and handlers are doing: the
        loop is told to stop and given `_STOP_WAIT_S`, open connections are shut (their
        handlers wake and end; one stuck elsewhere is a daemon thread left behind), and the
        listening socket is closed. Safe to call more than once."""
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=_STOP_WAIT_S)
        self._http.close_connections()
        self._http.server_close()

    def __enter__(self) -> ViewerServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
