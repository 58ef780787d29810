"""`Hub` over huggingface_hub: one commit per push, snapshot downloads into LeRobot's cache.

Downloads go through `snapshot_download`, into the same cache folders LeRobot 0.6.1 uses
(`HF_LEROBOT_HOME/hub` for datasets, `HF_HUB_CACHE` for models), so either tool reuses what the
other fetched: a file already there is not fetched again, which is also what makes an
interrupted pull resumable. huggingface_hub retries a dropped connection mid-file itself, from
the byte it reached. Offline, `local_files_only` makes the cache the only source.

Tokens are huggingface_hub's business (`hf auth login`, `HF_TOKEN`): nothing here reads, passes
or logs one.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import structlog
from huggingface_hub import CommitOperationAdd, HfApi, RepoFile, snapshot_download
from huggingface_hub.errors import RevisionNotFoundError
from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS, filter_repo_objects

from rlctl.adapters.hub.errors import hub_errors, repo_url
from rlctl.adapters.hub.settings import HubSettings
from rlctl.adapters.storage.dataset_lock import LOCK_NAME, writing
from rlctl.adapters.storage.shareable import folder_files, refuse_outside
from rlctl.application.ports.hub import (
    HubNotCached,
    PushRequest,
    PushResult,
    RecordedFile,
    RecordedFiles,
    RepoRef,
    Snapshot,
)
from rlctl.domain.errors import InvalidInput

log = structlog.get_logger(__name__)

CARD_NAME = "README.md"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")

# huggingface_hub's HTTP client logs every request at INFO: hundreds of lines per pull on a
# terminal. Quiet it unless someone chose its level.
for _name in ("httpx2", "httpx"):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.WARNING)


def _library_version() -> str:
    try:
        return version("rlctl-adapters")
    except PackageNotFoundError:
        return "0+unknown"


class HuggingFaceHub:
    def __init__(self, settings: HubSettings | None = None) -> None:
        self._settings = settings or HubSettings.from_environment()

    @property
    def settings(self) -> HubSettings:
        return self._settings

    @property
    def offline(self) -> bool:
        return self._settings.offline

    def home_root(self, repo_id: str) -> Path:
        return self._settings.lerobot_home / repo_id

    def _api(self) -> HfApi:
        return HfApi(
            endpoint=self._settings.endpoint,
            library_name="rlctl",
            library_version=_library_version(),
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
        settings = self._settings
        log.debug(
            "hub download",
            repo=repo.describe(),
            patterns=None if allow is None else len(allow),
            offline=settings.offline,
            force=force,
        )
        # A folder being filled is being written: one writer at a time (the cache locks itself).
        folder_lock = writing(local_dir) if local_dir is not None else contextlib.nullcontext()
        with (
            folder_lock,
            hub_errors(
                repo, action="download", endpoint=settings.endpoint, offline=settings.offline
            ),
        ):
            path = snapshot_download(
                repo.repo_id,
                repo_type=repo.kind,
                revision=repo.revision,
                endpoint=settings.endpoint,
                cache_dir=settings.cache_for(repo.kind),
                local_dir=local_dir,
                allow_patterns=list(allow) if allow is not None else None,
                ignore_patterns=list(ignore) if ignore else None,
                local_files_only=settings.offline,
                force_download=force,
                max_workers=settings.max_workers,
                library_name="rlctl",
                library_version=_library_version(),
            )
        root = Path(path)
        commit = root.name if local_dir is None and _COMMIT.match(root.name) else None
        return Snapshot(repo=repo, root=root, commit=commit or _local_dir_commit(root))

    def recorded_files(self, repo: RepoRef) -> RecordedFiles:
        settings = self._settings
        if settings.offline:
            raise HubNotCached(
                "cannot compare the local copy with the Hub in offline mode",
                where=repo.describe(),
                hint="unset HF_HUB_OFFLINE (or set it to 0) to reach the Hub",
            )
        api = self._api()
        with hub_errors(repo, action="list the files of", endpoint=settings.endpoint):
            revision = repo.revision
            commit = revision if revision and _COMMIT.match(revision) else None
            if commit is None:
                commit = api.repo_info(repo.repo_id, repo_type=repo.kind, revision=revision).sha
            files = {
                entry.path: RecordedFile(
                    path=entry.path,
                    size=entry.size,
                    sha256=entry.lfs.sha256 if entry.lfs is not None else None,
                    git_sha1=entry.blob_id,
                )
                for entry in api.list_repo_tree(
                    repo.repo_id, recursive=True, revision=commit, repo_type=repo.kind
                )
                if isinstance(entry, RepoFile)
            }
        log.debug("hub listing", repo=repo.describe(), commit=commit, files=len(files))
        return RecordedFiles(repo=repo, commit=commit, files=files)

    def push(self, request: PushRequest) -> PushResult:
        repo = request.repo
        files = files_to_push(request)
        if not files:
            raise InvalidInput(
                "nothing to push: no file of the folder is selected",
                where=str(request.folder),
                hint="check the folder; rlctl pushes a dataset root or a pretrained_model folder",
            )
        api = self._api()
        branch = repo.revision
        with hub_errors(repo, action="push", endpoint=self._settings.endpoint):
            # Create only when missing: a member of an organisation may write to its repos
            # without the right to create one (the Hub answers 403 to create_repo then).
            if not api.repo_exists(repo.repo_id, repo_type=repo.kind):
                api.create_repo(
                    repo.repo_id, repo_type=repo.kind, private=request.private, exist_ok=True
                )
            if branch:
                api.create_branch(repo.repo_id, branch=branch, repo_type=repo.kind, exist_ok=True)
            operations = [
                CommitOperationAdd(path_in_repo=name, path_or_fileobj=request.folder / name)
                for name in files
            ]
            operations.append(
                CommitOperationAdd(path_in_repo=CARD_NAME, path_or_fileobj=request.card.encode())
            )
            info = api.create_commit(
                repo.repo_id,
                operations,
                commit_message=request.commit_message,
                repo_type=repo.kind,
                revision=branch,
            )
            if request.version_tag:
                # Move the tag: readers that pull it by default must see this push.
                with contextlib.suppress(RevisionNotFoundError):
                    api.delete_tag(repo.repo_id, tag=request.version_tag, repo_type=repo.kind)
                api.create_tag(
                    repo.repo_id, tag=request.version_tag, revision=info.oid, repo_type=repo.kind
                )
        url = repo_url(repo, self._settings.endpoint)
        return PushResult(
            repo_id=repo.repo_id,
            kind=repo.kind,
            branch=branch,
            commit=info.oid,
            url=f"{url}/tree/{branch}" if branch else url,
            files=len(operations),
            version_tag=request.version_tag,
        )


def files_to_push(request: PushRequest) -> list[str]:
    """Repo paths of the folder's files that the request selects; the card is sent apart."""
    folder = request.folder
    if not folder.is_dir():
        raise InvalidInput("no such folder", where=str(folder))
    # The folder's own files: no lock, journal, staging or temporary file of a writer (one
    # killed midway leaves them), nothing a link leads to outside the folder.
    found = folder_files(folder)
    names = sorted([*found.files, *found.outside])
    ignore = [*request.ignore, *DEFAULT_IGNORE_PATTERNS, CARD_NAME, LOCK_NAME]
    allow = list(request.allow) if request.allow is not None else None
    selected = list(filter_repo_objects(names, allow_patterns=allow, ignore_patterns=ignore))
    refuse_outside(selected, found, folder, request.allow)
    return selected


def _local_dir_commit(root: Path) -> str | None:
    """The commit of the newest file huggingface_hub placed in a `local_dir` download."""
    records = root / ".cache" / "huggingface" / "download"
    newest = max(records.rglob("*.metadata"), key=lambda p: p.stat().st_mtime, default=None)
    if newest is None:
        return None
    with contextlib.suppress(OSError, IndexError):
        first = newest.read_text(encoding="utf-8").splitlines()[0].strip()
        return first if _COMMIT.match(first) else None
    return None
