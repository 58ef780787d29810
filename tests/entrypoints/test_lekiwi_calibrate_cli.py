"""`rlctl calibrate --robot.type=lekiwi` as a user runs it: the command in its own process, its
prompts answered on its stdin while the test moves the emulated Feetech motors by hand, as a
person does; the file checked against what LeRobot 0.6.1's `LeKiwi.calibrate` writes for the
same motions (arm homed to half a turn, the wheels not homed at all, the wrist roll and the
wheels given the whole turn), in LeRobot's place; a second connect takes it without asking."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import scservo_sdk

from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.robots.config import LeKiwiConfig
from rlctl.adapters.robots.lekiwi import ARM_MOTORS, BASE_MOTORS, lekiwi
from rlctl.domain.calibration import Calibration

pytestmark = pytest.mark.timeout(180)

MOTORS = (*ARM_MOTORS, *BASE_MOTORS)
FULL_TURN = ("arm_wrist_roll", *BASE_MOTORS)
RANGED = tuple(m for m in ARM_MOTORS if m not in FULL_TURN)
# Where a person left each shaft before calibrating (raw ticks, no offset): the arm roughly in
# the middle of its range, the wheels wherever they stopped.
MIDDLE = dict(zip(MOTORS, (2100, 1980, 2230, 1870, 3000, 2600, 500, 3900, 1234), strict=True))
# Each recorded joint's two extremes reached while ranges are recorded (raw shaft ticks).
SWEEP = {
    "arm_shoulder_pan": (1100, 3050),
    "arm_shoulder_lift": (900, 3100),
    "arm_elbow_flex": (1300, 3300),
    "arm_wrist_flex": (950, 2900),
    "arm_gripper": (2050, 3500),
}
HALF_TURN = 2047  # LeRobot: int((4096 - 1) / 2)


class Output:
    """The command's stdout, gathered by a thread (prompts end without a newline)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.text = ""
        self._lock = threading.Lock()
        assert process.stdout is not None
        self._pipe = process.stdout
        self._process = process
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        fd = self._pipe.fileno()
        while chunk := os.read(fd, 4096):
            with self._lock:
                self.text += chunk.decode("utf-8", "replace")

    def since(self, start: int) -> str:
        with self._lock:
            return self.text[start:]

    def wait_for(self, pattern: str, *, start: int = 0, timeout_s: float = 60.0) -> int:
        """Where `pattern` (a regex) ends in the output after `start`; fails after the timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = re.search(pattern, self.since(start))
            if found:
                return start + found.end()
            if self._process.poll() is not None:
                self._thread.join(timeout=5)
                if not re.search(pattern, self.since(start)):
                    raise AssertionError(f"exited before {pattern!r}; output:\n{self.since(0)}")
            time.sleep(0.02)
        raise AssertionError(f"no {pattern!r} within {timeout_s} s; output:\n{self.since(0)}")


def lerobots_calibration(homings: dict[str, int], mins: dict[str, int], maxes: dict[str, int]):
    """What LeRobot's `LeKiwi.calibrate` saves: ids 1..9, drive mode 0, the arm's half-turn
    homings and the wheels' 0, recorded ranges except the full-turn motors' 0..4095."""
    return {
        name: {
            "id": i,
            "drive_mode": 0,
            "homing_offset": homings.get(name, 0),
            "range_min": 0 if name in FULL_TURN else mins[name],
            "range_max": 4095 if name in FULL_TURN else maxes[name],
        }
        for i, name in enumerate(MOTORS, start=1)
    }


@pytest.fixture
def kiwi_bus():
    bus = VirtualServoBus.uniform("feetech", "sts3215", range(1, 10)).start()
    yield bus
    bus.stop()


def rlctl_calibrate(bus: VirtualServoBus, root: Path) -> subprocess.Popen[bytes]:
    rlctl = Path(sys.executable).with_name("rlctl")
    argv = [str(rlctl), "calibrate", "--robot.type=lekiwi", f"--robot.port={bus.port}"]
    return start([*argv, "--robot.id=kiwi"], root)


LEROBOT_CALIBRATE = """
import sys
from lerobot.robots.lekiwi import LeKiwi, LeKiwiConfig
robot = LeKiwi(LeKiwiConfig(port=sys.argv[1], id="kiwi", cameras={}))
robot.connect()
robot.disconnect()
"""


def start(argv: list[str], root: Path, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        env={**os.environ, "HF_LEROBOT_CALIBRATION": str(root), "PYTHONUNBUFFERED": "1", **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def answer(process: subprocess.Popen[bytes], line: str = "") -> None:
    assert process.stdin is not None
    process.stdin.write(line.encode() + b"\n")
    process.stdin.flush()


def present(shaft: int, homing: int) -> int:
    """A Feetech motor's Present_Position: the shaft less the homing offset, on one turn."""
    return (shaft - homing) % 4096


