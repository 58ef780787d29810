"""Files of a Hub dataset read by byte ranges, through huggingface_hub's `HfFileSystem`.

`HubFiles` names one dataset repo at one commit (pinned, so a push during a run cannot mix two
versions); `open(path)` gives huggingface_hub's file of `datasets/REPO@COMMIT/path`: seekable,
its reads HTTP `Range` requests through huggingface_hub's session (its token, retries and
redirects to the storage backends). fsspec's block cache keeps the last `max_blocks` blocks of
each open file, so pyarrow reading a footer and then row groups, or a video demuxer seeking
about one episode's span, fetches little twice, and memory stays bounded with the video
decoders' 64 open files. Nothing is written to disk. Failures become one `HubError` naming the
file.

`HubFiles` is plain data, so DataLoader workers get a copy. Each process and thread uses its own
`HfFileSystem`, kept by the library per thread and arguments, which asks for the commit once and
lists each folder once, then opens files of it without a request (fsspec empties that cache in
a forked child, and huggingface_hub drops its HTTP session there).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import attrs
import httpx2
from huggingface_hub import HfFileSystem, HfFileSystemFile, hf_hub_url
from huggingface_hub.errors import EntryNotFoundError

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

    def open(self, path: str) -> HubFile:
        """The file at `path` in the repo; a `HubError` when it is missing or unreachable."""
        return HubFile(self, path)


class HubFile(HfFileSystemFile):
    """huggingface_hub's file at the pinned commit, read in cached blocks, its failures ours."""

    def __init__(self, files: HubFiles, path: str) -> None:
        self.files = files
        self.path_in_repo = path
        with stream_errors(files, path):
            super().__init__(
                HfFileSystem(endpoint=files.endpoint),
                f"datasets/{files.repo_id}@{files.commit}/{path}",
                mode="rb",
                block_size=files.block_bytes,
                cache_type="blockcache",
                cache_options={"maxblocks": files.max_blocks},
            )

    def read(self, length: int = -1) -> bytes:
        with stream_errors(self.files, self.path_in_repo):
            return super().read(length)

    def _fetch_range(self, start: int, end: int) -> bytes:
        data = super()._fetch_range(start, end)
        end = min(end, self.size)
        if len(data) == self.size != end - start:
            data = data[start:end]  # a server that ignores ranges sends the whole file
        if len(data) != end - start:
            raise HubError(
                f"asked the Hub for bytes {start}-{end - 1} of {self.path_in_repo}, "
                f"got {len(data)} bytes",
                where=self.files.url(self.path_in_repo),
                hint="the file may have changed on the Hub; "
                + STREAM_HINT.replace("REPO_ID", self.files.repo_id),
            )
        return data


@contextmanager
def stream_errors(files: HubFiles, path: str) -> Iterator[None]:
    """huggingface_hub's and the network's failures while streaming `path`, as one `HubError`."""
    url = files.url(path)
    try:
        yield
    except RlctlError:
        raise
    except (EntryNotFoundError, FileNotFoundError) as error:
        # HfFileSystem says FileNotFoundError for a missing repo or revision too, from the
        # Hub's answer.
        cause = error.__cause__
        translated = None if cause is None else translate(cause, files.repo, action="stream")
        if translated is not None:
            raise type(translated)(translated.message, where=url, hint=translated.hint) from error
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
            hint=STREAM_HINT.replace("REPO_ID", files.repo_id),
        ) from error
    except Exception as error:
        translated = translate(error, files.repo, action="stream")
        if translated is None:
            raise
        raise type(translated)(translated.message, where=url, hint=translated.hint) from error
