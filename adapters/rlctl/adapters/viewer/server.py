"""The dataset viewer's local web server: the page, its data as JSON, the dataset's own videos.

A `ThreadingHTTPServer` on 127.0.0.1 in a daemon thread. Routes (all relative, so the static
export in `site.py` serves the same page from files):

- `/` and `/static/<file>`: the hand-written page (package data next to this module);
- `/data/dataset.json`: the episode list, cameras and plot groups;
- `/data/episode-<i>.json`: one episode's series, timestamps and video clips;
- `/frames/<i>/<key>/<frame>`: one picture of a camera stored as images (no video);
- `/media/<path>`: a video file of the dataset, relative to its root, with HTTP range requests
  (browsers seek inside an mp4 by asking for byte ranges); never re-encoded.
"""

from __future__ import annotations

import contextlib
import json
import mimetypes
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import structlog

from rlctl.application.use_cases.view_dataset import DatasetViewer
from rlctl.domain.errors import InvalidInput, RlctlError

log = structlog.get_logger(__name__)

STATIC_FILES = ("index.html", "viewer.js", "viewer.css")
MEDIA_SUFFIXES = frozenset({".mp4", ".webm", ".mkv", ".mov"})
_CHUNK = 256 * 1024
_EPISODE = re.compile(r"^/data/episode-(\d+)\.json$")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_FRAME = re.compile(r"^/frames/(\d+)/([^/]+)/(\d+)$")


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


class _Handler(BaseHTTPRequestHandler):
    server: ViewerHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("viewer request", line=format % args)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, head: bool) -> None:
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
                self._json(self.server.viewer.episode(int(match.group(1))).to_dict(), head)
            elif match := _FRAME.match(path):
                episode, key, frame = int(match.group(1)), match.group(2), int(match.group(3))
                picture = self.server.viewer.frame_image(episode, key, frame)
                self._bytes(picture, picture_type(picture), head, cache=True)
            elif path.startswith("/media/"):
                self._media(path[len("/media/") :], head)
            else:
                self._error(HTTPStatus.NOT_FOUND, f"no such page: {path}")
        except RlctlError as error:
            self._error(HTTPStatus.NOT_FOUND, error.message)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser dropped a request it no longer needs (seeking does this)

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
        size = file.stat().st_size
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
        self.send_header("Content-Type", content_type(file.name))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(last - first + 1))
        if span is not None:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.end_headers()
        if head:
            return
        with file.open("rb") as stream:
            stream.seek(first)
            left = last - first + 1
            while left > 0:
                chunk = stream.read(min(_CHUNK, left))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)


class ViewerHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, viewer: DatasetViewer, host: str, port: int) -> None:
        self.viewer = viewer
        self.root = Path(viewer.root).resolve()
        super().__init__((host, port), _Handler)

    def media_file(self, relative: str) -> Path | None:
        """A video file inside the dataset's root; None for anything else (no `..` escapes)."""
        candidate = (self.root / relative).resolve()
        if candidate.suffix.lower() not in MEDIA_SUFFIXES or not candidate.is_file():
            return None
        if not candidate.is_relative_to(self.root):
            return None
        return candidate


class ViewerServer:
    """`start()` serves in a background thread; `url` is the page's address; `stop()` ends it."""

    def __init__(self, viewer: DatasetViewer, *, host: str = "127.0.0.1", port: int = 0) -> None:
        try:
            self._http = ViewerHTTPServer(viewer, host, port)
        except OSError as error:
            raise InvalidInput(
                f"cannot listen on {host}:{port} ({error.strerror or error})",
                where=f"{host}:{port}",
                hint="pick another --port, or --port 0 for any free one",
            ) from error
        self._thread = threading.Thread(
            target=self._http.serve_forever, name="rlctl-viewer", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        assert isinstance(host, str)  # an IP socket's address, not a Unix socket's bytes
        return f"http://{host}:{port}/"

    def start(self) -> ViewerServer:
        self._thread.start()
        # The page asks for the first episode at once: have it read while the browser loads.
        episodes = self._http.viewer.page.episodes
        if episodes:
            threading.Thread(target=self._warm, args=(episodes[0].index,), daemon=True).start()
        return self

    def _warm(self, index: int) -> None:
        with contextlib.suppress(RlctlError):  # the page's own request reports it
            self._http.viewer.episode(index)

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ViewerServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
