"""The compatibility matrix's rows: the dataset settings users change, as plain data.

Loaded by both sides: rlctl's tests (`test_matrix_lerobot_interop.py`) and LeRobot's Python
(`lerobot_matrix.py`), so it imports only numpy. A row names the features, the episodes, the
writer settings (video encoding, file-size limits, chunk size) and, for datasets edited by a
dataset tool, the edit; `frame_values` gives every frame's values, the same on both sides.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

FPS = 10
STATE = "observation.state"
ACTION = "action"
CAMERA = "observation.images.front"
WRIST = "observation.images.wrist"
DEPTH = "observation.images.depth"
HWC = ["height", "width", "channels"]
# x265 wants sides that are multiples of 8; AV1 and x264 take these too.
HEIGHT, WIDTH = 16, 32
TASKS = ("pick the cube", "place the cube", "push the cube")


def _vector(dtype: str, n: int, names: list[str] | None = None) -> dict[str, Any]:
    return {"dtype": dtype, "shape": [n], "names": names}


def _camera(dtype: str = "video", channels: int = 3, **info: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"dtype": dtype, "shape": [HEIGHT, WIDTH, channels], "names": HWC}
    if info:
        out["info"] = info
    return out


def base_features(camera: str = "video") -> dict[str, dict[str, Any]]:
    joints = [f"joint_{i}" for i in range(3)]
    return {
        STATE: _vector("float32", 3, joints),
        ACTION: _vector("float32", 3, joints),
        CAMERA: _camera(camera),
    }


def _episodes(*lengths: int) -> list[list[str]]:
    """Per episode, the task of every frame (the middle episode changes task halfway)."""
    out = []
    for ep, length in enumerate(lengths):
        task = TASKS[ep % len(TASKS)]
        if ep == 1 and length > 2:
            out.append([task] * (length // 2) + [TASKS[0]] * (length - length // 2))
        else:
            out.append([task] * length)
    return out


def _deltas(*cameras: str) -> dict[str, list[float]]:
    out = {ACTION: [0.0, 1 / FPS, 2 / FPS], STATE: [-1 / FPS, 0.0]}
    for key in cameras:
        out[key] = [-1 / FPS, 0.0]
    return out


def _row(name: str, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": name,
        "setting": name,
        "fps": FPS,
        "features": base_features(),
        "episodes": _episodes(5, 3, 6),
        # LeRobot's `RGBEncoderConfig` fields (vcodec, pix_fmt, g, crf, preset); {} = defaults.
        "video": {},
        "use_videos": True,
        "chunks_size": None,
        "data_files_size_in_mb": None,
        "video_files_size_in_mb": None,
        "deltas": _deltas(CAMERA),
        # A dataset tool applied to the dataset written (None: the dataset as written).
        "edit": None,
        # The least number of data files, video files (per camera) and chunk folders expected.
        "layout": {},
        # Episodes also read alone (LeRobot's `episodes=`), or None.
        "subset": None,
        # `rlctl dataset check` warnings expected of the dataset (substrings of the message).
        "allowed_warnings": [],
    }
    row.update(changes)
    return row


def _dtype_features() -> dict[str, dict[str, Any]]:
    features = base_features()
    features.update(
        {
            "observation.f64": _vector("float64", 2),
            "observation.i64": _vector("int64", 1),
            "observation.i64_pair": _vector("int64", 2),
            "observation.i32": _vector("int32", 2),
            "observation.u8": _vector("uint8", 4),
            "observation.flag": _vector("bool", 1),
            "observation.flags": _vector("bool", 3),
            "next.reward": _vector("float32", 1),
            "observation.note": {"dtype": "string", "shape": [1], "names": None},
        }
    )
    return features


def _rank_features() -> dict[str, dict[str, Any]]:
    features = base_features()
    features.update(
        {
            "observation.grid": {"dtype": "float32", "shape": [2, 3], "names": None},
            "observation.cube": {"dtype": "int16", "shape": [2, 2, 2], "names": None},
            "observation.tensor4": {"dtype": "float64", "shape": [2, 1, 2, 2], "names": None},
            "observation.tensor5": {"dtype": "uint8", "shape": [1, 2, 1, 2, 2], "names": None},
        }
    )
    return features


def _depth_features() -> dict[str, dict[str, Any]]:
    features = base_features()
    features[DEPTH] = _camera(channels=1, is_depth_map=True)
    return features


def _tools_features() -> dict[str, dict[str, Any]]:
    features = base_features()
    features[WRIST] = _camera("image")
    return features


TOOLS_EPISODES = _episodes(4, 3, 5, 2)
TOOLS_DELTAS = _deltas(CAMERA, WRIST)


def _tool_row(name: str, edit: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return _row(
        name,
        features=_tools_features(),
        episodes=TOOLS_EPISODES,
        deltas=TOOLS_DELTAS,
        edit=edit,
        **changes,
    )


ROWS: list[dict[str, Any]] = [
    _row("libsvtav1 yuv420p (defaults: g 2, crf 30)"),
    _row("libsvtav1 g 10 crf 45", video={"vcodec": "libsvtav1", "g": 10, "crf": 45}),
    _row("h264 yuv420p", video={"vcodec": "h264", "pix_fmt": "yuv420p"}),
    _row(
        "h264 yuv444p g 1 crf 18", video={"vcodec": "h264", "pix_fmt": "yuv444p", "g": 1, "crf": 18}
    ),
    _row("h264 codec GOP (g null) crf 23", video={"vcodec": "h264", "g": None, "crf": 23}),
    _row("hevc yuv420p", video={"vcodec": "hevc", "pix_fmt": "yuv420p"}),
    _row(
        "hevc yuv444p g 4 crf 28", video={"vcodec": "hevc", "pix_fmt": "yuv444p", "g": 4, "crf": 28}
    ),
    _row(
        "fractional file sizes (data 0.002 MB, video 0.0015 MB)",
        episodes=_episodes(5, 3, 6, 4, 2, 5),
        data_files_size_in_mb=0.002,
        video_files_size_in_mb=0.0015,
        layout={"data_files": 2, "video_files": 2},
    ),
    _row(
        "tiny file sizes + chunks_size 2 (a file per episode, 3 chunk folders)",
        episodes=_episodes(3, 4, 2, 5, 3),
        chunks_size=2,
        data_files_size_in_mb=0.0001,
        video_files_size_in_mb=0.0001,
        layout={"data_files": 5, "video_files": 5, "chunks": 3},
        subset=[1, 3, 4],
    ),
    _row(
        "images instead of video (use_videos false)",
        features=base_features("image"),
        use_videos=False,
    ),
    _row(
        "depth video (hevc gray12le, mm)",
        features=_depth_features(),
        # Even lengths: LeRobot 0.6.1 misreads its own depth video after an odd-length episode.
        episodes=_episodes(4, 6, 4),
        deltas=_deltas(CAMERA, DEPTH),
    ),
    _row("dtypes float64 int64 int32 uint8 bool string", features=_dtype_features()),
    _row("rank 2-5 numeric features", features=_rank_features()),
    _tool_row("delete episodes (tool)", {"tool": "delete", "episodes": [1, 3]}),
    _tool_row("split (tool)", {"tool": "split", "episodes": [1, 2]}),
    _tool_row("merge (tool)", {"tool": "merge"}, subset=[2, 5]),
    _row(
        "resumed recording (h264, tiny files, chunks_size 2)",
        episodes=_episodes(3, 4, 2, 5, 3),
        video={"vcodec": "h264", "g": 4, "crf": 23},
        chunks_size=2,
        data_files_size_in_mb=0.0001,
        video_files_size_in_mb=0.0001,
        edit={"tool": "resume", "first": 3},
        subset=[2, 3],
    ),
    _tool_row(
        "add features (tool)",
        {"tool": "add_features"},
    ),
    _tool_row("remove features (tool)", {"tool": "remove_features", "keys": [CAMERA, ACTION]}),
    _tool_row(
        "modify tasks (tool)",
        {"tool": "modify_tasks", "new_task": "tidy up", "episode_tasks": {"1": "wipe the table"}},
    ),
    _row(
        "images converted to video (tool)",
        features=base_features("image"),
        use_videos=False,
        edit={"tool": "convert_images_to_video", "video": {"vcodec": "h264", "crf": 23}},
        # LeRobot encodes a batch of episodes as one run: later episodes start between keyframes.
        allowed_warnings=["does not start on a keyframe"],
    ),
    _row(
        "videos re-encoded (tool: h264 g 4 crf 23)",
        edit={"tool": "reencode_videos", "video": {"vcodec": "h264", "g": 4, "crf": 23}},
    ),
    _row(
        "converted from v2.1",
        features=_tools_features(),
        episodes=TOOLS_EPISODES,
        deltas=TOOLS_DELTAS,
        edit={"tool": "convert_v21"},
    ),
]
for _row_ in ROWS:
    _row_["id"] = (
        _row_["name"].split(" (")[0].replace(" + ", "-").replace(" ", "-").replace(".", "")
    )

# Features `add_features` adds: name -> (LeRobot feature, value per global frame index).
ADDED = {
    "next.reward": _vector("float32", 1),
    "observation.extra": _vector("float64", 2),
}


def added_value(key: str, index: int) -> np.ndarray:
    if key == "next.reward":
        return np.array([index * 0.5], dtype=np.float32)
    return np.array([index, -index / 3], dtype=np.float64)


def merged_episodes(row: dict[str, Any]) -> list[list[str]]:
    """The second dataset of a merge: the row's episodes, reversed, the first task renamed."""
    return [[f"{t} again" for t in ep] for ep in reversed(row["episodes"])]


