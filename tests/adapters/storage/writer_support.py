"""Shared by the writer tests: small datasets described as data, written, and read back raw.

Reading goes through pyarrow and PyAV directly (not the reader), so a writer bug cannot hide
behind the same bug in the reader. Loaded by the test files with `load_support()` (pytest's
importlib mode puts no test folder on `sys.path`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import av
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image

from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.domain.features import FeatureSpec

STATE = "observation.state"
ACTION = "action"
REWARD = "next.reward"
IMAGE = "observation.images.wrist"
VIDEO = "observation.images.front"
# A numeric feature of rank >= 2 (LeRobot stores it as a `datasets` ArrayND).
GRID = "observation.tactile"
HWC = ["height", "width", "channels"]
IMAGE_SHAPE = (12, 16, 3)
VIDEO_SHAPE = (16, 24, 3)
# Smooth pictures survive AV1 at crf 30 closely (mean absolute error about 1.5 of 255, up to 10
# on a file's last frame); the bound stays well under the gap between consecutive frames (~35),
# so a frame shifted by one always fails.
VIDEO_TOLERANCE = 16.0


@attrs.frozen
class DatasetPlan:
    """What to record: features to include and, per episode, the task of every frame."""

    fps: int
    state_dim: int
    episodes: tuple[tuple[str, ...], ...]
    reward: bool = False
    image: bool = False
    video: bool = False
    seed: int = 0
    grid: tuple[int, ...] | None = None
    grid_dtype: str = "float32"

    def features(self) -> dict[str, FeatureSpec]:
        names = [f"joint_{i}" for i in range(self.state_dim)]
        out = {
            STATE: FeatureSpec(STATE, "float32", (self.state_dim,), names=names),
            ACTION: FeatureSpec(ACTION, "float32", (self.state_dim,), names=names),
        }
        if self.reward:
            out[REWARD] = FeatureSpec(REWARD, "float32", (1,))
        if self.image:
            out[IMAGE] = FeatureSpec(IMAGE, "image", IMAGE_SHAPE, names=HWC)
        if self.video:
            out[VIDEO] = FeatureSpec(VIDEO, "video", VIDEO_SHAPE, names=HWC)
        if self.grid is not None:
            out[GRID] = FeatureSpec(GRID, self.grid_dtype, self.grid)
        return out

    @property
    def lengths(self) -> list[int]:
        return [len(tasks) for tasks in self.episodes]


def picture(shape: tuple[int, int, int], ep: int, t: int, salt: int) -> np.ndarray:
    """A smooth moving gradient, like the benchmark's cameras."""
    h, w, _ = shape
    yy, xx = np.mgrid[0:h, 0:w]
    # Gentle slopes (AV1 keeps them), big steps between frames (a shifted frame is far off).
    r = (xx * 2 + 29 * t + 17 * ep + salt) % 256
    g = (yy * 2 + 37 * t + 31 * ep) % 256
    b = (xx + yy + 41 * t + salt) % 256
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


def frame(plan: DatasetPlan, ep: int, t: int) -> dict[str, Any]:
    rng = np.random.default_rng([plan.seed, ep, t])
    out: dict[str, Any] = {
        STATE: rng.standard_normal(plan.state_dim).astype(np.float32),
        ACTION: rng.standard_normal(plan.state_dim).astype(np.float32),
        "task": plan.episodes[ep][t],
    }
    if plan.reward:
        out[REWARD] = np.float32(rng.random())
    if plan.image:
        out[IMAGE] = picture(IMAGE_SHAPE, ep, t, salt=50)
    if plan.video:
        out[VIDEO] = picture(VIDEO_SHAPE, ep, t, salt=90)
    if plan.grid is not None:
        dtype = np.dtype(plan.grid_dtype)
        if dtype.kind == "f":
            out[GRID] = rng.standard_normal(plan.grid).astype(dtype)
        else:
            out[GRID] = rng.integers(-100, 100, plan.grid).astype(dtype)
    return out


def fast_options(**changes: Any) -> WriterOptions:
    """Thread encoding, no fsync: the same files, written quicker for property tests."""
    return WriterOptions(**{"encode_in_subprocess": False, "durable": False, **changes})


def write(root: Path, plan: DatasetPlan, options: WriterOptions | None = None, **create: Any):
    session = LeRobotV3Writer(options=options or fast_options()).create(
        root, fps=plan.fps, features=plan.features(), robot_type="so101_follower", **create
    )
    with session:
        for ep, tasks in enumerate(plan.episodes):
            for t in range(len(tasks)):
                session.add_frame(frame(plan, ep, t))
            session.save_episode()
    return session


# --- reading back ------------------------------------------------------------------------------


def info(root: Path) -> dict[str, Any]:
    return json.loads((root / "meta/info.json").read_text())


def parquet_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("chunk-*/file-*.parquet"))


def data_table(root: Path) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in parquet_files(root / "data")])


def episodes_table(root: Path) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in parquet_files(root / "meta/episodes")])


def tasks(root: Path) -> list[str]:
    table = pq.read_table(root / "meta/tasks.parquet").sort_by("task_index")
    return table.column("task").to_pylist()


