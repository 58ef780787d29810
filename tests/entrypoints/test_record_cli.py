"""`rlctl record | teleoperate | replay | calibrate` as a user types them: on a simulator, on a
virtual SO-101 (follower and leader on two virtual servo buses the real Feetech SDK talks to),
and a real recording process killed mid-episode, then resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from click.testing import CliRunner

from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.so_follower import SO_JOINTS
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.entrypoints.cli.main import cli

QUIET = ["--controls=off", "--progress=silent"]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.slow
def test_record_on_the_sim_robot_with_the_metaworld_expert(tmp_path):
    root = tmp_path / "mw"
    result = invoke(
        "record",
        "--robot.type=sim",
        "--robot.env.type=metaworld",
        "--robot.env.task=reach-v3",
        "--robot.env.obs_type=state",
        "--robot.env.episode_length=12",
        "--teleop.type=metaworld_expert",
        f"--dataset.root={root}",
        "--dataset.num_episodes=2",
        "--dataset.fps=10",
        "--dataset.episode_time_s=5",
        "--dataset.reset_time_s=0",
        *QUIET,
    )
    assert result.exit_code == 0, result.output
    assert "recorded 2 episode(s), 24 frames" in result.output
    reader = LeRobotDatasetReader(root)
    assert reader.meta.total_episodes == 2 and len(reader) == 24
    assert reader.meta.robot_type == "sim_metaworld"
    item = reader[3]
    assert item["observation.environment_state"].shape == (39,)
    assert item["action"].shape == (4,) and item["task"]  # the env's own task text


def arms(follower: VirtualServoBus, leader: VirtualServoBus) -> list[str]:
    return [
        "--robot.type=so101_follower",
        f"--robot.port={follower.port}",
        "--robot.id=f",
        "--teleop.type=so101_leader",
        f"--teleop.port={leader.port}",
        "--teleop.id=l",
    ]


@pytest.mark.slow
def test_record_teleoperate_and_replay_on_a_virtual_so101(so101, tmp_path):
    follower, leader = so101
    root = tmp_path / "wave"
    result = invoke(
        "record",
        *arms(follower, leader),
        "--robot.cameras={front: {type: synthetic, width: 64, height: 48, fps: 15}}",
        f"--dataset.root={root}",
        "--dataset.single_task=wave",
        "--dataset.num_episodes=2",
        "--dataset.fps=15",
        "--dataset.episode_time_s=1",
        "--dataset.reset_time_s=0.2",
        *QUIET,
    )
    assert result.exit_code == 0, result.output
    reader = LeRobotDatasetReader(root)
    assert reader.meta.robot_type == "so_follower" and len(reader) == 30
    assert reader.meta.features["action"].names == [f"{m}.pos" for m in SO_JOINTS]
    actions = np.stack([reader[i]["action"].numpy() for i in range(len(reader))])
    states = np.stack([reader[i]["observation.state"].numpy() for i in range(len(reader))])
    assert actions.std(axis=0).min() > 1.0  # the leader moved, and its moves were recorded
    # The follower follows: its state trails the actions sent to it by about a tick.
    assert np.abs(states[1:15] - actions[:14]).mean() < np.abs(actions).mean()
    assert reader[0]["observation.images.front"].shape == (3, 48, 64)
    assert follower.motor(1).torque_enabled is False  # torque off on disconnect

    result = invoke(
        "teleoperate", *arms(follower, leader), "--fps=30", "--teleop_time_s=0.5", *QUIET
    )
    assert result.exit_code == 0, result.output
    assert "teleoperated: 15 ticks" in result.output

    result = invoke(
        "replay",
        *arms(follower, leader)[:3],
        f"--dataset.root={root}",
        "--dataset.episode=1",
        "--progress=silent",
    )
    assert result.exit_code == 0, result.output
    assert "replayed episode 1: 15 actions" in result.output


@pytest.mark.slow
def test_calibrate_offers_the_saved_calibration(so101):
    follower, _ = so101
    result = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--robot.type=so101_follower",
            f"--robot.port={follower.port}",
            "--robot.id=f",
        ],
        input="\n",
    )
    assert result.exit_code == 0, result.output
    assert "using the saved calibration" in result.output


def test_record_without_a_robot_or_a_location_says_what_to_add(tmp_path):
    result = CliRunner().invoke(cli, ["record", f"--dataset.root={tmp_path / 'x'}"])
    assert result.exit_code == 1
    assert "no robot given" in result.output and "--robot.type=so101_follower" in result.output
    result = CliRunner().invoke(cli, ["record", "--robot.type=scripted", "--teleop.type=scripted"])
    assert result.exit_code == 1 and "no dataset location" in result.output
    result = CliRunner().invoke(cli, ["calibrate"])
    assert result.exit_code == 1 and "either a robot or a teleoperator" in result.output


def test_a_record_failing_at_start_leaves_no_dataset_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path / "calibration"))
    root = tmp_path / "out" / "a" / "ds"
    result = CliRunner().invoke(
        cli,
        [
            "record",
            "--robot.type=so101_follower",
            f"--robot.port={tmp_path / 'no-such-port'}",
            "--robot.id=f",
            "--teleop.type=so101_leader",
            f"--teleop.port={tmp_path / 'no-such-port-either'}",
            "--teleop.id=l",
            f"--dataset.root={root}",
            *QUIET,
        ],
    )
    assert result.exit_code == 1 and "cannot open the serial port" in result.output
    # The folders it made go with the dataset: the same command can run once the port is right.
    assert not (tmp_path / "out").exists()


def test_a_resumed_record_failing_at_start_leaves_the_dataset_as_it_was(tmp_path):
    root = tmp_path / "ds"
    synthetic = "{front: {type: synthetic, width: 64, height: 48, fps: 20}}"
    common = [
        "record",
        "--robot.type=scripted",
        "--teleop.type=scripted",
        f"--dataset.root={root}",
        "--dataset.fps=20",
        "--dataset.episode_time_s=0.25",
        "--dataset.reset_time_s=0",
        "--dataset.num_episodes=1",
        *QUIET,
    ]
    first = invoke(*common, f"--robot.cameras={synthetic}")
    assert first.exit_code == 0, first.output

    def files() -> dict[Path, bytes]:
        # Resuming rewrites stats.json from the episodes' own statistics (equal to the last
        # digit or so), whatever happens next.
        kept = (p for p in root.rglob("*") if p.is_file() and p.name != "stats.json")
        return {p: p.read_bytes() for p in kept}

    before = files()
    missing = "{front: {type: opencv, index_or_path: %s, width: 64, height: 48}}"
    result = CliRunner().invoke(
        cli, [*common, "--resume=true", f"--robot.cameras={missing % (tmp_path / 'none.mp4')}"]
    )
    assert result.exit_code == 1 and "no such device or video file" in result.output
    assert files() == before
    assert LeRobotMetaReader().read_meta(root).total_episodes == 1


def test_print_config_reads_lerobots_camera_syntax():
    result = CliRunner().invoke(
        cli,
        [
            "record",
            "--robot.type=so101_follower",
            "--robot.port=/dev/ttyACM0",
            "--robot.cameras={front: {type: opencv, index_or_path: 0, width: 640, height: 480}}",
            "--print-config",
        ],
    )
    assert result.exit_code == 0, result.output
    config = json.loads(result.output)
    assert config["robot"]["cameras"]["front"]["type"] == "opencv"
    assert config["robot"]["use_degrees"] is True
    assert config["dataset"]["fps"] == 30 and config["dataset"]["store"] == "lerobot"


def record_process(root: Path, *extra: str, log_level: str = "info") -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from rlctl.entrypoints.cli.main import main; main()",
            "--log-format=json",
            f"--log-level={log_level}",
            "record",
            "--robot.type=scripted",
            "--robot.cameras={front: {type: synthetic, width: 64, height: 48, fps: 20}}",
            "--teleop.type=scripted",
            f"--dataset.root={root}",
            "--dataset.single_task=swing",
            "--dataset.fps=20",
            "--dataset.episode_time_s=0.5",
            "--dataset.reset_time_s=0",
            *QUIET,
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def kill_tree(process: subprocess.Popen) -> None:
    children = psutil.Process(process.pid).children(recursive=True)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    psutil.wait_procs(children, timeout=10)


@pytest.mark.slow
def test_sigkill_mid_episode_keeps_earlier_episodes_and_resume_continues(tmp_path):
    root = tmp_path / "ds"
    process = record_process(root, "--dataset.num_episodes=50", log_level="debug")
    assert process.stdout is not None
    saved = written = 0
    for line in process.stdout:
        event = json.loads(line) if line.startswith("{") else {}
        saved += event.get("event") == "episode saved"  # handed to the writer
        written += event.get("event") == "episode written"  # on disk
        if saved >= 3 and written >= 2 and event.get("event") == "recording episode":
            break
    time.sleep(0.2)  # a few frames into the next episode
    kill_tree(process)

    checked = invoke("dataset", "check", str(root))
    assert checked.exit_code == 0, checked.output  # an interrupted commit is only a warning
    reader = LeRobotDatasetReader(root)
    kept = reader.meta.total_episodes
    # Every episode said written survives; those saved after it may still have been on their
    # way to the disk (at most two wait: the recorder waits for the disk beyond).
    assert written <= kept <= saved
    assert [e.length for e in reader.meta.episodes] == [10] * kept
    assert reader[len(reader) - 1]["observation.images.front"].shape == (3, 48, 64)

    resumed = record_process(root, "--dataset.num_episodes=2", "--resume=true")
    output, _ = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, output
    reader = LeRobotDatasetReader(root)
    assert reader.meta.total_episodes == kept + 2 and len(reader) == 10 * (kept + 2)
    assert LeRobotMetaReader().read_meta(root).tasks == ("swing",)
    assert "ok, 0 warnings" in invoke("dataset", "check", str(root)).output


def _stop_during_an_episode(root: Path, send) -> tuple[int, str]:
    """Start a recording, let one episode be saved and the next one begin, then `send` the
    stop; return the exit status and the output."""
    process = record_process(root, "--dataset.num_episodes=5", "--dataset.episode_time_s=3")
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 120
    for line in process.stdout:
        lines.append(line)
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == "recording episode" and event.get("episode") == 1:
            break
        assert time.monotonic() < deadline, "".join(lines)
    time.sleep(0.5)  # some frames of the second episode (of 60)
    send(process)
    try:
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            kill_tree(process)
    return process.returncode, "".join(lines) + output


def _ctrl_c_under_uv(process: subprocess.Popen) -> None:
    # The terminal's SIGINT, then uv's copy of it (`uv run` forwards it to its child), then the
    # person pressing again while the episode is being saved.
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)


@pytest.mark.slow
@pytest.mark.parametrize(
    "send",
    [_ctrl_c_under_uv, lambda p: p.send_signal(signal.SIGTERM)],
    ids=["ctrl-c-under-uv", "sigterm"],
)
def test_a_repeated_ctrl_c_or_sigterm_closes_the_dataset_whole(tmp_path, send):
    """As LeRobot, the episode under way is dropped and the finished ones kept; a second
    signal (uv forwards each Ctrl-C again) or SIGTERM must not cut the closing of the dataset."""
    root = tmp_path / "ds"
    code, output = _stop_during_an_episode(root, send)
    # 130 from the command; a press that lands after the dataset is closed, while the process
    # exits, ends it by SIGINT's own status (-2): the data is whole either way.
    assert code in (130, -signal.SIGINT), output
    assert "interrupted: keeping the finished episodes" in output
    assert "recorded 1 episode(s), 60 frames" in output
    meta = LeRobotMetaReader().read_meta(root)
    assert meta.total_episodes == 1 and meta.episodes[0].length == 60, output
    checked = invoke("dataset", "check", str(root))
    assert checked.exit_code == 0 and "ok, 0 warnings" in checked.output, checked.output
