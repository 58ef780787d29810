"""Datasets rlctl writes open in LeRobot 0.6.1 and return what was written.

Runs when RLCTL_LEROBOT_PYTHON names a Python with lerobot installed (see ../shared/bench/README.md,
e.g. /tmp/lerobot-anchor/bin/python): LeRobot's own `LeRobotDataset(repo_id, root=...)` loads the
dataset in that interpreter and hands back every item, which is compared here with what went in.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer

SUPPORT_PATH = Path(__file__).with_name("writer_support.py")
LEROBOT_PYTHON = os.environ.get("RLCTL_LEROBOT_PYTHON")


def load_support():
    spec = importlib.util.spec_from_file_location("writer_support", SUPPORT_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = load_support()

pytestmark = [
    pytest.mark.lerobot,
    pytest.mark.slow,
    pytest.mark.skipif(
        not LEROBOT_PYTHON,
        reason="set RLCTL_LEROBOT_PYTHON to a Python with lerobot 0.6.1 installed "
        "(e.g. /tmp/lerobot-anchor/bin/python) to check that LeRobot reads rlctl's datasets",
    ),
]

LOAD_WITH_LEROBOT = """
import json, sys
import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset
root, out, fps = sys.argv[1], sys.argv[2], int(sys.argv[3])
deltas = {"action": [0.0, 1 / fps, 2 / fps], "observation.state": [-1 / fps, 0.0]}
ds = LeRobotDataset("rlctl/interop", root=root, delta_timestamps=deltas, video_backend="pyav")
arrays, tasks = {}, {}
for i in range(len(ds)):
    for key, value in ds[i].items():
        if isinstance(value, str):
            tasks[i] = value
        else:
            arrays[f"{i}/{key}"] = value.numpy()
np.savez(out, **arrays)
print(json.dumps({
    "len": len(ds),
    "episodes": ds.meta.total_episodes,
    "fps": ds.fps,
    "tasks": tasks,
    "task_table": list(ds.meta.tasks.index),
    "stats": sorted(ds.meta.stats),
}))
"""


def load_with_lerobot(root: Path, fps: int, tmp_path: Path) -> tuple[dict, dict]:
    out = tmp_path / "items.npz"
    result = subprocess.run(
        [LEROBOT_PYTHON, "-c", LOAD_WITH_LEROBOT, str(root), str(out), str(fps)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    with np.load(out) as arrays:
        return summary, dict(arrays)


def expected_items(plan):
    """(global index, episode, frame, first and last global index of the episode) per item."""
    for ep, length in enumerate(plan.lengths):
        start = sum(plan.lengths[:ep])
        for t in range(length):
            yield start + t, ep, t, start, start + length - 1


def check_items(plan, summary: dict, arrays: dict) -> None:
    total = sum(plan.lengths)
    assert summary["len"] == total
    assert summary["episodes"] == len(plan.lengths)
    for index, ep, t, first, last in expected_items(plan):
        expected = support.frame(plan, ep, t)
        assert summary["tasks"][str(index)] == expected["task"]
        assert arrays[f"{index}/index"] == index
        assert arrays[f"{index}/episode_index"] == ep
        assert arrays[f"{index}/frame_index"] == t
        assert arrays[f"{index}/timestamp"] == np.float32(t / plan.fps)
        # The action chunk runs on inside the episode and is padded (repeated) past its end.
        chunk = arrays[f"{index}/action"]
        for step in range(3):
            frame_t = min(t + step, last - first)
            np.testing.assert_array_equal(chunk[step], support.frame(plan, ep, frame_t)["action"])
        assert arrays[f"{index}/action_is_pad"].tolist() == [
            t + step > last - first for step in range(3)
        ]
        history = arrays[f"{index}/observation.state"]
        np.testing.assert_array_equal(history[1], expected[support.STATE])
        np.testing.assert_array_equal(
            history[0], support.frame(plan, ep, max(t - 1, 0))[support.STATE]
        )
        if plan.image:
            image = arrays[f"{index}/{support.IMAGE}"]
            np.testing.assert_allclose(
                image, expected[support.IMAGE].transpose(2, 0, 1) / 255.0, atol=1e-6
            )
        if plan.video:
            image = arrays[f"{index}/{support.VIDEO}"] * 255.0
            error = np.abs(image - expected[support.VIDEO].transpose(2, 0, 1)).mean()
            assert error < support.VIDEO_TOLERANCE, (index, error)


def test_lerobot_reads_what_rlctl_wrote(tmp_path: Path) -> None:
    plan = support.DatasetPlan(
        fps=10,
        state_dim=4,
        episodes=(("pick",) * 6, ("place",) * 4 + ("pick",) * 3, ("push",) * 5),
        reward=True,
        image=True,
        video=True,
    )
    support.write(tmp_path / "ds", plan)
    summary, arrays = load_with_lerobot(tmp_path / "ds", plan.fps, tmp_path)
    check_items(plan, summary, arrays)
    assert summary["task_table"] == ["pick", "place", "push"]
    assert set(summary["stats"]) >= {support.STATE, support.VIDEO, support.IMAGE, "index"}


def test_lerobot_reads_a_lerobot_dataset_rlctl_resumed(tmp_path: Path, fixtures_dir: Path) -> None:
    # Appending to LeRobot's own files: new episodes go to new files after LeRobot's.
    root = tmp_path / "ds"
    shutil.copytree(fixtures_dir / "sim_video", root)
    plan = support.DatasetPlan(fps=10, state_dim=6, episodes=(("pick the cube",) * 4, ("new",) * 3))
    with LeRobotV3Writer(options=support.fast_options()).resume(root) as session:
        assert session.num_episodes == 3
        for ep, length in enumerate(plan.lengths):
            for t in range(length):
                frame = support.frame(plan, ep, t)
                frame["observation.images.front"] = np.zeros((48, 64, 3), np.uint8)
                session.add_frame(frame)
            session.save_episode()
    summary, arrays = load_with_lerobot(root, plan.fps, tmp_path)
    assert summary["len"] == 75 + 7 and summary["episodes"] == 5
    assert summary["task_table"] == ["pick the cube", "place the cube", "new"]
    for t in range(4):
        np.testing.assert_array_equal(
            arrays[f"{75 + t}/observation.state"][1], support.frame(plan, 0, t)[support.STATE]
        )
    assert arrays["78/observation.images.front"].max() < 0.05  # the black frames we wrote
