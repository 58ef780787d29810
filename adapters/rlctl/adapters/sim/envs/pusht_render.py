"""gym-pusht's PushT, drawing the same pictures for a third of the work.

Every PushT step draws the scene on a 512x512 pygame surface and copies it out pixel by pixel
through a transposed view; filming an episode draws and copies the same scene a second time
for the video frame. On two cores that was most of an evaluation's time. `PushTDrawnOnce`:

- draws each physics state once: the observation and the video frame of a step share it;
- reads the surface's own memory (32-bit, row by row) and resizes its four channels before
  picking out red, green and blue: the resize works on each channel alone, so the pixels are
  the ones gym-pusht returns, bit for bit (a test compares the two over whole episodes).

Only what gym-pusht draws and copies is replaced; physics, rewards and observations are its own.
A surface in any other pixel layout is copied the original way.
"""

from __future__ import annotations

import sys
from typing import Any

import cv2
import numpy as np
from gym_pusht.envs.pusht import PushTEnv


class PushTDrawnOnce(PushTEnv):
    _scene: tuple[tuple[float, ...], Any] | None = None

    def step(self, action: Any):
        self._scene = None
        return super().step(action)

    def _setup(self) -> None:
        self._scene = None
        super()._setup()

    def _set_state(self, state: Any) -> None:
        self._scene = None
        super()._set_state(state)

    def _draw(self):
        pose = self._pose()
        if self._scene is None or self._scene[0] != pose:
            self._scene = (pose, super()._draw())
        return self._scene[1]

    def _get_img(self, screen, width, height, render_action=False):
        img = resized_rgb(screen, width, height)
        if img is None:
            return super()._get_img(screen, width, height, render_action=render_action)
        if render_action and self._last_action is not None:
            # gym-pusht's marker of the last action, drawn on the resized picture as it does.
            render_size = min(width, height)
            coord = (np.array(self._last_action) / 512 * [height, width]).astype(np.int32)
            cv2.drawMarker(
                img,
                coord,
                color=(255, 0, 0),
                markerType=cv2.MARKER_CROSS,
                markerSize=int(8 / 96 * render_size),
                thickness=int(1 / 96 * render_size),
            )
        return img

    def _pose(self) -> tuple[float, ...]:
        # What the picture shows; a pose changed from outside a step is still drawn afresh.
        return (
            id(self.space),
            *self.agent.position,
            *self.block.position,
            self.block.angle,
            *np.asarray(self.goal_pose, dtype=float).tolist(),
        )


def resized_rgb(screen: Any, width: int, height: int) -> np.ndarray | None:
    """The surface as (height, width, 3) RGB, or None when its pixels are not 32-bit rows."""
    channels = _rgb_bytes(screen)
    if channels is None:
        return None
    w, h = screen.get_size()
    pixels = np.frombuffer(screen.get_buffer(), np.uint8).reshape(h, w, 4)
    resized = cv2.resize(pixels, (width, height))
    # A plain channel shuffle; OpenCV's is a tight loop where numpy's fancy index is strided.
    shuffle = _SHUFFLES.get(tuple(channels))
    if shuffle is not None:
        return cv2.cvtColor(resized, shuffle)
    return np.ascontiguousarray(resized[..., channels])


_SHUFFLES: dict[tuple[int, ...], int] = {
    (2, 1, 0): cv2.COLOR_BGRA2RGB,
    (0, 1, 2): cv2.COLOR_RGBA2RGB,
}


def _rgb_bytes(screen: Any) -> list[int] | None:
    """Byte offsets of red, green and blue in a pixel, if every pixel is 4 whole bytes."""
    w, _ = screen.get_size()
    if screen.get_bytesize() != 4 or screen.get_pitch() != 4 * w:
        return None
    shifts = screen.get_shifts()[:3]
    if any(s % 8 for s in shifts):
        return None
    offsets = [s // 8 for s in shifts]
    return offsets if sys.byteorder == "little" else [3 - o for o in offsets]
