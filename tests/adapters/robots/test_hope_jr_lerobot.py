"""Opt-in (RLCTL_LEROBOT_PYTHON): LeRobot 0.6.1 itself takes rlctl's calibration files for the
Hope JR arm and hand and the Homunculus glove, finds them matching what the emulated motors hold
(so it asks for no calibration), and reads the same joints from the same emulated devices: the
arm's and hand's Feetech buses (the hand's on protocol 1) and the glove's ESP32 lines."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scservo_sdk

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import HopeJrArmConfig, HopeJrHandConfig
from rlctl.adapters.robots.hope_jr import ARM_JOINTS, HAND_MOTORS, hope_jr_arm, hope_jr_hand
from rlctl.adapters.teleop.config import HomunculusGloveConfig
from rlctl.adapters.teleop.homunculus import GLOVE_JOINTS, homunculus_glove
from rlctl.adapters.teleop.virtual_homunculus import VirtualHomunculusBoard
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot

ARM = {1: "sm8512bl"} | dict.fromkeys(range(2, 8), "sts3250")

LEROBOT_READS = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from lerobot.robots.hope_jr import HopeJrArm, HopeJrArmConfig, HopeJrHand, HopeJrHandConfig
    from lerobot.teleoperators.homunculus import HomunculusGlove, HomunculusGloveConfig
    arm_port, hand_port, glove_port, root = sys.argv[1:5]
    root = Path(root)
    out = {}
    arm = HopeJrArm(HopeJrArmConfig(
        port=arm_port, id="jr", calibration_dir=root / "robots/hope_jr_arm"))
    arm.connect(calibrate=False)
    out["arm_calibrated"] = arm.is_calibrated
    out["arm"] = arm.get_observation()
    arm.disconnect()
    hand = HopeJrHand(HopeJrHandConfig(
        port=hand_port, side="right", id="jr", calibration_dir=root / "robots/hope_jr_hand"))
    hand.connect(calibrate=False)
    out["hand_calibrated"] = hand.is_calibrated
    out["hand"] = hand.get_observation()
    hand.send_action({"thumb_mcp.pos": 25.0, "thumb_pip.pos": 25.0})
    hand.disconnect()
    glove = HomunculusGlove(HomunculusGloveConfig(
        port=glove_port, side="right", id="g",
        calibration_dir=root / "teleoperators/homunculus_glove"))
    glove.connect(calibrate=False)
    out["glove_calibrated"] = glove.is_calibrated
    out["glove"] = glove.get_action()
    glove.disconnect()
    print(json.dumps(out))
    """
)


def calibrate(target, store, move, polls) -> None:
    console = ScriptedConsole([], enter_after_polls=polls, on_poll=move)
    CalibrateRobot(store, console, ManualClock())(target, reuse="no")


@pytest.mark.lerobot
@pytest.mark.slow
def test_lerobot_takes_rlctls_calibrations_and_reads_the_same_joints(tmp_path, monkeypatch):
    python = os.environ.get("RLCTL_LEROBOT_PYTHON")
    if not python:
        pytest.skip("set RLCTL_LEROBOT_PYTHON to a Python with lerobot==0.6.1")
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 250.0)
    root = tmp_path / "calibration"
    store = CalibrationFiles(root)
    arm_bus = VirtualServoBus("feetech", ARM, tau_s=0.01).start()
    hand_bus = VirtualServoBus.uniform("feetech", "scs0009", range(1, 17), tau_s=0.01).start()
    board = VirtualHomunculusBoard.glove().start()
    try:
        # rlctl calibrates the three: the arm homed as its motors hold it, ranges recorded.
        for motor in arm_bus.motors:
            motor.set_register("Homing_Offset", 7 * motor.id)
        arm = hope_jr_arm(HopeJrArmConfig(port=arm_bus.port, id="jr"), calibration_store=store)
        arm.connect()

        def arm_moves(poll: int) -> None:
            for motor in arm_bus.motors:
                motor.move_by_hand((1200 if poll % 2 else 2900) + 7 * motor.id)

        calibrate(arm.calibration_targets()[0], store, arm_moves, 3)
        arm.calibration_targets()[0].bus.disable_torque()  # so the joints stay where put
        for i, motor in enumerate(arm_bus.motors):
            motor.move_by_hand(1500 + 150 * i)
        ours_arm = arm.get_observation()["observation.state"]
        arm.disconnect()

        hand = hope_jr_hand(
            HopeJrHandConfig(port=hand_bus.port, side="right", id="jr"), calibration_store=store
        )
        hand.connect()

        def hand_moves(poll: int) -> None:
            for motor in hand_bus.motors:
                motor.move_by_hand(150 if poll % 2 else 850)

        calibrate(hand.calibration_targets()[0], store, hand_moves, 3)
        hand.calibration_targets()[0].bus.disable_torque()
        for i, motor in enumerate(hand_bus.motors):
            motor.move_by_hand(200 + 40 * i)
        ours_hand = hand.get_observation()["observation.state"]
        hand.disconnect()

        glove = homunculus_glove(
            HomunculusGloveConfig(port=board.port, side="right", id="g"), calibration_store=store
        )
        glove.connect()

        def glove_moves(poll: int) -> None:
            board.set_all(800 if poll % 2 else 3300)

        calibrate(glove.calibration_targets()[0], store, glove_moves, 12)
        board.set(**{joint: 1500 + 80 * i for i, joint in enumerate(GLOVE_JOINTS)})
        ours_glove = glove.get_action({})
        for _ in range(30):  # the smoothing settles on the held readings
            ours_glove = glove.get_action({})
        glove.disconnect()

        # What LeRobot's environment may lack: the Feetech SDK and pyserial (ours, linked).
        shim = tmp_path / "lerobot_path"
        shim.mkdir()
        site = Path(scservo_sdk.__file__).parent.parent
        for pattern in ("scservo_sdk", "serial", "feetech_servo_sdk-*.dist-info", "pyserial-*"):
            for found in site.glob(pattern):
                (shim / found.name).symlink_to(found)
        extra = os.environ.get("RLCTL_LEROBOT_EXTRA_PATH", "/tmp/lerobot-extra")
        paths = [p for p in (str(shim), extra, os.environ.get("PYTHONPATH")) if p]
        result = subprocess.run(
            [python, "-c", LEROBOT_READS, arm_bus.port, hand_bus.port, board.port, str(root)],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        )
        assert result.returncode == 0, result.stderr[-3000:]
        theirs = json.loads(result.stdout.strip().splitlines()[-1])
        assert theirs["arm_calibrated"] and theirs["hand_calibrated"]
        assert theirs["glove_calibrated"]
        np.testing.assert_allclose(
            [theirs["arm"][f"{j}.pos"] for j in ARM_JOINTS], ours_arm, atol=0.1
        )
        np.testing.assert_allclose(
            [theirs["hand"][f"{m}.pos"] for m in HAND_MOTORS], ours_hand, atol=0.2
        )
        # LeRobot's glove starts its smoothing on the held readings: the same joints.
        np.testing.assert_allclose(
            [theirs["glove"][f"{m}.pos"] for m in HAND_MOTORS], ours_glove, atol=0.2
        )
        # LeRobot drove the hand with rlctl's calibration: thumb_mcp is reversed on the right.
        assert hand_bus.motor(2).register("Goal_Position") == int(0.75 * 700 + 150)
        assert hand_bus.motor(3).register("Goal_Position") == int(0.25 * 700 + 150)
    finally:
        board.stop()
        hand_bus.stop()
        arm_bus.stop()
