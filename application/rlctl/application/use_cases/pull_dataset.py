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
- A local copy that cannot be loaded is a cache miss: the files the `DatasetIntegrity` check
  finds missing or damaged (meta/ first, then the data and videos it names) are fetched again,
  with a warning naming them, and every other file is kept. Only when that cannot work —
  offline, the Hub unreachable or without the dataset, or the Hub's copy as damaged as ours —
  does it stop, with an error naming the files.

`ResolveDataset` turns what a user typed (a folder or a repo id) into a local root, the way
LeRobot does: a folder is a folder; a repo id is first looked up under `HF_LEROBOT_HOME/<repo_id>`
(recorded or copied there; repaired in place from the Hub when files are damaged), then
pulled (from the cache when it holds it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs
import structlog

from rlctl.application.episode_spec import format_episode_spec, parse_episode_spec
from rlctl.application.ports.dataset import DatasetMetaReader
from rlctl.application.ports.hub import (
    DamagedFile,
    DatasetIntegrity,
    DatasetLayout,
    Hub,
    HubError,
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
META_DIR = "meta"
# meta/ first, then the files it names; a file fetched again and still damaged stops it sooner.
MAX_REPAIR_ROUNDS = 4


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
    """Without `integrity`, a local copy is trusted as found (nothing is checked or repaired)."""

    def __init__(
        self,
        hub: Hub,
        meta_reader: DatasetMetaReader,
        layout: DatasetLayout,
        integrity: DatasetIntegrity | None = None,
    ) -> None:
        self._hub = hub
        self._meta_reader = meta_reader
        self._layout = layout
        self._integrity = integrity

    def __call__(self, request: PullDatasetRequest) -> PulledDataset:
        check_repo_id(request.repo_id, where="repo id")
        home = self._hub.home_root(request.repo_id)
        if request.local_dir is None and request.revision is None and is_home_copy(home, self._hub):
            # The copy readers prefer is the one to fill and repair, not a cache nobody reads.
            return self.repair_home(request.repo_id, home, request.episodes, videos=request.videos)
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
            pinned = RepoRef(repo.repo_id, "dataset", snapshot.commit or revision)
            self._repair(snapshot.root, pinned, None, local_dir=local_dir, only_meta=True)
            meta = self._meta_reader.read_meta(str(snapshot.root))
            episodes = None
            needed = self._layout.episode_files(meta, range(meta.total_episodes))
        else:
            metadata = self._layout.metadata_patterns()
            first = self._hub.download(repo, allow=metadata, local_dir=local_dir)
            pinned = RepoRef(repo.repo_id, "dataset", first.commit or revision)
            self._repair(first.root, pinned, None, local_dir=local_dir, only_meta=True)
            meta = self._meta_reader.read_meta(str(first.root))
            episodes = (
                None
                if request.episodes is None
                else parse_episode_spec(request.episodes, meta.total_episodes)
            )
            chosen = range(meta.total_episodes) if episodes is None else episodes
            needed = self._layout.episode_files(meta, chosen, videos=request.videos)
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
        self._repair(snapshot.root, pinned, episodes, within=needed, local_dir=local_dir)
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

    def repair_home(
        self,
        repo_id: str,
        home: Path,
        episodes: str | tuple[int, ...] | None = None,
        *,
        videos: bool = True,
    ) -> PulledDataset:
        """Check the copy under HF_LEROBOT_HOME and fetch again, into it, the files of the
        selection that are missing or damaged (the rest stay as they are)."""
        check_repo_id(repo_id, where="repo id")
        repo = RepoRef(repo_id, "dataset", CODEBASE_VERSION)
        self._repair(home, repo, None, home=True, only_meta=True)
        meta = self._meta_reader.read_meta(str(home))
        chosen = None if episodes is None else parse_episode_spec(episodes, meta.total_episodes)
        needed = self._layout.episode_files(
            meta, range(meta.total_episodes) if chosen is None else chosen, videos=videos
        )
        self._repair(home, repo, chosen, within=needed, home=True)
        return PulledDataset(
            repo_id=repo_id,
            revision=CODEBASE_VERSION,
            commit=None,
            root=home,
            episodes=chosen,
            files=tuple(needed),
        )

    def _repair(
        self,
        root: Path,
        repo: RepoRef,
        episodes: tuple[int, ...] | None,
        *,
        within: Sequence[str] | None = None,
        local_dir: Path | None = None,
        home: bool = False,
        only_meta: bool = False,
    ) -> None:
        """Fetch again what `root` holds damaged, until nothing is (or nothing more can be).

        `only_meta`: only meta/ (the rest may not be there yet); `within`: meta/ and these files
        (those the selection needs: no videos when they were left out)."""
        if self._integrity is None:
            return
        wanted = None if within is None else set(within)
        fetched: set[str] = set()
        for _ in range(MAX_REPAIR_ROUNDS):
            damaged = [
                d
                for d in self._integrity.damaged_files(root, episodes)
                if d.path.startswith(META_DIR)
                or (not only_meta and (wanted is None or d.path in wanted))
            ]
            if not damaged:
                return
            again = [d for d in damaged if d.path in fetched]
            if again:
                raise CorruptDataset(
                    f"{len(again)} file(s) fetched again from the Hub still cannot be loaded: "
                    f"{_sample(again)}",
                    where=repo.describe(),
                    hint="the dataset on the Hub is damaged too: ask its owner to push it again, "
                    f"or pull another revision (--revision); `rlctl dataset check {root}` lists "
                    "every problem",
                )
            if self._hub.offline:
                raise HubNotCached(
                    f"{len(damaged)} file(s) of the local copy cannot be loaded: "
                    f"{_sample(damaged)}; offline mode (HF_HUB_OFFLINE=1) forbids fetching them "
                    "again",
                    where=str(root / damaged[0].path),
                    hint=f"connect and run `HF_HUB_OFFLINE=0 rlctl dataset pull {repo.repo_id}` "
                    "once: it fetches only the damaged files and keeps the others",
                )
            log.warning(
                "local copy damaged: fetching these files again",
                repo=repo.describe(),
                root=str(root),
                files={d.path: d.problem for d in damaged},
            )
            names = [d.path for d in damaged]
            try:
                if home:
                    self._replace_from_hub(root, repo, names)
                else:
                    self._hub.download(repo, allow=names, local_dir=local_dir, force=True)
            except HubError as error:
                raise CorruptDataset(
                    f"{len(damaged)} file(s) of the local copy cannot be loaded "
                    f"({_sample(damaged)}), and fetching them again failed: {error.message}",
                    where=str(root),
                    hint=(error.hint + "; " if error.hint else "")
                    + f"`rlctl dataset check {root}` lists every problem",
                ) from error
            fetched.update(names)
        raise CorruptDataset(
            f"the local copy is still damaged after {MAX_REPAIR_ROUNDS} rounds of fetching",
            where=str(root),
            hint=f"`rlctl dataset check {root}` lists every problem",
        )

    def _replace_from_hub(self, home: Path, repo: RepoRef, names: list[str]) -> None:
        """Fetch into the cache (a copy under HF_LEROBOT_HOME has no download records to keep
        consistent), then copy over the damaged files, one at a time and atomically."""
        assert self._integrity is not None
        try:
            snapshot = self._hub.download(repo, allow=names, force=True)
        except HubRevisionNotFound:
            repo = RepoRef(repo.repo_id, "dataset", FALLBACK_REVISION)
            snapshot = self._hub.download(repo, allow=names, force=True)
        files: list[str] = []
        for name in names:
            if name.endswith("/"):
                folder = snapshot.root / name
                found = sorted(p for p in folder.rglob("*") if p.is_file())
                files += [p.relative_to(snapshot.root).as_posix() for p in found]
            elif (snapshot.root / name).is_file():
                files.append(name)
        self._integrity.replace_files(home, files, snapshot.root)

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


def _sample(damaged: Sequence[DamagedFile]) -> str:
    shown = "; ".join(f"{d.path} ({d.problem})" for d in damaged[:3])
    return shown + (f" … ({len(damaged) - 3} more)" if len(damaged) > 3 else "")


def is_home_copy(home: Path, hub: Hub) -> bool:
    """A dataset recorded or copied under HF_LEROBOT_HOME, which readers prefer. One an older
    LeRobot mirrored there (`local_dir`) is re-fetched through the cache while online."""
    legacy = (home / LEGACY_MIRROR_MARK).exists() and not hub.offline
    return (home / META_DIR).is_dir() and not legacy


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
        if revision is None and is_home_copy(home, self._hub):
            return self._pull.repair_home(str(location), home, episodes).root
        request = PullDatasetRequest(str(location), revision=revision, episodes=episodes)
        return self._pull(request).root
