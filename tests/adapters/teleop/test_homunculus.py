"""The Homunculus arm and glove (`homunculus_arm`, `homunculus_glove`) on virtual boards that
print what the ESP32 firmware prints, through a pty: LeRobot's line layouts, calibration in
LeRobot's place and format, its normalization, smoothing and glove-to-Hope-JR-hand translation,
and a board that stops sending or sends noise named."""

from __future__ import annotations

import contextlib
import json
import time

import attrs
import numpy as np
import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.teleop.config import (
    HomunculusArmConfig,
    HomunculusGloveConfig,
    TeleoperatorConfig,
)
from rlctl.adapters.teleop.homunculus import (
    ARM_JOINTS,
    GLOVE_JOINTS,
    HAND_MOTORS,
    glove_to_hope_jr_hand,
    homunculus_arm,
    homunculus_glove,
    parse_arm_line,
)
from rlctl.adapters.teleop.virtual_homunculus import VirtualHomunculusBoard
from rlctl.application.ports.robot import ACTION_KEY
from rlctl.application.use_cases.calibrate_robot import CalibrateRobot
from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.config import converter
from rlctl.domain.errors import CalibrationError, ConfigError, HardwareError, NotSupported

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def store(tmp_path):
    return CalibrationFiles(tmp_path / "calibration")


@pytest.fixture
def glove_board():
    with VirtualHomunculusBoard.glove() as board:
        yield board


@pytest.fixture
def arm_board():
    with VirtualHomunculusBoard.arm() as board:
        yield board


def lerobot_glove_to_hand(glove: dict[str, float]) -> dict[str, float]:
    """LeRobot 0.6.1's `homunculus_glove_to_hope_jr_hand`, written out for the index finger
    and the pinky (splay 0.3 and 0.5)."""
    out = {}
    for finger, splay in (("index", 0.3), ("pinky", 0.5)):
        flex, abd = glove[f"{finger}_mcp_flexion"], glove[f"{finger}_mcp_abduction"]
        out[f"{finger}_radial_flexor"] = abd * splay + flex * (1 - splay)
        out[f"{finger}_ulnar_flexor"] = -abd * splay + flex * (1 - splay)
        out[f"{finger}_pip_dip"] = glove[f"{finger}_dip"]
    return out


def test_the_glove_maps_to_the_hope_jr_hands_motors_as_lerobot_does():
    glove = {joint: float(i * 7 % 100) for i, joint in enumerate(GLOVE_JOINTS)}
    glove["index_mcp_abduction"] = -40.0
    glove["pinky_mcp_abduction"] = 60.0
    hand = glove_to_hope_jr_hand(glove)
    assert list(hand) == list(HAND_MOTORS)
    expected = lerobot_glove_to_hand(glove)
    for motor, value in expected.items():
        assert hand[motor] == pytest.approx(value)
    assert hand["thumb_dip"] == glove["thumb_dip"]


def test_the_arms_line_is_read_at_lerobots_fields():
    tokens = [str(100 + i) for i in range(21)]
    assert parse_arm_line(tokens) == {
        "shoulder_pitch": 119,
        "shoulder_yaw": 118,
        "shoulder_roll": 120,
        "elbow_flex": 117,
        "wrist_roll": 116,
        "wrist_yaw": 101,
        "wrist_pitch": 100,
    }
    assert parse_arm_line(tokens[:20]) is None


def test_configs_take_lerobots_fields_and_refuse_a_wrong_side():
    config = converter.structure(
        {"type": "homunculus_glove", "port": "/dev/ttyACM1", "side": "left", "id": "g"},
        TeleoperatorConfig,
    )
    assert isinstance(config, HomunculusGloveConfig) and config.baud_rate == 115_200
    with pytest.raises(ConfigError, match="side must be left or right"):
        HomunculusGloveConfig(port="x", side="up")


