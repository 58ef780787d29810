"""LeRobot 0.6.1's own reBot classes, with the real `motorbridge` and `motorbridge-smart-servo`,
against rlctl's emulations: the B601's Damiao motors behind the emulated USB-CAN serial bridge (a
pty), the Arm 102's FashionStar servos on a pty. Each side reads the calibration the other
saved, and both read the same positions.

Opt-in: RLCTL_LEROBOT_PYTHON names LeRobot's Python; LeRobot installs the two packages with its
`rebot` extra, or RLCTL_MOTORBRIDGE_PATH names folders holding them (unpacked wheels) to put on
that Python's path. Skips otherwise.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.motors.virtual_damiao import VirtualDamiaoMotors
from rlctl.adapters.motors.virtual_damiao_bridge import VirtualDamiaoBridge
from rlctl.adapters.motors.virtual_fashionstar import VirtualFashionStarBus
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import REBOT_B601_JOINTS, ROBOT_TYPES, RebotB601FollowerConfig
from rlctl.adapters.robots.rebot_b601_follower import MOTOR_MODELS
from rlctl.adapters.teleop.config import TELEOPERATOR_TYPES
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot

pytestmark = [pytest.mark.lerobot, pytest.mark.slow, pytest.mark.timeout(300)]

SCRIPT = Path(__file__).with_name("lerobot_rebot.py")
_channels = itertools.count()


@pytest.fixture
def lerobot_env(lerobot):
    """The environment under which LeRobot's Python finds motorbridge; skips when it cannot."""
    env = dict(os.environ)
    extra = os.environ.get("RLCTL_MOTORBRIDGE_PATH")
    if extra:
        env["PYTHONPATH"] = os.pathsep.join([extra, env.get("PYTHONPATH", "")]).strip(os.pathsep)
    probe = subprocess.run(
        [os.environ["RLCTL_LEROBOT_PYTHON"], "-c", "import motorbridge, motorbridge_smart_servo"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(
            "LeRobot's Python has no motorbridge / motorbridge-smart-servo: install its `rebot` "
            "extra, or set RLCTL_MOTORBRIDGE_PATH to folders holding the unpacked wheels"
        )
    return lambda *args: lerobot(*args, env=env, timeout=120)


def calibrate(target, folder: Path) -> None:
    CalibrateRobot(CalibrationFiles(folder), ScriptedConsole(answers=[""]), ManualClock())(target)


def test_lerobots_b601_follower_runs_on_the_emulated_bridge(lerobot_env, tmp_path):
    ids = RebotB601FollowerConfig(port="x").motor_can_ids
    motors = {send: (recv, MOTOR_MODELS[name]) for name, (send, recv) in ids.items()}
    channel = f"rebot-lerobot-{next(_channels)}"
    with VirtualDamiaoMotors(channel, motors) as emulated, VirtualDamiaoBridge(channel) as bridge:
        emulated.move(3, -17.0)
        config = ROBOT_TYPES.make(
            "rebot_b601_follower",
            port=bridge.port,
            can_timeout_s=0.2,
            id="lab",
            calibration_dir=str(tmp_path / "b601"),
        )
        robot = config.build(CalibrationFiles(tmp_path))
        robot.connect()
        try:
            calibrate(robot.calibration_targets()[0], tmp_path)
        finally:
            robot.disconnect()
        for motor in emulated.motors.values():
            motor.control_mode = 1  # as a power cycle leaves them: LeRobot sets the modes again

        out = lerobot_env(SCRIPT, "follower", bridge.port, tmp_path / "b601")

        # LeRobot loaded rlctl's file, set the gripper in force-position mode, moved the arm.
        assert out["calibration"]["shoulder_lift"]["range_min"] == -200
        assert emulated.motors[7].control_mode == 4 and emulated.motors[1].control_mode == 1
        for i, name in enumerate(REBOT_B601_JOINTS, 1):
            goal = out["sent"][f"{name}.pos"]
            assert emulated.motors[i].position == pytest.approx(goal, abs=0.05)
            assert out["read"][f"{name}.pos"] == pytest.approx(goal, abs=0.05)
        robot.connect()
        try:
            here = robot.get_observation()["observation.state"]
        finally:
            robot.disconnect()
        expected = [out["read"][f"{name}.pos"] for name in REBOT_B601_JOINTS]
        np.testing.assert_allclose(here, expected, atol=0.05)


def test_lerobots_arm_102_leader_reads_what_rlctl_reads(lerobot_env, tmp_path):
    with VirtualFashionStarBus(ids=range(7)) as servos:
        for servo_id in range(7):
            servos.move(servo_id, 11.0 * servo_id)  # away from the zero pose
        config = TELEOPERATOR_TYPES.make(
            "rebot_102_leader",
            port=servos.port,
            timeout_s=0.2,
            id="hand",
            calibration_dir=str(tmp_path / "arm102"),
        )
        leader = config.build(CalibrationFiles(tmp_path))
        leader.connect()
        try:
            calibrate(leader.calibration_targets()[0], tmp_path)
            for servo_id, angle in enumerate((20.0, 405.0, -30.0, 100.0, -700.0, 15.0, 10.0)):
                servos.move(servo_id, angle)
            ours = leader.get_action({})
        finally:
            leader.disconnect()

        out = lerobot_env(SCRIPT, "leader", servos.port, tmp_path / "arm102")

        saved = json.loads((tmp_path / "arm102/hand.json").read_text())
        assert out["calibration"] == saved
        theirs = [out["read"][f"{name}.pos"] for name in REBOT_B601_JOINTS]
        np.testing.assert_allclose(ours, theirs, atol=0.05)
        np.testing.assert_allclose(ours, [-20, -45, -30, 90, 20, -15, -60], atol=0.05)
