"""Port for showing a run as it happens: cameras, joint positions and actions, tick by tick.

`rlctl record|teleoperate|eval --display_data=true` stream every tick to a viewer (rerun's, as
LeRobot does); `rlctl dataset view --rerun` replays a stored episode through the same port into
a file. The control loops call `log_frame` once per tick from their own thread, so an adapter
must return at once: it hands the frame on (to a queue, a library that sends in the background)
and may drop frames it cannot keep up with, never slow the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from rlctl.domain.features import FeatureSpec


class LiveDisplay(Protocol):
    def open(
        self, features: Mapping[str, FeatureSpec], *, fps: int, name: str, paced: bool = True
    ) -> None:
        """Before the first frame: what frames hold (the dataset features of the observation and
        the action: their `names` name each dimension), the rate, and the run's name (`record`,
        `eval_pusht` …: it names the recording and any file written). Says where to watch.

        `paced`: the caller keeps to a clock (a robot), so frames the display cannot keep up
        with are dropped; unpaced (a simulator, a stored episode), `log_frame` may wait and every
        frame is shown."""
        ...

    def log_frame(
        self, step: int, observation: Mapping[str, Any], action: np.ndarray | None
    ) -> None:
        """One tick: an observation as the robot or simulator gives it (one value per feature:
        pictures as uint8 (height, width, channels) or encoded bytes, vectors as arrays; keys
        not among the opened features are ignored) and the action sent, if any. Cheap: called
        from the control loop's thread."""
        ...

    def close(self) -> None:
        """The run ended: frames handed over are shown or written; safe twice."""
        ...
