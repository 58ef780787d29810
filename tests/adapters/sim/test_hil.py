"""gym-hil as `--env.type=hil`: the config as LeRobot's, scripted key events standing in for the
keyboard, LeRobot's HIL processor steps, and the env in eval and under the sim robot."""

from __future__ import annotations

import numpy as np
import pytest

from rlctl.adapters.sim.envs.hil import HilEnv
from rlctl.adapters.sim.envs.hil_input import ScriptedKeys
from rlctl.adapters.sim.envs.hil_processor import (
    CropResizeConfig,
    GymHILAdapter,
    ImageCropResize,
    InterventionAction,
    InterventionConfig,
)
from rlctl.adapters.sim.registry import make_env_config
from rlctl.domain.errors import ConfigError
from rlctl.domain.frames import Transition

SMALL = {"observation_height": 32, "observation_width": 32}


def test_tasks_name_the_scene_and_the_input_device():
    assert make_env_config("hil").scene_and_input() == ("PandaPickCube", None)
    keyboard = make_env_config("hil", task="PandaPickCubeKeyboard")
    assert keyboard.scene_and_input() == ("PandaPickCube", "keyboard")
    assert keyboard.gym_id == "gym_hil/PandaPickCubeKeyboard-v0"
    gamepad = make_env_config("hil", task="PandaArrangeBoxesGamepad-v0")
    assert gamepad.scene_and_input() == ("PandaArrangeBoxes", "gamepad")
    scripted = make_env_config(
        "hil", task="PandaPickCubeKeyboard-v0", scripted_keys=["0 press space"]
    )
    assert scripted.scene_and_input() == ("PandaPickCube", "scripted")
    assert (
        make_env_config("hil", task="PandaPickCubeKeyboard", input="none").scene_and_input()[1]
        is None
    )


def test_lerobots_processor_sections_decide_length_gripper_and_success():
    config = make_env_config(
        "hil",
        fps=10,
        processor={
            "gripper": {"use_gripper": True, "gripper_penalty": -0.02},
            "reset": {"control_time_s": 3.0, "terminate_on_success": False},
        },
    )
    assert config.max_steps() == 30 and config.gripper_penalty() == -0.02
    assert not config.terminate_on_success()
    # As LeRobot: no gripper section, no penalty; no reset section, gym-hil's 100 steps.
    plain = make_env_config("hil")
    assert plain.gripper_penalty() == 0.0 and plain.max_steps() == 100
    assert make_env_config("hil", episode_length=7).max_steps() == 7


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"task": "PandaStackCubes-v0"}, "env.task"),
        ({"robot": {"type": "so101_follower"}}, "env.robot"),
        ({"scripted_keys": ["soon press space"]}, "env.scripted_keys[0]"),
        ({"scripted_keys": ["0 press f13"]}, "env.scripted_keys[0]"),
        (
            {"processor": {"inverse_kinematics": {"urdf_path": "x.urdf"}}},
            "env.processor.inverse_kinematics",
        ),
    ],
)
def test_bad_settings_say_where(fields, where):
    with pytest.raises(ConfigError) as caught:
        make_env_config("hil", **fields)
    assert caught.value.where == where
    with pytest.raises(ConfigError, match="gym-hil"):
        HilEnv(name="real_robot")  # `name` as a config file gives it


def test_scripted_keys_drive_gym_hils_keyboard_map():
    keys = ScriptedKeys(
        ["0 press space", "0 press up", "1 press ctrl_l", "2 release up", "3 press enter"]
    )
    keys.update()  # step 0
    assert keys.should_intervene() and keys.get_deltas() == (1.0, 0.0, 0.0)
    keys.update()  # step 1
    assert keys.gripper_command() == "close"
    keys.update()  # step 2
    assert keys.get_deltas() == (0.0, 0.0, 0.0) and keys.should_intervene()
    keys.update()  # step 3
    assert keys.get_episode_end_status() == "success"
    assert keys.get_episode_end_status() is None  # read once, as gym-hil's controllers
    keys.reset()
    assert not keys.should_intervene()


