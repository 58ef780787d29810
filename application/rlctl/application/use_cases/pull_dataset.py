"""PullDataset: fetch a dataset from the Hub, whole or only the files some episodes need.

The policy of the work:
- The revision defaults to the codebase-version tag (`v3.0`), as LeRobot does, so a dataset
  pushed in a newer format later does not break an older reader; a repo without the tag falls
  back to its default branch, with a warning.
- `--episodes 0-4,7` first fetches `meta/`, works out from `meta/episodes` which data and video
  files hold those episodes, then fetches only them, pinned to the commit the metadata came
  from (a push in between must not mix two versions).
- Files already in the cache are not fetched again: after an interruption, the same call
  resumes. Offline, the cache alone answers, and anything the selection needs but the cache
  lacks is named.

`ResolveDataset` turns what a user typed (a folder or a repo id) into a local root, the way
LeRobot does: a folder is a folder; a repo id is first looked up under `HF_LEROBOT_HOME/<repo_id>`
(recorded or copied there), then pulled (from the cache when it holds it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs
import structlog

from rlctl.application.episode_spec import format_episode_spec, parse_episode_spec
from rlctl.application.ports.dataset import DatasetMetaReader
from rlctl.application.ports.hub import (
    DatasetLayout,
    Hub,
    HubNotCached,
    HubRevisionNotFound,
    RepoRef,
    Snapshot,
    check_repo_id,
    is_repo_id,
)
from rlctl.domain.dataset_meta import CODEBASE_VERSION
from rlctl.domain.errors import CorruptDataset

log = structlog.get_logger(__name__)

FALLBACK_REVISION = "main"
# LeRobot's sign that a folder was mirrored with `snapshot_download(local_dir=...)` by an older
# LeRobot: it re-fetches those through the revision-safe cache, and so do we while online.
LEGACY_MIRROR_MARK = Path(".cache", "huggingface", "download")
INFO_FILE = Path("meta", "info.json")


@attrs.frozen
class PullDatasetRequest:
    repo_id: str
    revision: str | None = None
    # "0-4,7" or indices; None: every episode.
    episodes: str | tuple[int, ...] | None = None
    # None: the cache shared with LeRobot; a folder: the files are placed there instead.
    local_dir: str | None = None
    videos: bool = True


@attrs.frozen
class PulledDataset:
    repo_id: str
    revision: str
    commit: str | None
    root: Path
    # None: every episode.
    episodes: tuple[int, ...] | None
    # The data and video files the selection needs, relative to `root`.
    files: tuple[str, ...]


class PullDataset:
    def __init__(self, hub: Hub, meta_reader: DatasetMetaReader, layout: DatasetLayout) -> None:
        self._hub = hub
        self._meta_reader = meta_reader
        self._layout = layout

    def __call__(self, request: PullDatasetRequest) -> PulledDataset:
        check_repo_id(request.repo_id, where="repo id")
        if request.revision is not None:
            return self._pull(request, request.revision)
        try:
            return self._pull(request, CODEBASE_VERSION)
        except HubRevisionNotFound:
            log.warning(
                "dataset has no codebase-version tag; pulling its default branch",
                repo_id=request.repo_id,
                tag=CODEBASE_VERSION,
                revision=FALLBACK_REVISION,
            )
            return self._pull(request, FALLBACK_REVISION)
        except HubNotCached as missing:
            if not self._hub.offline:
                raise
            # Offline, a repo without the tag was cached under its default branch, if at all.
            try:
                return self._pull(request, FALLBACK_REVISION)
            except HubNotCached:
                raise missing from None

    def _pull(self, request: PullDatasetRequest, revision: str) -> PulledDataset:
        repo = RepoRef(request.repo_id, "dataset", revision)
        local_dir = Path(request.local_dir).expanduser() if request.local_dir else None
        log.info("pulling dataset", repo=repo.describe(), episodes=request.episodes)
        if request.episodes is None and request.videos:
            snapshot = self._hub.download(repo, local_dir=local_dir)
            meta = self._meta_reader.read_meta(str(snapshot.root))
            episodes = None
            needed = self._layout.episode_files(meta, range(meta.total_episodes))
        else:
            metadata = self._layout.metadata_patterns()
            first = self._hub.download(repo, allow=metadata, local_dir=local_dir)
            meta = self._meta_reader.read_meta(str(first.root))
            episodes = (
                None
                if request.episodes is None
                else parse_episode_spec(request.episodes, meta.total_episodes)
            )
            chosen = range(meta.total_episodes) if episodes is None else episodes
            needed = self._layout.episode_files(meta, chosen, videos=request.videos)
            pinned = RepoRef(repo.repo_id, "dataset", first.commit or revision)
            try:
                snapshot = self._hub.download(
                    pinned, allow=[*metadata, *needed], local_dir=local_dir
                )
            except HubNotCached as error:
                # Name the revision and selection the user asked for, not the pinned commit.
                raise HubNotCached(
                    error.message, where=repo.describe(), hint=_online_hint(repo, episodes)
                ) from error
        self._check_complete(snapshot, repo, needed, episodes)
        log.info(
            "dataset pulled",
            repo=repo.describe(),
            commit=snapshot.commit,
            root=str(snapshot.root),
            files=len(needed),
        )
        return PulledDataset(
            repo_id=repo.repo_id,
            revision=revision,
            commit=snapshot.commit,
            root=snapshot.root,
            episodes=episodes,
            files=tuple(needed),
        )

    def _check_complete(
        self,
        snapshot: Snapshot,
        repo: RepoRef,
        needed: Sequence[str],
        episodes: tuple[int, ...] | None,
    ) -> None:
        missing = [f for f in needed if not (snapshot.root / f).is_file()]
        if not missing:
            return
        sample = ", ".join(missing[:3]) + (
            f" … ({len(missing) - 3} more)" if len(missing) > 3 else ""
        )
        if self._hub.offline:
            raise HubNotCached(
                f"{len(missing)} file(s) the selection needs are not in the local cache: {sample}",
                where=repo.describe(),
                hint=_online_hint(repo, episodes),
            )
        raise CorruptDataset(
            f"the Hub copy lacks {len(missing)} file(s) that meta/episodes names: {sample}",
            where=repo.describe(),
            hint="the dataset on the Hub is incomplete: ask its owner to push it again, "
            "or pull another revision",
        )


def _online_hint(repo: RepoRef, episodes: tuple[int, ...] | None) -> str:
    spec = "" if episodes is None else f" --episodes {format_episode_spec(episodes)}"
    revision = "" if repo.revision in (None, CODEBASE_VERSION) else f" --revision {repo.revision}"
    return (
        f"connect to the network and pull once (HF_HUB_OFFLINE=0 rlctl dataset pull "
        f"{repo.repo_id}{revision}{spec}); offline mode then reads it from the cache"
    )


class ResolveDataset:
    """A folder stays a folder; a repo id becomes the local root of its dataset."""

    def __init__(self, hub: Hub, pull: PullDataset) -> None:
        self._hub = hub
        self._pull = pull

    def __call__(
        self,
        location: str | Path,
        *,
        revision: str | None = None,
        episodes: str | tuple[int, ...] | None = None,
    ) -> Path:
        path = Path(location).expanduser()
        # An existing folder wins over a repo id of the same spelling: what is on disk is meant.
        if path.exists() or not is_repo_id(str(location)):
            return path
        home = self._hub.home_root(str(location))
        legacy = (home / LEGACY_MIRROR_MARK).exists() and not self._hub.offline
        if revision is None and (home / INFO_FILE).is_file() and not legacy:
            return home
        request = PullDatasetRequest(str(location), revision=revision, episodes=episodes)
        return self._pull(request).root
