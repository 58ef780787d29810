"""Builds one gym-hil env: gym-hil's own scene and wrappers, and the person's input.

gym-hil's registered `Keyboard` / `Gamepad` tasks open MuJoCo's passive viewer (a window) and
start a pynput listener when built, which a machine without a desktop cannot do. The env here
is the same stack — gym-hil's `GripperPenaltyWrapper`, `EEActionWrapper`, its reset delay —
with the input wrapper below in place of `InputsControlWrapper` (same step logic, same `info`
tags) taking a controller that `hil_input` chooses, and no viewer.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from rlctl.adapters.sim.envs.hil_input import make_controller

if TYPE_CHECKING:
    from rlctl.adapters.sim.envs.hil import HilEnvSpec

log = logging.getLogger(__name__)


class HilInputWrapper(gym.Wrapper):  # type: ignore[type-arg]
    """gym-hil's InputsControlWrapper.step with an injected controller (see the module doc)."""

    def __init__(self, env: gym.Env, controller: Any, use_gripper: bool) -> None:  # type: ignore[type-arg]
        super().__init__(env)
        self.controller = controller
        self.use_gripper = use_gripper

    def _input(self) -> tuple[bool, np.ndarray, bool, bool, bool]:
        c = self.controller
        c.update()
        action = np.array(c.get_deltas(), dtype=np.float32)
        # gym-hil's end-effector action always ends with the gripper command (1: stay).
        gripper = {"open": 2.0, "close": 0.0}.get(c.gripper_command(), 1.0)
        gripper = gripper if self.use_gripper else 1.0
        action = np.concatenate([action, np.array([gripper], dtype=np.float32)])
        status = c.get_episode_end_status()
        rerecord = status == "rerecord_episode" or bool(
            getattr(c, "rerecord_requested", lambda: False)()
        )
        return bool(c.should_intervene()), action, status is not None, status == "success", rerecord

    def step(self, action: Any) -> Any:
        is_intervention, human, terminate, success, rerecord = self._input()
        if terminate:
            log.info("episode ended by the person: %s", "success" if success else "failure")
        if is_intervention:
            action = human
        obs, reward, terminated, truncated, info = self.env.step(action)
        terminated = terminated or truncated or terminate
        if success:
            reward = 1.0
        info["is_intervention"] = is_intervention
        info["teleop_action"] = np.asarray(action, dtype=np.float32)
        info["rerecord_episode"] = rerecord
        info["is_success"] = succeeded(info) or success
        if terminated or truncated:
            info["next.success"] = success
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> Any:
        self.controller.reset()
        return self.env.reset(**kwargs)

    def close(self) -> None:
        self.controller.stop()
        self.env.close()


class TaggedPolicyWrapper(gym.Wrapper):  # type: ignore[type-arg]
    """The plain tasks: nobody intervenes, but each step is tagged as the input tasks tag theirs."""

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        info["is_intervention"] = False
        info["teleop_action"] = np.asarray(action, dtype=np.float32)
        info["rerecord_episode"] = False
        info["is_success"] = succeeded(info)
        return obs, reward, terminated, truncated, info


def succeeded(info: dict[str, Any]) -> bool:
    """gym-hil's own success check (`succeed`), under the name every rlctl loop reads
    (`is_success`: the RL actor's episode success, eval's success rate)."""
    return bool(info.get("succeed", False))


