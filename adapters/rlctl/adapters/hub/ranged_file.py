"""Files of a Hub repo read by byte ranges: what streaming reads tables and videos through.

`HubFiles` names one dataset repo at one commit (pinned, so a push during a run cannot mix two
versions); `open(path)` gives a `RemoteFile`, a seekable binary file whose reads become HTTP
`Range` requests through huggingface_hub's own session (its token, retries and redirects to the
storage backends). Reads fetch whole blocks and keep the last few, so pyarrow reading a footer
and then row groups, or a video demuxer seeking about one episode's span, fetches little twice.
Nothing is written to disk. huggingface_hub's failures become one `HubError` naming the file.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import httpx2
from huggingface_hub import get_hf_file_metadata, hf_hub_url
from huggingface_hub.errors import HfHubHTTPError, RemoteEntryNotFoundError
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_backoff

from rlctl.adapters.hub.errors import translate
from rlctl.application.ports.hub import HubError, HubNotCached, RepoRef
from rlctl.domain.errors import RlctlError

BLOCK_BYTES = 1 << 20
# Per open file; the video decoders keep up to 64 files open, so this bounds memory too.
MAX_BLOCKS = 8
STREAM_HINT = (
    "check the network (and HF_ENDPOINT if set) and run again, or read a local copy instead: "
    "`rlctl dataset pull REPO_ID` and drop streaming"
)


@attrs.frozen
class HubFiles:
    """The files of one dataset repo at one commit. Picklable: DataLoader workers get a copy."""

    repo_id: str
    commit: str
    endpoint: str | None = None
    block_bytes: int = BLOCK_BYTES
    max_blocks: int = MAX_BLOCKS

    @property
    def repo(self) -> RepoRef:
        return RepoRef(self.repo_id, "dataset", self.commit)

    def url(self, path: str) -> str:
        return hf_hub_url(
            self.repo_id, path, repo_type="dataset", revision=self.commit, endpoint=self.endpoint
        )

    def open(self, path: str) -> RemoteFile:
        """The file at `path` in the repo; a `HubError` when it is missing or unreachable."""
        url = self.url(path)
        with stream_errors(self, path):
            size = get_hf_file_metadata(url, endpoint=self.endpoint).size
        if size is None:
            raise HubError(
                "the Hub gave no size for the file, which reading by ranges needs",
                where=url,
                hint=STREAM_HINT.replace("REPO_ID", self.repo_id),
            )
        return RemoteFile(self, path, url, int(size))


@contextmanager
def stream_errors(files: HubFiles, path: str) -> Iterator[None]:
    """huggingface_hub's and the network's failures while streaming `path`, as one `HubError`."""
    url = files.url(path)
    hint = STREAM_HINT.replace("REPO_ID", files.repo_id)
    try:
        yield
    except RlctlError:
        raise
    except RemoteEntryNotFoundError as error:
        raise HubError(
            f"the file {path} is not on the Hub, though the dataset's metadata names it",
            where=url,
            hint="the dataset on the Hub is incomplete: ask its owner to push it again, or use "
            "another revision (--dataset.revision)",
        ) from error
    except httpx2.TransportError as error:
        raise HubNotCached(
            f"cannot reach the Hub to stream {path}: {type(error).__name__}: {error}",
            where=url,
            hint=hint,
        ) from error
    except HfHubHTTPError as error:
        translated = translate(error, files.repo, action="stream")
        if translated is None:  # pragma: no cover - translate knows every HfHubHTTPError
            raise
        raise type(translated)(translated.message, where=url, hint=translated.hint) from error
    except Exception as error:
        translated = translate(error, files.repo, action="stream")
        if translated is None:
            raise
        raise type(translated)(translated.message, where=url, hint=translated.hint) from error


class RemoteFile(io.RawIOBase):
    """A read-only, seekable view of one remote file, fetched in blocks as it is read."""

    def __init__(self, files: HubFiles, path: str, url: str, size: int) -> None:
        super().__init__()
        self.files = files
        self.path = path
        self.url = url
        self.size = size
        self.name = url
        self.bytes_fetched = 0
        self.requests = 0
        self._position = 0
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            position = offset
        elif whence == io.SEEK_CUR:
            position = self._position + offset
        elif whence == io.SEEK_END:
            position = self.size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._position = position
        return position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        with self._lock:
            start = self._position
            end = min(start + len(view), self.size)
            if end <= start:
                return 0
            view[: end - start] = self._read(start, end)
            self._position = end
            return end - start

    def readall(self) -> bytes:
        with self._lock:
            start = self._position
            data = self._read(start, self.size) if start < self.size else b""
            self._position = max(start, self.size)
            return data

    def _read(self, start: int, end: int) -> bytes:
        block = self.files.block_bytes
        first, last = start // block, (end - 1) // block
        if last - first + 1 > self.files.max_blocks:
            return self._fetch(start, end)  # a long read (a row group): no point caching it
        missing = [i for i in range(first, last + 1) if i not in self._blocks]
        for run_start, run_end in _runs(missing):
            data = self._fetch(run_start * block, min((run_end + 1) * block, self.size))
            for i in range(run_start, run_end + 1):
                offset = (i - run_start) * block
                self._blocks[i] = data[offset : offset + block]
        parts = []
        for i in range(first, last + 1):
            self._blocks.move_to_end(i)
            parts.append(self._blocks[i])
        while len(self._blocks) > self.files.max_blocks:
            self._blocks.popitem(last=False)
        joined = b"".join(parts)
        return joined[start - first * block : end - first * block]

    def _fetch(self, start: int, end: int) -> bytes:
        headers = {**build_hf_headers(library_name="rlctl"), "Range": f"bytes={start}-{end - 1}"}
        with stream_errors(self.files, self.path):
            response = http_backoff("GET", self.url, headers=headers)
            hf_raise_for_status(response)
            data = response.content
        if response.status_code == 200 and len(data) == self.size:
            data = data[start:end]  # a server that ignores ranges sends the whole file
        if len(data) != end - start:
            raise HubError(
                f"asked the Hub for bytes {start}-{end - 1} of {self.path}, got {len(data)} bytes",
                where=self.url,
                hint="the file may have changed on the Hub; "
                + STREAM_HINT.replace("REPO_ID", self.files.repo_id),
            )
        self.requests += 1
        self.bytes_fetched += len(data)
        return data


def _runs(indices: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs of sorted block indices, as (first, last) pairs."""
    runs: list[tuple[int, int]] = []
    for index in indices:
        if runs and runs[-1][1] == index - 1:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    return runs