def test_the_intervention_step_takes_the_persons_action_and_signals():
    adapted = GymHILAdapter()(
        Transition(
            action=np.zeros(4, np.float32),
            info={
                "is_intervention": True,
                "teleop_action": np.array([1, 0, 0, 2]),
                "discrete_penalty": -0.02,
                "success": True,
            },
        )
    )
    assert adapted.complementary_data["discrete_penalty"] == -0.02
    out = InterventionAction(InterventionConfig(use_gripper=True))(adapted)
    np.testing.assert_array_equal(out.action, [1, 0, 0, 2])
    assert out.action.dtype == np.float32 and out.done and out.reward == 1.0
    assert out.info["is_intervention"] and out.complementary_data["teleop_action"] is out.action
    # A gamepad's dict, without the intervention flag: the policy's action stays.
    calm = InterventionAction(InterventionConfig(terminate_on_success=False))(
        Transition(
            action=np.ones(3),
            complementary_data={"teleop_action": {"delta_x": 5.0}},
            info={"success": True},
        )
    )
    np.testing.assert_array_equal(calm.action, np.ones(3))
    assert not calm.done and calm.reward == 1.0


@pytest.mark.slow
def test_crop_and_resize_as_torchvision():
    torch = pytest.importorskip("torch")
    from torchvision.transforms import functional as tvf

    image = np.random.default_rng(0).random((1, 3, 20, 30), dtype=np.float32)
    step = ImageCropResize(CropResizeConfig({"observation.images.front": (2, 3, 10, 12)}, (8, 8)))
    out = step(
        Transition(observation={"observation.images.front": image, "observation.state": np.ones(2)})
    )
    cropped = tvf.crop(torch.from_numpy(image), 2, 3, 10, 12)
    expected = tvf.resize(cropped, [8, 8]).clamp(0, 1).numpy()
    np.testing.assert_allclose(out.observation["observation.images.front"], expected, atol=1e-6)
    np.testing.assert_array_equal(out.observation["observation.state"], np.ones(2))
    with pytest.raises(ConfigError):
        ImageCropResize(CropResizeConfig({"observation.images.front": (15, 0, 10, 10)}))(
            Transition(observation={"observation.images.front": image})
        )


def _needs_gym_hil():
    pytest.importorskip("gym_hil")


@pytest.mark.slow
def test_a_scripted_person_takes_over_and_ends_the_episode_as_gym_hil_tags_it():
    _needs_gym_hil()
    config = make_env_config(
        "hil",
        task="PandaPickCubeKeyboard-v0",
        scripted_keys=["0 press space", "0 press up", "2 press space", "3 press enter"],
        **SMALL,
    )
    assert isinstance(config, HilEnv)
    env = config.env_factory(config.tasks()[0])()
    try:
        obs, _ = env.reset(seed=0)
        assert obs["pixels"]["front"].shape == (32, 32, 3) and obs["agent_pos"].shape == (18,)
        policy = np.array([0, 0, 0, 1], np.float32)
        infos = []
        for _ in range(4):
            _, reward, terminated, _, info = env.step(policy)
            infos.append(info)
        assert [i["is_intervention"] for i in infos] == [True, True, False, False]
        np.testing.assert_array_equal(infos[0]["teleop_action"], [1, 0, 0, 1])
        np.testing.assert_array_equal(infos[2]["teleop_action"], policy)
        assert terminated and reward == 1.0 and infos[3]["next.success"]
    finally:
        env.close()


@pytest.mark.slow
def test_the_sim_robot_records_what_the_person_executed():
    _needs_gym_hil()
    from rlctl.adapters.robots.config import SimRobotConfig
    from rlctl.adapters.robots.sim_robot import SimRobot

    env = make_env_config(
        "hil",
        task="PandaPickCubeKeyboard",
        scripted_keys=["1 press space", "1 press left"],
        **SMALL,
    )
    robot = SimRobot(SimRobotConfig(env=env))
    assert set(robot.observation_features) == {
        "observation.state",
        "observation.images.front",
        "observation.images.wrist",
    }
    assert robot.action_features["action"].names == ["delta_x", "delta_y", "delta_z", "gripper"]
    robot.connect()
    try:
        robot.reset()
        policy = np.array([0.5, 0, 0, 1], np.float32)
        first = robot.send_action(policy)
        second = robot.send_action(policy)
        np.testing.assert_allclose(first, policy)
        np.testing.assert_array_equal(second, [0, 1, 0, 1])  # left: +y, as gym-hil maps it
        assert robot.get_observation()["observation.images.wrist"].dtype == np.uint8
    finally:
        robot.disconnect()


