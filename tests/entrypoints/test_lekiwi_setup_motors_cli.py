"""`rlctl setup-motors --robot.type=lekiwi`: LeKiwi's nine motors given their ids one at a time,
in LeRobot's order (the arm from its gripper, then the wheels from the right one), on an emulated
Feetech bus where a fresh motor answers at the factory id 1."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.lekiwi import ARM_MOTORS, BASE_MOTORS, SETUP_ORDER
from rlctl.entrypoints.cli.main import cli

pytestmark = pytest.mark.timeout(120)


def test_lekiwis_order_is_lerobots():
    assert SETUP_ORDER == (
        "arm_gripper",
        "arm_wrist_roll",
        "arm_wrist_flex",
        "arm_elbow_flex",
        "arm_shoulder_lift",
        "arm_shoulder_pan",
        "base_right_wheel",
        "base_back_wheel",
        "base_left_wheel",
    )


@pytest.mark.slow
def test_setup_motors_sets_lekiwis_nine_ids_one_motor_at_a_time(monkeypatch):
    # Only the factory rate is scanned: a scan of every rate is the buses' tests' business.
    monkeypatch.setattr(FeetechMotorBus, "_family_baudrates", lambda self: [1_000_000])
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 500.0)
    fresh = VirtualServoBus.uniform("feetech", "sts3215", [1]).start()
    try:
        result = CliRunner().invoke(
            cli,
            ["setup-motors", "--robot.type=lekiwi", f"--robot.port={fresh.port}", "--robot.id=k"],
            input="\n" * 9,
        )
    finally:
        fresh.stop()
    assert result.exit_code == 0, result.output
    ids = {name: i for i, name in enumerate((*ARM_MOTORS, *BASE_MOTORS), start=1)}
    said = re.findall(r"'(\w+)' motor id set to (\d+)", result.output)
    assert said == [(motor, str(ids[motor])) for motor in SETUP_ORDER]
    prompts = result.output.index("'arm_gripper' motor only")
    assert prompts < result.output.index("'base_right_wheel' motor only")
    assert "lekiwi k: 9 motors set up" in result.output
    assert fresh.motors[0].id == ids["base_left_wheel"]  # the last one set up
