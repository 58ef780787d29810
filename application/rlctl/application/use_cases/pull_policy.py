"""PullPolicy: fetch a policy checkpoint from the Hub into the cache LeRobot's loader reads.

Only the files a loader needs are fetched (the allow-list LeRobot pushes with), at the default
branch unless a revision is given. What is already cached is not fetched again; offline, the
cache alone answers. `ResolvePolicy` lets `load_policy` take a folder or a repo id.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import structlog

from rlctl.application.ports.hub import Hub, RepoRef, check_repo_id, is_repo_id
from rlctl.application.use_cases.push_policy import CONFIG_NAME, POLICY_FILES, checkpoint_dir
from rlctl.domain.errors import InvalidInput

log = structlog.get_logger(__name__)


@attrs.frozen
class PullPolicyRequest:
    repo_id: str
    revision: str | None = None
    local_dir: str | None = None
    # Only config.json (what `rlctl train --policy.path` reads before it starts), no weights.
    config_only: bool = False


@attrs.frozen
class PulledPolicy:
    repo_id: str
    revision: str | None
    commit: str | None
    root: Path


class PullPolicy:
    def __init__(self, hub: Hub) -> None:
        self._hub = hub

    def __call__(self, request: PullPolicyRequest) -> PulledPolicy:
        check_repo_id(request.repo_id, where="repo id")
        repo = RepoRef(request.repo_id, "model", request.revision)
        local_dir = Path(request.local_dir).expanduser() if request.local_dir else None
        allow = (CONFIG_NAME,) if request.config_only else POLICY_FILES
        snapshot = self._hub.download(repo, allow=allow, local_dir=local_dir)
        if not (snapshot.root / CONFIG_NAME).is_file():
            raise InvalidInput(
                "the repo has no config.json: it is not a LeRobot policy checkpoint",
                where=repo.describe(),
                hint="check the repo id; policies pushed by LeRobot or rlctl hold config.json "
                "and model.safetensors at the top",
            )
        log.info(
            "policy pulled", repo=repo.describe(), commit=snapshot.commit, root=str(snapshot.root)
        )
        return PulledPolicy(repo.repo_id, request.revision, snapshot.commit, snapshot.root)


class ResolvePolicy:
    """A checkpoint folder stays a folder; a repo id becomes its pulled (or cached) copy."""

    def __init__(self, pull: PullPolicy) -> None:
        self._pull = pull

    def __call__(
        self, location: str | Path, *, revision: str | None = None, config_only: bool = False
    ) -> Path:
        """`config_only`: of a repo, fetch config.json alone (the weights come later)."""
        path = Path(location).expanduser()
        if path.exists() or not is_repo_id(str(location)):
            return checkpoint_dir(path) if path.is_dir() else path
        request = PullPolicyRequest(str(location), revision=revision, config_only=config_only)
        return self._pull(request).root
