"""A per-process cache of open video files.

Decoders keep files open between calls because opening (probing the container, building the
decoder) costs more than decoding a frame. An open demuxer must never be used by two processes:
after `fork` (DataLoader workers) the child forgets everything it inherited and opens its own.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path


class OpenFiles[T]:
    """Handles keyed by path, least recently used closed first once `max_open` are open."""

    def __init__(
        self, open_file: Callable[[Path], T], close_file: Callable[[T], None], max_open: int = 64
    ) -> None:
        if max_open < 1:
            raise ValueError(f"max_open must be at least 1, got {max_open}")
        self._open_file = open_file
        self._close_file = close_file
        self._max_open = max_open
        self._handles: OrderedDict[str, T] = OrderedDict()
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def get(self, path: Path) -> T:
        key = str(path)
        with self._lock:
            self._forget_if_forked()
            handle = self._handles.get(key)
            if handle is not None:
                self._handles.move_to_end(key)
                return handle
        # Open outside the lock: it is slow, and another path must not wait for it.
        handle = self._open_file(path)
        evicted: list[T] = []
        with self._lock:
            existing = self._handles.get(key)
            if existing is not None:
                evicted.append(handle)
                handle = existing
            else:
                self._handles[key] = handle
            while len(self._handles) > self._max_open:
                evicted.append(self._handles.popitem(last=False)[1])
        for stale in evicted:
            self._close_file(stale)
        return handle

    def discard(self, path: Path) -> None:
        """Close and forget `path`, e.g. after an error left its decoder in an unknown state."""
        with self._lock:
            handle = self._handles.pop(str(path), None)
        if handle is not None:
            self._close_file(handle)

    def clear(self) -> None:
        with self._lock:
            self._forget_if_forked()
            handles = list(self._handles.values())
            self._handles.clear()
        for handle in handles:
            self._close_file(handle)

    def __len__(self) -> int:
        with self._lock:
            self._forget_if_forked()
            return len(self._handles)

    def _forget_if_forked(self) -> None:
        # Inherited handles share their file offsets with the parent's: reading through them
        # would move the parent's position. Drop them unused; the child opens its own.
        pid = os.getpid()
        if pid != self._pid:
            self._handles = OrderedDict()
            self._pid = pid
