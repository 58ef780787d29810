"""`--teleop.type=unitree_g1`: LeRobot 0.6.1's exoskeleton for the Unitree G1's arms.

    rlctl calibrate --teleop.type=unitree_g1 --teleop.id=exo \\
        --teleop.left_arm_config.port=/dev/ttyACM0 --teleop.right_arm_config.port=/dev/ttyACM1
    rlctl teleoperate --robot.type=unitree_g1 --robot.controller=GrootLocomotionController ...
        --teleop.type=unitree_g1 --teleop.id=exo --teleop.left_arm_config.port=... (same ports)

Each arm is a board printing one line of 16 integers per sample over USB serial (115200 baud;
LeRobot's `parse_raw16`: a line with fewer numbers is not a sample). Five joints are read as
(sine, cosine) pairs of hall sensors through LeRobot's calibration (`rlctl.domain.exoskeleton`),
their angles put the exoskeleton's URDF in its pose, and its end effector, shifted by LeRobot's
offsets, is the G1 hand's target for the arm IK (`rlctl.adapters.kinematics.g1_arm_ik`).

Actions (LeRobot's names): the 14 arm joints `kLeftShoulderPitch.q` ... `kRightWristYaw.q` in
radians, then `remote.lx`, `remote.ly`, `remote.rx`, `remote.ry` from the joysticks on the
boards (channels 11 and 13; 12 is the button, high when released: a board whose button reads
high on connect has a joystick, centred where it rests then). The G1 takes this action when it
runs a locomotion controller (`--robot.controller`), as in LeRobot.

Calibration (`rlctl calibrate`): per arm and joint, the joint is turned round while the sensor
pair's readings are collected (a median of 5 against spikes), an ellipse is fitted to them as
LeRobot's calibration fits it (OpenCV's `fitEllipse`, the 5 % outliers by radius trimmed, at most
300 points), and the joint is then held in its zero pose for 50 samples. The file is LeRobot's:
`$HF_LEROBOT_CALIBRATION/teleoperators/unitree_g1/<id>_left.json` (`left.json` without an id).

Unlike LeRobot, a board that stops sending or sends only garbage is an error naming the arm and
its port after `timeout_s` (LeRobot's arm would keep its last pose); the joystick-only mode
(no ports) is refused, since it drives the G1 from its wireless remote, which rlctl's G1 does
not relay.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import structlog

from rlctl.adapters.robots.calibration_files import CalibrationFiles, read_calibration_text
from rlctl.adapters.teleop.config import UnitreeG1TeleoperatorConfig
from rlctl.adapters.teleop.serial_joints import SerialJointBus
from rlctl.application.ports.control import Console
from rlctl.application.ports.robot import (
    ACTION_KEY,
    CalibrationKey,
    CalibrationStore,
    CalibrationTarget,
)
from rlctl.application.robot_features import action_feature
from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.errors import CalibrationError, NotSupported
from rlctl.domain.exoskeleton import (
    ADC_HALF,
    ADC_MAX,
    CHANNELS,
    EXO_JOINTS,
    SIDES,
    ExoCalibration,
    ExoJointCalibration,
    centered_point,
)
from rlctl.domain.features import FeatureSpec
from rlctl.domain.motors import Motor

log = structlog.get_logger(__name__)

TELEOP_TYPE = "unitree_g1"
REMOTE_AXES = ("remote.lx", "remote.ly", "remote.rx", "remote.ry")
JOYSTICK_X, JOYSTICK_BUTTON, JOYSTICK_Y = 11, 12, 13
CHANNEL_NAMES = tuple(f"ch{i}" for i in range(CHANNELS))
FIRMWARE = "Unitree G1 exoskeleton"

# LeRobot's `CalibParams`, those that apply without its live plot.
MIN_FIT_POINTS = 60
MAX_FIT_POINTS = 300
FIT_WINDOW = 900
TRIM = (0.05, 0.95)
MEDIAN_WINDOW = 5
HISTORY = 3500
ZERO_SAMPLES = 50

Reuse = Literal["ask", "yes", "no"]


def arm_joint_features() -> tuple[str, ...]:
    from rlctl.adapters.kinematics.g1_arm_ik import ARM_JOINTS

    return tuple(f"{name}.q" for name, _ in ARM_JOINTS)


def parse_raw16(tokens: list[str]) -> dict[str, int] | None:
    """LeRobot's `parse_raw16`: the first 16 numbers of a line of at least 16, each an ADC
    reading (0..ADC_MAX); None for a line that is not one."""
    if len(tokens) < CHANNELS:
        return None
    values = {name: int(token) for name, token in zip(CHANNEL_NAMES, tokens[:CHANNELS])}
    # A number no 12-bit ADC gives is a garbled line (a joystick axis of 48839 would be full
    # stick on the robot).
    if not all(0 <= value <= ADC_MAX for value in values.values()):
        return None
    return values


# --- one arm's board -------------------------------------------------------------------------


class ExoArm:
    """One exoskeleton arm: its board's lines (a background reader) and its calibration file."""

    def __init__(
        self, side: str, port: str, baud_rate: int, timeout_s: float, calibration_path: Path
    ) -> None:
        self.side = side
        self.name = f"G1 exoskeleton's {side} arm"
        self.calibration_path = calibration_path
        self.calibration: ExoCalibration | None = None
        motors = {
            n: Motor(i, "exo_adc", MotorNormMode.RANGE_0_100) for i, n in enumerate(CHANNEL_NAMES)
        }
        self.bus = SerialJointBus(
            port,
            motors,
            parse_raw16,
            device=self.name,
            baudrate=baud_rate,
            timeout_s=timeout_s,
            first_line_timeout_s=2 * timeout_s,
            expected=f"{CHANNELS} integers separated by spaces",
            firmware=FIRMWARE,
            baud_setting=f"--teleop.{side}_arm_config.baud_rate",
        )

    @property
    def port(self) -> str:
        return self.bus.port

    def read_raw(self) -> list[int]:
        """The next sample's 16 readings; a silent or garbling board raises `HardwareError`."""
        values = self.bus.sync_read("Present_Position", normalize=False)
        return [int(values[name]) for name in CHANNEL_NAMES]

    def saved_calibration(self) -> ExoCalibration | None:
        path = self.calibration_path
        text = read_calibration_text(path)
        return None if text is None else ExoCalibration.from_json(text, where=str(path))

    def load_calibration(self) -> ExoCalibration:
        saved = self.saved_calibration()
        if saved is None:
            raise CalibrationError(
                f"the {self.name} has no calibration",
                where=str(self.calibration_path),
                hint="run `rlctl calibrate --teleop.type=unitree_g1` with the same id and ports "
                "(or LeRobot's calibration: the file is shared)",
            )
        self.calibration = saved
        return saved

    def save_calibration(self, calibration: ExoCalibration) -> str:
        path = self.calibration_path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")  # a crash never leaves half a file
        tmp.write_text(calibration.to_json() + "\n", encoding="utf-8")
        tmp.replace(path)
        self.calibration = calibration
        return str(path)

    def angles(self, raw: Sequence[int]) -> dict[str, float]:
        if self.calibration is None:
            raise CalibrationError(f"the {self.name} is not calibrated", where=self.port)
        return self.calibration.angles(raw)