def build_hil_env(spec: HilEnvSpec) -> gym.Env:  # type: ignore[type-arg]
    from gym_hil.envs import PandaArrangeBoxesGymEnv, PandaPickCubeGymEnv
    from gym_hil.mujoco_gym_env import GymRenderingSpec
    from gym_hil.wrappers.hil_wrappers import (
        DEFAULT_EE_STEP_SIZE,
        EEActionWrapper,
        GripperPenaltyWrapper,
        ResetDelayWrapper,
    )

    scene_class = {
        "PandaPickCube": PandaPickCubeGymEnv,
        "PandaArrangeBoxes": PandaArrangeBoxesGymEnv,
    }
    options: dict[str, Any] = {
        "image_obs": spec.image_obs,
        "render_mode": "rgb_array",
        "render_spec": GymRenderingSpec(height=spec.height, width=spec.width),
        "reward_type": spec.reward_type,
    }
    if spec.scene == "PandaPickCube":
        options["random_block_position"] = spec.random_block_position
    env: gym.Env = ArmObservationBounds(scene_class[spec.scene](**options))  # type: ignore[type-arg]
    if spec.use_gripper:
        env = GripperPenaltyWrapper(env, penalty=spec.gripper_penalty)
    # gym-hil always keeps the gripper command in the action, `use_gripper` or not.
    env = EEActionWrapper(env, ee_action_step_size=DEFAULT_EE_STEP_SIZE, use_gripper=True)
    if spec.device is None:
        env = TaggedPolicyWrapper(env)
    else:
        env = HilInputWrapper(
            env, make_controller(spec.device, spec.scripted_keys), spec.use_gripper
        )
    if spec.reset_delay_s > 0:
        env = ResetDelayWrapper(env, delay_seconds=spec.reset_delay_s)
    env = gym.wrappers.TimeLimit(FrontCameraRender(env), max_episode_steps=spec.max_steps)
    return SeedsGlobalDraws(env)


class SeedsGlobalDraws(gym.Wrapper):  # type: ignore[type-arg]
    """gym-hil draws the cube's place (`random_block_position`) from numpy's global generator,
    not the env's own: a reset given a seed seeds that one too, so the seed decides the scene
    as it does in every other env (LeRobot's `set_seed` seeds it once per process)."""

    def reset(self, **kwargs: Any) -> Any:
        seed = kwargs.get("seed")
        if seed is not None:
            np.random.seed(int(seed) % 2**32)
        return self.env.reset(**kwargs)


# The Franka Emika Panda's rated joint speeds (rad/s, Franka's datasheet): MuJoCo's model of the
# arm carries no velocity limits.
PANDA_MAX_JOINT_SPEED = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61)


class ArmObservationBounds(gym.ObservationWrapper):  # type: ignore[type-arg]
    """gym-hil's observation space with the ranges its scene knows in place of its unbounded
    boxes: `agent_pos` (the 7 joint positions within the model's joint ranges, their 7 speeds
    within the Panda's rated ones, the gripper's command within its actuator's range, the
    fingertip's position within the workspace the controller keeps it in) and
    `environment_state` (the cube's position, in that workspace). What a learner normalises the
    state with when it is given no statistics, as LeRobot's processors normalise with an env's
    bounds. Observations are passed through untouched."""

    def __init__(self, env: gym.Env) -> None:  # type: ignore[type-arg]
        super().__init__(env)
        scene: Any = env.unwrapped  # gym-hil's FrankaGymEnv: its model and its controller's setup
        model = scene._model
        joints = model.dof_jntid[scene._panda_dof_ids]
        workspace = np.asarray(scene._cartesian_bounds, dtype=np.float64)
        gripper = model.actuator_ctrlrange[scene._gripper_ctrl_id]
        speed = np.asarray(PANDA_MAX_JOINT_SPEED)
        low = np.concatenate([model.jnt_range[joints, 0], -speed, gripper[:1], workspace[0]])
        high = np.concatenate([model.jnt_range[joints, 1], speed, gripper[1:], workspace[1]])
        observed: Any = env.observation_space
        spaces = dict(observed.spaces)
        agent = spaces["agent_pos"]
        if agent.shape != low.shape:
            raise AssertionError(f"gym-hil's agent_pos is {agent.shape}, its bounds {low.shape}")
        spaces["agent_pos"] = gym.spaces.Box(
            low.astype(np.float32), high.astype(np.float32), agent.shape, np.float32
        )
        if "environment_state" in spaces:
            spaces["environment_state"] = gym.spaces.Box(
                workspace[0].astype(np.float32), workspace[1].astype(np.float32), (3,), np.float32
            )
        self.observation_space = gym.spaces.Dict(spaces)

    def observation(self, observation: Any) -> Any:
        return observation


class FrontCameraRender(gym.Wrapper):  # type: ignore[type-arg]
    """`render()` gives the front camera's frame (gym-hil's gives a list, one per camera)."""

    def render(self) -> Any:
        frames = self.env.render()
        return frames[0] if isinstance(frames, list | tuple) and frames else frames
