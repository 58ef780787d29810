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
- A pull (and a read that failed on a copy of a repo id) also compares every file the selection
  needs with the Hub's record of it (size, sha256 or git hash): damage no quick check sees,
  such as bytes flipped inside a parquet page, is a cache miss too. Files that differ are
  fetched again and named (`PulledDataset.replaced`). A copy under HF_LEROBOT_HOME may hold the
  user's own edits: its data files are replaced only while its meta/ is the Hub's byte for byte
  (then a data file that differs can only be damaged); otherwise it is kept, with a warning.

`ResolveDataset` turns what a user typed (a folder or a repo id) into a local root, the way
LeRobot does: a folder is a folder; a repo id is first looked up under `HF_LEROBOT_HOME/<repo_id>`
(recorded or copied there; repaired in place from the Hub when files are damaged), then
pulled (from the cache when it holds it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

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
    RecordedFiles,
    RepoRef,
    Snapshot,
    check_repo_id,
    is_repo_id,
)
from rlctl.domain.dataset_meta import CODEBASE_VERSION
from rlctl.domain.errors import CorruptDataset, RlctlError

log = structlog.get_logger(__name__)
T = TypeVar("T")

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
    # Compare every needed file with the Hub's hashes (what `rlctl dataset pull` does); opening
    # a repo id runs only the quick check, and compares when a read failed.
    verify: bool = True
    # Reuse hashes of files untouched since they were hashed; False reads every byte again.
    trust_hashes: bool = True


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
    # Files of the local copy found missing, damaged or not the Hub's bytes, and fetched again.
    replaced: tuple[str, ...] = ()


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
            return self.repair_home(
                request.repo_id,
                home,
                request.episodes,
                videos=request.videos,
                verify=request.verify,
                trust_hashes=request.trust_hashes,
            )
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
        replaced: list[str] = []
        if request.episodes is None and request.videos:
            snapshot = self._hub.download(repo, local_dir=local_dir)
            pinned = RepoRef(repo.repo_id, "dataset", snapshot.commit or revision)
            replaced += self._repair(
                snapshot.root, pinned, None, local_dir=local_dir, only_meta=True
            )
            meta = self._meta_reader.read_meta(str(snapshot.root))
            episodes = None
            needed = self._layout.episode_files(meta, range(meta.total_episodes))
        else:
            metadata = self._layout.metadata_patterns()
            first = self._hub.download(repo, allow=metadata, local_dir=local_dir)
            pinned = RepoRef(repo.repo_id, "dataset", first.commit or revision)
            replaced += self._repair(first.root, pinned, None, local_dir=local_dir, only_meta=True)
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
        replaced += self._repair(
            snapshot.root, pinned, episodes, within=needed, local_dir=local_dir
        )
        if request.verify:
            replaced += self._verify(
                snapshot.root,
                pinned,
                needed,
                local_dir=local_dir,
                trust_hashes=request.trust_hashes,
            )
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
            replaced=tuple(dict.fromkeys(replaced)),
        )

    def repair_home(
        self,
        repo_id: str,
        home: Path,
        episodes: str | tuple[int, ...] | None = None,
        *,
        videos: bool = True,
        verify: bool = False,
        trust_hashes: bool = True,
    ) -> PulledDataset:
        """Check the copy under HF_LEROBOT_HOME and fetch again, into it, the files of the
        selection that are missing or damaged (the rest stay as they are); with `verify`, also
        those whose bytes are not the Hub's (see the module's doc for a copy edited locally)."""
        check_repo_id(repo_id, where="repo id")
        repo = RepoRef(repo_id, "dataset", CODEBASE_VERSION)
        replaced = self._repair(home, repo, None, home=True, only_meta=True)
        meta = self._meta_reader.read_meta(str(home))
        chosen = None if episodes is None else parse_episode_spec(episodes, meta.total_episodes)
        needed = self._layout.episode_files(
            meta, range(meta.total_episodes) if chosen is None else chosen, videos=videos
        )
        replaced += self._repair(home, repo, chosen, within=needed, home=True)
        if verify:
            replaced += self._verify(home, repo, needed, home=True, trust_hashes=trust_hashes)
        return PulledDataset(
            repo_id=repo_id,
            revision=CODEBASE_VERSION,
            commit=None,
            root=home,
            episodes=chosen,
            files=tuple(needed),
            replaced=tuple(dict.fromkeys(replaced)),
        )

    def _recorded(self, repo: RepoRef, *, home: bool) -> RecordedFiles:
        try:
            return self._hub.recorded_files(repo)
        except HubRevisionNotFound:
            if not home:
                raise
            # A home copy is compared with what a pull would fetch: the tag, else main.
            return self._hub.recorded_files(RepoRef(repo.repo_id, "dataset", FALLBACK_REVISION))

    def _verify(
        self,
        root: Path,
        repo: RepoRef,
        needed: Sequence[str],
        *,
        local_dir: Path | None = None,
        home: bool = False,
        trust_hashes: bool = True,
    ) -> list[str]:
        """Compare meta/ and the `needed` files of `root` with the Hub's record of `repo`; fetch
        again those that differ. The names of the files fetched again."""
        if self._integrity is None or self._hub.offline:
            return []
        try:
            listing = self._recorded(repo, home=home)
        except HubError as error:
            log.warning(
                "could not compare the local copy with the Hub's hashes",
                repo=repo.describe(),
                root=str(root),
                reason=error.message,
            )
            return []
        wanted = set(needed)
        recorded = [
            entry
            for name, entry in sorted(listing.files.items())
            if name.startswith(META_DIR + "/") or name in wanted
        ]
        differing = self._integrity.differing_files(root, recorded, trust_cache=trust_hashes)
        if not differing:
            return []
        if home:
            edited = [d for d in differing if d.path.startswith(META_DIR + "/")]
            if edited:
                # Another version than the Hub's (recorded further, edited, ...): its data may
                # differ on purpose, and nothing the user made is replaced.
                log.warning(
                    "the local copy's metadata is not the Hub's (a local edit or another "
                    "version?): its files are kept as they are",
                    repo=repo.describe(),
                    root=str(root),
                    files={d.path: d.problem for d in differing[:8]},
                )
                return []
        pinned = RepoRef(repo.repo_id, "dataset", listing.commit or listing.repo.revision)
        log.warning(
            "local copy differs from the Hub's: fetching these files again",
            repo=pinned.describe(),
            root=str(root),
            files={d.path: d.problem for d in differing},
        )
        names = [d.path for d in differing]
        try:
            if home:
                self._replace_from_hub(root, pinned, names)
            else:
                self._hub.download(pinned, allow=names, local_dir=local_dir, force=True)
        except HubError as error:
            raise CorruptDataset(
                f"{len(differing)} file(s) of the local copy are not the Hub's "
                f"({_sample(differing)}), and fetching them again failed: {error.message}",
                where=str(root),
                hint=(error.hint + "; " if error.hint else "")
                + f"`rlctl dataset check {root}` lists every problem",
            ) from error
        fetched = [listing.files[name] for name in names]
        still = self._integrity.differing_files(root, fetched, trust_cache=False)
        if still:
            raise CorruptDataset(
                f"{len(still)} file(s) fetched again from the Hub still differ from the Hub's "
                f"own record of them: {_sample(still)}",
                where=pinned.describe(),
                hint="the Hub served other bytes than it records (a proxy or a broken mirror?); "
                "run the pull again later, or ask the dataset's owner to push it again",
            )
        return names

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
    ) -> list[str]:
        """Fetch again what `root` holds damaged, until nothing is (or nothing more can be); the
        names of the files fetched again.

        `only_meta`: only meta/ (the rest may not be there yet); `within`: meta/ and these files
        (those the selection needs: no videos when they were left out)."""
        if self._integrity is None:
            return []
        wanted = None if within is None else set(within)
        fetched: dict[str, None] = {}
        for _ in range(MAX_REPAIR_ROUNDS):
            damaged = [
                d
                for d in self._integrity.damaged_files(root, episodes)
                if d.path.startswith(META_DIR)
                or (not only_meta and (wanted is None or d.path in wanted))
            ]
            if not damaged:
                return list(fetched)
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
            fetched.update(dict.fromkeys(names))
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
    """A folder stays a folder; a repo id becomes the local root of its dataset.

    Resolving runs the quick check only (opening a dataset must not read every byte); `read`
    opens the copy and, when that fails as a damaged copy would, compares it with the Hub's
    hashes, fetches again what differs and opens it once more.
    """

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
        return self._resolve(str(location), revision, episodes, verify=False).root

    def _resolve(
        self,
        repo_id: str,
        revision: str | None,
        episodes: str | tuple[int, ...] | None,
        *,
        verify: bool,
    ) -> PulledDataset:
        home = self._hub.home_root(repo_id)
        if revision is None and is_home_copy(home, self._hub):
            return self._pull.repair_home(
                repo_id, home, episodes, verify=verify, trust_hashes=not verify
            )
        request = PullDatasetRequest(
            repo_id, revision=revision, episodes=episodes, verify=verify, trust_hashes=not verify
        )
        return self._pull(request)

    def repair(
        self,
        location: str | Path,
        *,
        revision: str | None = None,
        episodes: str | tuple[int, ...] | None = None,
    ) -> tuple[str, ...]:
        """After a read of what `location` resolved to failed: compare every byte of the copy
        with the Hub's hashes and fetch again what differs. The files replaced; none when
        `location` is a folder or the copy is the Hub's (the failure is then not damage a
        download can fix)."""
        if Path(location).expanduser().exists() or not is_repo_id(str(location)):
            return ()
        return self._resolve(str(location), revision, episodes, verify=True).replaced

    def read(
        self,
        location: str | Path,
        opener: Callable[[Path], T],
        *,
        revision: str | None = None,
        episodes: str | tuple[int, ...] | None = None,
    ) -> T:
        """`opener(root)` of the resolved copy; a copy of a repo id that fails to open as damaged
        (`CorruptDataset`) is repaired from the Hub's hashes and opened once more."""
        root = self(location, revision=revision, episodes=episodes)
        try:
            return opener(root)
        except CorruptDataset as failure:
            try:
                replaced = self.repair(location, revision=revision, episodes=episodes)
            except RlctlError as error:
                log.warning("repairing the copy failed", root=str(root), reason=error.message)
                raise failure from error
            if not replaced:
                raise
            log.warning(
                "the copy failed to open: files that were not the Hub's were fetched again",
                root=str(root),
                files=list(replaced),
            )
            return opener(root)
