"""The G1's locomotion controllers (`--robot.controller`) on tiny ONNX policies exported here with
torch.onnx: LeRobot's observation layouts and arithmetic written out against them, the
Holosoma gains read from the model's metadata, and the robot running one beside an emulated
bridge (the legs from the controller, the arms from the action, every command guarded)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="the controllers need the unitree_g1 extra")
onnx = pytest.importorskip("onnx", reason="the controllers need the unitree_g1 extra")
torch = pytest.importorskip("torch")

from rlctl.adapters.robots.config import RobotConfig  # noqa: E402
from rlctl.adapters.robots.g1_locomotion import (  # noqa: E402
    BodyState,
    GrootLocomotion,
    HolosomaLocomotion,
    gravity_orientation,
)
from rlctl.adapters.robots.unitree_g1 import UnitreeG1Robot  # noqa: E402
from rlctl.domain.config import structure  # noqa: E402
from rlctl.domain.errors import ConfigError, HardwareError, InvalidInput  # noqa: E402

from .g1_bridge import EmulatedBridge  # noqa: E402
from .g1_policies import HOLOSOMA_KD, HOLOSOMA_KP, export, write_policies  # noqa: E402

pytestmark = pytest.mark.timeout(120)

AXES = ("remote.lx", "remote.ly", "remote.rx", "remote.ry")


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    folder = tmp_path_factory.mktemp("policies")
    return folder, write_policies(folder)


def body(seed=0):
    rng = np.random.default_rng(seed)
    quat = rng.normal(size=4)
    return BodyState(
        q=rng.uniform(-0.5, 0.5, 29), dq=rng.uniform(-1, 1, 29),
        quaternion=quat / np.linalg.norm(quat), gyroscope=rng.uniform(-1, 1, 3),
    )  # fmt: skip


def test_gravity_is_lerobots_formula():
    np.testing.assert_allclose(gravity_orientation(np.array([1.0, 0, 0, 0])), [0, 0, -1])
    half = math.sqrt(0.5)  # a quarter turn about x
    np.testing.assert_allclose(gravity_orientation(np.array([half, half, 0, 0])), [0, -1, 0],
                               atol=1e-6)  # fmt: skip


def test_groot_builds_lerobots_observation_and_picks_balance_or_walk(policies):
    folder, run = policies
    groot = GrootLocomotion(str(folder))
    default = np.zeros(29, np.float32)
    default[[0, 6]], default[[3, 9]], default[[4, 10]] = -0.1, 0.3, -0.2
    history = [np.zeros(86, np.float32) for _ in range(6)]
    previous = np.zeros(15, np.float32)
    for step, (inputs, policy) in enumerate(
        [
            ({}, "balance"),
            ({"remote.ly": 0.5, "remote.lx": 0.2}, "walk"),
            ({"remote.rx": 0.01}, "balance"),
        ]
    ):
        state = body(step)
        cmd = np.array([inputs.get("remote.ly", 0), -inputs.get("remote.lx", 0),
                        -inputs.get("remote.rx", 0)], np.float32)  # fmt: skip
        frame = np.zeros(86, np.float32)
        frame[:3] = cmd * np.array([2.0, 2.0, 0.25])
        frame[3] = 0.74
        frame[7:10] = state.gyroscope * 0.25
        frame[10:13] = gravity_orientation(state.quaternion)
        frame[13:42] = state.q - default
        frame[42:71] = state.dq * 0.05
        frame[71:86] = previous
        history = [*history[1:], frame]
        previous = run[policy](np.concatenate(history))
        goals = groot.step(inputs, state)
        np.testing.assert_allclose(goals, default[:15] + previous * 0.25, atol=1e-5)
    assert groot.kp is None  # the robot's own gains


def test_holosoma_reads_its_gains_and_keeps_lerobots_gait_phase(policies):
    folder, run = policies
    holo = HolosomaLocomotion(str(folder))
    np.testing.assert_allclose(holo.kp, HOLOSOMA_KP)
    np.testing.assert_allclose(holo.kd, HOLOSOMA_KD)
    default = HolosomaLocomotion.DEFAULT_ANGLES
    last = np.zeros(29, np.float32)
    phase = np.array([0.0, np.pi])
    standing = True
    phase_dt = 2 * np.pi / (200 * 0.5)
    for step, inputs in enumerate([{}, {"remote.ly": 0.9}, {"remote.ly": 0.9, "remote.lx": 0.05},
                                   {"remote.rx": -0.5}, {}]):  # fmt: skip
        state = body(step)
        ly, lx, rx = (inputs.get(k, 0.0) for k in ("remote.ly", "remote.lx", "remote.rx"))
        ly, lx, rx = (v if abs(v) > 0.1 else 0.0 for v in (ly, lx, rx))
        cmd = np.array([np.clip(ly, -0.3, 0.3), -np.clip(lx, -0.3, 0.3), -rx], np.float32)
        if np.linalg.norm(cmd[:2]) < 0.01 and abs(cmd[2]) < 0.01:
            phase, standing = np.array([np.pi, np.pi]), True
        elif standing:
            phase, standing = np.array([0.0, np.pi]), False
        else:
            phase = np.fmod(phase + phase_dt + np.pi, 2 * np.pi) - np.pi
        q, dq = state.q.copy(), state.dq.copy()
        q[15:], dq[15:] = default[15:], 0.0
        obs = np.concatenate([last, state.gyroscope * 0.25, [cmd[2]], cmd[:2], np.cos(phase),
                              q - default, dq * 0.05, gravity_orientation(state.quaternion),
                              np.sin(phase)])  # fmt: skip
        last = np.clip(run["holosoma"](obs), -100, 100)
        goals = holo.step(inputs, state)
        np.testing.assert_allclose(goals, (default + last * 0.25)[:15], atol=1e-5)


def test_a_policy_of_the_wrong_size_or_without_gains_is_named(tmp_path):
    export(tmp_path / HolosomaLocomotion.files[0], 100, 29, seed=0)  # no kp / kd
    with pytest.raises(ConfigError, match="no usable 'kp'"):
        HolosomaLocomotion(str(tmp_path))
    with pytest.raises(ConfigError, match=r"Balance\.onnx is missing"):
        GrootLocomotion(str(tmp_path))
    for name in GrootLocomotion.files:
        export(tmp_path / name, 516, 12, seed=0)
    groot = GrootLocomotion(str(tmp_path))
    with pytest.raises(ConfigError, match="gives 12 values, LeRobot's gives 15"):
        groot.step({}, body())


# --- on the robot ---------------------------------------------------------------------------


def g1(bridge, folder, **settings):
    raw = {
        "type": "unitree_g1", "is_simulation": False, "robot_ip": "127.0.0.1",
        "lowcmd_port": bridge.lowcmd_port, "lowstate_port": bridge.lowstate_port,
        "connect_timeout_s": 3.0, "observation_timeout_s": 0.3,
        "controller": "HolosomaLocomotionController", "controller_repo": str(folder),
    }  # fmt: skip
    return UnitreeG1Robot(structure({**raw, **settings}, RobotConfig))


def test_the_controller_drives_the_legs_and_the_action_the_arms(policies):
    folder, _ = policies
    with EmulatedBridge() as bridge:
        robot = g1(bridge, folder)
        names = list(robot.action_features["action"].names)
        assert names[0] == "kLeftShoulderPitch.q" and names[-4:] == list(AXES)
        assert len(names) == 18
        robot.connect()
        robot.reset()
        try:
            present = robot.get_observation()["observation.state"]
            arms = present[15:] + 0.05
            sent = robot.send_action(np.concatenate([arms, [0.0, 0.5, -1.05, 7.0]]))
            np.testing.assert_allclose(sent[:14], arms, atol=1e-5)
            # A little past the stick's travel clipped to it; far past is garbage: no command.
            assert list(sent[14:]) == [0.0, 0.5, -1.0, 0.0]
            time.sleep(0.2)  # the controller runs at 200 Hz beside it
            commands = [c["data"]["motor_cmd"] for c in bridge.commands]
            legs = [c for c in commands if c[0]["kp"] == HOLOSOMA_KP[0]]
            assert len(legs) > 5  # its commands, with its gains on the legs
            last = commands[-1]
            assert [c["kp"] for c in last[:15]] == HOLOSOMA_KP[:15]
            assert last[15]["kp"] == 50  # the arms keep the robot's gains
            np.testing.assert_allclose([c["q"] for c in last[15:29]], arms, atol=1e-5)
            with pytest.raises(InvalidInput, match="the 14 arm joints then the remote's 4 axes"):
                robot.send_action(np.zeros(29))
        finally:
            robot.disconnect()
        count = len(bridge.commands)
        time.sleep(0.1)
        assert len(bridge.commands) == count  # the controller stopped with the robot


def test_a_bridge_that_stops_the_controller_is_one_error(policies):
    folder, _ = policies
    with EmulatedBridge() as bridge:
        robot = g1(bridge, folder)
        robot.connect()
        robot.reset()
        try:
            bridge.silence()
            time.sleep(0.8)
            with pytest.raises(HardwareError, match="HolosomaLocomotionController had no usable"):
                robot.send_action(np.zeros(18))
        finally:
            robot.disconnect()
