"""Where a streamed dataset comes from: its `meta/` (fetched, small) and its files (read by ranges).

Only `meta/` is downloaded, into the cache LeRobot shares (`HF_LEROBOT_HOME/hub`), at the
codebase-version tag as LeRobot reads it (the default branch when the repo has no such tag). The
commit it came from pins every later read. Data and video files are never downloaded: the
snapshot folder stands for the dataset root, and a path under it is read from the Hub by
ranges (`RemoteVideos` serves the video decoders).
"""

from __future__ import annotations

from pathlib import Path

import attrs
import structlog

from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.adapters.hub.layout import METADATA_PATTERNS
from rlctl.adapters.hub.streamed_files import HubFile, HubFiles
from rlctl.adapters.storage.lerobot_v3.decoders import backend_name
from rlctl.application.ports.hub import HubNotCached, HubRevisionNotFound, RepoRef, check_repo_id
from rlctl.application.ports.video import VideoDecoder
from rlctl.domain.dataset_meta import CODEBASE_VERSION
from rlctl.domain.errors import InvalidInput

log = structlog.get_logger(__name__)

FALLBACK_REVISION = "main"


@attrs.frozen
class StreamSource:
    repo_id: str
    revision: str
    # Where meta/ lies; data and video paths under it are read from the Hub.
    root: Path
    files: HubFiles

    def path_in_repo(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            raise InvalidInput(
                f"{path} is not a file of the streamed dataset", where=str(self.root)
            ) from None


def open_source(repo_id: str, revision: str | None, hub: HuggingFaceHub | None) -> StreamSource:
    """Fetch `meta/` of `repo_id` (at `revision`, else LeRobot's default) and pin its commit."""
    check_repo_id(repo_id, where="repo_id")
    hub = hub or HuggingFaceHub()
    if hub.offline:
        raise HubNotCached(
            "streaming reads the dataset from the Hub, and offline mode (HF_HUB_OFFLINE=1) "
            "forbids it",
            where=f"dataset {repo_id}",
            hint="unset HF_HUB_OFFLINE to stream, or read a local copy: pull it once "
            f"(`rlctl dataset pull {repo_id}`) and drop streaming",
        )
    chosen = revision or CODEBASE_VERSION
    try:
        snapshot = hub.download(RepoRef(repo_id, "dataset", chosen), allow=METADATA_PATTERNS)
    except HubRevisionNotFound:
        if revision is not None:
            raise
        log.warning(
            "dataset has no codebase-version tag; streaming its default branch",
            repo_id=repo_id,
            tag=CODEBASE_VERSION,
            revision=FALLBACK_REVISION,
        )
        chosen = FALLBACK_REVISION
        snapshot = hub.download(RepoRef(repo_id, "dataset", chosen), allow=METADATA_PATTERNS)
    commit = snapshot.commit or chosen
    log.info("streaming dataset", repo=repo_id, revision=chosen, commit=commit)
    files = HubFiles(repo_id, commit, endpoint=hub.settings.endpoint)
    return StreamSource(repo_id, chosen, snapshot.root, files)


class RemoteVideos:
    """A decoder's `source`: the video at a path under the root, opened on the Hub."""

    def __init__(self, source: StreamSource) -> None:
        self.source = source

    def __call__(self, path: Path) -> HubFile:
        return self.source.files.open(self.source.path_in_repo(Path(path)))


class RemoteDecoderFactory:
    """Makes this process's video decoder reading from the Hub (picklable, for workers).

    The backends are the local reader's, choosing as it does: torchcodec when it works here,
    else PyAV ('auto'), so frames come out the same as from a local copy.
    """

    def __init__(self, backend: str | None, videos: RemoteVideos) -> None:
        self.backend = backend_name(backend)
        self.videos = videos

    def __call__(self) -> VideoDecoder:
        from rlctl.adapters.video.auto import AutoVideoDecoder
        from rlctl.adapters.video.pyav_decoder import PyAVVideoDecoder

        if self.backend == "pyav":
            return PyAVVideoDecoder(source=self.videos)
        if self.backend == "torchcodec":
            return self._torchcodec()
        return AutoVideoDecoder(
            preferred=self._torchcodec, fallback=lambda: PyAVVideoDecoder(source=self.videos)
        )

    def _torchcodec(self) -> VideoDecoder:
        from rlctl.adapters.video.auto import video_decoder_for
        from rlctl.adapters.video.torchcodec_decoder import TorchCodecVideoDecoder

        video_decoder_for("torchcodec").close()  # probes torchcodec: a VideoError if unusable
        return TorchCodecVideoDecoder(source=self.videos)


class HubStreamedDatasets:
    """`StreamedDatasets` over the Hugging Face Hub: `meta/` fetched as `open_source` does."""

    def __init__(self, hub: HuggingFaceHub | None = None) -> None:
        self._hub = hub

    def metadata_root(self, repo_id: str, revision: str | None) -> Path:
        return open_source(repo_id, revision, self._hub).root
