"""PushDataset: publish a local LeRobot v3.0 dataset on the Hub, as LeRobot's `push_to_hub` does.

The policy of the work:
- Only a dataset that reads back is pushed: its metadata must parse, and every data and video
  file `meta/episodes` names must be there. A broken dataset on the Hub breaks every reader.
- One commit holds the files and the card (README.md, written from the metadata), so nobody
  sees files without their card or half a dataset.
- Only the dataset's own files are pushed: `meta/` and the data and video files `meta/episodes`
  names. Not what else the folder holds (notes, other folders, a dataset split into a
  subfolder, leftovers of killed writers, LeRobot's temporary `images/`, huggingface_hub's
  `.cache/`), and never what a symbolic link leads to outside the folder (refused, naming the
  link). Videos can be left out (`videos=False`), as LeRobot's `push_videos=False`.
- The codebase-version tag (`v3.0`) is moved to the new commit: LeRobot pulls that tag by
  default, so this is what makes the push visible to it.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import structlog

from rlctl.application.hub_cards import DEFAULT_LICENSE, dataset_card
from rlctl.application.ports.dataset import DatasetMetaReader
from rlctl.application.ports.hub import (
    DatasetLayout,
    Hub,
    HubError,
    PushRequest,
    PushResult,
    RepoRef,
    check_repo_id,
)
from rlctl.domain.errors import CorruptDataset, InvalidInput

log = structlog.get_logger(__name__)

PUSH_IGNORE = (
    "images/",
    ".cache/",
    "*.incomplete",
    "*.tmp",
    "*.lock",
    "*.DS_Store",
)


@attrs.frozen
class PushDatasetRequest:
    root: str
    repo_id: str
    private: bool | None = None
    # None: the default branch; a name: that branch, created from the default one if missing.
    branch: str | None = None
    # Card tags (shown on the Hub page), not git tags.
    tags: tuple[str, ...] = ()
    license: str | None = DEFAULT_LICENSE
    videos: bool = True
    tag_version: bool = True


def refuse_offline(hub: Hub, what: str) -> None:
    if hub.offline:
        raise HubError(
            f"cannot push {what} in offline mode",
            where="HF_HUB_OFFLINE",
            hint="unset HF_HUB_OFFLINE (or set it to 0) to reach the Hub",
        )


class PushDataset:
    def __init__(self, hub: Hub, meta_reader: DatasetMetaReader, layout: DatasetLayout) -> None:
        self._hub = hub
        self._meta_reader = meta_reader
        self._layout = layout

    def __call__(self, request: PushDatasetRequest) -> PushResult:
        check_repo_id(request.repo_id)
        refuse_offline(self._hub, f"dataset {request.repo_id}")
        root = Path(request.root).expanduser()
        meta = self._meta_reader.read_meta(str(root))
        every = range(meta.total_episodes)
        needed = self._layout.episode_files(meta, every)
        missing = [f for f in needed if not (root / f).is_file()]
        if missing:
            raise CorruptDataset(
                f"{len(missing)} file(s) that meta/episodes names are missing: "
                + ", ".join(missing[:3])
                + (" …" if len(missing) > 3 else ""),
                where=str(root),
                hint=f"the dataset is incomplete; run `rlctl dataset check {root}` and repair it "
                "before pushing",
            )
        outside = [f for f in needed if not _inside(root, f)]
        if outside:
            raise InvalidInput(
                f"{len(outside)} file(s) of the dataset lead out of its folder through a "
                f"symbolic link: " + ", ".join(outside[:3]) + (" …" if len(outside) > 3 else ""),
                where=str(root),
                hint="rlctl pushes only the folder's own files: copy the files into the folder "
                "in place of the links, then push again",
            )
        own = needed if request.videos else self._layout.episode_files(meta, every, videos=False)
        allow = (*self._layout.metadata_patterns(), *own)
        card = dataset_card(meta, request.repo_id, tags=request.tags, license=request.license)
        result = self._hub.push(
            PushRequest(
                repo=RepoRef(request.repo_id, "dataset", request.branch),
                folder=root,
                card=card,
                commit_message=f"Upload dataset: {meta.total_episodes} episodes, "
                f"{meta.total_frames} frames ({meta.codebase_version}, rlctl)",
                allow=allow,
                ignore=PUSH_IGNORE,
                private=request.private,
                version_tag=meta.codebase_version if request.tag_version else None,
            )
        )
        log.info(
            "dataset pushed",
            repo_id=result.repo_id,
            branch=result.branch,
            commit=result.commit,
            url=result.url,
            files=result.files,
        )
        return result


def _inside(root: Path, name: str) -> bool:
    """True when `root/name` is in the folder once links are followed."""
    return (root / name).resolve().is_relative_to(root.resolve())
