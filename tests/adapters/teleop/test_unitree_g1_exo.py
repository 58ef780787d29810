"""The Unitree G1 exoskeleton (`--teleop.type=unitree_g1`) on virtual arm boards (pseudo-terminals
printing the boards' lines) with stand-in URDFs: LeRobot's calibration file and angle formula,
the guided calibration, the arm IK (a pose to joints and back), the Hub path for the URDFs, the
joysticks, and the faults a person meets (a silent board, garbage, no calibration)."""

from __future__ import annotations

import json
import math
import os
import time
from collections import deque
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pinocchio", reason="the G1 arm IK needs the unitree_g1 extra")
pytest.importorskip("casadi", reason="the G1 arm IK needs the unitree_g1 extra")

from rlctl.adapters.kinematics.g1_arm_ik import (
    ARM_JOINTS,
    ASSETS_REPO,
    G1_URDF,
    assets_folder,
    load_exo_to_g1,
    load_g1_arm_ik,
)
from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedConsole, ScriptedControls
from rlctl.adapters.memory.dataset_writer import InMemoryDatasetWriter
from rlctl.adapters.memory.robot import ScriptedRobot
from rlctl.adapters.robots.calibration_files import CalibrationFiles
from rlctl.adapters.teleop.config import (
    TELEOPERATOR_TYPES,
    ExoskeletonArmPortConfig,
    TeleoperatorConfig,
    UnitreeG1TeleoperatorConfig,
)
from rlctl.adapters.teleop.unitree_g1_exo import (
    REMOTE_AXES,
    UnitreeG1Exoskeleton,
    fit_ellipse,
    parse_raw16,
)
from rlctl.adapters.teleop.virtual_unitree_g1_exo import (
    VirtualExoArm,
    true_calibration,
    write_assets,
)
from rlctl.application.ports.hub import HubError
from rlctl.application.ports.teleoperator import SelfCalibrating
from rlctl.application.use_cases.record_episodes import (
    DatasetTarget,
    RecordEpisodes,
    RecordSettings,
)
from rlctl.domain.config import converter
from rlctl.domain.errors import (
    CalibrationError,
    ConfigError,
    HardwareError,
    NotSupported,
)
from rlctl.domain.exoskeleton import EXO_JOINTS, ExoCalibration

ARM_Q = tuple(f"{name}.q" for name, _ in ARM_JOINTS)


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    return write_assets(tmp_path_factory.mktemp("g1_assets"))


def _arms(period_s):
    with (
        VirtualExoArm("left", period_s=period_s) as left,
        VirtualExoArm("right", period_s=period_s, seed=7) as right,
    ):
        yield {"left": left, "right": right}


@pytest.fixture
def arms():
    """Boards at 200 samples a second: the reader keeps up while the IK runs beside it."""
    yield from _arms(0.005)


@pytest.fixture
def fast_arms():
    """Boards at 1000 samples a second, for a calibration's thousands of readings."""
    yield from _arms(0.001)


def _config(arms, assets, tmp_path, **kwargs) -> UnitreeG1TeleoperatorConfig:
    return UnitreeG1TeleoperatorConfig(
        id="exo",
        calibration_dir=str(tmp_path / "calib"),
        assets=str(assets),
        left_arm_config=ExoskeletonArmPortConfig(port=arms["left"].port),
        right_arm_config=ExoskeletonArmPortConfig(port=arms["right"].port),
        **kwargs,
    )


