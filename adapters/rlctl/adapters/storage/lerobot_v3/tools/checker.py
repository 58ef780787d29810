"""`DatasetChecker` for LeRobot v3.0 folders: `rlctl dataset check`.

Opening reads `meta/` and lists its problems; then each data and video file the episodes point
at is one unit of work, read whole and compared with the metadata. Files no episode points at are
reported as warnings (left over by an interrupted session, or by a copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from rlctl.adapters.storage.lerobot_v3.leftovers import leftovers_beside, leftovers_inside
from rlctl.adapters.storage.lerobot_v3.paths import (
    DATA_DIR,
    VIDEOS_DIR,
    episode_data_file,
    episode_video_file,
)
from rlctl.adapters.storage.lerobot_v3.tools.check_files import check_data_file, check_video_file
from rlctl.adapters.storage.lerobot_v3.tools.check_meta import check_meta
from rlctl.adapters.storage.lerobot_v3.tools.findings import Findings
from rlctl.application.ports.dataset_tools import DatasetProblem
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import DatasetError


@attrs.frozen
class _Unit:
    path: Path
    video_key: str | None
    episodes: tuple[EpisodeRecord, ...]


class LeRobotDatasetCheck:
    def __init__(self, root: Path) -> None:
        self._root = root
        self._findings = Findings(root)
        self._units: dict[str, _Unit] = {}
        self._meta: DatasetMeta | None = None
        if not root.is_dir():
            self._findings.add(
                "no dataset folder here",
                file=str(root),
                hint="give the dataset's root folder (the one holding meta/ and data/)",
            )
        else:
            self._meta = check_meta(root, self._findings)
            if self._meta is not None:
                self._plan(self._meta)
        self._opening = self._findings.take()

    @property
    def opening_problems(self) -> Sequence[DatasetProblem]:
        return self._opening

    @property
    def units(self) -> Sequence[str]:
        return list(self._units)

    def check(self, unit: str) -> list[DatasetProblem]:
        assert self._meta is not None
        work = self._units[unit]
        if work.video_key is None:
            check_data_file(work.path, self._meta, work.episodes, self._findings)
        else:
            check_video_file(work.path, work.video_key, self._meta, work.episodes, self._findings)
        return self._findings.take()

    def _plan(self, meta: DatasetMeta) -> None:
        grouped: dict[tuple[Path, str | None], list[EpisodeRecord]] = {}
        for episode in meta.episodes:
            try:
                grouped.setdefault((episode_data_file(meta, episode), None), []).append(episode)
                for video_key in meta.video_keys:
                    path = episode_video_file(meta, episode, video_key)
                    grouped.setdefault((path, video_key), []).append(episode)
            except DatasetError as err:
                self._findings.add(err.message, file=err.where, episode=episode.index)
        for (path, key), episodes in sorted(grouped.items(), key=lambda item: str(item[0][0])):
            self._units[str(path)] = _Unit(self._root / path, key, tuple(episodes))
        self._report_strays()

    def _report_strays(self) -> None:
        for path in [*leftovers_inside(self._root), *leftovers_beside(self._root)]:
            self._findings.warning(
                "left over by an interrupted write or edit (or one still running)",
                file=path,
                kind="leftovers",
                hint="`rlctl dataset check --fix` removes what no running writer holds",
            )
        known = {unit.path for unit in self._units.values()}
        for folder, pattern in ((DATA_DIR, "*.parquet"), (VIDEOS_DIR, "*.mp4")):
            for path in sorted((self._root / folder).rglob(pattern)):
                if path not in known:
                    self._findings.warning(
                        "no episode points at this file (left over, or an interrupted write)",
                        file=path,
                        kind="unreferenced files",
                    )


class LeRobotDatasetChecker:
    def open(self, location: str | Path) -> LeRobotDatasetCheck:
        return LeRobotDatasetCheck(Path(location).expanduser())
