"""Hold Ctrl-C back while an update is applied, so an interrupt never leaves half the
parameters stepped: the KeyboardInterrupt is raised when the block ends instead."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


@contextmanager
def sigint_deferred() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives signals
        return
    received: list[tuple[int, FrameType | None]] = []

    def remember(signum: int, frame: FrameType | None) -> None:
        received.append((signum, frame))

    previous: Any = signal.signal(signal.SIGINT, remember)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(*received[0])  # Python's default handler raises KeyboardInterrupt
        elif received and previous == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)