def _write_true_calibrations(arms, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for side, arm in arms.items():
        (folder / f"exo_{side}.json").write_text(true_calibration(arm).to_json())


# --- config and registry -----------------------------------------------------------------


def test_the_config_takes_lerobots_fields_through_the_registry():
    config = converter.structure(
        {
            "type": "unitree_g1",
            "id": "exo",
            "left_arm_config": {"port": "/dev/ttyACM0"},
            "right_arm_config": {"port": "/dev/ttyACM1", "baud_rate": 115200},
            "frozen_joints": "left_wrist_yaw_joint, right_wrist_yaw_joint",
        },
        TeleoperatorConfig,
    )
    assert isinstance(config, UnitreeG1TeleoperatorConfig)
    assert config.frozen == ("left_wrist_yaw_joint", "right_wrist_yaw_joint")
    assert config.assets == ASSETS_REPO
    assert "unitree_g1" in TELEOPERATOR_TYPES.names()
    with pytest.raises(ConfigError, match="only the left exoskeleton arm has a port") as err:
        UnitreeG1TeleoperatorConfig(left_arm_config=ExoskeletonArmPortConfig(port="/dev/x"))
    assert err.value.where == "teleop.right_arm_config.port"
    with pytest.raises(NotSupported, match="wireless remote"):
        UnitreeG1TeleoperatorConfig().build(CalibrationFiles())


def test_a_line_is_a_sample_when_it_has_16_numbers_as_lerobot_parses_it():
    numbers = [str(i) for i in range(1, 18)]
    assert parse_raw16(numbers) == {f"ch{i}": i + 1 for i in range(16)}
    assert parse_raw16(numbers[:3]) is None
    # A number no 12-bit ADC gives: a garbled line (48839 was full stick on the G1).
    assert parse_raw16([*numbers[:7], "99999999", *numbers[8:16]]) is None
    assert parse_raw16([*numbers[:7], "-1", *numbers[8:16]]) is None
    assert parse_raw16([*numbers[:7], "4095", *numbers[8:16]]) is not None
    with pytest.raises(ValueError):
        parse_raw16([*numbers[:7], "x", *numbers[8:16]])


# --- calibration ---------------------------------------------------------------------------


def test_the_calibration_file_is_lerobots_and_its_angles_lerobots_formula(arms, tmp_path):
    truth = true_calibration(arms["left"])
    data = json.loads(truth.to_json())
    assert set(data) == {"version", "side", "adc_max", "joints"}
    assert [j["name"] for j in data["joints"]] == list(EXO_JOINTS)
    assert set(data["joints"][0]) == {"name", "center_fit", "T", "zero_offset"}
    assert ExoCalibration.from_dict(data) == truth
    # LeRobot's `joint_z_and_angle`, written out.
    raw = arms["left"].raw()
    arms["left"].set_angles(elbow_flex=0.8, wrist_roll=-2.0)
    raw = arms["left"].raw()
    for j in data["joints"]:
        pair = {"shoulder_pitch": (0, 1), "shoulder_yaw": (2, 3), "shoulder_roll": (4, 5),
                "elbow_flex": (6, 7), "wrist_roll": (14, 15)}[j["name"]]  # fmt: skip
        s, c = raw[pair[0]], raw[pair[1]]
        z = np.asarray(j["T"]) @ (np.array([c - 2047.5, s - 2047.5]) - np.asarray(j["center_fit"]))
        ang = math.atan2(z[1], z[0]) - j["zero_offset"]
        expected = math.atan2(math.sin(-ang), math.cos(-ang))
        assert truth.angles(raw)[j["name"]] == pytest.approx(expected, abs=1e-12)
    got = truth.angles(raw)
    assert got["elbow_flex"] == pytest.approx(0.8, abs=2e-3)
    assert got["wrist_roll"] == pytest.approx(-2.0, abs=2e-3)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "not JSON"),
        ('{"joints": [{"name": "knee", "center_fit": [0, 0], "T": [[1, 0], [0, 1]]}]}', "knee"),
        (
            '{"joints": [{"name": "elbow_flex", "center_fit": [0], "T": [[1, 0], [0, 1]]}]}',
            "center_fit",
        ),
        ('{"joints": [{"name": "elbow_flex", "center_fit": [0, 0], "T": [[1, 0]]}]}', "2x2"),
    ],
)
def test_a_malformed_calibration_file_is_named_with_the_fix(arms, assets, tmp_path, content, match):
    config = _config(arms, assets, tmp_path)
    folder = tmp_path / "calib"
    _write_true_calibrations(arms, folder)
    (folder / "exo_right.json").write_text(content)
    teleop = config.build(CalibrationFiles())
    with pytest.raises(CalibrationError, match=match) as err:
        teleop.connect()
    assert "exo_right.json" in err.value.where and "calibrate" in err.value.hint
    assert not teleop.is_connected


