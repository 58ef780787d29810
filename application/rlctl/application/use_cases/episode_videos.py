"""Films the first few environments of a rollout batch, one mp4 per episode.

Frames are handed to a background thread that encodes them as they come, through a bounded
queue: the rollout does not wait for the encoder on every step, and a whole episode of
680x680 frames (about 400 MB for PushT) is never held in memory, as it is in LeRobot.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlctl.application.ports.video import VideoEncoder, VideoWriter
from rlctl.domain.video import viewing_encoding

_STOP = object()
_ABORT = object()
_QUEUE_FRAMES = 64


class EpisodeVideos:
    def __init__(
        self, encoder: VideoEncoder, paths: Sequence[Path], fps: int, codec: str = "h264"
    ) -> None:
        self.count = len(paths)
        self._encoder = encoder
        self._paths = [Path(p) for p in paths]
        self._fps = fps
        self._encoding = viewing_encoding(codec)
        self._writers: list[VideoWriter | None] = [None] * self.count
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=_QUEUE_FRAMES)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="eval-videos", daemon=True)
        self._thread.start()

    def add(self, frames: np.ndarray | None, live: np.ndarray) -> None:
        """One frame for each filmed env still running (None: the env cannot render)."""
        if frames is None or self._error is not None:
            return
        for i in np.flatnonzero(np.asarray(live)[: self.count]):
            self._queue.put((int(i), frames[i]))

    def finish(self) -> list[Path]:
        """Wait for the encoder; the paths of the videos written, in env order."""
        self._queue.put(_STOP)
        self._thread.join()
        if self._error is not None:
            raise self._error
        return [p for p, w in zip(self._paths, self._writers) if w is not None]

    def abort(self) -> None:
        """Drop every video of this batch (an error or Ctrl-C stopped the rollout)."""
        self._queue.put(_ABORT)
        self._thread.join()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP or item is _ABORT:
                self._close(abort=item is _ABORT or self._error is not None)
                return
            if self._error is not None:
                continue  # keep draining so the rollout never blocks on a full queue
            index, frame = item
            try:
                writer = self._writers[index]
                if writer is None:
                    self._paths[index].parent.mkdir(parents=True, exist_ok=True)
                    writer = self._encoder.begin(self._paths[index], self._fps, self._encoding)
                    self._writers[index] = writer
                writer.add_frame(frame)
            except Exception as error:
                self._error = error

    def _close(self, abort: bool) -> None:
        for writer in self._writers:
            if writer is None:
                continue
            try:
                if abort:
                    writer.abort()
                else:
                    writer.finish()
            except Exception as error:
                self._error = self._error or error
