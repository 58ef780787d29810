"""Live displays that show nothing: `NoDisplay` when `--display_data` is off, `RecordedDisplay`
keeping every frame (tests, and a service that wants the frames itself)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from rlctl.domain.features import FeatureSpec


class NoDisplay:
    def open(
        self, features: Mapping[str, FeatureSpec], *, fps: int, name: str, paced: bool = True
    ) -> None:
        pass

    def log_frame(
        self, step: int, observation: Mapping[str, Any], action: np.ndarray | None
    ) -> None:
        pass

    def close(self) -> None:
        pass


@attrs.frozen
class DisplayedFrame:
    step: int
    observation: Mapping[str, Any]
    action: np.ndarray | None


class RecordedDisplay:
    """Keeps what it is given; `opened` lists each `open`'s (name, fps, feature keys, paced)."""

    def __init__(self) -> None:
        self.opened: list[tuple[str, int, tuple[str, ...], bool]] = []
        self.frames: list[DisplayedFrame] = []
        self.closed = 0
        self.is_open = False

    def open(
        self, features: Mapping[str, FeatureSpec], *, fps: int, name: str, paced: bool = True
    ) -> None:
        self.opened.append((name, fps, tuple(features), paced))
        self.is_open = True

    def log_frame(
        self, step: int, observation: Mapping[str, Any], action: np.ndarray | None
    ) -> None:
        if not self.is_open:
            raise RuntimeError("log_frame before open (or after close)")
        self.frames.append(DisplayedFrame(step, dict(observation), action))

    def close(self) -> None:
        self.closed += 1
        self.is_open = False