def test_without_a_calibration_connect_says_how_to_calibrate(arms, assets, tmp_path):
    teleop = _config(arms, assets, tmp_path).build(CalibrationFiles())
    with pytest.raises(CalibrationError, match="left arm has no calibration") as err:
        teleop.connect()
    assert "rlctl calibrate --teleop.type=unitree_g1" in err.value.hint
    assert err.value.where.endswith("calib/exo_left.json")


class PersonAtTheExoskeleton(ScriptedConsole):
    """The console with a person behind it: turns the joint asked for round, or holds it at
    zero, and presses Enter after the number of readings `presses` gives, one per step."""

    # Lines a board may have written before the person stopped the joint that the host has
    # not read yet (a pseudo-terminal's buffer holds about 60 of them): a loaded machine reads
    # them late, so the readings counted in the zero pose start once more than that many
    # lines came after it.
    STALE_LINES = 100

    # A loaded host reads the board's lines at its own pace: readings a turn apart can all
    # land near one point of the circle, and the tool says the fit needs more. The person
    # then keeps turning and presses again, as often as this many times in one calibration.
    RETRIES = 6

    def __init__(self, arms, presses, answers=(), *, early_presses=1):
        super().__init__(answers)
        self.arms = arms
        self.presses = deque(presses)
        self.polls = 0
        self.due = self.presses.popleft()
        self.settling: tuple[object, int] | None = None
        self.early_presses = early_presses  # the presses planned to come before a fit
        self.retries = 0

    def show(self, text):
        super().show(text)
        if "] " not in text or "zero at" in text:
            return
        side, joint = text.split("] ")[1].split()[:2]
        arm = self.arms[side]
        if "keep turning" in text:
            if self.early_presses:
                self.early_presses -= 1
            else:
                self.retries += 1
                assert self.retries <= self.RETRIES, "the fit keeps failing on a full turn"
                self.presses.appendleft(self.due)  # the next press planned waits its turn
                self.due = 230
        if "round and round" in text or "keep turning" in text:
            arm.sweep(joint.rstrip(":"))
            self.settling = None
        else:
            arm.sweep(None)
            arm.set_angles(**{joint.rstrip(":"): 0.0})
            self.settling = (arm, arm.lines_sent)

    def enter_pressed(self):
        if self.settling is not None:
            arm, since = self.settling
            if arm.lines_sent - since < self.STALE_LINES:
                self.polls = 0  # the host may still read lines from before the pose
                return False
        self.polls += 1
        if self.polls < self.due:
            return False
        self.polls, self.due = 0, self.presses.popleft()
        return True


def test_guided_calibration_fits_each_joint_and_saves_lerobots_file(fast_arms, assets, tmp_path):
    arms = fast_arms
    config = _config(arms, assets, tmp_path)
    folder = tmp_path / "calib"
    folder.mkdir()
    (folder / "exo_right.json").write_text(true_calibration(arms["right"]).to_json())
    teleop = config.build(CalibrationFiles())
    assert isinstance(teleop, SelfCalibrating) and teleop.calibration_targets() == []
    # Enter comes too early once (20 readings: no fit yet), then after a full turn, and after
    # 60 readings in the zero pose.
    console = PersonAtTheExoskeleton(arms, [20, 230, 60, *[230, 60] * 4, 0], answers=[""])
    saved = teleop.calibrate_with(console, reuse="ask")
    assert saved == [str(folder / "exo_left.json")]
    assert (
        console.prompts and "exoskeleton's right arm has a saved calibration" in console.prompts[0]
    )
    assert any("no ellipse fits the" in s for s in console.shown)
    assert any("using the saved calibration" in s for s in console.shown)
    fitted = ExoCalibration.from_json((folder / "exo_left.json").read_text())
    assert fitted.side == "left" and [j.name for j in fitted.joints] == list(EXO_JOINTS)
    truth = true_calibration(arms["left"])
    left = arms["left"]
    left.sweep(None)
    for angle in (-2.5, -1.0, 0.0, 0.7, 2.0):
        left.set_angles(**dict.fromkeys(EXO_JOINTS, angle))
        raw = left.raw()
        for joint, value in fitted.angles(raw).items():
            assert value == pytest.approx(truth.angles(raw)[joint], abs=0.03), (joint, angle)