def test_the_state_only_mode_has_the_cubes_position_and_no_cameras():
    config = make_env_config("hil", obs_type="environment_state_agent_pos")
    features = config.env_features()
    assert set(features) == {"action", "agent_pos", "environment_state"}
    assert features["environment_state"].shape == (3,)
    assert features["environment_state"].kind.name == "ENV"
    assert config.features_map["environment_state"] == "observation.environment_state"
    assert set(make_env_config("hil").env_features()) == {
        "action",
        "agent_pos",
        "pixels/front",
        "pixels/wrist",
    }


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"obs_type": "state"}, "env.obs_type"),
        ({"reward_type": "shaped"}, "env.reward_type"),
        (
            {"task": "PandaArrangeBoxes-v0", "random_block_position": True},
            "env.random_block_position",
        ),
        (
            {
                "obs_type": "environment_state_agent_pos",
                "processor": {"image_preprocessing": {"resize_size": [64, 64]}},
            },
            "env.processor.image_preprocessing",
        ),
    ],
)
def test_a_state_only_mode_named_wrong_or_given_image_steps_says_where(fields, where):
    with pytest.raises(ConfigError) as caught:
        make_env_config("hil", **fields)
    assert caught.value.where == where


@pytest.mark.slow
@pytest.mark.parametrize("task", ["PandaPickCube", "PandaArrangeBoxes"])
def test_the_state_only_sim_robot_sees_the_arm_and_the_cube_and_renders_nothing(task):
    _needs_gym_hil()
    from rlctl.adapters.robots.config import SimRobotConfig
    from rlctl.adapters.robots.sim_robot import SimRobot

    env = make_env_config("hil", task=task, obs_type="environment_state_agent_pos", **SMALL)
    robot = SimRobot(SimRobotConfig(env=env))
    assert set(robot.observation_features) == {
        "observation.state",
        "observation.environment_state",
    }
    robot.connect()
    try:
        robot.reset()
        before = robot.get_observation()
        assert before["observation.state"].shape == (18,)
        assert before["observation.environment_state"].shape == (3,)
        for _ in range(3):
            robot.send_action(np.array([0.0, 0.0, -1.0, 1.0], np.float32))
        after = robot.get_observation()
        assert not any("images" in key for key in after)
        # The arm moved down; the cube stayed on the table.
        assert not np.allclose(after["observation.state"], before["observation.state"])
        np.testing.assert_allclose(
            after["observation.environment_state"], before["observation.environment_state"],
            atol=1e-3,
        )  # fmt: skip
    finally:
        robot.disconnect()


def test_gym_hils_own_success_is_the_is_success_every_loop_reads():
    """gym-hil says `succeed`; the RL actor's episode success and eval's success rate read
    `is_success` (it was always false on gym-hil)."""
    gym = pytest.importorskip("gymnasium")
    from rlctl.adapters.sim.envs.hil_env import HilInputWrapper, TaggedPolicyWrapper

    class Scene(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (2,))
        action_space = gym.spaces.Box(-1, 1, (4,))

        def __init__(self, succeed: bool) -> None:
            self.succeed = succeed

        def reset(self, **kwargs):
            return np.zeros(2), {}

        def step(self, action):
            return np.zeros(2), float(self.succeed), self.succeed, False, {"succeed": self.succeed}

    for succeed in (True, False):
        _, _, _, _, info = TaggedPolicyWrapper(Scene(succeed)).step(np.zeros(4))
        assert info["is_success"] is succeed
        _, _, _, _, info = HilInputWrapper(Scene(succeed), Idle(), use_gripper=True).step(
            np.zeros(4)
        )
        assert info["is_success"] is succeed


class Idle:
    """A person who does nothing."""

    def update(self) -> None:
        pass

    def get_deltas(self) -> list[float]:
        return [0.0, 0.0, 0.0]

    def gripper_command(self) -> str:
        return "stay"

    def get_episode_end_status(self) -> None:
        return None

    def should_intervene(self) -> bool:
        return False


