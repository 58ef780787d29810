"""`resolve_location`: what `open_dataset` / `load_policy` call so users may type a repo id.

A path (existing, or not shaped like `namespace/name`) comes back as it is; a repo id comes back
as the local root of its files: `HF_LEROBOT_HOME/<repo_id>` for a dataset recorded or copied
there, else the cached snapshot, pulled first when the cache lacks it (offline: an error naming
what is missing). Either copy is checked first, and its damaged files fetched again. The use
cases hold the rules; this only wires the real adapters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.adapters.hub.integrity import LeRobotIntegrity
from rlctl.adapters.hub.layout import LeRobotLayout
from rlctl.application.ports.hub import Hub
from rlctl.application.use_cases.pull_dataset import PullDataset, ResolveDataset
from rlctl.application.use_cases.pull_policy import PullPolicy, ResolvePolicy


def dataset_resolver(hub: Hub | None = None) -> ResolveDataset:
    from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader

    hub = hub or HuggingFaceHub()
    pull = PullDataset(hub, LeRobotMetaReader(), LeRobotLayout(), LeRobotIntegrity())
    return ResolveDataset(hub, pull)


def policy_resolver(hub: Hub | None = None) -> ResolvePolicy:
    return ResolvePolicy(PullPolicy(hub or HuggingFaceHub()))


def resolve_location(
    repo_id_or_path: str | Path,
    *,
    kind: Literal["dataset", "model"] = "dataset",
    revision: str | None = None,
    episodes: str | tuple[int, ...] | None = None,
    hub: Hub | None = None,
) -> Path:
    if kind == "model":
        return policy_resolver(hub)(repo_id_or_path, revision=revision)
    return dataset_resolver(hub)(repo_id_or_path, revision=revision, episodes=episodes)
