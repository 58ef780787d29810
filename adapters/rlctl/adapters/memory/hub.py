"""A Hub in RAM: repos as dicts of bytes, downloads copied into a folder. For tests, dry runs.

It keeps the rules that matter to the use cases: one commit per push, branches and tags, errors
for a missing repo or revision, files fetched only once, and an offline switch under which
only what was already fetched is served.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Sequence
from pathlib import Path

import attrs

from rlctl.adapters.storage.shareable import folder_files, refuse_outside
from rlctl.application.ports.hub import (
    HubNotCached,
    HubRepoNotFound,
    HubRevisionNotFound,
    PushRequest,
    PushResult,
    RecordedFile,
    RecordedFiles,
    RepoRef,
    Snapshot,
)

DEFAULT_BRANCH = "main"
LFS_SUFFIXES = (".parquet", ".mp4")


def recorded_file(name: str, content: bytes) -> RecordedFile:
    """What the Hub records of a file: LFS files (parquet, mp4, as LeRobot's .gitattributes
    says) by the sha256 of their content, the others by their git blob id."""
    if name.endswith(LFS_SUFFIXES):
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{_sha256(content)}\n"
        return RecordedFile(name, len(content), _sha256(content), _git_sha1(pointer.encode()))
    return RecordedFile(name, len(content), None, _git_sha1(content))


def _sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _git_sha1(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def _match(path: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, p + "*" if p.endswith("/") else p) for p in patterns)


@attrs.define
class MemoryRepo:
    private: bool = False
    commits: dict[str, dict[str, bytes]] = attrs.field(factory=dict)
    branches: dict[str, str] = attrs.field(factory=dict)
    tags: dict[str, str] = attrs.field(factory=dict)

    def resolve(self, revision: str | None) -> str | None:
        name = revision or DEFAULT_BRANCH
        if name in self.commits:
            return name
        return self.branches.get(name) or self.tags.get(name)


class InMemoryHub:
    def __init__(self, workdir: Path, *, offline: bool = False) -> None:
        self.workdir = Path(workdir)
        self.offline = offline
        self.repos: dict[tuple[str, str], MemoryRepo] = {}
        # Every (repo, commit, path) fetched, to check what a pull transferred.
        self.fetched: list[tuple[str, str, str]] = []

    def home_root(self, repo_id: str) -> Path:
        return self.workdir / "home" / repo_id

    def push(self, request: PushRequest) -> PushResult:
        repo_ref = request.repo
        # The same selection as the real Hub's, made before anything is created: the folder's
        # own files, never a writer's leftovers nor what a link leads to outside the folder.
        found = folder_files(request.folder)
        selected = []
        for name in sorted([*found.files, *found.outside]):
            if name == "README.md":
                continue
            if request.allow is not None and not _match(name, request.allow):
                continue
            if _match(name, request.ignore):
                continue
            selected.append(name)
        refuse_outside(selected, found, request.folder, request.allow)
        repo = self.repos.setdefault(
            (repo_ref.kind, repo_ref.repo_id), MemoryRepo(private=bool(request.private))
        )
        branch = repo_ref.revision or DEFAULT_BRANCH
        parent = repo.branches.get(branch) or repo.branches.get(DEFAULT_BRANCH)
        files = dict(repo.commits.get(parent, {})) if parent else {}
        for name in selected:
            files[name] = (request.folder / name).read_bytes()
        files["README.md"] = request.card.encode()
        digest = hashlib.sha1(repr(sorted(files.items())).encode() + str(parent).encode())
        commit = digest.hexdigest()
        repo.commits[commit] = files
        repo.branches[branch] = commit
        if request.version_tag:
            repo.tags[request.version_tag] = commit
        return PushResult(
            repo_id=repo_ref.repo_id,
            kind=repo_ref.kind,
            branch=repo_ref.revision,
            commit=commit,
            url=f"memory://{repo_ref.kind}s/{repo_ref.repo_id}",
            files=len(files),
            version_tag=request.version_tag,
        )

    def download(
        self,
        repo: RepoRef,
        *,
        allow: Sequence[str] | None = None,
        ignore: Sequence[str] | None = None,
        local_dir: Path | None = None,
        force: bool = False,
    ) -> Snapshot:
        commit = self._commit(repo)
        root = local_dir or self.workdir / "cache" / repo.kind / repo.repo_id / commit
        files = self.repos[(repo.kind, repo.repo_id)].commits[commit] if not self.offline else {}
        for name, content in files.items():
            if allow is not None and not _match(name, allow):
                continue
            if ignore and _match(name, ignore):
                continue
            target = root / name
            if target.is_file() and not force:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            self.fetched.append((repo.repo_id, commit, name))
        if self.offline and not root.is_dir():
            raise HubNotCached("not in the local cache (offline)", where=repo.describe())
        return Snapshot(repo=repo, root=root, commit=commit)

    def recorded_files(self, repo: RepoRef) -> RecordedFiles:
        if self.offline:
            raise HubNotCached("cannot list the Hub's files offline", where=repo.describe())
        commit = self._commit(repo)
        files = self.repos[(repo.kind, repo.repo_id)].commits[commit]
        return RecordedFiles(
            repo=repo,
            commit=commit,
            files={name: recorded_file(name, content) for name, content in files.items()},
        )

    def _commit(self, repo: RepoRef) -> str:
        if self.offline:
            # Offline, a revision resolves only to what was fetched before.
            cached = self.workdir / "cache" / repo.kind / repo.repo_id
            known = self.repos.get((repo.kind, repo.repo_id))
            commit = known.resolve(repo.revision) if known else None
            if commit is None or not (cached / commit).is_dir():
                raise HubNotCached("not in the local cache (offline)", where=repo.describe())
            return commit
        known = self.repos.get((repo.kind, repo.repo_id))
        if known is None:
            raise HubRepoNotFound(f"no {repo.kind} repo {repo.repo_id!r}", where=repo.describe())
        commit = known.resolve(repo.revision)
        if commit is None:
            raise HubRevisionNotFound(f"no revision {repo.revision!r}", where=repo.describe())
        return commit
