"""`rlctl record --robot.type=unitree_g1 --robot.is_simulation=false ...` as a user types it,
against an emulated G1 bridge (LeRobot's `run_g1_server.py` messages on real ZeroMQ sockets on
localhost), driven by a recorded G1 episode replayed as the teleoperator: the episodes have
LeRobot's features and check clean, the commands reach the robot; the bridge going silent
mid-episode keeps the finished episodes and names the bridge."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.robots.unitree_g1_joints import FEATURE_NAMES
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.domain.features import FeatureSpec
from rlctl.entrypoints.cli.main import cli

from ..adapters.robots.g1_bridge import EmulatedBridge

QUIET = ["--controls=off", "--progress=silent"]
START = np.array([0.01 * i for i in range(29)])


@pytest.fixture
def bridge():
    with EmulatedBridge() as running:
        yield running


def g1_episode(root: Path, frames: int = 12) -> Path:
    """One G1 episode whose actions wave the left elbow from the emulated start pose."""
    names = list(FEATURE_NAMES)
    features = {
        "observation.state": FeatureSpec("observation.state", "float32", (29,), names=names),
        "action": FeatureSpec("action", "float32", (29,), names=names),
    }
    options = WriterOptions(encode_in_subprocess=False, durable=False)
    with LeRobotV3Writer(options=options).create(root, fps=10, features=features) as session:
        for tick in range(frames):
            action = START.copy()
            action[18] += 0.3 * np.sin(tick / 3)
            session.add_frame(
                {
                    "observation.state": START.astype(np.float32),
                    "action": action.astype(np.float32),
                    "task": "wave",
                }
            )
        session.save_episode()
    return root


def record(root: Path, source: Path, bridge: EmulatedBridge, episodes: int, *settings: str):
    return CliRunner().invoke(
        cli,
        [
            "record",
            "--robot.type=unitree_g1",
            "--robot.is_simulation=false",
            "--robot.robot_ip=127.0.0.1",
            f"--robot.lowcmd_port={bridge.lowcmd_port}",
            f"--robot.lowstate_port={bridge.lowstate_port}",
            *settings,
            "--teleop.type=replay",
            f"--teleop.dataset={source}",
            f"--dataset.root={root}",
            "--dataset.single_task=wave",
            f"--dataset.num_episodes={episodes}",
            "--dataset.fps=10",
            "--dataset.episode_time_s=1",
            "--dataset.reset_time_s=0",
            *QUIET,
        ],
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_record_replays_an_episode_onto_the_g1_and_checks_clean(bridge, tmp_path):
    source = g1_episode(tmp_path / "source")
    root = tmp_path / "g1"
    result = record(root, source, bridge, 1)
    assert result.exit_code == 0, result.output
    reader = LeRobotDatasetReader(root)
    meta = reader.meta
    assert meta.robot_type == "unitree_g1"
    assert meta.total_episodes == 1 and len(reader) == 10
    assert meta.features["observation.state"].names == list(FEATURE_NAMES)
    assert meta.features["action"].names == list(FEATURE_NAMES)
    # What was recorded is what reached the robot: LeRobot's message, the replayed elbow.
    frame = reader[4]
    expected = START[18] + 0.3 * np.sin(4 / 3)
    assert frame["action"][18].item() == pytest.approx(expected, abs=1e-5)
    elbows = [m["data"]["motor_cmd"][18]["q"] for m in bridge.commands]
    assert any(abs(q - expected) < 1e-5 for q in elbows)
    assert all(len(m["data"]["motor_cmd"]) == 35 for m in bridge.commands)
    check = CliRunner().invoke(cli, ["dataset", "check", str(root)])
    assert check.exit_code == 0, check.output


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_bridge_going_silent_mid_episode_keeps_the_finished_episodes(bridge, tmp_path):
    source = g1_episode(tmp_path / "source")
    root = tmp_path / "lost"
    done = threading.Event()

    def silence_in_the_second_episode() -> None:
        deadline = time.monotonic() + 120
        while not done.is_set() and time.monotonic() < deadline:
            if len(bridge.commands) >= 15:
                break
            time.sleep(0.01)
        bridge.silence()

    killer = threading.Thread(target=silence_in_the_second_episode, daemon=True)
    killer.start()
    try:
        result = record(root, source, bridge, 4, "--robot.observation_timeout_s=0.3")
    finally:
        done.set()
        killer.join(timeout=10)
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("error: "))
    assert f"the G1 bridge at tcp://127.0.0.1:{bridge.lowstate_port}" in error, error
    assert "run_g1_server" in result.output  # the hint
    reader = LeRobotDatasetReader(root)
    assert reader.meta.total_episodes == 1 and len(reader) == 10
    check = CliRunner().invoke(cli, ["dataset", "check", str(root)])
    assert check.exit_code == 0, check.output


def test_lerobots_simulator_default_is_refused_in_one_line(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "record",
            "--robot.type=unitree_g1",
            "--teleop.type=scripted",
            f"--dataset.root={tmp_path / 'x'}",
            "--dataset.single_task=t",
            *QUIET,
        ],
    )
    assert result.exit_code == 1, result.output
    assert "robot.is_simulation" in result.output and "MuJoCo" in result.output
    assert "--robot.is_simulation=false" in result.output
