"""Decoding the camera frames a batch of items needs, as float32 CHW arrays in [0, 1].

Requests are grouped by file; each file's timestamps are decoded once, sorted and without
duplicates, in runs of nearby timestamps (a decoder asked for far-apart frames in one call may
decode everything between them instead of seeking). Files are decoded on parallel threads: the
decoders release the GIL, and an item usually needs one frame from each of several cameras.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import numpy as np

from rlctl.adapters.storage.lerobot_v3.decoders import (
    process_local_decoder,
    process_local_threads,
)
from rlctl.application.ports.video import VideoDecoder
from rlctl.domain.errors import CorruptDataset, VideoError
from rlctl.domain.video import VideoTimestampError

# Timestamps closer than this many frames are decoded in one call, further ones in separate calls.
RUN_GAP_FRAMES = 4
MAX_THREADS = 4


@attrs.frozen(eq=False)
class FrameRequest:
    """Frames of one file at `timestamps` (seconds from the start of the file)."""

    path: Path
    timestamps: np.ndarray


def chw_float(frames: np.ndarray) -> np.ndarray:
    """uint8 (N, H, W, C) -> float32 (N, C, H, W) in [0, 1], contiguous, exactly `x / 255`.

    numpy, not torch: torch's intra-op threads make this small op 50x slower on a busy machine.
    One output array for all frames: numpy backs an allocation of 4 MB or more with huge pages,
    where one array per item costs a page fault every 4 KB (a quarter of the CPU time of a read).
    """
    n, h, w, c = frames.shape
    out = np.empty((n, c, h, w), dtype=np.float32)
    np.divide(frames.transpose(0, 3, 1, 2), np.float32(255), out=out, dtype=np.float32)
    return out


def runs(sorted_times: np.ndarray, max_gap_s: float) -> list[np.ndarray]:
    """Split sorted timestamps where two neighbours are more than `max_gap_s` apart."""
    if len(sorted_times) <= 1:
        return [sorted_times]
    cuts = np.flatnonzero(np.diff(sorted_times) > max_gap_s) + 1
    return np.split(sorted_times, cuts)


class VideoFrameFetcher:
    """Frames for many requests; decoders and threads are made per process, on first use."""

    def __init__(
        self, decoder_factory: Callable[[], VideoDecoder], fps: float, tolerance_s: float
    ) -> None:
        self._decoder = process_local_decoder(decoder_factory)
        self._threads = process_local_threads(min(MAX_THREADS, os.cpu_count() or 1))
        self._max_gap_s = RUN_GAP_FRAMES / fps
        self.tolerance_s = tolerance_s

    def fetch(self, requests: Sequence[FrameRequest]) -> list[np.ndarray]:
        """One float32 `(len(timestamps), C, H, W)` array per request, in request order."""
        by_file: dict[Path, list[int]] = {}
        for number, request in enumerate(requests):
            by_file.setdefault(request.path, []).append(number)
        results: list[np.ndarray | None] = [None] * len(requests)
        groups = list(by_file.items())
        if len(groups) == 1:
            done = [self._fetch_file(groups[0][0], [requests[n] for n in groups[0][1]])]
        else:
            pool = self._threads.get()
            futures = [
                pool.submit(self._fetch_file, path, [requests[n] for n in numbers])
                for path, numbers in groups
            ]
            done = [future.result() for future in futures]
        for (_, numbers), arrays in zip(groups, done):
            for number, array in zip(numbers, arrays):
                results[number] = array
        return results  # type: ignore[return-value]

    def close(self) -> None:
        self._decoder.close()
        self._threads.close()

    def _fetch_file(self, path: Path, requests: list[FrameRequest]) -> list[np.ndarray]:
        asked = np.concatenate([r.timestamps for r in requests])
        unique, inverse = np.unique(asked, return_inverse=True)
        decoded = np.concatenate([self._decode(path, run) for run in runs(unique, self._max_gap_s)])
        # Items get views into one array for the whole file (see `chw_float`).
        buffer = chw_float(decoded[inverse])
        out, offset = [], 0
        for request in requests:
            count = len(request.timestamps)
            out.append(buffer[offset : offset + count])
            offset += count
        return out

    def _decode(self, path: Path, times: np.ndarray) -> np.ndarray:
        try:
            return self._decoder.get().decode(path, times.tolist(), self.tolerance_s)
        except VideoTimestampError:
            raise  # the data disagrees with the video: its own message says so
        except VideoError as err:
            raise CorruptDataset(
                f"the video cannot be decoded: {err.message}",
                where=str(path),
                hint=(
                    "the file may be damaged (re-download the dataset), or this video backend "
                    "cannot decode it (try video_backend='pyav')"
                ),
            ) from err
