"""ConvertDataset: a LeRobot v2.1 (or v2.0) dataset rewritten in v3.0.

Episodes keep their order and numbering, data files and mp4s are packed many episodes per file
(videos joined without re-encoding), per-episode statistics move into meta/episodes and
stats.json becomes their aggregate, as LeRobot's `convert_dataset_v21_to_v30` does. Without an
output folder the dataset is converted in place and the original kept beside it
(`ROOT.v2.1`), as LeRobot keeps `ROOT_old`.
"""

from __future__ import annotations

import attrs

from rlctl.application.ports.dataset_tools import (
    DatasetFolders,
    DatasetRebuilder,
    EpisodeRef,
    LegacyDatasetReader,
)
from rlctl.application.ports.progress import Progress
from rlctl.application.use_cases.dataset_rebuild import (
    EditResult,
    build,
    build_in_place,
    require_new_output,
)
from rlctl.domain.errors import InvalidInput

# The v3.0 layout's defaults (LeRobot's DEFAULT_CHUNK_SIZE and file-size limits).
V3_CHUNKS_SIZE = 1000
V3_DATA_FILE_MB = 100
V3_VIDEO_FILE_MB = 200


@attrs.frozen
class ConvertResult:
    result: EditResult
    from_version: str
    # Where the original went when converting in place.
    original: str | None


class ConvertDataset:
    def __init__(
        self,
        legacy_reader: LegacyDatasetReader,
        rebuilder: DatasetRebuilder,
        folders: DatasetFolders,
        progress: Progress,
    ) -> None:
        self._legacy_reader = legacy_reader
        self._rebuilder = rebuilder
        self._folders = folders
        self._progress = progress

    def __call__(self, location: str, output: str | None = None) -> ConvertResult:
        legacy = self._legacy_reader.read_meta(location)
        template = attrs.evolve(
            legacy,
            chunks_size=V3_CHUNKS_SIZE,
            data_files_size_in_mb=V3_DATA_FILE_MB,
            video_files_size_in_mb=V3_VIDEO_FILE_MB,
        )
        refs = [EpisodeRef(location, i) for i in range(legacy.total_episodes)]
        if output is not None:
            require_new_output(self._folders, output, [location])
            result = build(
                self._rebuilder,
                self._progress,
                output=output,
                template=template,
                refs=refs,
                description="converting episodes",
            )
            return ConvertResult(result, legacy.codebase_version, None)
        original = f"{location.rstrip('/')}.{legacy.codebase_version}"
        if self._folders.exists(original):
            raise InvalidInput(
                "the place for the original dataset is taken",
                where=original,
                hint="move it away, or convert to a new folder with -o",
            )
        with self._folders.lock(location):
            result = build_in_place(
                self._rebuilder,
                self._folders,
                self._progress,
                location=location,
                template=template,
                refs=refs,
                keep_old_at=original,
                description="converting episodes",
            )
        return ConvertResult(result, legacy.codebase_version, original)