def calibrate_by_hand(bus: VirtualServoBus, process: subprocess.Popen[bytes]) -> str:
    """What a person does at the prompts of LeRobot's procedure (rlctl's or LeRobot's own):
    the arm left in the middle, Enter; each joint through its range, one after the other, each
    pose held until the live table shows it was read; Enter. Returns the whole output."""
    output = Output(process)
    try:
        at = output.wait_for(r"middle of its range of motion and press ENTER")
        answer(process)
        at = output.wait_for(r"Recording positions\. Press ENTER to stop", start=at)
        homings = {name: MIDDLE[name] - HALF_TURN for name in ARM_MOTORS}
        for name, (low, high) in SWEEP.items():
            motor = bus.motor(MOTORS.index(name) + 1)
            for shaft in (low, high, MIDDLE[name]):
                motor.move_by_hand(shaft)
                row = rf"{name}\s*\|\s*-?\d+\s*\|\s*{present(shaft, homings[name])}\s*\|"
                at = output.wait_for(row, start=at)
        # The wrist roll and the wheels turn too: their range is the whole turn whatever they do.
        for name, shaft in (("arm_wrist_roll", 100), ("base_left_wheel", 2900)):
            bus.motor(MOTORS.index(name) + 1).move_by_hand(shaft)
        answer(process)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    text = output.since(0)
    assert process.returncode == 0, text
    return text


def expected_calibration() -> dict:
    homings = {name: MIDDLE[name] - HALF_TURN for name in ARM_MOTORS}
    mins = {name: present(SWEEP[name][0], homings[name]) for name in RANGED}
    maxes = {name: present(SWEEP[name][1], homings[name]) for name in RANGED}
    return lerobots_calibration(homings, mins, maxes)


def leave_in_the_middle(bus: VirtualServoBus) -> None:
    for i, name in enumerate(MOTORS, start=1):
        bus.motor(i).move_by_hand(MIDDLE[name])


