"""Packing a new dataset's episodes into files: data parquet files and per-camera mp4 files.

Both follow LeRobot's rule: an episode starts a new file when adding it would take the current
one past the size limit (`data_files_size_in_mb`, `video_files_size_in_mb`), and a chunk folder
holds at most `chunks_size` files. The output is a fresh folder whose info.json is written last,
so files are written in place, without temporary names.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rlctl.adapters.storage.episode_source import VideoSpan
from rlctl.adapters.storage.lerobot_v3.meta_writer import VideoPlacement, next_file
from rlctl.adapters.storage.lerobot_v3.paths import DEFAULT_DATA_PATH, DEFAULT_VIDEO_PATH
from rlctl.adapters.storage.lerobot_v3.tools.video_spans import (
    Piece,
    StreamParams,
    VideoFacts,
    copy_spans,
)

_MB = 1024 * 1024


class DataPacker:
    """Streams episode tables into data files, one row group per episode (as LeRobot writes)."""

    def __init__(
        self,
        root: Path,
        schema: pa.Schema,
        *,
        chunks_size: int,
        max_file_mb: float,
        dictionary_columns: list[str],
    ) -> None:
        self._root = root
        self._schema = schema
        self._chunks_size = chunks_size
        self._max_bytes = max_file_mb * _MB
        self._dictionary_columns = dictionary_columns
        self._position: tuple[int, int] | None = None
        self._sink: pa.OSFile | None = None
        self._writer: pq.ParquetWriter | None = None
        self._rows = 0

    def add(self, table: pa.Table) -> tuple[int, int]:
        if self._writer is not None and self._sink is not None:
            written = self._sink.tell()
            per_row = written / self._rows if self._rows else 0
            if written + per_row * table.num_rows >= self._max_bytes:
                self._close_file()
        if self._writer is None:
            self._open_file()
        assert self._writer is not None and self._position is not None
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self._rows += table.num_rows
        return self._position

    def _open_file(self) -> None:
        self._position = (
            (0, 0) if self._position is None else next_file(*self._position, self._chunks_size)
        )
        chunk, file = self._position
        path = self._root / DEFAULT_DATA_PATH.format(chunk_index=chunk, file_index=file)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._sink = pa.OSFile(str(path), "wb")
        self._writer = pq.ParquetWriter(
            self._sink,
            self._schema,
            compression="snappy",
            use_dictionary=self._dictionary_columns,
        )
        self._rows = 0

    def _close_file(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._sink is not None:
            self._sink.close()
        self._writer, self._sink = None, None

    def close(self) -> None:
        self._close_file()


class VideoPacker:
    """One camera's output files: spans are placed at once and copied when a file is full.

    A file only holds spans whose streams match (codec, size, pixel format, codec headers): a
    span that differs starts a new file, so nothing is ever re-encoded to fit.
    """

    def __init__(
        self,
        root: Path,
        key: str,
        fps: int,
        *,
        chunks_size: int,
        max_file_mb: float,
        facts: Callable[[Path], VideoFacts],
    ) -> None:
        self._root = root
        self._key = key
        self._fps = fps
        self._chunks_size = chunks_size
        self._max_bytes = max_file_mb * _MB
        self._facts = facts
        self._position: tuple[int, int] | None = None
        self._pieces: list[Piece] = []
        self._params: StreamParams | None = None
        self._bytes = 0.0
        self._duration = 0.0

    def add(self, span: VideoSpan, frames: int) -> VideoPlacement:
        facts = self._facts(span.path)
        # The span's share of its file's bytes: enough to decide when a file is full.
        estimate = facts.size_bytes * (span.duration / facts.duration_s if facts.duration_s else 1)
        if self._pieces and (
            facts.params != self._params or self._bytes + estimate >= self._max_bytes
        ):
            self._flush()
        if not self._pieces:
            self._position = (
                (0, 0) if self._position is None else next_file(*self._position, self._chunks_size)
            )
            self._params, self._bytes, self._duration = facts.params, 0.0, 0.0
        assert self._position is not None
        start = self._duration
        self._pieces.append(Piece(span, start, frames))
        self._bytes += estimate
        self._duration = start + span.duration
        return VideoPlacement(*self._position, from_timestamp=start, to_timestamp=self._duration)

    def _flush(self) -> None:
        if not self._pieces:
            return
        assert self._position is not None
        chunk, file = self._position
        path = self._root / DEFAULT_VIDEO_PATH.format(
            video_key=self._key, chunk_index=chunk, file_index=file
        )
        copy_spans(self._pieces, path, self._fps)
        self._pieces = []

    @property
    def pending(self) -> set[Path]:
        """Source files of the spans not yet copied into the output."""
        return {piece.span.path for piece in self._pieces}

    def close(self) -> None:
        self._flush()
