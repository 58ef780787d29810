"""`rlctl record | teleoperate --teleop.type=phone --teleop.phone_os=android` on a virtual SO-101
(the real Feetech SDK on an emulated bus) and a synthetic arm URDF, a fake phone sending what the
WebXR page sends: the joint goals come from inverse kinematics and pass the robot's guard."""

from __future__ import annotations

import json
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import websocket
from click.testing import CliRunner

from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.entrypoints.cli.main import cli

from ..adapters.teleop.conftest import synthetic_arm_urdf
from .conftest import GoalLog

QUIET = ["--controls=off", "--progress=silent"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PhoneHand(threading.Thread):
    """A phone held with the move button down, A held; raised to 6 cm at 10 cm a second once
    `moving()` says so (the arm's first goal: the loop is running), by the clock, so that a
    loaded machine's slower messages move it as far within the episode."""

    def __init__(self, port: int, moving: Callable[[], bool] = lambda: True) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.moving = moving
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> None:
        deadline = time.monotonic() + 60
        ws = None
        while ws is None and not self.stop.is_set() and time.monotonic() < deadline:
            try:
                ws = websocket.create_connection(
                    f"wss://127.0.0.1:{self.port}/ws",
                    sslopt={"cert_reqs": ssl.CERT_NONE},
                    timeout=5,
                )
            except OSError:
                time.sleep(0.05)
        if ws is None:
            return
        try:
            moving_since = None
            while not self.stop.wait(0.01):
                if moving_since is None and self.sent >= 20 and self.moving():
                    moving_since = time.monotonic()
                moved_s = 0.0 if moving_since is None else time.monotonic() - moving_since
                y = min(0.1 * moved_s, 0.06)
                state = {
                    "position": {"x": 0.0, "y": y, "z": 0.0},
                    "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0},
                    "move": True,
                    "gripper": "open",
                    "fps": 100,
                    "scale": 1.0,
                    "reservedButtonA": True,
                    "reservedButtonB": False,
                    "device": "Phone",
                    "message": "",
                }
                try:
                    ws.send(json.dumps({"type": "pose", "data": state}))
                except OSError:
                    return
                self.sent += 1
        finally:
            ws.close()


@pytest.fixture
def arm(so_calibration, monkeypatch, tmp_path) -> Iterator[tuple[VirtualServoBus, Path]]:
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 1000.0)
    so_calibration("robots", "so_follower", "f")
    bus = VirtualServoBus.uniform("feetech", "sts3215", range(1, 7), tau_s=0.02).start()
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(synthetic_arm_urdf())
    yield bus, urdf
    bus.stop()


def _args(bus: VirtualServoBus, urdf: Path, port: int) -> list[str]:
    return [
        "--robot.type=so101_follower",
        "--robot.id=f",
        f"--robot.port={bus.port}",
        "--robot.max_relative_target=4",
        "--teleop.type=phone",
        "--teleop.phone_os=android",
        "--teleop.host=127.0.0.1",
        f"--teleop.port={port}",
        f"--teleop.urdf_path={urdf}",
        "--teleop.calibration_timeout_s=20",
    ]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_record_and_teleoperate_with_a_phone_on_a_virtual_so101(arm, tmp_path, monkeypatch):
    bus, urdf = arm
    goals = GoalLog(monkeypatch)
    port = _free_port()
    hand = PhoneHand(port, moving=lambda: bool(goals.pairs))
    hand.start()
    root = tmp_path / "phone"
    try:
        result = CliRunner().invoke(
            cli,
            [
                "record",
                *_args(bus, urdf, port),
                f"--dataset.root={root}",
                "--dataset.single_task=raise the arm",
                "--dataset.num_episodes=1",
                "--dataset.fps=15",
                "--dataset.episode_time_s=2",
                "--dataset.reset_time_s=0",
                *QUIET,
            ],
            catch_exceptions=False,
        )
    finally:
        hand.stop.set()
        hand.join(timeout=10)
    assert result.exit_code == 0, result.output
    reader = LeRobotDatasetReader(root)
    names = reader.meta.features["action"].names
    assert names == [
        f"{m}.pos"
        for m in (
            "shoulder_pan",
            "shoulder_lift",
            "elbow_flex",
            "wrist_flex",
            "wrist_roll",
            "gripper",
        )
    ]
    frames = [reader[i] for i in range(len(reader))]
    actions = np.stack([f["action"].numpy() for f in frames])
    states = np.stack([f["observation.state"].numpy() for f in frames])
    # The phone went up: inverse kinematics lifted the shoulder (negative about y) and
    # bent the elbow; button A opened the gripper.
    # (By how much depends on how many of the phone's poses a loaded machine delivered in
    # the episode: a degree at least, against no motion or the other way.)
    assert actions[-1, 1] < actions[0, 1] - 1.0
    assert actions[-1, 5] > actions[0, 5] + 10.0
    # Every goal passed the robot's guard: at most 4 degrees from where each joint was read
    # before it was sent (the arm moves on between, so the recorded states cannot tell).
    assert goals.largest_step() <= 4.0 + 1e-3
    steps = np.abs(actions - states)
    assert steps[:, :5].max() >= 3.5  # and the goals did drive the joints
    assert math.isfinite(float(actions.sum()))

    hand = PhoneHand(port)
    hand.start()
    try:
        result = CliRunner().invoke(
            cli,
            ["teleoperate", *_args(bus, urdf, port), "--fps=30", "--teleop_time_s=0.5", *QUIET],
            catch_exceptions=False,
        )
    finally:
        hand.stop.set()
        hand.join(timeout=10)
    assert result.exit_code == 0, result.output
    assert "teleoperated: 15 ticks" in result.output


def test_an_ios_phone_is_refused_before_anything_moves(arm):
    bus, urdf = arm
    result = CliRunner().invoke(
        cli,
        [
            "teleoperate",
            "--robot.type=so101_follower",
            "--robot.id=f",
            f"--robot.port={bus.port}",
            "--teleop.type=phone",
            f"--teleop.urdf_path={urdf}",
            "--teleop_time_s=0.1",
            *QUIET,
        ],
    )
    assert result.exit_code != 0
    assert "HEBI" in result.output and "--teleop.phone_os=android" in result.output