@pytest.mark.slow
def test_calibrate_a_lekiwi_by_moving_its_joints_as_lerobot_does(kiwi_bus, tmp_path):
    leave_in_the_middle(kiwi_bus)
    root = tmp_path / "calibration"
    output = calibrate_by_hand(kiwi_bus, rlctl_calibrate(kiwi_bus, root))

    path = root / "robots" / "lekiwi" / "kiwi.json"  # LeRobot's place for `--robot.id=kiwi`
    assert f"Calibration saved to {path}" in output
    expected = expected_calibration()
    saved = json.loads(path.read_text())
    assert saved == expected
    assert list(saved) == list(MOTORS)  # LeRobot's order: the arm, then the wheels
    for name in MOTORS:
        assert list(saved[name]) == ["id", "drive_mode", "homing_offset", "range_min", "range_max"]
    # The calibration went to the motors: homings and ranges in their registers.
    for i, name in enumerate(MOTORS, start=1):
        motor = kiwi_bus.motor(i)
        assert motor.register("Homing_Offset") == expected[name]["homing_offset"], name
        assert motor.register("Min_Position_Limit") == expected[name]["range_min"], name
        assert motor.register("Max_Position_Limit") == expected[name]["range_max"], name

    # A second connect takes the file as it is: nothing asked, the motors' registers kept, and
    # the arm in the middle of its calibrated range reads near the middle.
    leave_in_the_middle(kiwi_bus)
    robot = lekiwi(
        LeKiwiConfig(port=kiwi_bus.port, id="kiwi", cameras={}),
        calibration_store=CalibrationFiles(root=root),
    )
    robot.connect()
    try:
        assert robot.arm.is_calibrated
        assert robot.arm.bus.calibration is not None
        assert robot.arm.bus.calibration == Calibration.from_json(json.dumps(expected))
        assert (
            kiwi_bus.motor(1).register("Homing_Offset")
            == expected["arm_shoulder_pan"]["homing_offset"]
        )
        # Back in the pose it was homed in (half a turn on every arm motor): LeRobot's degrees,
        # taken from the middle of each recorded range.
        degrees = [
            (HALF_TURN - (expected[m]["range_min"] + expected[m]["range_max"]) / 2) * 360 / 4095
            for m in ARM_MOTORS[:5]
        ]
        state = robot.state()
        assert state.shape == (9,)
        assert state[:5] == pytest.approx(degrees, abs=1e-3)
    finally:
        robot.disconnect()
    assert json.loads(path.read_text()) == expected  # untouched by the connect


@pytest.mark.slow
@pytest.mark.lerobot
def test_lerobots_own_calibration_of_the_same_motions_writes_the_same_file(tmp_path):
    """LeRobot 0.6.1's `LeKiwi.calibrate` on an emulated bus, then `rlctl calibrate` on another,
    each given the same motions: the two files say the same, in the same text."""
    python = os.environ.get("RLCTL_LEROBOT_PYTHON")
    if not python:
        pytest.skip("set RLCTL_LEROBOT_PYTHON to a Python with lerobot==0.6.1")
    # What LeRobot's environment may lack: the Feetech SDK and pyserial (ours, linked).
    shim = tmp_path / "lerobot_path"
    shim.mkdir()
    site = Path(scservo_sdk.__file__).parent.parent
    for pattern in ("scservo_sdk", "serial", "feetech_servo_sdk-*.dist-info", "pyserial-*"):
        for found in site.glob(pattern):
            (shim / found.name).symlink_to(found)
    extra = os.environ.get("RLCTL_LEROBOT_EXTRA_PATH", "/tmp/lerobot-extra")
    pythonpath = os.pathsep.join(p for p in (str(shim), extra, os.environ.get("PYTHONPATH")) if p)
    files = {}
    for tool in ("lerobot", "rlctl"):
        root = tmp_path / tool
        # LeRobot writes each register once, without retrying: on a loaded machine a reply
        # through the pty can come late, and its whole calibration is run again (3 tries).
        for attempt in range(3):
            with VirtualServoBus.uniform("feetech", "sts3215", range(1, 10)) as bus:
                leave_in_the_middle(bus)
                if tool == "rlctl":
                    calibrate_by_hand(bus, rlctl_calibrate(bus, root))
                    break
                argv = [python, "-c", LEROBOT_CALIBRATE, bus.port]
                try:
                    calibrate_by_hand(bus, start(argv, root / str(attempt), PYTHONPATH=pythonpath))
                except AssertionError as error:
                    if "There is no status packet" not in str(error) or attempt == 2:
                        raise
                    continue
                root = root / str(attempt)
                break
        files[tool] = (root / "robots" / "lekiwi" / "kiwi.json").read_text()
    assert json.loads(files["lerobot"]) == expected_calibration()
    # The same text; rlctl ends its files with a newline, which LeRobot's reader takes as well.
    assert files["rlctl"] == files["lerobot"] + "\n"
