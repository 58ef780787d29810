"""What every LeRobot format version shares, so that no version's package imports another's.

The rebuilder (merge, split, delete-episodes, convert) copies episodes out of datasets of any
version. Each version's reader (`lerobot_v3.tools.sources.V3Source`,
`lerobot_v21.source.V21Source`) hands out the same `SourceEpisode`s, defined here; `open_source`
picks the reader by the dataset's major version, naming each by import path as the container
names adapters, so the v3 package never imports the v2.1 one (v2.1 builds on v3's file helpers,
one way only).
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import attrs
import pyarrow as pa

from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import CorruptDataset, DatasetNotFound
from rlctl.domain.statistics import FeatureStats

INFO_PATH = "meta/info.json"
MAX_INFO_BYTES = 16 * 2**20
_VERSION = re.compile(r"^v?(\d{1,4})\.(\d{1,4})")
# The reader of each major format version, "module:Class" taking the dataset root.
SOURCE_READERS = {
    2: "rlctl.adapters.storage.lerobot_v21.source:V21Source",
    3: "rlctl.adapters.storage.lerobot_v3.tools.sources:V3Source",
}
_NEWEST = max(SOURCE_READERS)


@attrs.frozen
class VideoSpan:
    """Where an episode's frames of one camera are: a file and a span of it, in seconds."""

    path: Path
    from_timestamp: float
    to_timestamp: float

    @property
    def duration(self) -> float:
        return self.to_timestamp - self.from_timestamp


@attrs.frozen
class SourceEpisode:
    index: int
    length: int
    tasks: tuple[str, ...]
    # Per-feature statistics as stored (features without them are absent).
    stats: Mapping[str, FeatureStats]
    videos: Mapping[str, VideoSpan]
    data_file: Path


class EpisodeSource(Protocol):
    """A dataset whose episodes can be copied: its metadata, each episode and its rows."""

    @property
    def root(self) -> Path: ...

    @property
    def meta(self) -> DatasetMeta: ...

    def episode(self, index: int) -> SourceEpisode: ...

    def rows(self, index: int) -> pa.Table:
        """The data rows of one episode, in frame order, with the source's columns and types."""
        ...


def dataset_root(location: str | Path) -> Path:
    root = Path(location).expanduser()
    if not root.is_dir():
        raise DatasetNotFound(
            "no dataset folder here",
            where=str(root),
            hint="give the dataset's root folder (the one holding meta/ and data/)",
        )
    return root


def _shown(value: object) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else f"a JSON {type(value).__name__}"
    return text if len(text) <= 60 else text[:60] + f"... ({len(text)} characters)"


def parse_version(version: object, where: str) -> tuple[int, int]:
    """(major, minor) of a `codebase_version` like 'v3.0'."""
    match = _VERSION.match(version) if isinstance(version, str) else None
    if match is None or len(version) > 64:  # type: ignore[arg-type]
        raise CorruptDataset(
            f"codebase_version {_shown(version)} is not a version like 'v3.0'",
            where=where,
            hint="set codebase_version to the LeRobot format version of the files, e.g. 'v3.0'",
        )
    return int(match.group(1)), int(match.group(2))


def codebase_major(root: Path) -> int | None:
    """The major format version info.json names; None when it cannot be told (the reader of
    the newest version then says what is wrong with the file)."""
    path = root / INFO_PATH
    try:
        # Only a regular file of sane size: a FIFO or a link to /dev/zero would never end (the
        # reader of the newest version then names what the file is).
        if not path.is_file() or path.stat().st_size > MAX_INFO_BYTES:
            return None
        info = json.loads(path.read_text(encoding="utf-8"))
        return parse_version(info["codebase_version"], INFO_PATH)[0]
    except (OSError, ValueError, KeyError, TypeError, CorruptDataset):
        return None


def open_source(location: str | Path) -> EpisodeSource:
    root = dataset_root(location)
    major = codebase_major(root)
    module, _, name = SOURCE_READERS.get(major or _NEWEST, SOURCE_READERS[_NEWEST]).partition(":")
    reader = getattr(importlib.import_module(module), name)
    return reader(root)
