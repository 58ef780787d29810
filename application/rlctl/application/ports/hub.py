"""The Hub: where datasets and policies are shared (Hugging Face Hub or anything like it).

The port speaks of repositories, revisions, folders and file patterns, never of HTTP: an adapter
pushes a local folder as one commit and pulls files into a local cache whose layout it owns. A
download that can be served from that cache is served from it; with the Hub switched off
(offline mode) only the cache answers, and what it lacks is a `HubNotCached` error.

Patterns are shell globs on repo paths (`fnmatch`): `meta/` means everything under `meta/`,
`*.json` any JSON file, an exact path one file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol

import attrs

from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import InvalidInput, RlctlError

RepoKind = Literal["dataset", "model"]

# What the Hub accepts as `namespace/name` (the Hub validates more; this catches typos early).
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")


def is_repo_id(text: str) -> bool:
    """`user/name` shaped; says nothing about whether the repo exists."""
    return bool(_REPO_ID.match(text)) and ".." not in text and not text.endswith((".git", "."))


def check_repo_id(repo_id: str, where: str = "--repo-id") -> str:
    if not is_repo_id(repo_id):
        raise InvalidInput(
            f"{repo_id!r} is not a Hub repo id",
            where=where,
            hint="write it as NAMESPACE/NAME, e.g. lerobot/pusht (your user or organisation, "
            "a slash, then letters, digits, '-', '_' or '.')",
        )
    return repo_id


@attrs.frozen
class RepoRef:
    """A repository at a revision: a branch, a tag or a commit (None: the default branch)."""

    repo_id: str
    kind: RepoKind = "dataset"
    revision: str | None = None

    def describe(self) -> str:
        at = f"@{self.revision}" if self.revision else ""
        return f"{self.kind} {self.repo_id}{at}"


@attrs.frozen
class PushRequest:
    """Push the files of `folder` that `allow` admits and `ignore` does not, plus the card.

    Everything lands in one commit on `repo.revision` (a branch, created from the default one
    when missing), so readers never see a half-pushed repository. `card` becomes README.md,
    replacing any README.md in the folder. `version_tag` is then moved to that commit.
    """

    repo: RepoRef
    folder: Path
    card: str
    commit_message: str
    allow: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    private: bool | None = None
    version_tag: str | None = None


@attrs.frozen
class PushResult:
    repo_id: str
    kind: RepoKind
    branch: str | None
    commit: str
    url: str
    files: int
    version_tag: str | None = None


@attrs.frozen
class Snapshot:
    """Files of a repo at one commit, on the local disk under `root` (maybe only some of them)."""

    repo: RepoRef
    root: Path
    commit: str | None


@attrs.frozen
class RecordedFile:
    """A file as the Hub records it at one commit: its size and the hashes the Hub keeps (the
    sha256 of an LFS file's content, the git blob id of any file's stored bytes)."""

    path: str
    size: int | None
    sha256: str | None = None
    # sha1 of b"blob <size>\0" + the bytes git stores: the content itself unless `sha256` is set
    # (an LFS file's git blob is its pointer, so then only the sha256 speaks of the content).
    git_sha1: str | None = None


@attrs.frozen
class RecordedFiles:
    """Every file of a repo at `commit`, by repo path, as the Hub records it."""

    repo: RepoRef
    commit: str | None
    files: dict[str, RecordedFile]


class Hub(Protocol):
    @property
    def offline(self) -> bool:
        """True when only the local cache may answer (e.g. `HF_HUB_OFFLINE=1`)."""
        ...

    def push(self, request: PushRequest) -> PushResult:
        """Create the repo if needed and push; raises `HubError`s naming the repo."""
        ...

    def download(
        self,
        repo: RepoRef,
        *,
        allow: Sequence[str] | None = None,
        ignore: Sequence[str] | None = None,
        local_dir: Path | None = None,
        force: bool = False,
    ) -> Snapshot:
        """Fetch the matching files of `repo` (all when `allow` is None) and say where they are.

        Files already in the cache are not fetched again, so calling again after an interruption
        resumes; `force` fetches them again all the same (what repairs a damaged copy). With
        `local_dir` the files are placed there instead of in the shared cache.
        """
        ...

    def home_root(self, repo_id: str) -> Path:
        """Where a dataset recorded or copied locally under this repo id lives, pulled or not."""
        ...

    def recorded_files(self, repo: RepoRef) -> RecordedFiles:
        """What the Hub records of each file of `repo` (size, hashes), at the commit the revision
        names: what a local copy must equal, byte for byte. Raises `HubError`s (offline:
        `HubNotCached`)."""
        ...


class DatasetLayout(Protocol):
    """Which repo files a dataset's episodes live in (a storage format's path rules)."""

    def metadata_patterns(self) -> tuple[str, ...]:
        """The files every reader needs whatever the episodes (e.g. `meta/`)."""
        ...

    def episode_files(
        self, meta: DatasetMeta, episodes: Sequence[int], *, videos: bool = True
    ) -> list[str]:
        """Repo paths of the data (and with `videos`, video) files of `episodes`, once each."""
        ...


@attrs.frozen
class DamagedFile:
    """A file of a local copy that cannot be loaded: its repo path and what is wrong with it.

    A path ending in `/` names a folder whose files cannot be told apart (fetch all of them)."""

    path: str
    problem: str


class DatasetIntegrity(Protocol):
    """Finds the files of a local dataset copy that cannot be loaded, and puts fixed ones in.

    The check is the quick one a reader can afford on every open (every file present, whole,
    of the right kind, with the rows its episodes need), not `rlctl dataset check`'s full read.
    """

    def damaged_files(self, root: Path, episodes: Sequence[int] | None = None) -> list[DamagedFile]:
        """The damaged files under `root`. While `meta/` cannot be read only its files are named
        (the data and video files are unknown until it is repaired); then the data and video
        files of `episodes` (None: every episode)."""
        ...

    def replace_files(self, root: Path, names: Sequence[str], source: Path) -> None:
        """Copy the files `names` from `source` (a fetched snapshot) over those under `root`,
        each one atomically, leaving every other file of `root` as it is."""
        ...

    def differing_files(
        self, root: Path, recorded: Sequence[RecordedFile], *, trust_cache: bool = True
    ) -> list[DamagedFile]:
        """The `recorded` files whose copy under `root` is missing or differs from what the Hub
        records (size, then hash: what no quick check sees, such as bytes flipped inside a
        file). Hashing reads every byte, so it is for pulls and for reads that failed;
        `trust_cache` reuses a hash taken earlier of a file that has not been touched since
        (same inode, size, modification and change times); without it every file is read."""
        ...


class HubError(RlctlError):
    """The Hub refused a request or could not be reached."""


class HubRepoNotFound(HubError):
    """No such repository, or a private one the user may not see."""


class HubAccessDenied(HubError):
    """Gated repo, missing or rejected token, or no write permission."""


class HubRevisionNotFound(HubError):
    """The repository exists but not the branch, tag or commit asked for."""


class HubNotCached(HubError):
    """Offline (or the Hub unreachable) and the local cache lacks what was asked for."""


class HubTransferInterrupted(HubError):
    """A transfer broke off; running the same command again resumes it."""
