"""huggingface_hub's exceptions, each turned into one `HubError` that names the repo and the fix.

Order matters: `GatedRepoError` is a `RepositoryNotFoundError`, `IncompleteSnapshotError` a
`LocalEntryNotFoundError`, and every `HfHubHTTPError` is also an `OSError` and an HTTP error.
Messages never include a token: none reaches them (huggingface_hub sends it in a header, and
neither its messages nor ours quote headers).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    IncompleteSnapshotError,
    LocalEntryNotFoundError,
    LocalTokenNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from rlctl.application.ports.hub import (
    HubAccessDenied,
    HubError,
    HubNotCached,
    HubRepoNotFound,
    HubRevisionNotFound,
    HubTransferInterrupted,
    RepoRef,
)
from rlctl.domain.errors import InvalidInput, RlctlError

LOGIN_HINT = "log in with `hf auth login` (or set HF_TOKEN to one of your access tokens)"
RESUME_HINT = (
    "run the same command again: files already transferred are kept and only the rest is sent"
)
# huggingface_hub's own wording for a file that arrived shorter or longer than announced.
_SIZE_MISMATCH = "Consistency check failed"
_MISSING = re.compile(r"(\d+) file\(s\) are missing \((.*?)\)\. ")


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0] if lines else text


def _status(error: HfHubHTTPError) -> int | None:
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


def repo_url(repo: RepoRef, endpoint: str | None) -> str:
    base = (endpoint or "https://huggingface.co").rstrip("/")
    prefix = "datasets/" if repo.kind == "dataset" else ""
    return f"{base}/{prefix}{repo.repo_id}"


def _pull_command(repo: RepoRef) -> str:
    group = "dataset" if repo.kind == "dataset" else "policy"
    return f"rlctl {group} pull {repo.repo_id}"


@contextmanager
def hub_errors(
    repo: RepoRef, *, action: str, endpoint: str | None = None, offline: bool = False
) -> Iterator[None]:
    """Run one Hub operation (`action`: "download", "push", …), translating what it raises."""
    try:
        yield
    except RlctlError:
        raise
    except Exception as error:
        translated = translate(error, repo, action=action, endpoint=endpoint, offline=offline)
        if translated is None:
            raise
        raise translated from error


def translate(
    error: BaseException,
    repo: RepoRef,
    *,
    action: str,
    endpoint: str | None = None,
    offline: bool = False,
) -> RlctlError | None:
    where = repo.describe()
    url = repo_url(repo, endpoint)
    if isinstance(error, GatedRepoError):
        return HubAccessDenied(
            "the repo is gated: its owner asks every user to accept its conditions first",
            where=where,
            hint=f"log in (`hf auth login` or HF_TOKEN), accept the conditions on {url}, "
            "then run the command again",
        )
    if isinstance(error, RepositoryNotFoundError):
        other = "model (rlctl policy …)" if repo.kind == "dataset" else "dataset (rlctl dataset …)"
        return HubRepoNotFound(
            f"no {repo.kind} repo {repo.repo_id!r} on the Hub, or it is private",
            where=where,
            hint=f"check the repo id (is it a {other}?); for a private repo, {LOGIN_HINT}",
        )
    if isinstance(error, RevisionNotFoundError):
        return HubRevisionNotFound(
            f"the repo has no branch, tag or commit named {repo.revision!r}",
            where=where,
            hint=f"pick a revision the repo has (see {url}/tree/main and its tags), or leave "
            "--revision out",
        )
    if isinstance(error, RemoteEntryNotFoundError):
        return HubError(
            f"a file is missing on the Hub: {_first_line(error)}",
            where=where,
            hint="the repo may have changed during the transfer; run the command again",
        )
    if isinstance(error, IncompleteSnapshotError | LocalEntryNotFoundError):
        return _not_cached(error, repo, endpoint=endpoint, offline=offline)
    if isinstance(error, HfHubHTTPError):
        return _http_error(error, repo, action=action)
    if isinstance(error, LocalTokenNotFoundError):
        return HubAccessDenied("you are not logged in to the Hub", where=where, hint=LOGIN_HINT)
    if isinstance(error, OfflineModeIsEnabled):
        return HubNotCached(
            f"cannot {action} in offline mode",
            where=where,
            hint="unset HF_HUB_OFFLINE (or set it to 0) to reach the Hub",
        )
    if isinstance(error, httpx2.TransportError) or _SIZE_MISMATCH in str(error):
        return HubTransferInterrupted(
            f"the {action} broke off: {_first_line(error)}", where=where, hint=RESUME_HINT
        )
    if isinstance(error, HFValidationError):
        return InvalidInput(_first_line(error), where=where)
    return None


def _not_cached(
    error: BaseException, repo: RepoRef, *, endpoint: str | None, offline: bool
) -> HubError:
    where = repo.describe()
    cause = error.__cause__
    missing = ""
    if isinstance(error, IncompleteSnapshotError):
        # "... is incomplete: 3 file(s) are missing (a, b, c). ..." — keep the count and names.
        found = _MISSING.search(str(error))
        missing = f" ({found.group(1)} file(s) missing: {found.group(2)})" if found else ""
    if offline or isinstance(cause, OfflineModeIsEnabled):
        return HubNotCached(
            f"not in the local cache{missing}; offline mode (HF_HUB_OFFLINE=1) forbids downloading",
            where=where,
            hint=f"connect and run `HF_HUB_OFFLINE=0 {_pull_command(repo)}` once; offline "
            "mode then reads it from the cache",
        )
    if isinstance(cause, HfHubHTTPError):
        # The Hub answered, but not with the files (5xx, 401 …): say what it answered.
        return _http_error(cause, repo, action="download")
    base = endpoint or "https://huggingface.co"
    return HubNotCached(
        f"cannot reach the Hub at {base} and the local cache lacks it{missing}",
        where=where,
        hint="check the network (and HF_ENDPOINT if set), then run the command again; "
        f"`{_pull_command(repo)}` fetches it ahead of time",
    )


def _http_error(error: HfHubHTTPError, repo: RepoRef, *, action: str) -> HubError:
    where = repo.describe()
    status = _status(error)
    if isinstance(error, RepositoryNotFoundError | RevisionNotFoundError):
        translated = translate(error, repo, action=action)
        if isinstance(translated, HubError):
            return translated
    if status == 401:
        return HubAccessDenied(
            "the Hub rejected your token (401 Unauthorized): it is invalid or expired",
            where=where,
            hint=LOGIN_HINT,
        )
    if status == 403:
        return HubAccessDenied(
            f"your token may not {action} {'to ' if action == 'push' else ''}this repo "
            "(403 Forbidden)",
            where=where,
            hint="use a token with write access to this namespace: `hf auth login`"
            if action == "push"
            else LOGIN_HINT,
        )
    if status is not None and (status == 429 or status >= 500):
        return HubTransferInterrupted(
            f"the Hub answered {status} during the {action}: {_first_line(error)}",
            where=where,
            hint="the Hub is busy or down; wait a little, then " + RESUME_HINT,
        )
    return HubError(f"the Hub refused the {action}: {_first_line(error)}", where=where)
