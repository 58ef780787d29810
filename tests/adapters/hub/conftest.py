"""A fake Hugging Face Hub on 127.0.0.1, and an environment that points huggingface_hub at it.

The server speaks the endpoints huggingface_hub 2.4 calls for what rlctl does, `HfFileSystem`
included: repo info at a revision, the tree listing (paged with a `Link: <…>; rel="next"` header
when `tree_page_size` is set, 404 EntryNotFound for a folder the commit lacks) and paths-info
(parquet and mp4 files listed as the Hub lists LFS files: the git hash of their pointer, and
`lfs` with the content's sha256), refs, file resolve (HEAD and GET, with ETag, X-Repo-Commit,
Content-Length and byte ranges, `bytes=a-b` or `bytes=a-`, 416 past the end; `ignore_ranges`
makes it answer every GET with the whole file, as a server that does not do ranges would), and
the upload side (create repo, validate README YAML, preupload, NDJSON commit, branches, tags).
Every file is uploaded inline ("regular" mode), so no LFS or Xet storage is involved.

Errors carry the headers the Hub sets (`X-Error-Code: RepoNotFound | RevisionNotFound |
GatedRepo | EntryNotFound`, `X-Error-Message`), since that is how huggingface_hub tells them
apart. Every request is recorded; past `max_requests` the server answers 410 Gone (which
huggingface_hub does not retry), so a runaway loop fails a test instead of hanging it. A guard
refuses any socket connection that is not to the loopback address.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import shutil
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import attrs
import pytest
import yaml

GOOD_TOKEN = "hf_fake_good_token"
BAD_TOKEN = "hf_fake_bad_token"
READ_ONLY_TOKEN = "hf_fake_read_only_token"
GITATTRIBUTES = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n*.mp4 filter=lfs diff=lfs\n"
# Files the Hub keeps in LFS (as GITATTRIBUTES says): listed with their content's sha256.
LFS_SUFFIXES = (".parquet", ".mp4")


def git_blob_sha(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@attrs.define
class FakeRepo:
    kind: str
    repo_id: str
    private: bool = False
    gated: bool = False
    commits: dict[str, dict[str, bytes]] = attrs.field(factory=dict)
    branches: dict[str, str] = attrs.field(factory=dict)
    tags: dict[str, str] = attrs.field(factory=dict)

    def resolve(self, revision: str) -> str | None:
        if revision in self.commits:
            return revision
        return self.branches.get(revision) or self.tags.get(revision)


@attrs.define
class Request:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case


class FakeHub:
    def __init__(self, max_requests: int = 2000) -> None:
        self.repos: dict[tuple[str, str], FakeRepo] = {}
        self.requests: list[Request] = []
        self.max_requests = max_requests
        # file path -> how many more GETs of it break off, and after how many body bytes.
        self.interruptions: dict[str, list[int]] = {}
        # Body bytes of every file GET (ranged or whole), to tell a streamed read from a download.
        self.bytes_sent = 0
        # Entries per page of a tree listing (None: all in one), and whether Range is ignored.
        self.tree_page_size: int | None = None
        self.ignore_ranges = False
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self.url = ""

    # --- state helpers for tests -------------------------------------------------------------

    def create(self, kind: str, repo_id: str, **flags: Any) -> FakeRepo:
        repo = FakeRepo(kind, repo_id, **flags)
        first = self._new_commit("initial commit")
        repo.commits[first] = {".gitattributes": GITATTRIBUTES}
        repo.branches["main"] = first
        self.repos[(kind, repo_id)] = repo
        return repo

    def repo(self, kind: str, repo_id: str) -> FakeRepo:
        return self.repos[(kind, repo_id)]

    def file_gets(self, suffix: str = "") -> list[Request]:
        return [
            r
            for r in self.requests
            if r.method == "GET" and "/resolve/" in r.path and r.path.endswith(suffix)
        ]

    def interrupt(self, path: str, times: int, after_bytes: int) -> None:
        self.interruptions[path] = [times, after_bytes]

    def _new_commit(self, seed: str) -> str:
        return hashlib.sha1(f"{seed}-{next(self._counter)}".encode()).hexdigest()

    # --- request handling --------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.requests.append(
                Request(h.command, h.path, {k.lower(): v for k, v in h.headers.items()})
            )
            over_budget = len(self.requests) > self.max_requests
        if over_budget:
            return send(h, 410, {"error": "request budget of the fake Hub exhausted"})
        token = (h.headers.get("authorization") or "").removeprefix("Bearer ").strip()
        if token == BAD_TOKEN:
            return send(
                h,
                401,
                {"error": "Invalid credentials"},
                {"X-Error-Message": "Invalid credentials in Authorization header"},
            )
        path = urlsplit(h.path).path
        parts = [unquote(p) for p in path.split("/")[1:]]
        body = (
            h.rfile.read(int(h.headers.get("Content-Length") or 0))
            if h.command in ("POST", "PUT")
            else b""
        )
        if parts[:1] == ["api"]:
            return self._api(h, parts[1:], body, token)
        return self._resolve(h, path, token)

    def _api(self, h: BaseHTTPRequestHandler, parts: list[str], body: bytes, token: str) -> None:
        if parts == ["repos", "create"] and h.command == "POST":
            return self._create_repo(h, json.loads(body), token)
        if parts == ["validate-yaml"] and h.command == "POST":
            return self._validate_yaml(h, json.loads(body))
        if len(parts) < 3 or parts[0] not in ("models", "datasets"):
            return send(h, 404, {"error": "unknown endpoint"})
        kind, repo_id, rest = parts[0][:-1], f"{parts[1]}/{parts[2]}", parts[3:]
        repo = self.repos.get((kind, repo_id))
        if repo is None or (repo.private and token != GOOD_TOKEN):
            return send(h, 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
        action = rest[0] if rest else "revision"
        revision = unquote(rest[1]) if len(rest) > 1 else "main"
        writes = {"preupload", "commit", "branch", "tag"}
        if action in writes and token == READ_ONLY_TOKEN:
            return send(
                h,
                403,
                {"error": "You don't have the rights to write"},
                {"X-Error-Message": "You don't have the rights to write"},
            )
        if action == "refs":
            return send(h, 200, self._refs(repo))
        if action == "branch" and h.command == "POST":
            return self._create_branch(h, repo, revision, json.loads(body or b"{}"))
        if action == "tag" and h.command == "DELETE":
            if revision not in repo.tags:
                return send(
                    h, 404, {"error": "tag not found"}, {"X-Error-Code": "RevisionNotFound"}
                )
            del repo.tags[revision]
            return send(h, 200, {})
        commit = repo.resolve(revision)
        if commit is None:
            return send(
                h,
                404,
                {"error": f"Invalid rev id: {revision}"},
                {"X-Error-Code": "RevisionNotFound"},
            )
        files = repo.commits[commit]
        if action == "revision":
            return send(
                h,
                200,
                {
                    "id": repo_id,
                    "sha": commit,
                    "private": repo.private,
                    "gated": "auto" if repo.gated else False,
                    "siblings": [{"rfilename": p} for p in sorted(files)],
                },
            )
        if action == "tree":
            return self._tree(h, files, "/".join(rest[2:]))
        if action == "paths-info":
            wanted = parse_qs(body.decode()).get("paths", [])
            return send(h, 200, [e for e in tree(files, "", True) if e["path"] in wanted])
        if action == "preupload":
            return send(
                h,
                200,
                {
                    "files": [
                        {
                            "path": f["path"],
                            "uploadMode": "regular",
                            "shouldIgnore": False,
                            "oid": git_blob_sha(files[f["path"]]) if f["path"] in files else None,
                        }
                        for f in json.loads(body)["files"]
                    ]
                },
            )
        if action == "commit" and h.command == "POST":
            return self._commit(h, repo, revision, commit, body)
        if action == "tag" and h.command == "POST":
            tag = json.loads(body)["tag"]
            if tag in repo.tags:
                return send(h, 409, {"error": "tag exists"})
            repo.tags[tag] = commit
            return send(h, 200, {})
        return send(h, 404, {"error": "unknown endpoint"})

    def _tree(self, h: BaseHTTPRequestHandler, files: dict[str, bytes], prefix: str) -> None:
        query = parse_qs(urlsplit(h.path).query)
        entries = tree(files, prefix, query.get("recursive", [""])[0].lower() == "true")
        if prefix and not entries:
            return send(
                h,
                404,
                {"error": f"{prefix} does not exist on this revision"},
                {"X-Error-Code": "EntryNotFound"},
            )
        start = int(query.get("cursor", ["0"])[0])
        size = self.tree_page_size or len(entries)
        headers = {}
        if start + size < len(entries):
            base = self.url + urlsplit(h.path).path
            flags = "&".join(f"{k}={v[0]}" for k, v in query.items() if k != "cursor")
            headers["Link"] = f'<{base}?{flags}&cursor={start + size}>; rel="next"'
        return send(h, 200, entries[start : start + size], headers)

    def _create_repo(self, h: BaseHTTPRequestHandler, payload: dict, token: str) -> None:
        if token == READ_ONLY_TOKEN:
            return send(
                h,
                403,
                {"error": "no write access"},
                {"X-Error-Message": "You don't have the rights to create a repo"},
            )
        kind = payload.get("type") or "model"
        repo_id = f"{payload['organization']}/{payload['name']}"
        url = f"{self.url}/{'datasets/' if kind == 'dataset' else ''}{repo_id}"
        if (kind, repo_id) in self.repos:
            return send(h, 409, {"error": "You already created this repo", "url": url})
        self.create(kind, repo_id, private=payload.get("visibility") == "private")
        return send(h, 200, {"url": url})

    @staticmethod
    def _validate_yaml(h: BaseHTTPRequestHandler, payload: dict) -> None:
        text = payload["content"]
        try:
            header = text.split("---\n")[1]
            assert isinstance(yaml.safe_load(header), dict)
        except Exception as err:  # the Hub answers 400 with the reason
            return send(h, 400, {"errors": [{"message": f"invalid YAML: {err}"}]})
        return send(h, 200, {"errors": [], "warnings": []})

    def _create_branch(self, h, repo: FakeRepo, branch: str, payload: dict) -> None:
        if branch in repo.branches:
            return send(h, 409, {"error": "branch exists"})
        start = repo.resolve(payload.get("startingPoint") or "main")
        if start is None:
            return send(h, 404, {"error": "bad start"}, {"X-Error-Code": "RevisionNotFound"})
        repo.branches[branch] = start
        return send(h, 200, {})

    def _commit(self, h, repo: FakeRepo, branch: str, parent: str, body: bytes) -> None:
        files = dict(repo.commits[parent])
        for line in body.decode().splitlines():
            item = json.loads(line)
            value = item["value"]
            if item["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] == "deletedFile":
                files.pop(value["path"], None)
            elif item["key"] != "header":
                return send(h, 400, {"error": f"fake Hub cannot {item['key']}"})
        commit = self._new_commit(repo.repo_id)
        repo.commits[commit] = files
        repo.branches[branch] = commit
        url = f"{self.url}/{'datasets/' if repo.kind == 'dataset' else ''}{repo.repo_id}"
        return send(
            h,
            200,
            {"commitUrl": f"{url}/commit/{commit}", "commitOid": commit, "pullRequestUrl": None},
        )

    @staticmethod
    def _refs(repo: FakeRepo) -> dict:
        def refs(names: dict[str, str], prefix: str) -> list[dict]:
            return [
                {"name": n, "ref": f"refs/{prefix}/{n}", "targetCommit": c}
                for n, c in names.items()
            ]

        return {
            "branches": refs(repo.branches, "heads"),
            "tags": refs(repo.tags, "tags"),
            "converts": [],
        }

    def _resolve(self, h: BaseHTTPRequestHandler, path: str, token: str) -> None:
        raw = path.split("/")[1:]
        kind = "dataset" if raw[0] == "datasets" else "model"
        raw = raw[1:] if kind == "dataset" else raw
        if len(raw) < 5 or raw[2] != "resolve":
            return send(h, 404, {"error": "not found"})
        repo_id, revision = f"{unquote(raw[0])}/{unquote(raw[1])}", unquote(raw[3])
        filename = unquote("/".join(raw[4:]))
        repo = self.repos.get((kind, repo_id))
        if repo is None or (repo.private and token != GOOD_TOKEN):
            return send(h, 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
        if repo.gated:
            return send(
                h,
                403,
                {"error": "gated"},
                {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access restricted"},
            )
        commit = repo.resolve(revision)
        if commit is None:
            return send(h, 404, {"error": "revision"}, {"X-Error-Code": "RevisionNotFound"})
        content = repo.commits[commit].get(filename)
        if content is None:
            return send(
                h,
                404,
                {"error": "entry"},
                {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit},
            )
        start, end = 0, len(content) - 1
        ranged = None if self.ignore_ranges else h.headers.get("Range")
        if ranged and ranged.startswith("bytes="):
            first, _, last = ranged[len("bytes=") :].partition("-")
            start = int(first or 0)
            end = min(end, int(last)) if last else end
            if start >= len(content):
                return send(
                    h,
                    416,
                    {"error": "range not satisfiable"},
                    {"Content-Range": f"bytes */{len(content)}"},
                )
        partial = bool(ranged) and (start > 0 or end < len(content) - 1)
        headers = {
            "ETag": f'"{hashlib.sha256(content).hexdigest()}"',
            "X-Repo-Commit": commit,
            "Accept-Ranges": "none" if self.ignore_ranges else "bytes",
        }
        if partial:
            headers["Content-Range"] = f"bytes {start}-{end}/{len(content)}"
        payload = content[start : end + 1]
        self.bytes_sent += len(payload) if h.command == "GET" else 0
        h.send_response(206 if partial else 200)
        for name, value in headers.items():
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        if h.command == "HEAD":
            return None
        plan = self.interruptions.get(filename)
        if plan and plan[0] > 0:
            plan[0] -= 1
            h.wfile.write(payload[: plan[1]])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return None
        h.wfile.write(payload)
        return None


def tree(files: dict[str, bytes], prefix: str, recursive: bool) -> list[dict]:
    base = prefix.rstrip("/") + "/" if prefix else ""
    entries: dict[str, dict] = {}
    for name, content in sorted(files.items()):
        if not name.startswith(base):
            continue
        rest = name[len(base) :].split("/")
        folders = rest[:-1] if recursive else rest[:1] if len(rest) > 1 else []
        for depth in range(1, len(folders) + 1):
            folder = base + "/".join(rest[:depth])
            entries[folder] = {"type": "directory", "path": folder, "oid": git_blob_sha(b"")}
        if recursive or len(rest) == 1:
            entries[name] = {
                "type": "file",
                "path": name,
                "size": len(content),
                "oid": git_blob_sha(content),
            }
            if name.endswith(LFS_SUFFIXES):
                # As the Hub lists an LFS file: git stores its pointer, `lfs` speaks of the bytes.
                pointer = lfs_pointer(content)
                entries[name]["oid"] = git_blob_sha(pointer)
                entries[name]["lfs"] = {
                    "oid": hashlib.sha256(content).hexdigest(),
                    "size": len(content),
                    "pointerSize": len(pointer),
                }
    return list(entries.values())


def lfs_pointer(content: bytes) -> bytes:
    digest = hashlib.sha256(content).hexdigest()
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{digest}\nsize {len(content)}\n"
    ).encode()


def send(
    h: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None
) -> None:
    body = json.dumps(payload).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(body)))
    for name, value in (headers or {}).items():
        h.send_header(name, value)
    h.end_headers()
    if h.command != "HEAD":
        h.wfile.write(body)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes: with Nagle's algorithm each answer on a kept-alive
    # connection would wait for the client's delayed ACK (about 40 ms), which no real Hub adds.
    disable_nagle_algorithm = True
    hub: FakeHub

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.hub.handle(self)

    def do_HEAD(self) -> None:
        self.hub.handle(self)

    def do_POST(self) -> None:
        self.hub.handle(self)

    def do_DELETE(self) -> None:
        self.hub.handle(self)


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any test that tries to open a connection beyond 127.0.0.1."""
    connect = socket.socket.connect

    def guarded(sock: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if sock.family in (socket.AF_INET, socket.AF_INET6) and host not in (
            "127.0.0.1",
            "::1",
            "localhost",
        ):
            raise AssertionError(f"a test tried to reach {address}: tests stay on loopback")
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


class FakeHubServer(ThreadingHTTPServer):
    """Serves a `FakeHub` on 127.0.0.1 from a background thread; `stop()` returns within a bound.

    Not `serve_forever()`: its `shutdown()` waits without a bound for the loop to notice (forever
    when the loop never ran or died). Here the loop polls a stop flag, `stop()` waits for it at
    most `STOP_WAIT_S`, shuts the open connections (handlers waiting on a kept-alive client wake
    and end) and closes the socket. Handler threads are daemons, never joined.
    """

    STOP_WAIT_S = 5.0
    daemon_threads = True
    block_on_close = False
    timeout = 0.05  # how often the loop looks at the stop flag

    def __init__(self, hub: FakeHub) -> None:
        super().__init__(("127.0.0.1", 0), type("Handler", (_Handler,), {"hub": hub}))
        self.hub = hub
        hub.url = f"http://127.0.0.1:{self.server_address[1]}"
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="fake-hub", daemon=True)

    def start(self) -> FakeHubServer:
        self._thread.start()
        return self

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                self.handle_request()
            except (OSError, ValueError):  # the socket was closed under the loop
                return

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client gone mid-answer (reset, or shut by `stop()`) is no error of the fake Hub's.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def stop(self) -> None:
        """Stop serving within about `STOP_WAIT_S`, whatever clients and handlers do."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(self.STOP_WAIT_S)
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self.server_close()


@pytest.fixture
def fake_hub() -> Iterator[FakeHub]:
    hub = FakeHub()
    server = FakeHubServer(hub).start()
    try:
        yield hub
    finally:
        server.stop()


@pytest.fixture
def hub_env(fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """huggingface_hub pointed at the fake Hub, its caches and LeRobot's under tmp_path."""
    home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_LEROBOT_HOME", str(home / "lerobot"))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setenv("HF_TOKEN", GOOD_TOKEN)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    # A dropped connection or a 5xx is retried after time.sleep(1 or more): no need to wait in
    # a test.
    import huggingface_hub.file_download as file_download
    import huggingface_hub.utils._http as http

    monkeypatch.setattr(file_download, "time", _NoSleep())
    monkeypatch.setattr(http, "time", _NoSleep())
    return home


class _NoSleep:
    @staticmethod
    def sleep(_seconds: float) -> None:
        return None


@pytest.fixture
def sim_video_copy(fixtures_dir: Path, tmp_path: Path) -> Path:
    root = tmp_path / "sim_video"
    shutil.copytree(fixtures_dir / "sim_video", root)
    for path in root.rglob("*"):  # the fixtures are read-only; the copy must not be
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root
