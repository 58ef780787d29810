"""Offscreen rendering for MuJoCo simulators (ALOHA through dm_control, Meta-World).

MuJoCo picks its OpenGL backend from `MUJOCO_GL` when it is first imported; unset, it tries a
GLFW window, which fails on a server with no display. On such a machine rlctl asks for EGL
(headless, through Mesa's or NVIDIA's libEGL) unless the user chose a backend. When rendering
still fails, `rendering_hint` says what to install or set.

`egl_on_gpu` says whether rendering goes through EGL on an NVIDIA GPU, where every live env holds
a GL context in GPU memory: the evaluation then does not start the next task's envs ahead by
default (`--eval.prefetch_next_task=auto`), as LeRobot never has two tasks' envs alive.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

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


def gl_backend(headless_default: bool = True) -> str | None:
    """The backend MuJoCo will use: `MUJOCO_GL`, else EGL on a machine without a display when
    the env asks for it (`use_offscreen_gl_when_headless`), else None (a GLFW window)."""
    chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
    if chosen:
        return chosen
    return "egl" if headless_default and not os.environ.get("DISPLAY") else None


def nvidia_gpu_visible() -> bool:
    """An NVIDIA device this process may use, found without importing torch or CUDA (which
    would be slow, and unsafe before forking workers)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    devices = any(Path("/dev").glob("nvidia[0-9]*"))
    return devices or any(Path("/proc/driver/nvidia/gpus").glob("*"))


def egl_on_gpu(headless_default: bool = True) -> bool:
    """MuJoCo renders through EGL with an NVIDIA device present (so on the GPU); osmesa renders
    on the CPU, and a GLFW window is a desktop's."""
    return gl_backend(headless_default) == "egl" and nvidia_gpu_visible()
