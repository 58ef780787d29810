"""Packing encoded episodes into `videos/<key>/chunk-XXX/file-YYY.mp4`, many episodes per file.

An episode goes to the end of the camera's current file (joined without re-encoding into a
temporary file that then replaces it), or starts the next file when the current one would pass
`video_files_size_in_mb` (LeRobot's rule). Frames already in a file never move, so the spans
recorded for earlier episodes stay valid whatever happens to the file later.
"""

from __future__ import annotations

from pathlib import Path

from rlctl.adapters.storage.lerobot_v3.atomic_files import fsync_dir, publish, temp_path_for
from rlctl.adapters.storage.lerobot_v3.meta_writer import VideoPlacement, next_file
from rlctl.adapters.storage.lerobot_v3.video_worker import EncodedEpisode
from rlctl.application.ports.video import VideoEncoder


class VideoFileAppender:
    """One camera's video files: where the next episode goes, and putting it there."""

    def __init__(
        self,
        root: Path,
        path_template: str,
        video_key: str,
        encoder: VideoEncoder,
        *,
        chunks_size: int,
        max_file_mb: float,
        last_file: tuple[int, int] | None = None,
        durable: bool = True,
    ) -> None:
        self._root = root
        self._template = path_template
        self._key = video_key
        self._encoder = encoder
        self._chunks_size = chunks_size
        self._max_file_bytes = max_file_mb * 1024 * 1024
        self._durable = durable
        self._last_file = last_file
        self._current: tuple[int, int] | None = None

    def path(self, chunk_index: int, file_index: int) -> Path:
        return self._root / self._template.format(
            video_key=self._key, chunk_index=chunk_index, file_index=file_index
        )

    def append(self, episode: EncodedEpisode) -> VideoPlacement:
        """Move or join `episode.path` into the camera's files; the temporary file is consumed."""
        if self._current is not None:
            current = self.path(*self._current)
            if current.stat().st_size + episode.path.stat().st_size < self._max_file_bytes:
                return self._join(current, episode)
            self._last_file = self._current
        target = (
            (0, 0) if self._last_file is None else next_file(*self._last_file, self._chunks_size)
        )
        destination = self.path(*target)
        destination.parent.mkdir(parents=True, exist_ok=True)
        publish(episode.path, destination, self._durable)
        self._current = target
        return VideoPlacement(*target, from_timestamp=0.0, to_timestamp=episode.stream.duration_s)

    def _join(self, current: Path, episode: EncodedEpisode) -> VideoPlacement:
        assert self._current is not None
        joined = temp_path_for(current)
        try:
            segments = self._encoder.concatenate([current, episode.path], joined)
            publish(joined, current, self._durable)
        finally:
            joined.unlink(missing_ok=True)
        episode.path.unlink(missing_ok=True)
        if self._durable:
            fsync_dir(episode.path.parent)
        span = segments[-1]
        return VideoPlacement(
            *self._current, from_timestamp=span.from_timestamp, to_timestamp=span.to_timestamp
        )