def test_the_ellipse_fit_needs_enough_readings():
    tt = np.linspace(0, 2 * np.pi, 200)
    x, y = 1500 * np.cos(tt) + 30, 1000 * np.sin(tt) - 20
    center, t = fit_ellipse(list(x), list(y))
    assert center == pytest.approx((30, -20), abs=1.0)
    z = np.asarray(t) @ (np.stack([x, y]) - np.asarray(center)[:, None])
    assert np.hypot(*z) == pytest.approx(np.ones(200), abs=0.01)
    assert fit_ellipse(list(x[:30]), list(y[:30])) is None


# --- the arm IK -----------------------------------------------------------------------------


def test_a_pose_solved_for_the_arms_comes_back_through_forward_kinematics(assets):
    ik = load_g1_arm_ik(str(assets))
    rng = np.random.default_rng(0)
    q_star = rng.uniform(ik.lower * 0.4, ik.upper * 0.4)
    # The casadi chain the solver optimises is pinocchio's kinematics.
    for q in (q_star, np.zeros(14), rng.uniform(ik.lower, ik.upper)):
        numeric, symbolic = ik.hand_poses(q), ik.symbolic_hand_poses(q)
        for side in ("left", "right"):
            np.testing.assert_allclose(symbolic[side], numeric[side], atol=1e-9)
    targets = ik.hand_poses(q_star)
    for _ in range(8):  # the smoothing terms pull less as the solution settles
        q, converged = ik.solve(targets["left"], targets["right"])
        assert converged
    assert np.all(q >= ik.lower - 1e-6) and np.all(q <= ik.upper + 1e-6)
    back = ik.hand_poses(q)
    for side in ("left", "right"):
        assert np.linalg.norm(back[side][:3, 3] - targets[side][:3, 3]) < 5e-3
        rel = back[side][:3, :3] @ targets[side][:3, :3].T
        assert math.acos(np.clip((np.trace(rel) - 1) / 2, -1, 1)) < 0.05


