"""Recording with a ZMQ camera whose publisher stops mid-recording: one error naming the camera,
and the episodes finished before it are kept and check clean."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.entrypoints.cli.main import cli

PUBLISHER = Path(__file__).parents[1] / "adapters" / "cameras" / "zmq_publisher.py"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_zmq_camera_lost_mid_recording_keeps_the_finished_episodes_and_names_it(tmp_path):
    process = subprocess.Popen(
        [sys.executable, str(PUBLISHER), "head", "32", "24", "20", "-1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    root = tmp_path / "lost"
    done = threading.Event()

    def stop_publishing_once_an_episode_is_saved() -> None:
        deadline = time.monotonic() + 90
        while not done.is_set() and time.monotonic() < deadline:
            try:
                if LeRobotMetaReader().read_meta(root).total_episodes >= 1:
                    break
            except Exception:
                pass
            time.sleep(0.05)
        process.kill()

    killer = threading.Thread(target=stop_publishing_once_an_episode_is_saved, daemon=True)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        killer.start()
        result = CliRunner().invoke(
            cli,
            [
                "record",
                "--robot.type=scripted",
                "--teleop.type=scripted",
                "--robot.cameras={head: {type: zmq, server_address: 127.0.0.1, "
                f"port: {port}, camera_name: head, width: 32, height: 24, fps: 20, "
                "timeout_ms: 5000, warmup_s: 0}}",
                f"--dataset.root={root}",
                "--dataset.single_task=look",
                "--dataset.num_episodes=5",
                "--dataset.fps=20",
                "--dataset.episode_time_s=1",
                "--dataset.reset_time_s=0",
                "--controls=off",
                "--progress=silent",
            ],
        )
    finally:
        done.set()
        killer.join(timeout=10)
        process.kill()
        process.wait(timeout=10)
    assert result.exit_code == 1, result.output
    said = result.output
    # One error line naming the camera (by its name in the robot's config when the robot reads
    # it, by its address alone when the capture itself failed first) and where it listens.
    error = next(line for line in said.splitlines() if line.startswith("error: "))
    assert f"zmq head@127.0.0.1:{port}: " in error, said
    assert error.startswith(("error: camera 'head', zmq", "error: zmq")), said
    assert "no frame from the publisher" in said or "the camera stopped delivering" in said
    reader = LeRobotDatasetReader(root)
    assert reader.meta.total_episodes >= 1 and len(reader) == 20 * reader.meta.total_episodes
    assert reader[0]["observation.images.head"].shape == (3, 24, 32)
    check = CliRunner().invoke(cli, ["dataset", "check", str(root)])
    assert check.exit_code == 0, check.output