# --- the joysticks ---------------------------------------------------------------------------


class ExoJoysticks:
    """LeRobot's `RemoteController` fed from the boards: axes in about -1..1 around the centre
    read on connect, for each board whose joystick button reads high (released) then."""

    def __init__(self) -> None:
        self.centres: dict[str, tuple[int, int] | None] = dict.fromkeys(SIDES)
        self.axes = dict.fromkeys(REMOTE_AXES, 0.0)

    def calibrate_centre(self, raw: Sequence[int], side: str) -> None:
        if raw[JOYSTICK_BUTTON] <= ADC_HALF:
            log.info("exoskeleton joystick not detected", side=side)
            self.centres[side] = None
            return
        self.centres[side] = (raw[JOYSTICK_X], raw[JOYSTICK_Y])
        log.info("exoskeleton joystick enabled", side=side, centre=self.centres[side])

    def update(self, raw: Sequence[int], side: str) -> None:
        centre = self.centres[side]
        if centre is None:
            return
        x = (raw[JOYSTICK_X] - centre[0]) / ADC_HALF
        y = (raw[JOYSTICK_Y] - centre[1]) / ADC_HALF
        prefix = "remote.l" if side == "left" else "remote.r"
        self.axes[f"{prefix}x"], self.axes[f"{prefix}y"] = x, y


# --- the teleoperator ------------------------------------------------------------------------