def decode_png(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def decode_video(path: Path) -> Iterator[tuple[float, np.ndarray]]:
    """(timestamp in seconds, RGB frame) for every frame of the file."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for picture_ in container.decode(stream):
            yield float(picture_.pts * stream.time_base), picture_.to_ndarray(format="rgb24")


def video_frames(root: Path, row: dict[str, Any], key: str, fps: int) -> list[np.ndarray]:
    """The frames of one episode of one camera, found through its meta/episodes row."""
    template = info(root)["video_path"]
    path = root / template.format(
        video_key=key,
        chunk_index=row[f"videos/{key}/chunk_index"],
        file_index=row[f"videos/{key}/file_index"],
    )
    start, end = row[f"videos/{key}/from_timestamp"], row[f"videos/{key}/to_timestamp"]
    half_frame = 0.5 / fps
    return [f for ts, f in decode_video(path) if start - half_frame <= ts < end - half_frame]


def check_dataset(root: Path, plan: DatasetPlan) -> None:
    """Everything `plan` recorded is on disk, in LeRobot's layout, with consistent metadata."""
    lengths = plan.lengths
    meta = info(root)
    assert meta["total_episodes"] == len(lengths)
    assert meta["total_frames"] == sum(lengths)
    all_tasks = tasks(root)
    assert meta["total_tasks"] == len(all_tasks)
    assert all_tasks == list(dict.fromkeys(t for ep in plan.episodes for t in ep))

    data = data_table(root)
    episodes = episodes_table(root).to_pylist()
    assert [row["episode_index"] for row in episodes] == list(range(len(lengths)))
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for ep, row in enumerate(episodes):
        assert row["length"] == lengths[ep]
        assert (row["dataset_from_index"], row["dataset_to_index"]) == (starts[ep], starts[ep + 1])
        assert row["tasks"] == list(dict.fromkeys(plan.episodes[ep]))
        assert row[f"stats/{STATE}/count"] == [lengths[ep]]
    assert data.num_rows == sum(lengths)
    index = data.column("index").to_numpy()
    np.testing.assert_array_equal(index, np.arange(sum(lengths)))
    for ep, row in enumerate(episodes):
        rows = data.slice(starts[ep], lengths[ep]).to_pylist()
        video = video_frames(root, row, VIDEO, plan.fps) if plan.video else None
        if video is not None:
            assert len(video) == lengths[ep]
        for t, stored in enumerate(rows):
            expected = frame(plan, ep, t)
            assert stored["episode_index"] == ep and stored["frame_index"] == t
            assert stored["timestamp"] == np.float32(t / plan.fps)
            assert all_tasks[stored["task_index"]] == expected["task"]
            np.testing.assert_array_equal(np.float32(stored[STATE]), expected[STATE])
            np.testing.assert_array_equal(np.float32(stored[ACTION]), expected[ACTION])
            if plan.reward:
                assert np.float32(stored[REWARD]) == expected[REWARD]
            if plan.image:
                np.testing.assert_array_equal(decode_png(stored[IMAGE]["bytes"]), expected[IMAGE])
            if plan.grid is not None:
                grid = np.asarray(stored[GRID], dtype=plan.grid_dtype)
                np.testing.assert_array_equal(grid.reshape(plan.grid), expected[GRID])
            if video is not None:
                error = np.abs(video[t].astype(float) - expected[VIDEO]).mean()
                assert error < VIDEO_TOLERANCE, (ep, t, error)


def committed_episodes(root: Path) -> int:
    """Check the episodes info.json commits against `plan`-independent invariants; their count.

    info.json is the commit point: rows past its totals (an interrupted commit) are ignored here,
    as the writer's resume drops them.
    """
    meta = info(root)
    total = meta["total_episodes"]
    rows = (
        [r for r in episodes_table(root).to_pylist() if r["episode_index"] < total] if total else []
    )
    assert [r["episode_index"] for r in rows] == list(range(total))
    assert (rows[-1]["dataset_to_index"] if rows else 0) == meta["total_frames"]
    return total


def check_committed(root: Path, plan: DatasetPlan) -> int:
    """The committed episodes hold exactly the first episodes of `plan`; returns their count."""
    total = committed_episodes(root)
    if total == 0:
        return 0
    committed = attrs.evolve(plan, episodes=plan.episodes[:total])
    rows = [r for r in episodes_table(root).to_pylist() if r["episode_index"] < total]
    data = data_table(root)
    data = data.filter(pc.less(data.column("episode_index"), total))
    assert data.num_rows == sum(committed.lengths)
    starts = np.concatenate([[0], np.cumsum(committed.lengths)])
    all_tasks = tasks(root)
    for ep, row in enumerate(rows):
        stored_rows = data.slice(starts[ep], committed.lengths[ep]).to_pylist()
        video = video_frames(root, row, VIDEO, plan.fps) if plan.video else None
        if video is not None:
            assert len(video) == committed.lengths[ep], (ep, len(video))
        for t, stored in enumerate(stored_rows):
            expected = frame(plan, ep, t)
            assert (stored["episode_index"], stored["frame_index"]) == (ep, t)
            assert stored["index"] == starts[ep] + t
            assert all_tasks[stored["task_index"]] == expected["task"]
            np.testing.assert_array_equal(np.float32(stored[STATE]), expected[STATE])
            if video is not None:
                assert np.abs(video[t].astype(float) - expected[VIDEO]).mean() < VIDEO_TOLERANCE
    return total
