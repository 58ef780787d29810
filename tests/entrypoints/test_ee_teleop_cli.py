"""`rlctl record --teleop.type=gamepad | keyboard_ee --teleop.urdf_path=...` on a virtual SO-101
(the real Feetech SDK on an emulated bus) and a synthetic arm URDF: scripted HID reports and key
events come in through the `hid` and `pynput` modules the teleoperators import, the deltas go
through LeRobot's end-effector steps and inverse kinematics, and the joint goals pass the
robot's guard."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.kinematics.robot_kinematics import RobotKinematics
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.entrypoints.cli.main import cli

from ..adapters.teleop.conftest import MOTORS, synthetic_arm_urdf
from .conftest import GoalLog

QUIET = ["--controls=off", "--progress=silent"]
MAX_STEP = 4.0


@pytest.fixture
def arm(so_calibration, monkeypatch, tmp_path) -> Iterator[tuple[VirtualServoBus, Path]]:
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 1000.0)
    so_calibration("robots", "so_follower", "f")
    bus = VirtualServoBus.uniform("feetech", "sts3215", range(1, 7), tau_s=0.02).start()
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(synthetic_arm_urdf())
    yield bus, urdf
    bus.stop()


def fake_hid(report: list[int]) -> types.ModuleType:
    """The `hid` module with one Logitech pad that reports `report` (a held stick) once, then
    nothing new (hidapi's non-blocking read: `[]`)."""

    class Device:
        def __init__(self) -> None:
            self.sent = False

        def open_path(self, path: bytes) -> None:
            pass

        def set_nonblocking(self, value: int) -> None:
            pass

        def read(self, size: int) -> list[int]:
            if self.sent:
                return []
            self.sent = True
            return list(report)

        def close(self) -> None:
            pass

    module = types.ModuleType("hid")
    module.enumerate = lambda: [  # type: ignore[attr-defined]
        {"product_string": "Logitech RumblePad 2 USB", "path": b"/dev/hidraw0"}
    ]
    module.device = Device  # type: ignore[attr-defined]
    return module


def fake_pynput(held: list[str]) -> types.ModuleType:
    """`pynput` whose listener, once started, says `held` keys went down (and stay down)."""

    class Listener:
        def __init__(self, on_press: Callable[[Any], None], on_release: Callable[[Any], None]):
            self.on_press = on_press
            self.alive = False

        def start(self) -> None:
            self.alive = True
            for name in held:
                self.on_press(types.SimpleNamespace(char=None, name=name))

        def is_alive(self) -> bool:
            return self.alive

        def stop(self) -> None:
            self.alive = False

    keyboard = types.ModuleType("pynput.keyboard")
    keyboard.Listener = Listener  # type: ignore[attr-defined]
    package = types.ModuleType("pynput")
    package.keyboard = keyboard  # type: ignore[attr-defined]
    return package


def _record(bus: VirtualServoBus, urdf: Path, root: Path, teleop: list[str]) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "record",
            "--robot.type=so101_follower",
            "--robot.id=f",
            f"--robot.port={bus.port}",
            f"--robot.max_relative_target={MAX_STEP:g}",
            *teleop,
            f"--teleop.urdf_path={urdf}",
            "--teleop.end_effector_step_sizes=0.01,0.01,0.01",
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
    assert result.exit_code == 0, result.output


def _check(root: Path, urdf: Path, gripper_goal: float, goals: GoalLog) -> None:
    reader = LeRobotDatasetReader(root)
    assert reader.meta.features["action"].names == [f"{m}.pos" for m in MOTORS]
    frames = [reader[i] for i in range(len(reader))]
    actions = np.stack([f["action"].numpy() for f in frames]).astype(float)
    states = np.stack([f["observation.state"].numpy() for f in frames]).astype(float)
    assert np.all(np.isfinite(actions))
    kin = RobotKinematics(urdf, joint_names=list(MOTORS))
    start, end = kin.forward_kinematics(states[0]), kin.forward_kinematics(states[-1])
    # The end effector went up (delta_z +1 each tick, 1 cm a tick at most), and not sideways.
    assert end[2, 3] > start[2, 3] + 0.03, (start[:3, 3], end[:3, 3])
    assert abs(end[1, 3] - start[1, 3]) < 0.01
    # The gripper was sent to its goal (rate-limited by the guard), and every goal passed the
    # guard: at most MAX_STEP from where each joint was read before it was sent.
    assert abs(actions[-1, 5] - gripper_goal) < abs(states[0, 5] - gripper_goal)
    assert len(goals.pairs) >= len(frames)
    assert goals.largest_step() <= MAX_STEP + 1e-3


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_gamepad_drives_a_virtual_so101_through_inverse_kinematics(arm, tmp_path, monkeypatch):
    bus, urdf = arm
    # Right stick pushed forward (delta_z +1), LT held (gripper: close, LeRobot's 0).
    report = [0, 128, 128, 128, 0, 0, 4, 0]
    monkeypatch.setitem(sys.modules, "hid", fake_hid(report))
    root = tmp_path / "gamepad"
    goals = GoalLog(monkeypatch)
    _record(bus, urdf, root, ["--teleop.type=gamepad"])
    _check(root, urdf, gripper_goal=100.0, goals=goals)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_keyboard_drives_a_virtual_so101_through_inverse_kinematics(arm, tmp_path, monkeypatch):
    bus, urdf = arm
    # Right Shift held (delta_z +1), right Ctrl held (gripper: open, LeRobot's 2).
    monkeypatch.setitem(sys.modules, "pynput", fake_pynput(["shift_r", "ctrl_r"]))
    monkeypatch.setitem(sys.modules, "pynput.keyboard", sys.modules["pynput"].keyboard)
    root = tmp_path / "keyboard"
    goals = GoalLog(monkeypatch)
    _record(bus, urdf, root, ["--teleop.type=keyboard_ee"])
    _check(root, urdf, gripper_goal=0.0, goals=goals)


def test_without_a_urdf_the_deltas_are_refused_by_a_joint_arm(arm, monkeypatch):
    bus, _ = arm
    monkeypatch.setitem(sys.modules, "hid", fake_hid([0, 128, 128, 128, 128, 0, 0, 0]))
    result = CliRunner().invoke(
        cli,
        [
            "teleoperate",
            "--robot.type=so101_follower",
            "--robot.id=f",
            f"--robot.port={bus.port}",
            "--teleop.type=gamepad",
            "--teleop_time_s=0.1",
            *QUIET,
        ],
    )
    assert result.exit_code != 0
    assert "(4,)" in result.output and "(6,)" in result.output


def test_a_missing_urdf_is_named_before_anything_moves(arm, monkeypatch, tmp_path):
    bus, _ = arm
    monkeypatch.setitem(sys.modules, "hid", fake_hid([0, 128, 128, 128, 0, 0, 0, 0]))
    result = CliRunner().invoke(
        cli,
        [
            "teleoperate",
            "--robot.type=so101_follower",
            "--robot.id=f",
            f"--robot.port={bus.port}",
            "--teleop.type=gamepad",
            f"--teleop.urdf_path={tmp_path / 'nowhere.urdf'}",
            "--teleop_time_s=0.1",
            *QUIET,
        ],
    )
    assert result.exit_code != 0
    assert "no URDF file at" in result.output and "urdf_path" in result.output
