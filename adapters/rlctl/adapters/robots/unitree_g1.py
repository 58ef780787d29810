"""`--robot.type=unitree_g1`: Unitree's G1 humanoid through LeRobot 0.6.1's ZeroMQ bridge.

With `is_simulation=false` LeRobot's `UnitreeG1` does not speak DDS itself: it sends JSON over
ZeroMQ to `run_g1_server.py` running on the robot, which relays it to Unitree's SDK (and
recomputes the CRC). rlctl speaks the same messages with pyzmq alone:

- state: a SUB socket on `tcp://<robot_ip>:6001` takes `{"topic": "rt/lowstate", "data":
  {"motor_state": [{"q", "dq", "tau_est", "temperature"} x 35], "imu_state": {...},
  "wireless_remote": base64, "mode_machine": int}}`, read by a thread (the newest kept);
- commands: a PUSH socket on `tcp://<robot_ip>:6000` sends `{"topic": "rt/lowcmd", "data":
  {"mode_pr": 0, "mode_machine": <the robot's>, "motor_cmd": [{"mode", "q", "dq", "kp", "kd",
  "tau"} x 35]}}`: the 29 joints in position mode (1) with the goal and their gains, the other
  six entries zero, as LeRobot's message is.

Features are LeRobot's: `observation.state` and `action` are the 29 joints' `<name>.q`
(radians, LeRobot's names and order), plus the cameras. With a locomotion `controller`
(`g1_locomotion.py`), LeRobot's ONNX policy runs in a thread at its own rate, driving the 15 leg
and waist joints from the remote's axes and the state (velocities and IMU included); the action
is then the 14 arm joints and `remote.lx/ly/rx/ry`, and both threads' commands pass the same
guard, one at a time. With `gravity_compensation`, each command carries the arms' holding
torques (LeRobot's RNEA on the G1's URDF). Every action passes the guard first:
finite and inside Unitree's joint limits (a small overshoot clipped, garbage held at the last
safe goal), each joint at most `max_relative_target` from where it is. A state message with a
non-finite value (or malformed) is not used: the last good one stands, said once per episode,
and no good state for `observation_timeout_s` is one `HardwareError` naming the bridge, its
ports and the last problem, where LeRobot serves its last state forever.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import structlog

from rlctl.adapters.cameras.robot_frames import camera_features, connect_cameras, read_cameras
from rlctl.adapters.robots.config import UnitreeG1Config
from rlctl.adapters.robots.g1_locomotion import LOWER_BODY, REMOTE_AXES, BodyState
from rlctl.adapters.robots.unitree_g1_joints import (
    FEATURE_NAMES,
    JOINT_NAMES,
    LEROBOT_BRIDGE,
    LOWER,
    NUM_JOINTS,
    UPPER,
)
from rlctl.application.ports.camera import Camera
from rlctl.application.ports.robot import ACTION_KEY, CalibrationStore, CalibrationTarget
from rlctl.application.robot_features import STATE_KEY, action_feature, state_feature
from rlctl.domain.action_guard import ActionGuard, ActionLimits
from rlctl.domain.errors import HardwareError, InvalidInput, NotSupported, RlctlError
from rlctl.domain.features import FeatureSpec

log = structlog.get_logger(__name__)
# How far past the stick's travel (±1) a remote axis is clipped rather than taken as garbage.
AXIS_OVERSHOOT = 1.1

ROBOT_TYPE = "unitree_g1"
LOWCMD_TOPIC = "rt/lowcmd"
# Unitree's low-level command carries 35 motor entries; LeRobot sends them all.
MOTOR_COMMANDS = 35
POSITION_MODE = 1
# The arm joints (left shoulder pitch .. right wrist yaw) are the last 14 of the 29.
ARM_START = 15
# How long the receiving thread waits per poll (so it notices `close` quickly).
_POLL_MS = 50
# How long closing waits for the last command (the zero-gain one) to leave.
_LINGER_MS = 500


def _zmq() -> Any:
    try:
        import zmq
    except ImportError as error:
        raise NotSupported(
            "pyzmq is not installed", where=ROBOT_TYPE, hint="pip install 'rlctl[zmq]'"
        ) from error
    return zmq


class BadState(Exception):
    """A state message rlctl does not use (malformed, or with non-finite joints)."""


@attrs.frozen
class LowState:
    """The part of one lowstate message rlctl uses: the 29 joints' positions and the robot's
    mode, with when it came; for a locomotion controller also the joints' velocities and the
    IMU's quaternion (w, x, y, z) and gyroscope (NaN where the message has none)."""

    q: np.ndarray = attrs.field(eq=False)
    mode_machine: int
    received_at: float
    dq: np.ndarray = attrs.field(eq=False, factory=lambda: np.full(NUM_JOINTS, np.nan))
    quaternion: np.ndarray = attrs.field(eq=False, factory=lambda: np.full(4, np.nan))
    gyroscope: np.ndarray = attrs.field(eq=False, factory=lambda: np.full(3, np.nan))