class UnitreeG1Exoskeleton:
    """The two arms as one `Teleoperator` (and `SelfCalibrating`: `rlctl calibrate`)."""

    def __init__(
        self,
        config: UnitreeG1TeleoperatorConfig,
        arms: Mapping[str, ExoArm],
        *,
        solver_factory: Any = None,
    ) -> None:
        self.config = config
        self.arms = dict(arms)
        self._solver_factory = solver_factory or _load_solver
        self.solver: Any = None
        self.joysticks = ExoJoysticks()
        self._names = (*arm_joint_features(), *REMOTE_AXES)
        self._connected = False

    @property
    def teleop_type(self) -> str:
        return TELEOP_TYPE

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        return {ACTION_KEY: action_feature(self._names)}

    @property
    def is_connected(self) -> bool:
        return self._connected and all(arm.bus.is_connected for arm in self.arms.values())

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []  # hall sensors, not a motor bus: `calibrate_with` guides the person instead

    def connect(self) -> None:
        if self.is_connected:
            return
        try:
            for arm in self.arms.values():
                arm.load_calibration()  # before the port: a missing file is said at once
            for arm in self.arms.values():
                arm.bus.connect()
            if self.solver is None:
                self.solver = self._solver_factory(self.config)
            for side, arm in self.arms.items():
                self.joysticks.calibrate_centre(arm.read_raw(), side)
        except BaseException:
            self.disconnect()
            raise
        self._connected = True

    def reset(self) -> None:
        pass

    def get_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        raw = {side: arm.read_raw() for side, arm in self.arms.items()}
        angles = {side: self.arms[side].angles(raw[side]) for side in SIDES}
        joints, _converged = self.solver(angles["left"], angles["right"])
        for side in SIDES:
            self.joysticks.update(raw[side], side)
        axes = [self.joysticks.axes[name] for name in REMOTE_AXES]
        return np.asarray([*joints, *axes], dtype=np.float32)

    def disconnect(self) -> None:
        self._connected = False
        for arm in self.arms.values():
            arm.bus.disconnect()

    # calibration

    def calibrate_with(self, console: Console, *, reuse: Reuse = "ask") -> list[str]:
        """Calibrate each arm whose calibration is not reused; return the files written."""
        saved_to = []
        for side in SIDES:
            arm = self.arms[side]
            saved = arm.saved_calibration()
            if saved is not None and _reuse(console, arm.name, reuse):
                console.show(f"{arm.name}: using the saved calibration ({arm.calibration_path})")
                continue
            arm.bus.connect()
            try:
                calibration = calibrate_arm(arm, console)
            finally:
                arm.bus.disconnect()
            where = arm.save_calibration(calibration)
            console.show(f"{arm.name}: calibration saved to {where}")
            saved_to.append(where)
        return saved_to


def _reuse(console: Console, name: str, reuse: Reuse) -> bool:
    if reuse != "ask":
        return reuse == "yes"
    answer = console.ask(
        f"{name} has a saved calibration: press Enter to use it, or type 'c' and Enter to "
        "calibrate it again: "
    )
    return answer.strip().lower() != "c"


def calibrate_arm(arm: ExoArm, console: Console) -> ExoCalibration:
    """LeRobot's calibration of one arm, joint by joint: the ellipse, then the zero pose."""
    joints = []
    for i, joint in enumerate(EXO_JOINTS, start=1):
        step = f"[{i}/{len(EXO_JOINTS)}] {arm.side} {joint}"
        console.show(f"{step}: move it through its whole range, round and round, then press Enter")
        center, transform = _fit_joint(arm, joint, console, step)
        console.show(f"{step}: hold it in its zero pose, then press Enter")
        zero = _zero_offset(arm, joint, center, transform, console, step)
        console.show(f"{step}: zero at {zero:+.3f} rad ({math.degrees(zero):+.1f} deg)")
        joints.append(ExoJointCalibration(joint, center, transform, zero))
    return ExoCalibration(side=arm.side, joints=tuple(joints), adc_max=ADC_MAX)


def _fit_joint(
    arm: ExoArm, joint: str, console: Console, step: str
) -> tuple[tuple[float, float], tuple[tuple[float, float], tuple[float, float]]]:
    window_s: deque[float] = deque(maxlen=MEDIAN_WINDOW)
    window_c: deque[float] = deque(maxlen=MEDIAN_WINDOW)
    xs: deque[float] = deque(maxlen=HISTORY)
    ys: deque[float] = deque(maxlen=HISTORY)
    while True:
        x, y = centered_point(arm.read_raw(), joint)
        window_c.append(x)
        window_s.append(y)
        if len(window_s) >= max(3, MEDIAN_WINDOW):
            xs.append(float(np.median(window_c)))
            ys.append(float(np.median(window_s)))
        if console.enter_pressed():
            fit = fit_ellipse(list(xs), list(ys))
            if fit is not None:
                return fit
            console.show(
                f"{step}: no ellipse fits the {len(xs)} readings yet: keep turning the joint "
                f"(at least {MIN_FIT_POINTS} readings, all the way round), then press Enter"
            )


