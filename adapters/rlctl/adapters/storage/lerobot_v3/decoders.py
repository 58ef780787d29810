"""Per-process resources: the video decoder and the threads that decode cameras side by side.

A DataLoader forks its workers from the parent; a decoder the parent already used (an open
demuxer, torchcodec's native state) must not be reused in a child — LeRobot's torchcodec path
crashes there with "Could not push packet to decoder" — and a thread pool does not survive a fork
at all. Both are therefore keyed by process id, made on first use in each process, and never
pickled.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlctl.application.ports.video import VideoDecoder
from rlctl.domain.errors import InvalidInput

# LeRobot's names, plus its deprecated alias for PyAV.
_BACKEND_ALIASES = {
    None: "auto",
    "auto": "auto",
    "pyav": "pyav",
    "video_reader": "pyav",
    "torchcodec": "torchcodec",
}


def backend_name(video_backend: str | None) -> str:
    try:
        return _BACKEND_ALIASES[video_backend]
    except KeyError:
        raise InvalidInput(
            f"unknown video backend {video_backend!r}",
            where="video_backend",
            hint="use 'torchcodec', 'pyav', or None/'auto' to pick the one that works here",
        ) from None


class DecoderFactory:
    """Makes the named backend's decoder, probing torchcodec once per process tree.

    torchcodec's probe (encode and decode a tiny clip) costs 0.3-0.9 s. A DataLoader worker
    forked or spawned from a process whose probe passed runs on the same libraries, and inherits
    `torchcodec_verified`, so it skips the probe; a decode error still falls back to PyAV under
    'auto'.
    """

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.torchcodec_verified = False

    def __call__(self) -> VideoDecoder:
        # Imported here: reading a dataset without videos must not load av or torchcodec.
        from rlctl.adapters.video.auto import AutoVideoDecoder, video_decoder_for

        if self.backend == "torchcodec":
            return self._torchcodec()
        if self.backend == "auto":
            return AutoVideoDecoder(preferred=self._torchcodec)
        return video_decoder_for(self.backend)

    def _torchcodec(self) -> VideoDecoder:
        from rlctl.adapters.video.auto import torchcodec_decoder, video_decoder_for

        if self.torchcodec_verified:
            return torchcodec_decoder()
        decoder = video_decoder_for("torchcodec")  # probes; a VideoError when unusable here
        self.torchcodec_verified = True
        return decoder


def decoder_factory(video_backend: str | None) -> Callable[[], VideoDecoder]:
    """A picklable factory for the named backend (DataLoader workers may be spawned)."""
    return DecoderFactory(backend_name(video_backend))


class ProcessLocal[T]:
    """`get()` returns this process's `T`, made by `factory` on first use in each process."""

    def __init__(self, factory: Callable[[], T], close: Callable[[T], None]) -> None:
        self._factory = factory
        self._close = close
        self._pid: int | None = None
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        pid = os.getpid()
        if self._pid != pid:
            # First use here, or a forked child: what the parent made is dropped unused (closing
            # it would touch state the parent still owns), and so is its lock, which a parent
            # thread may have held at the moment of the fork.
            self._lock = threading.Lock()
            self._value = None
            self._pid = pid
        value = self._value
        if value is None:
            with self._lock:
                value = self._value
                if value is None:
                    value = self._value = self._factory()
        return value

    def close(self) -> None:
        value, self._value = self._value, None
        if value is not None and self._pid == os.getpid():
            self._close(value)

    def __getstate__(self) -> dict[str, Any]:
        return {"_factory": self._factory, "_close": self._close}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["_factory"], state["_close"])  # type: ignore[misc]


def process_local_decoder(factory: Callable[[], VideoDecoder]) -> ProcessLocal[VideoDecoder]:
    return ProcessLocal(factory, _close_decoder)


def _close_decoder(decoder: VideoDecoder) -> None:
    decoder.close()


def process_local_threads(max_workers: int) -> ProcessLocal[ThreadPoolExecutor]:
    return ProcessLocal(
        functools.partial(ThreadPoolExecutor, max_workers, "rlctl-video"), _shutdown_threads
    )


def _shutdown_threads(pool: ThreadPoolExecutor) -> None:
    pool.shutdown(wait=False)
