"""A robot and a camera from another distribution, installed, then recorded with as a user types it.

`tests/plugins/toy_robot` is what an outside package ships: config classes, an adapter module,
and entry points in the groups `rlctl.robots` and `rlctl.cameras`. It is installed into a folder
of its own the way an installer lays a wheel out (the `install_plugin` fixture: the package, and
a `.dist-info` with its `METADATA` and the `entry_points.txt` written from its pyproject.toml),
which the `rlctl` processes get on their path; nothing in rlctl names it, so the types are found
only through `importlib.metadata`'s entry points, as a `pip install`ed package's are.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "toy_robot"
RLCTL = Path(sys.executable).with_name("rlctl")


@pytest.fixture(scope="module")
def plugin_site(install_plugin, tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("toy_robot_site")
    install_plugin(PLUGIN, site)
    return site


def rlctl_cli(site: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLCTL_PROGRESS": "silent"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run([str(RLCTL), *args], capture_output=True, text=True, timeout=300, env=env)


RECORD = [
    "record", "--robot.type=toy", "--robot.id=head",
    "--robot.cameras={card: {type: toy_card, width: 32, height: 24}}",
    "--teleop.type=scripted", "--teleop.joints=pan,tilt", "--teleop.amplitude=40",
    "--dataset.single_task=look around", "--dataset.fps=20", "--dataset.episode_time_s=0.5",
    "--dataset.reset_time_s=0", "--controls=off", "--progress=silent",
]  # fmt: skip


@pytest.mark.slow  # three rlctl processes, two of which record
def test_a_plugin_robot_and_camera_record_through_the_cli(plugin_site, tmp_path):
    listed = rlctl_cli(plugin_site, "record", "--robot.type=toy", "--help")
    assert listed.returncode == 0, listed.stderr
    said = " ".join(listed.stdout.split())
    assert "scripted, toy." in said and "synthetic, toy_card." in said
    assert "--robot.limit_deg float = 90.0" in said

    # Three episodes asked for; the head stops answering in the third (its 25th observation,
    # each episode takes 10 frames): the first two are kept, the part that failed is named.
    root = tmp_path / "head"
    recorded = rlctl_cli(
        plugin_site, *RECORD, f"--dataset.root={root}", "--dataset.num_episodes=3",
        "--robot.max_relative_target=5", "--robot.fail_at=25",
    )  # fmt: skip
    assert recorded.returncode == 1, recorded.stderr
    assert "the toy head stopped answering" in recorded.stderr
    assert "check its cable" in recorded.stderr and "Traceback" not in recorded.stderr

    reader = LeRobotDatasetReader(root)
    assert reader.meta.robot_type == "toy" and reader.meta.total_episodes == 2
    assert reader.meta.features["action"].names == ["pan.pos", "tilt.pos"]
    assert reader.meta.features["observation.state"].names == ["pan.pos", "tilt.pos"]
    assert reader[0]["observation.images.card"].shape == (3, 24, 32)
    actions = np.stack([reader[i]["action"].numpy() for i in range(len(reader))])
    # The plugin's guard capped each step at 5 degrees: what was stored is what was sent.
    assert np.abs(np.diff(actions, axis=0)).max() <= 5.0 + 1e-4
    assert np.abs(actions).max() > 0


def test_without_the_plugin_its_robot_type_is_unknown_with_the_known_ones_listed(tmp_path):
    result = rlctl_cli(None, *RECORD, f"--dataset.root={tmp_path / 'x'}")
    assert result.returncode == 1, result.stderr
    assert "unknown robot type 'toy'" in result.stderr
    assert "so101_follower" in result.stderr and "'rlctl.robots'" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "x").exists()