def fit_ellipse(
    xs: Sequence[float], ys: Sequence[float]
) -> tuple[tuple[float, float], tuple[tuple[float, float], tuple[float, float]]] | None:
    """LeRobot's fit: the newest `FIT_WINDOW` points, trimmed by radius, at most
    `MAX_FIT_POINTS`, through OpenCV's `fitEllipse`; the centre and the map onto the unit
    circle (`diag(1/a, 1/b) R^T`, a the major semi-axis), or None."""
    try:
        import cv2
    except ImportError as error:
        raise NotSupported(
            "OpenCV is not installed: the exoskeleton's calibration fits its ellipses with it",
            where=TELEOP_TYPE,
            hint="pip install 'rlctl[cameras]'",
        ) from error
    n = min(FIT_WINDOW, len(xs))
    if n < MIN_FIT_POINTS:
        return None
    x = np.asarray(xs[-n:], dtype=float)
    y = np.asarray(ys[-n:], dtype=float)
    r = np.hypot(x, y)
    lo, hi = np.quantile(r, TRIM[0]), np.quantile(r, TRIM[1])
    keep = (r >= lo) & (r <= hi)
    x, y = x[keep], y[keep]
    if len(x) > MAX_FIT_POINTS:
        idx = np.linspace(0, len(x) - 1, MAX_FIT_POINTS).astype(int)
        x, y = x[idx], y[idx]
    if len(x) < MIN_FIT_POINTS:
        return None
    points = np.stack([x, y], axis=1).astype(np.float32).reshape(-1, 1, 2)
    try:
        (xc, yc), (w, h), angle_deg = cv2.fitEllipse(points)
    except cv2.error:
        return None
    a, b = float(w) / 2, float(h) / 2
    phi = math.radians(float(angle_deg))
    if b > a:
        a, b = b, a
        phi += math.pi / 2
    if not (math.isfinite(a) and math.isfinite(b)) or a <= 1e-6 or b <= 1e-6:
        return None
    rot = np.array([[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]])
    t = np.diag([1 / a, 1 / b]) @ rot.T
    return (float(xc), float(yc)), (
        (float(t[0, 0]), float(t[0, 1])),
        (float(t[1, 0]), float(t[1, 1])),
    )


def _zero_offset(
    arm: ExoArm,
    joint: str,
    center: tuple[float, float],
    transform: tuple[tuple[float, float], tuple[float, float]],
    console: Console,
    step: str,
) -> float:
    """The angle on the circle in the zero pose: the mean of the last 50 samples (a circular
    mean, which is LeRobot's arithmetic one unless the pose reads near +-pi)."""
    samples: deque[float] = deque(maxlen=ZERO_SAMPLES)
    probe = ExoJointCalibration(joint, center, transform)
    while True:
        z = probe.circle_point(arm.read_raw())
        samples.append(math.atan2(z[1], z[0]))
        if console.enter_pressed():
            if len(samples) >= ZERO_SAMPLES:
                angles = np.asarray(samples)
                return math.atan2(float(np.sin(angles).mean()), float(np.cos(angles).mean()))
            console.show(
                f"{step}: {len(samples)}/{ZERO_SAMPLES} samples so far: hold still, then press "
                "Enter"
            )


# --- building it -----------------------------------------------------------------------------


def _load_solver(config: UnitreeG1TeleoperatorConfig) -> Any:
    from rlctl.adapters.kinematics.g1_arm_ik import load_exo_to_g1

    return load_exo_to_g1(config.assets, EXO_JOINTS, config.frozen)


def calibration_path(
    config: UnitreeG1TeleoperatorConfig, side: str, store: CalibrationStore | None = None
) -> Path:
    """LeRobot's file for one arm: `<id>_<side>.json`, or `<side>.json` without an id."""
    files = store if isinstance(store, CalibrationFiles) else CalibrationFiles()
    arm_id = f"{config.id}_{side}" if config.id else side
    key = CalibrationKey("teleoperators", TELEOP_TYPE, arm_id, config.calibration_dir)
    return files.path_for(key)


def unitree_g1_exoskeleton(
    config: UnitreeG1TeleoperatorConfig, *, calibration_store: CalibrationStore
) -> UnitreeG1Exoskeleton:
    if not config.arms_enabled:
        raise NotSupported(
            "the exoskeleton without arm boards drives the G1 from Unitree's wireless remote "
            "alone, which rlctl's unitree_g1 robot does not relay",
            where="teleop.left_arm_config.port",
            hint="set both arm ports (--teleop.left_arm_config.port=... "
            "--teleop.right_arm_config.port=...)",
        )
    arms = {
        side: ExoArm(
            side,
            getattr(config, f"{side}_arm_config").port,
            getattr(config, f"{side}_arm_config").baud_rate,
            config.timeout_s,
            calibration_path(config, side, calibration_store),
        )
        for side in SIDES
    }
    return UnitreeG1Exoskeleton(config, arms)