def test_calibrating_the_arm_records_its_ranges_in_lerobots_format(arm_board, store, tmp_path):
    arm = homunculus_arm(
        HomunculusArmConfig(port=arm_board.port, id="exo"), calibration_store=store
    )
    arm.connect()
    try:
        assert not arm.stream.is_calibrated

        def move(poll: int) -> None:  # each joint to both ends of its range, one by one
            joint = ARM_JOINTS[(poll - 1) // 2 % len(ARM_JOINTS)]
            arm_board.set(**{joint: 1000 if poll % 2 else 3000})
            time.sleep(0.02)  # the board prints it before the next read

        console = ScriptedConsole([], enter_after_polls=2 * len(ARM_JOINTS) + 1, on_poll=move)
        CalibrateRobot(store, console, ManualClock())(arm.stream, reuse="no")
        saved = json.loads(
            (tmp_path / "calibration/teleoperators/homunculus_arm/exo.json").read_text()
        )
        assert list(saved) == list(ARM_JOINTS)
        assert saved["elbow_flex"] == {
            "id": 3,
            "drive_mode": 0,
            "homing_offset": 0,
            "range_min": 1000,
            "range_max": 3000,
        }
        assert not any("middle of its range" in p for p in console.prompts)
        assert arm.stream.is_calibrated

        # -100..100 of the range, smoothed by LeRobot's moving average (n=50).
        arm_board.set_all(3000)
        time.sleep(0.05)  # a line with the new readings has come
        first = arm.get_action({})
        assert first == pytest.approx(np.full(7, 100.0))
        arm_board.set(elbow_flex=2000)
        time.sleep(0.05)
        second = arm.get_action({})
        alpha = 2 / 51
        assert second[3] == pytest.approx(alpha * 0.0 + (1 - alpha) * 100.0, abs=1e-4)
        assert arm.action_features[ACTION_KEY].names == [f"{j}.pos" for j in ARM_JOINTS]
    finally:
        arm.disconnect()


def test_a_glove_calibration_from_lerobot_drives_the_hand_goals(glove_board, store, tmp_path):
    """A calibration written in LeRobot's format (ids from 0, the right hand's inversions)
    normalizes the glove as LeRobot does; the action is the Hope JR hand's."""
    inverted = {"thumb_mcp", "thumb_cmc", "thumb_pip", "thumb_dip", "index_mcp_abduction"}
    inverted |= {"middle_mcp_abduction", "ring_mcp_abduction", "ring_mcp_flexion"}
    inverted |= {"pinky_mcp_abduction"}
    calibration = Calibration(
        {
            j: MotorCalibration(i, int(j in inverted), 0, 1000, 3000)
            for i, j in enumerate(GLOVE_JOINTS)
        }
    )
    folder = tmp_path / "calibration/teleoperators/homunculus_glove"
    folder.mkdir(parents=True)
    (folder / "g.json").write_text(calibration.to_json())
    glove_board.set_all(2500)  # 75 % of the range; -100..100 joints: 50
    glove = homunculus_glove(
        HomunculusGloveConfig(port=glove_board.port, side="right", id="g"),
        calibration_store=store,
    )
    glove.connect()
    try:
        assert glove.stream.is_calibrated
        action = dict(zip(HAND_MOTORS, glove.get_action({}), strict=True))
        # thumb_cmc inverted: 100 - 75; index: flexion 75, abduction -50 (inverted).
        assert action["thumb_cmc"] == pytest.approx(25.0)
        assert action["index_radial_flexor"] == pytest.approx(-50 * 0.3 + 75 * 0.7)
        assert action["index_ulnar_flexor"] == pytest.approx(50 * 0.3 + 75 * 0.7)
        assert action["index_pip_dip"] == pytest.approx(75.0)
        # pinky: abduction inverted too; splay 0.5.
        assert action["pinky_radial_flexor"] == pytest.approx(-50 * 0.5 + 75 * 0.5)
        assert glove.action_features[ACTION_KEY].names == [f"{m}.pos" for m in HAND_MOTORS]
    finally:
        glove.disconnect()


def test_calibrating_the_glove_goes_finger_by_finger_and_inverts_lerobots_joints(
    glove_board, store
):
    glove = homunculus_glove(
        HomunculusGloveConfig(port=glove_board.port, side="left", id="g"),
        calibration_store=store,
    )
    glove.connect()
    try:

        def move(poll: int) -> None:
            glove_board.set_all(600 if poll % 2 else 3600)
            time.sleep(0.02)

        console = ScriptedConsole([], enter_after_polls=12, on_poll=move)
        outcome = CalibrateRobot(store, console, ManualClock())(glove.stream, reuse="no")
        fingers = [s for s in console.shown if s.startswith("Move the ")]
        assert [s.split()[2] for s in fingers] == ["thumb", "index", "middle", "ring", "pinky"]
        saved = outcome.calibration
        assert [saved[j].id for j in GLOVE_JOINTS] == list(range(16))
        left = {"thumb_cmc", "index_dip", "middle_mcp_abduction", "middle_dip"}
        left |= {"pinky_mcp_abduction", "pinky_dip"}
        assert {j for j in GLOVE_JOINTS if saved[j].drive_mode} == left
        # The readings are smoothed (n=10) before their extremes are kept, as in LeRobot.
        assert all(600 < saved[j].range_min < 2048 < saved[j].range_max < 3600 for j in saved)
    finally:
        glove.disconnect()


def test_a_board_that_stops_sending_is_named(glove_board, store):
    config = HomunculusGloveConfig(port=glove_board.port, side="right", id="g", timeout_s=0.3)
    glove = homunculus_glove(config, calibration_store=store)
    glove.connect()
    try:
        glove_board.pause()
        time.sleep(0.05)
        with contextlib.suppress(HardwareError):  # a line printed before the pause
            glove.stream.bus.sync_read("Present_Position", normalize=False)
        with pytest.raises(HardwareError, match=r"homunculus_glove sent nothing for 0\.3 s") as err:
            glove.stream.bus.sync_read("Present_Position", normalize=False)
        assert err.value.where == glove_board.port
    finally:
        glove.disconnect()


def test_garbled_lines_are_skipped_and_only_garble_is_named(glove_board, store):
    # Long enough that a loaded machine's board thread prints its noise within it (at 0.3 s a
    # CI run once saw no line at all: "sent nothing").
    config = HomunculusGloveConfig(port=glove_board.port, side="right", id="g", timeout_s=2.0)
    glove = homunculus_glove(config, calibration_store=store)
    glove.connect()
    try:
        glove_board.garble(3)  # a few bad lines among good ones: readings go on
        for _ in range(5):
            glove.stream.bus.sync_read("Present_Position", normalize=False)
        glove_board.garble(10_000)
        time.sleep(0.05)
        with contextlib.suppress(HardwareError):  # a good line printed before the noise
            glove.stream.bus.sync_read("Present_Position", normalize=False)
        with pytest.raises(HardwareError, match="unreadable line") as err:
            glove.stream.bus.sync_read("Present_Position", normalize=False)
        assert "16 integers" in err.value.message
    finally:
        glove.disconnect()


def test_a_reading_no_12_bit_adc_gives_is_a_garbled_line(glove_board, store):
    """Once taken as a reading, 999999 became the recorded range of calibration: the joint then
    read wrong for good."""
    config = HomunculusGloveConfig(port=glove_board.port, side="right", id="g", timeout_s=2.0)
    glove = homunculus_glove(config, calibration_store=store)
    glove.connect()
    try:
        glove_board.set(thumb_cmc=999_999)
        time.sleep(0.05)
        with contextlib.suppress(HardwareError):  # a good line printed before
            glove.stream.bus.sync_read("Present_Position", normalize=False)
        with pytest.raises(HardwareError, match="unreadable line"):
            glove.stream.bus.sync_read("Present_Position", normalize=False)
        glove_board.set(thumb_cmc=4095)
        reading = glove.stream.bus.sync_read("Present_Position", normalize=False)
        assert reading["thumb_cmc"] <= 4095
    finally:
        glove.disconnect()


def test_a_silent_or_missing_board_fails_to_connect_with_its_port(store, tmp_path):
    with VirtualHomunculusBoard.glove() as board:
        board.pause()
        glove = homunculus_glove(
            HomunculusGloveConfig(port=board.port, side="right", timeout_s=0.2),
            calibration_store=store,
        )
        with pytest.raises(HardwareError, match=r"sent nothing for 0\.4 s"):
            glove.connect()
        assert not glove.is_connected
    missing = homunculus_glove(
        HomunculusGloveConfig(port=str(tmp_path / "ttyNONE"), side="right"),
        calibration_store=store,
    )
    with pytest.raises(HardwareError, match="cannot open"):
        missing.connect()


def test_an_uncalibrated_glove_says_how_to_calibrate_and_cannot_drive_motors(glove_board, store):
    glove = homunculus_glove(
        HomunculusGloveConfig(port=glove_board.port, side="right"), calibration_store=store
    )
    glove.connect()
    try:
        with pytest.raises(CalibrationError, match="no calibration") as err:
            glove.get_action({})
        assert "rlctl calibrate --teleop.type=homunculus_glove" in str(err.value.hint)
        with pytest.raises(NotSupported, match="sensors, not motors"):
            glove.stream.bus.setup_motor("thumb_cmc")
    finally:
        glove.disconnect()


def test_a_calibration_plan_whose_groups_leave_a_joint_out_is_refused(glove_board, store):
    glove = homunculus_glove(
        HomunculusGloveConfig(port=glove_board.port, side="right", id="g"),
        calibration_store=store,
    )
    stream = glove.stream
    stream._plan = attrs.evolve(stream.calibration_plan, range_groups=(("thumb", ("thumb_cmc",)),))
    glove.connect()
    try:
        with pytest.raises(CalibrationError, match="groups leave out thumb_mcp"):
            CalibrateRobot(store, ScriptedConsole([]), ManualClock())(stream, reuse="no")
    finally:
        glove.disconnect()
