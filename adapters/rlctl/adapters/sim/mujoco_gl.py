"""Offscreen rendering for MuJoCo simulators (ALOHA through dm_control, Meta-World).

MuJoCo picks its OpenGL backend from `MUJOCO_GL` when it is first imported; unset, it tries a
GLFW window, which fails on a server with no display. On such a machine rlctl asks for EGL
(headless, through Mesa's or NVIDIA's libEGL) unless the user chose a backend. When rendering
still fails, `rendering_hint` says what to install or set.
"""

from __future__ import annotations

import os
import re

# What each backend needs on Debian/Ubuntu.
APT_PACKAGES = {"egl": "libegl1", "osmesa": "libosmesa6"}
_GL_ERROR = re.compile(r"opengl|\begl\b|libegl|glfw|osmesa|glgeterror|mjr_makecontext")


def use_offscreen_gl_when_headless() -> None:
    """Set `MUJOCO_GL=egl` when there is no display and no backend was chosen.

    Call it before the simulator package imports MuJoCo (inside worker processes too).
    """
    if not os.environ.get("DISPLAY") and not os.environ.get("MUJOCO_GL"):
        os.environ["MUJOCO_GL"] = "egl"


def is_rendering_error(error: BaseException) -> bool:
    text = f"{type(error).__module__} {type(error).__name__} {error}".lower()
    return type(error).__name__ == "FatalError" or _GL_ERROR.search(text) is not None


def rendering_hint() -> str:
    backend = os.environ.get("MUJOCO_GL") or "(unset: a GLFW window)"
    return (
        f"MuJoCo could not render offscreen with MUJOCO_GL={backend}: set MUJOCO_GL=egl "
        f"(needs libEGL: apt-get install {APT_PACKAGES['egl']}) or MUJOCO_GL=osmesa "
        f"(software, slower: apt-get install {APT_PACKAGES['osmesa']})"
    )
