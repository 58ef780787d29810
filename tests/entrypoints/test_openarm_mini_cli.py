"""`rlctl calibrate | teleoperate | setup-motors --teleop.type=openarm_mini` as a user types
them: the Mini's eight Feetech servos on a virtual bus the real SDK talks to, the OpenArm
follower's Damiao motors emulated on python-can's virtual interface; a Mini motor that stops
answering is named."""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Callable

import pytest
from click.testing import CliRunner

from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.motors.virtual_damiao import VirtualDamiaoMotors
from rlctl.adapters.robots.config import OpenArmFollowerConfig
from rlctl.adapters.teleop.openarm_mini import OpenArmMiniLeader
from rlctl.entrypoints.cli.main import cli

pytestmark = pytest.mark.timeout(60)

TYPE = "--teleop.type=openarm_mini"
QUIET = ["--controls=off", "--progress=silent"]
MOTORS = [f"joint_{i}" for i in range(1, 8)] + ["gripper"]
_channels = itertools.count()


class Answers(io.RawIOBase):
    """stdin that answers each prompt with Enter, doing what a hand does first: `before[n]()`
    runs when the n-th answer is read."""

    def __init__(self, before: list[Callable[[], None]]) -> None:
        self._before = before
        self._served = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        if len(buffer) == 0:
            return 0
        if self._served < len(self._before):
            self._before[self._served]()
        self._served += 1
        buffer[0:1] = b"\n"
        return 1


@pytest.fixture
def follower(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path / "calibration"))
    # Replies through a pty are late on a loaded 2-core machine; real arms need no such margin.
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 1000.0)
    config = OpenArmFollowerConfig(port="x")
    motors = {send: (recv, model) for send, recv, model in config.motor_config.values()}
    with VirtualDamiaoMotors(f"openarm-mini-cli-{next(_channels)}", motors) as emulated:
        yield emulated


@pytest.fixture
def mini():
    bus = VirtualServoBus.uniform("feetech", "sts3215", range(1, 9), tau_s=0.01).start()
    for motor in bus.motors:
        motor.move_by_hand(2048)
    yield bus
    bus.stop()


def robot_args(emulated) -> list[str]:
    return [
        "--robot.type=openarm_follower",
        f"--robot.port={emulated.channel}",
        "--robot.can_interface=virtual",
        "--robot.can_timeout_s=0.2",
        "--robot.can_retries=1",
        "--robot.side=right",
        "--robot.id=lab",
    ]


def mini_args(bus: VirtualServoBus) -> list[str]:
    port = f"--teleop.port={bus.port}"
    return ["--teleop.type=openarm_mini", port, "--teleop.side=right", "--teleop.id=hand"]


def calibrate_mini(bus: VirtualServoBus, tmp_path) -> dict:
    gripper = bus.motor(8)
    answers = Answers(
        [
            lambda: None,  # hanging straight down, gripper closed: every motor at 2048
            lambda: gripper.move_by_hand(2048),  # closed
            lambda: gripper.move_by_hand(2048 - 1400),  # open: below closed, drive mode 1
        ]
    )
    result = CliRunner().invoke(cli, ["calibrate", *mini_args(bus)], input=answers)
    assert result.exit_code == 0, result.output
    assert "CLOSE the gripper of openarm_mini hand" in result.output
    saved = tmp_path / "calibration/teleoperators/openarm_mini/hand.json"
    return json.loads(saved.read_text())


@pytest.mark.slow
def test_calibrate_a_mini_then_teleoperate_an_openarm_with_it(follower, mini, tmp_path):
    saved = calibrate_mini(mini, tmp_path)
    assert list(saved) == MOTORS
    assert saved["joint_6"] == {
        "id": 6,
        "drive_mode": 0,
        "homing_offset": 1,
        "range_min": 0,
        "range_max": 4095,
    }
    assert saved["gripper"] == {
        "id": 8,
        "drive_mode": 1,
        "homing_offset": 1,
        "range_min": 647,
        "range_max": 2047,
    }
    result = CliRunner().invoke(cli, ["calibrate", *robot_args(follower)], input="\n")
    assert result.exit_code == 0, result.output

    # The Mini (homed: raw = shaft - 1): joint_6 at +30 degrees drives the follower's joint_7;
    # joint_2 at -20 degrees is flipped for the right arm; the gripper half open is -32.5.
    mini.motor(6).move_by_hand(1 + 2047.5 + 30 * 4095 / 360)
    mini.motor(2).move_by_hand(1 + 2047.5 - 20 * 4095 / 360)
    mini.motor(8).move_by_hand(1 + 1347)
    result = CliRunner().invoke(
        cli,
        [
            "teleoperate",
            *robot_args(follower),
            *mini_args(mini),
            "--fps=30",
            "--teleop_time_s=0.3",
            *QUIET,
        ],
    )
    assert result.exit_code == 0, result.output
    position = {name: follower.motors[i].position for i, name in enumerate(MOTORS, 1)}
    assert position["joint_7"] == pytest.approx(30.0, abs=0.1)
    assert position["joint_2"] == pytest.approx(20.0, abs=0.1)
    assert position["gripper"] == pytest.approx(-32.5, abs=0.1)
    assert position["joint_6"] == pytest.approx(0.0, abs=0.1)
    assert not any(m.torque_enabled for m in mini.motors)