def picture(ep: int, t: int, salt: int, channels: int = 3) -> np.ndarray:
    """A smooth moving gradient with colour detail: codecs keep it closely; frames differ."""
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    r = (xx * 3 + 29 * t + 17 * ep + salt) % 256
    g = (yy * 5 + 37 * t + 31 * ep) % 256
    b = (xx * 2 + yy * 2 + 41 * t + salt) % 256
    return np.stack([r, g, b][:channels], axis=-1).astype(np.uint8)


def depth_mm(ep: int, t: int) -> np.ndarray:
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    depth = 300.0 + 150.0 * xx + 40.0 * yy + 80.0 * t + 500.0 * ep
    depth[0, :3] = 0.0  # no reading
    return np.rint(depth).astype(np.uint16)[..., None]


def frame_values(
    features: dict[str, dict[str, Any]], ep: int, t: int, seed: int = 0
) -> dict[str, Any]:
    """The values recorded at (episode, t) for `features` (no task)."""
    rng = np.random.default_rng([seed, ep, t])
    out: dict[str, Any] = {}
    for salt, (key, spec) in enumerate(sorted(features.items())):
        dtype, shape = spec["dtype"], tuple(spec["shape"])
        if spec.get("info", {}).get("is_depth_map"):
            out[key] = depth_mm(ep, t)
        elif dtype in ("video", "image"):
            out[key] = picture(ep, t, 40 * salt)
        elif dtype == "string":
            out[key] = f"note {ep}-{t}" + "!" * (t % 3)
        elif dtype == "bool":
            out[key] = rng.random(shape) > 0.5
        elif np.dtype(dtype).kind == "f":
            out[key] = rng.standard_normal(shape).astype(dtype)
        else:
            info = np.iinfo(np.dtype(dtype))
            out[key] = rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)
    return out


def lerobot_features(row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return copy.deepcopy(row["features"])