def _floats(values: Any, size: int) -> np.ndarray:
    out = np.full(size, np.nan)
    if isinstance(values, list) and len(values) >= size:
        for i in range(size):
            value = values[i]
            if isinstance(value, int | float) and not isinstance(value, bool):
                with contextlib.suppress(OverflowError):
                    out[i] = float(value)
    return out


def parse_lowstate(payload: bytes, received_at: float) -> LowState:
    """One bridge message as `run_g1_server.py` sends it; `BadState` says what is wrong."""
    try:
        message = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise BadState(f"a state message is not JSON ({error})") from error
    data = message.get("data") if isinstance(message, dict) else None
    if not isinstance(data, dict):
        data = {}
    motors = data.get("motor_state")
    if not isinstance(motors, list) or len(motors) < NUM_JOINTS:
        count = len(motors) if isinstance(motors, list) else 0
        raise BadState(f"a state message has {count} motor states, the G1 has {NUM_JOINTS} joints")
    q = np.full(NUM_JOINTS, np.nan)
    for i in range(NUM_JOINTS):
        motor = motors[i]
        value = motor.get("q") if isinstance(motor, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            # An integer past float's range is as unusable as NaN: left NaN.
            with contextlib.suppress(OverflowError):
                q[i] = float(value)
    bad = ~np.isfinite(q)
    # A value past float32's range is no more finite once stored than NaN is.
    with np.errstate(over="ignore"):
        bad |= ~np.isfinite(q.astype(np.float32))
    if bad.any():
        names = ", ".join(JOINT_NAMES[i] for i in np.flatnonzero(bad))
        raise BadState(f"no finite position for {names}")
    mode = data.get("mode_machine", 0)
    if not isinstance(mode, int) or isinstance(mode, bool):
        raise BadState(f"mode_machine is {mode!r}, not an integer")
    dq = _floats([m.get("dq") if isinstance(m, dict) else None for m in motors], NUM_JOINTS)
    imu = data.get("imu_state")
    imu = imu if isinstance(imu, dict) else {}
    return LowState(
        q,
        mode,
        received_at,
        dq=dq,
        quaternion=_floats(imu.get("quaternion"), 4),
        gyroscope=_floats(imu.get("gyroscope"), 3),
    )


def lowcmd_message(
    q: Sequence[float] | np.ndarray,
    kp: Sequence[float] | np.ndarray,
    kd: Sequence[float] | np.ndarray,
    mode_machine: int,
    tau: Sequence[float] | np.ndarray | None = None,
) -> dict[str, Any]:
    """LeRobot's command message: the joints in position mode with their goals and gains (no
    velocity; a feed-forward torque only with the gravity compensation), the entries past the
    29 joints zero."""
    torques = np.zeros(NUM_JOINTS) if tau is None else np.asarray(tau, dtype=np.float64)
    commands = []
    for i in range(MOTOR_COMMANDS):
        if i < NUM_JOINTS:
            commands.append(
                {
                    "mode": POSITION_MODE,
                    "q": float(q[i]),
                    "dq": 0.0,
                    "kp": float(kp[i]),
                    "kd": float(kd[i]),
                    "tau": float(torques[i]),
                }
            )
        else:
            commands.append({"mode": 0, "q": 0.0, "dq": 0.0, "kp": 0.0, "kd": 0.0, "tau": 0.0})
    return {
        "topic": LOWCMD_TOPIC,
        "data": {"mode_pr": 0, "mode_machine": int(mode_machine), "motor_cmd": commands},
    }


class Bridge:
    """The two sockets to `run_g1_server.py` and the thread that keeps its newest state."""

    def __init__(self, host: str, lowcmd_port: int, lowstate_port: int) -> None:
        self.host = host
        self.lowcmd_port = lowcmd_port
        self.lowstate_port = lowstate_port
        self._zmq = _zmq()
        self._context: Any = None
        self._commands: Any = None
        self._states: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._state: LowState | None = None
        self._problem: str | None = None
        self._received = 0

    @property
    def _ipv6(self) -> bool:
        return ":" in self.host

    def address(self, port: int) -> str:
        host = self.host.strip().removeprefix("[").removesuffix("]")
        return f"tcp://[{host}]:{port}" if self._ipv6 else f"tcp://{host}:{port}"

    def open(self) -> None:
        zmq = self._zmq
        self._context = zmq.Context()
        try:
            self._commands = self._context.socket(zmq.PUSH)
            self._commands.setsockopt(zmq.CONFLATE, 1)  # only the newest command matters
            self._commands.setsockopt(zmq.LINGER, _LINGER_MS)
            self._states = self._context.socket(zmq.SUB)
            self._states.setsockopt(zmq.CONFLATE, 1)
            self._states.setsockopt(zmq.LINGER, 0)
            self._states.setsockopt_string(zmq.SUBSCRIBE, "")
            if self._ipv6:
                self._commands.setsockopt(zmq.IPV6, 1)
                self._states.setsockopt(zmq.IPV6, 1)
            self._commands.connect(self.address(self.lowcmd_port))
            self._states.connect(self.address(self.lowstate_port))
        except zmq.ZMQError as error:
            self.close()
            raise HardwareError(
                f"cannot reach {self.host}: {error}",
                where=f"{ROBOT_TYPE} {self.host}",
                hint="robot_ip is the G1's IP address or host name",
            ) from error
        self._stop.clear()
        self._thread = threading.Thread(target=self._receive, name="unitree-g1-state", daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        zmq = self._zmq
        states = self._states
        while not self._stop.is_set():
            try:
                if not states.poll(_POLL_MS):
                    continue
                payload = states.recv(zmq.NOBLOCK)
            except zmq.Again:
                continue
            except zmq.ZMQError:
                return  # closed under us
            now = time.monotonic()
            try:
                state = parse_lowstate(payload, now)
            except BadState as error:
                with self._lock:
                    self._problem = str(error)
                continue
            with self._lock:
                self._state = state
                self._problem = None
                self._received += 1

    def latest(self) -> tuple[LowState | None, str | None]:
        """The newest good state, and what was wrong with the messages since (None: nothing)."""
        with self._lock:
            return self._state, self._problem

    def send(self, message: dict[str, Any]) -> bool:
        """Queue one command; False when the socket would not take it (no bridge)."""
        zmq = self._zmq
        try:
            self._commands.send(json.dumps(message).encode("utf-8"), zmq.NOBLOCK)
        except zmq.Again:
            return False
        return True

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        for socket in (self._states, self._commands):
            if socket is not None:
                socket.close()
        self._states = self._commands = None
        if self._context is not None:
            self._context.term()
            self._context = None


class UnitreeG1Robot:
    def __init__(self, config: UnitreeG1Config) -> None:
        self.config = config
        self._kp = np.asarray(config.kp, dtype=np.float64)
        self._kd = np.asarray(config.kd, dtype=np.float64)
        self._guard = ActionGuard(
            ActionLimits(FEATURE_NAMES, LOWER, UPPER), max_step=config.max_relative_target
        )
        self._camera_sizes = {
            name: camera.frame_size(name) for name, camera in config.cameras.items()
        }
        self.cameras: dict[str, Camera] = {
            name: camera.build() for name, camera in config.cameras.items()
        }
        self.where = f"{ROBOT_TYPE} {config.robot_ip}"
        self._bridge: Bridge | None = None
        self._mode_machine = 0
        self._problem_said = False
        self._held_said = False
        self._refused_said = False
        # LeRobot's arm solver, for its gravity torques (loaded on connect).
        self._arm_ik: Any = None
        # LeRobot's locomotion controller (loaded on connect) and the thread that runs it; the
        # goals last sent (both threads change them, one command at a time).
        self._controller: Any = None
        self._goals: np.ndarray | None = None
        self._inputs = dict.fromkeys(REMOTE_AXES, 0.0)
        self._send_lock = threading.Lock()
        self._loop: threading.Thread | None = None
        self._loop_stop = threading.Event()
        self._loop_error: BaseException | None = None

    @property
    def robot_type(self) -> str:
        return ROBOT_TYPE

    @property
    def observation_features(self) -> dict[str, FeatureSpec]:
        features = {STATE_KEY: state_feature(FEATURE_NAMES)}
        features.update(camera_features(self.cameras, self._camera_sizes))
        return features

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        if self.config.controller is None:
            return {ACTION_KEY: action_feature(FEATURE_NAMES)}
        # The controller drives the legs and the waist: the arms and the remote's axes are left.
        return {ACTION_KEY: action_feature((*FEATURE_NAMES[ARM_START:], *REMOTE_AXES))}

    @property
    def realtime(self) -> bool:
        return True

    @property
    def is_connected(self) -> bool:
        return self._bridge is not None

    def _hint(self) -> str:
        config = self.config
        return (
            f"start LeRobot's bridge on the robot (`{LEROBOT_BRIDGE}`, which listens on ports "
            f"{config.lowcmd_port} and {config.lowstate_port}), and check robot_ip and the network"
        )

    def connect(self) -> None:
        if self._bridge is not None:
            return
        config = self.config
        if config.gravity_compensation and self._arm_ik is None:
            from rlctl.adapters.kinematics.g1_arm_ik import load_g1_arm_ik

            self._arm_ik = load_g1_arm_ik(config.assets)
        if config.controller is not None:
            from rlctl.adapters.robots.g1_locomotion import make_controller

            # A fresh one each time: its gait and observation history start over.
            self._controller = make_controller(config.controller, config.controller_repo)
        bridge = Bridge(config.robot_ip, config.lowcmd_port, config.lowstate_port)
        bridge.open()
        try:
            deadline = time.monotonic() + config.connect_timeout_s
            state, problem = bridge.latest()
            while state is None and time.monotonic() < deadline:
                time.sleep(0.01)
                state, problem = bridge.latest()
            if state is None:
                why = f" (its messages were unusable: {problem})" if problem else ""
                raise HardwareError(
                    f"no state from the G1 bridge at {bridge.address(config.lowstate_port)} "
                    f"within {config.connect_timeout_s:g} s{why}",
                    where=self.where,
                    hint=self._hint(),
                )
        except BaseException:
            bridge.close()
            raise
        self._bridge = bridge
        self._mode_machine = state.mode_machine
        self._guard.forget()
        # LeRobot's first command holds every joint where it is.
        self._goals = np.asarray(state.q, dtype=np.float64).copy()
        self._inputs = dict.fromkeys(REMOTE_AXES, 0.0)
        if self._controller is not None:
            self._loop_error = None
            self._loop_stop.clear()
            self._loop = threading.Thread(
                target=self._run_controller, name="unitree-g1-locomotion", daemon=True
            )
            self._loop.start()
        connect_cameras(self.cameras, self._camera_sizes, release=self.disconnect)

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []  # the G1's joints come calibrated from Unitree

    def reset(self) -> None:
        with self._send_lock:
            self._guard.begin_episode()
            self._problem_said = False
            self._held_said = False

    @property
    def episode_over(self) -> bool:
        return False

    def _fresh_state(self) -> LowState:
        bridge = self._require_connected()
        state, problem = bridge.latest()
        assert state is not None  # connect waited for one
        silent = time.monotonic() - state.received_at
        if silent > self.config.observation_timeout_s:
            why = f"; the messages since were unusable: {problem}" if problem else ""
            raise HardwareError(
                f"no usable state from the G1 bridge at "
                f"{bridge.address(self.config.lowstate_port)} for {silent:.1f} s{why}",
                where=self.where,
                hint=self._hint(),
            )
        if problem is not None and not self._problem_said:
            self._problem_said = True
            log.warning(
                "a state message was not used: keeping the last good state",
                robot=ROBOT_TYPE,
                reason=problem,
                note="said once per episode",
            )
        return state

    def get_observation(self) -> dict[str, Any]:
        self._raise_controller_error()
        state = self._fresh_state()
        observation: dict[str, Any] = {STATE_KEY: state.q.astype(np.float32)}
        observation.update(read_cameras(self.cameras))
        return observation

    def send_action(self, action: np.ndarray) -> np.ndarray:
        width = len(self.action_features[ACTION_KEY].names or ())
        try:
            values = np.asarray(action, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            values = np.full(width, np.nan)
        if values.shape != (width,):
            what = (
                "one per joint, LeRobot's order"
                if self._controller is None and self.config.controller is None
                else "the 14 arm joints then the remote's 4 axes: the controller drives the legs"
            )
            raise InvalidInput(
                f"a G1 action has {width} values ({what}), got {values.size}",
                where=f"{ROBOT_TYPE} action",
            )
        self._raise_controller_error()
        state = self._fresh_state()
        if self.config.controller is None:
            goal = self._command(state, everything=values)
            return (state.q if goal is None else goal).astype(np.float32)
        arms, axes = values[: NUM_JOINTS - ARM_START], values[NUM_JOINTS - ARM_START :]
        # The remote's axes set the walking speed: a non-finite one is no command (0), as is
        # one far past the stick's travel (garbage, not a full stick); a little past is clipped.
        axes = np.nan_to_num(axes, nan=0.0, posinf=0.0, neginf=0.0)
        axes = np.clip(np.where(np.abs(axes) > AXIS_OVERSHOOT, 0.0, axes), -1.0, 1.0)
        with self._send_lock:
            self._inputs.update(zip(REMOTE_AXES, (float(a) for a in axes), strict=True))
        goal = self._command(state, arms=arms)
        sent = state.q if goal is None else goal
        return np.concatenate([sent[ARM_START:], axes]).astype(np.float32)

    def _command(
        self,
        state: LowState,
        *,
        everything: np.ndarray | None = None,
        arms: np.ndarray | None = None,
        legs: np.ndarray | None = None,
    ) -> np.ndarray | None:
        """Guard and send the goals, changed where given; the goals sent, or None."""
        with self._send_lock:
            assert self._goals is not None and self._bridge is not None  # connected
            goals = self._goals.copy() if everything is None else everything
            if arms is not None:
                goals[ARM_START:] = arms
            if legs is not None:
                goals[:LOWER_BODY] = legs
            decision = self._guard(goals, present=state.q)
            if decision.held and not self._held_said:
                self._held_said = True
                log.warning(
                    "action refused: the joints hold their last safe goal",
                    robot=ROBOT_TYPE,
                    reason=decision.reason,
                    note="said once per episode",
                )
            goal = decision.values
            if goal is None:  # nothing safe to send (cannot happen with a finite state)
                return None
            goal = np.asarray(goal, dtype=np.float64)
            self._goals = goal.copy()
            kp, kd = self._kp, self._kd
            controller = self._controller
            if controller is not None and controller.kp is not None:
                # LeRobot's controller sends its joints with its own gains (Holosoma's).
                kp, kd = kp.copy(), kd.copy()
                kp[:LOWER_BODY] = controller.kp[:LOWER_BODY]
                kd[:LOWER_BODY] = controller.kd[:LOWER_BODY]
            message = lowcmd_message(
                goal, kp, kd, self._mode_machine, tau=self._gravity_torques(goal)
            )
            if not self._bridge.send(message) and not self._refused_said:
                self._refused_said = True
                log.warning("the bridge did not take a command", robot=ROBOT_TYPE)
            return goal

    def _run_controller(self) -> None:
        """LeRobot's controller loop: every `control_dt`, the legs' and waist's goals from the
        remote's axes and the newest state, sent with the arms' last goals."""
        controller = self._controller
        bridge = self._bridge
        assert controller is not None and bridge is not None
        timeout_s = self.config.observation_timeout_s
        last_good = time.monotonic()
        try:
            while not self._loop_stop.is_set():
                started = time.monotonic()
                state, problem = bridge.latest()
                assert state is not None  # connect waited for one
                body = BodyState(state.q, state.dq, state.quaternion, state.gyroscope)
                usable = started - state.received_at <= timeout_s and all(
                    np.isfinite(part).all() for part in (body.dq, body.quaternion, body.gyroscope)
                )
                if usable:
                    last_good = started
                    with self._send_lock:
                        inputs = dict(self._inputs)
                    self._command(state, legs=controller.step(inputs, body))
                elif started - last_good > timeout_s:
                    why = f" ({problem})" if problem else ""
                    raise HardwareError(
                        f"the {controller.name} had no usable state (joint positions, velocities "
                        f"and the IMU, fresh) from the G1 bridge at "
                        f"{bridge.address(self.config.lowstate_port)} for {timeout_s:g} s{why}; "
                        "it stopped commanding the legs",
                        where=self.where,
                        hint=self._hint(),
                    )
                self._loop_stop.wait(max(0.0, controller.control_dt - (time.monotonic() - started)))
        except BaseException as error:  # said by the next call of the main loop
            self._loop_error = error
            log.error("the locomotion controller stopped", robot=ROBOT_TYPE, error=str(error))

    def _raise_controller_error(self) -> None:
        error = self._loop_error
        if error is None:
            return
        if isinstance(error, RlctlError):
            raise error
        raise HardwareError(
            f"the {self.config.controller} stopped: {error}",
            where=self.where,
            hint="its policy failed on the robot's state; the legs are no longer commanded",
        ) from error

    def _stop_controller(self) -> None:
        self._loop_stop.set()
        if self._loop is not None:
            self._loop.join(timeout=2.0)
            self._loop = None

    def _gravity_torques(self, goal: np.ndarray) -> np.ndarray | None:
        """LeRobot's gravity compensation: the torques holding the arms still at their goals
        (RNEA on the G1's URDF, the legs, waist and hands locked at 0); none on the others."""
        if self._arm_ik is None:
            return None
        tau = np.zeros(NUM_JOINTS)
        tau[ARM_START:] = self._arm_ik.gravity_torques(np.asarray(goal[ARM_START:], float))
        return tau

    def disconnect(self) -> None:
        """LeRobot's zero-gain command first (with `disable_torque_on_disconnect`), then the
        cameras and the sockets; safe twice."""
        for camera in self.cameras.values():
            if camera.is_connected:
                try:
                    camera.disconnect()
                except Exception as error:
                    log.warning("camera did not close", camera=camera.name, error=str(error))
        self._stop_controller()
        bridge, self._bridge = self._bridge, None
        if bridge is None:
            return
        try:
            state, _ = bridge.latest()
            if self.config.disable_torque_on_disconnect and state is not None:
                zero = np.zeros(NUM_JOINTS)
                here = np.clip(state.q, LOWER, UPPER)
                bridge.send(lowcmd_message(here, zero, zero, self._mode_machine))
        finally:
            bridge.close()

    def _require_connected(self) -> Bridge:
        if self._bridge is None:
            raise HardwareError(
                "the G1 is not connected", where=self.where, hint="connect it first"
            )
        return self._bridge


def unitree_g1(
    config: UnitreeG1Config, *, calibration_store: CalibrationStore | None = None
) -> UnitreeG1Robot:
    return UnitreeG1Robot(config)