def test_the_urdfs_come_from_the_hub_cache_as_lerobot_downloads_them(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    repo = cache / "models--lerobot--unitree-g1-mujoco"
    commit = "0123456789abcdef0123456789abcdef01234567"
    write_assets(repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = assets_folder(ASSETS_REPO)
    assert folder == repo / "snapshots" / commit and (folder / G1_URDF).is_file()
    solver = load_exo_to_g1(ASSETS_REPO, EXO_JOINTS)
    assert solver.ik.urdf == folder / G1_URDF
    with pytest.raises(HubError) as err:
        assets_folder("lerobot/not-cached-here")
    assert "lerobot/not-cached-here" in str(err.value.where) + err.value.message


def test_missing_or_wrong_urdfs_are_named(tmp_path):
    with pytest.raises(ConfigError, match=r"g1_body29_hand14\.urdf is missing") as err:
        load_g1_arm_ik(str(tmp_path))
    assert ASSETS_REPO in err.value.hint
    folder = write_assets(tmp_path / "a")
    urdf = folder / G1_URDF
    urdf.write_text(urdf.read_text().replace("left_elbow_joint", "left_elbow"))
    with pytest.raises(ConfigError, match="no joint left_elbow_joint"):
        load_g1_arm_ik(str(folder))
    with pytest.raises(ConfigError, match="not G1 arm joints"):
        load_exo_to_g1(str(write_assets(tmp_path / "b")), EXO_JOINTS, ("left_knee",))


def test_gravity_torques_are_the_potential_energys_slope(assets):
    pin = pytest.importorskip("pinocchio")
    ik = load_g1_arm_ik(str(assets))
    q = np.array([0.3, 0.2, -0.1, 0.8, 0.2, -0.3, 0.1, -0.2, -0.3, 0.2, 0.6, -0.1, 0.2, 0.3])
    tau = ik.gravity_torques(q)

    def potential(qm):
        return pin.computePotentialEnergy(ik.model, ik.data, ik.to_pin(qm))

    slope = [(potential(q + 1e-6 * e) - potential(q - 1e-6 * e)) / 2e-6 for e in np.eye(14)]
    np.testing.assert_allclose(tau, slope, atol=1e-5)
    assert np.abs(tau).max() > 0.1


# --- the teleoperator -------------------------------------------------------------------------


def test_the_exoskeleton_drives_the_arms_and_its_joysticks_the_remote_axes(arms, assets, tmp_path):
    config = _config(arms, assets, tmp_path, frozen_joints="right_wrist_yaw_joint")
    _write_true_calibrations(arms, tmp_path / "calib")
    teleop = config.build(CalibrationFiles())
    assert isinstance(teleop, UnitreeG1Exoskeleton)
    assert list(teleop.action_features["action"].names) == [*ARM_Q, *REMOTE_AXES]
    arms["right"].set_joystick(2048, 2048, button=1000)  # no joystick on the right board
    teleop.connect()
    try:
        rest = teleop.get_action({})
        arms["left"].set_angles(elbow_flex=0.6, shoulder_pitch=-0.4)
        arms["left"].set_joystick(3000, 1100)
        arms["right"].set_joystick(4000, 0, button=1000)
        # LeRobot's filter weighs the newest solution least: the arm gets there in a few ticks.
        for _ in range(8):
            moved = teleop.get_action({})
        assert moved.dtype == np.float32 and moved.shape == (18,)
        # The left arm followed the exoskeleton; the frozen joint stayed where it was.
        assert np.abs(moved[:7] - rest[:7]).max() > 0.1
        assert moved[ARM_Q.index("kRightWristYaw.q")] == rest[ARM_Q.index("kRightWristYaw.q")]
        assert moved[-4:-2] == pytest.approx([(3000 - 2048) / 2047.5, (1100 - 2048) / 2047.5])
        assert list(moved[-2:]) == [0.0, 0.0]
    finally:
        teleop.disconnect()
    assert not teleop.is_connected


def _act_until_it_fails(teleop, seconds=20.0):
    """Actions until one fails (the lines already on their way are read first)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        teleop.get_action({})


def test_a_board_that_stops_or_garbles_is_named_with_its_port(arms, assets, tmp_path):
    config = _config(arms, assets, tmp_path, timeout_s=0.3)
    _write_true_calibrations(arms, tmp_path / "calib")
    teleop = config.build(CalibrationFiles())
    teleop.connect()
    try:
        teleop.get_action({})
        arms["right"].pause()
        with pytest.raises(HardwareError, match=r"right arm sent nothing for 0\.3 s") as err:
            _act_until_it_fails(teleop)
        assert err.value.where == arms["right"].port
        assert "Unitree G1 exoskeleton firmware" in err.value.hint
        arms["right"].resume()
        teleop.get_action({})
        arms["left"].garble(10**6)
        with pytest.raises(HardwareError, match=r"left arm sent \d+ unreadable line") as err:
            _act_until_it_fails(teleop)
        assert "2x" in err.value.message and "--teleop.left_arm_config.baud_rate" in err.value.hint
    finally:
        teleop.disconnect()


def test_a_board_stopping_mid_recording_keeps_the_finished_episodes(arms, assets, tmp_path):
    config = _config(arms, assets, tmp_path, timeout_s=0.3)
    _write_true_calibrations(arms, tmp_path / "calib")
    teleop = config.build(CalibrationFiles())
    names = [*ARM_Q, *REMOTE_AXES]
    robot = ScriptedRobot(joints=[n.rsplit(".", 1)[0] for n in names])
    robot._names = names  # the G1's action names, as the teleop's
    from rlctl.domain.action_guard import ActionGuard, ActionLimits

    robot._guard = ActionGuard(ActionLimits.unbounded(names))
    calls = {"n": 0}
    get_action = teleop.get_action

    def counted(observation):
        calls["n"] += 1
        if calls["n"] == 16:  # the second episode's first frame (10 a episode, 5 of reset)
            arms["left"].pause()
            time.sleep(0.3)  # the lines on their way are read: the next frame waits in vain
        return get_action(observation)

    teleop.get_action = counted
    writer = InMemoryDatasetWriter()
    record = RecordEpisodes(writer, robot, ManualClock(), ScriptedControls(), teleop=teleop)
    root = Path("/memory/g1")
    with pytest.raises(HardwareError, match="left arm sent nothing"):
        record(
            DatasetTarget(root=root),
            RecordSettings(fps=10, episode_time_s=1.0, reset_time_s=0.5, single_task="wave",
                           num_episodes=3),
        )  # fmt: skip
    episodes = writer.datasets[root].episodes
    assert len(episodes) == 1
    assert not teleop.is_connected


# --- LeRobot --------------------------------------------------------------------------------


LEROBOT_READS = """
import json, sys
from pathlib import Path
from lerobot.teleoperators.unitree_g1.exo_calib import ExoskeletonCalibration, exo_raw_to_angles
data = json.loads(Path(sys.argv[1]).read_text())
calib = ExoskeletonCalibration.from_dict(data)
raws = json.loads(sys.argv[2])
Path(sys.argv[3]).write_text(json.dumps(calib.to_dict()))
print(json.dumps([exo_raw_to_angles(r, calib) for r in raws]))
"""


@pytest.mark.lerobot
def test_lerobot_reads_rlctls_calibration_and_back(arms, tmp_path):
    import subprocess

    python = os.environ.get("RLCTL_LEROBOT_PYTHON")
    if not python:
        pytest.skip("set RLCTL_LEROBOT_PYTHON to a Python with LeRobot 0.6.1")
    ours = true_calibration(arms["left"])
    path = tmp_path / "exo_left.json"
    path.write_text(ours.to_json())
    raws = []
    for angle in (-2.0, 0.3, 1.4):
        arms["left"].set_angles(**dict.fromkeys(EXO_JOINTS, angle))
        raws.append(arms["left"].raw())
    back = tmp_path / "lerobot.json"
    done = subprocess.run(
        [python, "-c", LEROBOT_READS, str(path), json.dumps(raws), str(back)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    for raw, angles in zip(raws, theirs, strict=True):
        assert ours.angles(raw) == pytest.approx(angles, abs=1e-12)
    assert ExoCalibration.from_json(back.read_text()) == ours


def test_the_in_memory_self_calibrating_teleoperator_asks_reuses_and_calibrates():
    from rlctl.adapters.memory.teleoperator import ScriptedSelfCalibrating

    fake = ScriptedSelfCalibrating(("left", "right"))
    assert isinstance(fake, SelfCalibrating)
    console = ScriptedConsole(["", "c"], enter_after_polls=3)
    assert fake.calibrate_with(console, reuse="no") == ["memory:left", "memory:right"]
    assert fake.calibrate_with(console, reuse="ask") == ["memory:right"]  # Enter, then 'c'
    assert fake.saved == {"left": 1, "right": 2}
    assert fake.calibrate_with(console, reuse="yes") == []