def test_a_mini_motor_that_stops_answering_mid_run_is_named(follower, mini, tmp_path, monkeypatch):
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 200.0)  # it will not answer
    result = CliRunner().invoke(cli, ["calibrate", *robot_args(follower)], input="\n")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "calibration/teleoperators/openarm_mini"
    folder.mkdir(parents=True)
    full_turn = {"drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": 4095}
    (folder / "hand.json").write_text(
        json.dumps({name: {"id": i, **full_turn} for i, name in enumerate(MOTORS, 1)})
    )
    reads = itertools.count(1)
    original = OpenArmMiniLeader.get_action

    def get_action(self, observation):
        if next(reads) == 4:
            mini.unplug(4)
        return original(self, observation)

    monkeypatch.setattr(OpenArmMiniLeader, "get_action", get_action)
    result = CliRunner().invoke(
        cli,
        ["teleoperate", *robot_args(follower), *mini_args(mini), "--teleop_time_s=2", *QUIET],
    )
    assert result.exit_code == 1, result.output
    assert "'joint_4' (id 4)" in result.output and mini.port in result.output
    assert not any(m.enabled for m in follower.motors.values())  # the follower let go


@pytest.mark.slow
def test_setup_motors_gives_the_minis_motors_lerobots_ids(monkeypatch):
    # One new motor at the factory id 1, plugged in alone for each prompt. Only the factory rate
    # is scanned: a scan of every rate is the buses' tests' business.
    monkeypatch.setattr(FeetechMotorBus, "_family_baudrates", lambda self: [1_000_000])
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 250.0)
    fresh = VirtualServoBus.uniform("feetech", "sts3215", [1]).start()
    port = fresh.port
    try:
        result = CliRunner().invoke(
            cli,
            [
                "setup-motors",
                "--teleop.type=openarm_mini",
                f"--teleop.port={port}",
                "--teleop.id=m",
            ],
            input="\n" * 8,
        )
        assert result.exit_code == 0, result.output
        assert "openarm_mini m: 8 motors set up" in result.output
        # Set up from the gripper (id 8) to joint_1, as LeRobot goes: the last is id 1.
        assert result.output.index("'gripper'") < result.output.index("'joint_1'")
    finally:
        fresh.stop()


@pytest.mark.slow
def test_two_minis_drive_a_bimanual_openarm(follower, tmp_path):
    config = OpenArmFollowerConfig(port="x")
    motors = {send: (recv, model) for send, recv, model in config.motor_config.values()}
    right = VirtualDamiaoMotors(f"openarm-mini-bi-{next(_channels)}", motors).start()
    minis = {
        side: VirtualServoBus.uniform("feetech", "sts3215", range(1, 9), tau_s=0.01).start()
        for side in ("left", "right")
    }
    try:
        folder = tmp_path / "calibration/teleoperators/openarm_mini"
        folder.mkdir(parents=True)
        full_turn = {"drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": 4095}
        for side, bus in minis.items():
            (folder / f"hands_{side}.json").write_text(
                json.dumps({name: {"id": i, **full_turn} for i, name in enumerate(MOTORS, 1)})
            )
            for motor in bus.motors:
                motor.move_by_hand(2048)
            # joint_1 at +10 degrees: negated on either side, as LeRobot does.
            bus.motor(1).move_by_hand(2047.5 + 10 * 4095 / 360)
        robot = ["--robot.type=bi_openarm_follower", "--robot.id=duo"]
        for side, bus in (("left", follower), ("right", right)):
            robot += [
                f"--robot.{side}_arm_config.port={bus.channel}",
                f"--robot.{side}_arm_config.side={side}",
                f"--robot.{side}_arm_config.can_interface=virtual",
                f"--robot.{side}_arm_config.can_timeout_s=0.2",
            ]
        result = CliRunner().invoke(cli, ["calibrate", *robot], input="\n\n")
        assert result.exit_code == 0, result.output
        teleop = ["--teleop.type=bi_openarm_mini", "--teleop.id=hands"] + [
            f"--teleop.{side}_arm_config.port={bus.port}" for side, bus in minis.items()
        ]
        result = CliRunner().invoke(
            cli,
            ["teleoperate", *robot, *teleop, "--fps=30", "--teleop_time_s=0.3", *QUIET],
        )
        assert result.exit_code == 0, result.output
        for arm in (follower, right):
            assert arm.motors[1].position == pytest.approx(-10.0, abs=0.1)
            assert arm.motors[2].position == pytest.approx(0.0, abs=0.1)
    finally:
        right.stop()
        for bus in minis.values():
            bus.stop()