@pytest.mark.slow
def test_the_dense_reward_and_the_random_cube_reach_gym_hil():
    _needs_gym_hil()
    from rlctl.adapters.robots.config import SimRobotConfig
    from rlctl.adapters.robots.sim_robot import SimRobot

    def three_resets(seed=0, **fields):
        env = make_env_config("hil", obs_type="environment_state_agent_pos", **SMALL, **fields)
        robot = SimRobot(SimRobotConfig(env=env, seed=seed))
        robot.connect()
        cubes, rewards = [], []
        try:
            for _ in range(3):
                robot.reset()
                cubes.append(robot.get_observation()["observation.environment_state"].copy())
                robot.send_action(np.array([0.0, 0.0, 0.0, 1.0], np.float32))
                assert robot.last_step is not None
                rewards.append(float(robot.last_step.reward[0]))
        finally:
            robot.disconnect()
        return np.stack(cubes), rewards

    cubes, rewards = three_resets()
    # gym-hil's defaults: the cube at (0.5, 0) on every reset, and 0 until it is lifted.
    np.testing.assert_allclose(cubes[:, :2], [[0.5, 0.0]] * 3, atol=1e-3)
    assert rewards == [0.0, 0.0, 0.0]
    cubes, rewards = three_resets(reward_type="dense", random_block_position=True)
    # Dense: the hand's closeness to the cube counts already (0.3 exp(-20 d), nothing lifted).
    assert all(0.0 < r < 0.3 for r in rewards), rewards
    # Random: a new place in gym-hil's sampling square on each reset.
    assert len({tuple(np.round(c[:2], 3)) for c in cubes}) == 3, cubes
    assert ((cubes[:, :2] >= [0.3, -0.15]) & (cubes[:, :2] <= [0.5, 0.15])).all(), cubes
    # The robot's seed decides the places (gym-hil draws them from numpy's global generator).
    np.random.seed(12345)  # what ran before must not matter
    again, _ = three_resets(reward_type="dense", random_block_position=True)
    np.testing.assert_array_equal(again, cubes)
    other, _ = three_resets(seed=7, reward_type="dense", random_block_position=True)
    assert not np.allclose(other[:, :2], cubes[:, :2]), other


def test_bounded_observations_are_the_finite_float_boxes_of_a_space():
    gym = pytest.importorskip("gymnasium")
    from rlctl.adapters.sim.simulation import bounded_observations

    box = gym.spaces.Box
    space = gym.spaces.Dict(
        {
            "agent_pos": box(np.array([-1.0, 0.0]), np.array([1.0, 2.0]), (2,), np.float32),
            "environment_state": box(-np.inf, np.inf, (3,), np.float32),
            "pixels": gym.spaces.Dict({"front": box(0, 255, (4, 4, 3), np.uint8)}),
        }
    )
    (key,) = bounded_observations(space)
    assert key == "agent_pos"
    # A lone box (Pendulum's) is the observation `as_observation` names `state`.
    pendulum = bounded_observations(box(np.array([-1.0, -8.0]), np.array([1.0, 8.0])))
    np.testing.assert_array_equal(pendulum["state"][1], [1.0, 8.0])


@pytest.mark.slow
def test_gym_hils_arm_tells_its_ranges_from_its_model():
    _needs_gym_hil()
    from rlctl.adapters.robots.config import SimRobotConfig
    from rlctl.adapters.robots.sim_robot import SimRobot

    env = make_env_config("hil", obs_type="environment_state_agent_pos", **SMALL)
    robot = SimRobot(SimRobotConfig(env=env))
    bounds = robot.observation_bounds
    low, high = bounds["observation.state"]
    # The 7 joints' ranges of MuJoCo's Panda, their rated speeds, the gripper's command range
    # (0-255), the fingertip within the controller's workspace.
    np.testing.assert_allclose(
        low[:7], [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973]
    )
    np.testing.assert_allclose(high[3], -0.0698, atol=1e-6)
    np.testing.assert_allclose(high[7:14], [2.175] * 4 + [2.61] * 3, rtol=1e-6)
    assert (low[14], high[14]) == (0.0, 255.0)
    np.testing.assert_allclose(low[15:], [0.2, -0.3, 0.0], atol=1e-6)
    np.testing.assert_allclose(high[15:], [0.6, 0.3, 0.5], atol=1e-6)
    np.testing.assert_allclose(
        bounds["observation.environment_state"][0], [0.2, -0.3, 0.0], atol=1e-6
    )
    robot.connect()
    try:
        robot.reset()
        for _ in range(5):
            robot.send_action(np.array([1.0, -1.0, -1.0, 2.0], np.float32))
            state = robot.get_observation()["observation.state"]
            assert ((state >= low - 1e-4) & (state <= high + 1e-4)).all(), state
    finally:
        robot.disconnect()
