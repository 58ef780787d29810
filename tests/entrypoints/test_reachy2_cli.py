"""`rlctl record --robot.type=reachy2 --teleop.type=reachy2_teleoperator` as a user types it,
against an emulated Reachy 2 (a real gRPC server on localhost): two recorded episodes have
LeRobot's features and check clean; the server dying mid-episode keeps the finished episodes and
names the host."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.entrypoints.cli.main import cli

from ..adapters.robots.reachy2_server import ReachyServer

QUIET = ["--controls=off", "--progress=silent"]


@pytest.fixture
def server():
    with ReachyServer() as running:
        yield running


def record(root, server: ReachyServer, episodes: int, *settings: str):
    return CliRunner().invoke(
        cli,
        [
            "record",
            "--robot.type=reachy2",
            "--robot.ip_address=127.0.0.1",
            f"--robot.sdk_port={server.port}",
            f"--robot.port={server.port}",
            "--robot.with_left_teleop_camera=true",
            "--robot.camera_width=160",
            "--robot.camera_height=120",
            *settings,
            "--teleop.type=reachy2_teleoperator",
            "--teleop.ip_address=127.0.0.1",
            f"--teleop.sdk_port={server.port}",
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
@pytest.mark.timeout(240)
def test_record_two_episodes_with_lerobots_features_that_check_clean(server, tmp_path):
    root = tmp_path / "reachy"
    result = record(root, server, 2)
    assert result.exit_code == 0, result.output
    reader = LeRobotDatasetReader(root)
    meta = reader.meta
    assert meta.total_episodes == 2 and len(reader) == 20
    assert meta.robot_type == "reachy2"
    names = meta.features["observation.state"].names
    assert names[:3] == ["neck_yaw.pos", "neck_pitch.pos", "neck_roll.pos"]
    assert names[-3:] == ["mobile_base.vx", "mobile_base.vy", "mobile_base.vtheta"]
    assert len(names) == 24 and meta.features["action"].names == names
    assert meta.features["observation.images.teleop_left"].shape == (120, 160, 3)
    frame = reader[0]
    assert frame["observation.images.teleop_left"].shape == (3, 120, 160)
    # The teleoperator read the robot's goals; the robot was sent them, through the guard.
    expected = server.robot.degrees("l_arm", "elbow", "yaw")
    index = names.index("l_elbow_yaw.pos")
    assert frame["action"][index].item() == pytest.approx(expected, abs=1e-3)
    assert "SendComponentsCommands" in server.robot.calls
    assert np.isfinite(frame["observation.state"].numpy()).all()
    check = CliRunner().invoke(cli, ["dataset", "check", str(root)])
    assert check.exit_code == 0, check.output


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_server_dying_mid_episode_keeps_the_finished_episodes(server, tmp_path):
    root = tmp_path / "lost"
    done = threading.Event()

    def stop_in_the_second_episode() -> None:
        # One state read at connect (robot), one (teleoperator), two per tick: the 30th is in
        # the second episode.
        deadline = time.monotonic() + 120
        while not done.is_set() and time.monotonic() < deadline:
            if server.robot.calls.count("GetReachyState") >= 30:
                break
            time.sleep(0.01)
        server.stop()

    killer = threading.Thread(target=stop_in_the_second_episode, daemon=True)
    killer.start()
    try:
        result = record(
            root,
            server,
            5,
            "--robot.request_timeout_s=0.3",
            "--robot.observation_timeout_s=0.5",
            "--teleop.request_timeout_s=0.3",
        )
    finally:
        done.set()
        killer.join(timeout=10)
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("error: "))
    # Whichever call of the tick met the dead server first is the one named (a read: "the
    # Reachy 2 SDK server at ... does not answer"; a command: "no command taken by the Reachy 2
    # ... (SendDirection) does not answer"), always with the server's address.
    assert f"127.0.0.1:{server.port}" in error and "does not answer" in error, error
    assert "sdk_port" in result.output  # the hint
    reader = LeRobotDatasetReader(root)
    assert reader.meta.total_episodes == 1 and len(reader) == 10
    check = CliRunner().invoke(cli, ["dataset", "check", str(root)])
    assert check.exit_code == 0, check.output
