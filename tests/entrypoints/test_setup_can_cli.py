"""`rlctl setup-can` as a user types it. Test and speed run against emulated Damiao motors on
python-can's virtual interface; setup runs `ip link` for real, and on a machine without CAN
links it must fail and say so (never report a link it did not bring up)."""

from __future__ import annotations

import itertools
import subprocess

import pytest
from click.testing import CliRunner

from rlctl.adapters.memory.control import ScriptedConsole
from rlctl.adapters.motors.can_setup import CanSetup
from rlctl.adapters.motors.virtual_damiao import VirtualDamiaoMotors
from rlctl.domain.errors import HardwareError, NotSupported
from rlctl.entrypoints.cli.main import cli

pytestmark = pytest.mark.timeout(30)
_channels = itertools.count()
FD = ["dbitrate", "5000000", "fd", "on"]


def invoke(*args: str):
    return CliRunner().invoke(cli, ["setup-can", *args])


@pytest.fixture
def emulated():
    motors = {i: (i + 0x10, "dm4310") for i in (1, 2, 3)}
    with VirtualDamiaoMotors(f"setup-can-{next(_channels)}", motors) as emulated:
        yield emulated


def test_test_mode_lists_the_motors_that_answer_and_moves_none(emulated):
    emulated.fault(3, 0xE)
    result = invoke(
        "--mode=test",
        f"--interfaces={emulated.channel}",
        "--can_interface=virtual",
        "--motor_ids=[1,2,3,4]",
        "--timeout=0.3",
    )
    assert result.exit_code == 0, result.output
    assert "motor 0x01 (joint_1): ✓ answers on 0x11, disabled" in result.output
    assert "motor 0x03 (joint_3): ✓ answers on 0x13, overload" in result.output
    assert "motor 0x04 (joint_4): ✗ no answer" in result.output
    assert "3/4 motors found" in result.output and "motors found: 3" in result.output
    assert not any(m.enabled for m in emulated.motors.values())


def test_test_mode_fails_when_no_motor_answers(emulated):
    result = invoke(
        "--mode=test",
        f"--interfaces={emulated.channel}",
        "--can_interface=virtual",
        "--motor_ids=[5,6]",
        "--timeout=0.1",
    )
    assert result.exit_code == 1
    assert "no motor answered" in result.output and "24 V" in result.output


def test_speed_mode_times_round_trips(emulated):
    result = invoke(
        "--mode=speed",
        f"--interfaces={emulated.channel}",
        "--can_interface=virtual",
        "--speed_iterations=5",
        "--timeout=0.3",
    )
    assert result.exit_code == 0, result.output
    assert "motor 0x01: 5/5 answered, mean round trip" in result.output


def test_test_mode_on_a_link_that_does_not_exist_says_so():
    result = invoke("--mode=test", "--interfaces=rlctlnocan7")
    assert result.exit_code == 1
    assert "rlctlnocan7" in result.output


def test_setup_of_a_link_that_does_not_exist_fails_and_says_which():
    # What `ip` answers on this machine: no such device (or no `ip` at all). Never a success.
    result = invoke("--mode=setup", "--interfaces=rlctlnocan7")
    assert result.exit_code == 1
    assert "could not bring up 1 of 1 CAN interface(s): rlctlnocan7" in result.output


def test_setup_runs_lerobots_ip_commands_and_checks_the_link_came_up():
    calls: list[list[str]] = []

    def run(command, **_):
        calls.append(command)
        if command[:3] == ["ip", "-details", "link"]:
            out = "5: can0: <NOARP,UP,LOWER_UP,ECHO> mtu 72\n    can <FD> state ERROR-ACTIVE"
            return subprocess.CompletedProcess(command, 0, out + " fd on", "")
        return subprocess.CompletedProcess(command, 0, "", "")

    console = ScriptedConsole()
    CanSetup(console, run=run).setup(["can0"])
    ip = [c[c.index("ip") :] for c in calls if "-details" not in c]
    assert ip == [
        ["ip", "link", "set", "can0", "down"],
        ["ip", "link", "set", "can0", "type", "can", "bitrate", "1000000", *FD],
        ["ip", "link", "set", "can0", "up"],
    ]
    assert "  ✓ can0: UP (CAN FD)" in console.shown


def test_a_link_that_stays_down_is_a_failure():
    def run(command, **_):
        if "-details" in command:
            return subprocess.CompletedProcess(command, 0, "5: can0: <NOARP,ECHO> mtu 16", "")
        return subprocess.CompletedProcess(command, 0, "", "")

    with pytest.raises(HardwareError, match="can0: it is DOWN after setup"):
        CanSetup(ScriptedConsole(), use_fd=False, run=run).setup(["can0"])
    with pytest.raises(NotSupported, match="socketcan links"):
        CanSetup(ScriptedConsole(), can_interface="virtual").setup(["vcan"])
