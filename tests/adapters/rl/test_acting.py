"""The actor's robot adapter: every action through the robot's guard (what it let through is
what is recorded), holding re-sends the last safe command, the env's reward and bounds are read
from a simulated robot, and a robot without a reward says what to plug in."""

from __future__ import annotations

import numpy as np
import pytest

from rlctl.adapters.memory.robot import ScriptedRobot
from rlctl.adapters.rl.acting import RobotInteraction
from rlctl.adapters.rl.reward import EnvReward
from rlctl.domain.errors import ConfigError


def test_actions_pass_the_guard_and_holding_resends_the_last_safe_one() -> None:
    robot = ScriptedRobot(joints=["a", "b"], limits=([-1.0, -1.0], [1.0, 1.0]))
    interaction = RobotInteraction(robot)
    observation = interaction.reset()
    assert set(observation) == {"observation.state"}
    first = interaction.step(np.array([0.5, 1.05]))  # a small overshoot is clipped
    np.testing.assert_allclose(first.executed_action, [0.5, 1.0])
    held = interaction.step(np.array([np.nan, 0.0]))  # refused: the last safe command stands
    np.testing.assert_allclose(held.executed_action, [0.5, 1.0])
    sent_before = len(robot.sent)
    interaction.hold()
    assert len(robot.sent) == sent_before + 1
    np.testing.assert_allclose(robot.sent[-1], [0.5, 1.0])
    with pytest.raises(ConfigError, match="no reward") as err:
        EnvReward().judge(first)
    assert "reward classifier" in (err.value.hint or "")
    interaction.close()
    assert robot.disconnects == 1


def test_a_simulated_robot_gives_features_bounds_and_rewards() -> None:
    pytest.importorskip("gymnasium")
    from rlctl.adapters.robots.config import SimRobotConfig
    from rlctl.adapters.robots.sim_robot import SimRobot
    from rlctl.adapters.sim.envs.gym_generic import GymEnv

    interaction = RobotInteraction(SimRobot(SimRobotConfig(env=GymEnv(id="Pendulum-v1"))))
    features = interaction.features
    assert features["observation.state"].shape == (3,)
    assert features["action"].shape == (1,)
    bounds = interaction.action_bounds()
    assert bounds is not None
    np.testing.assert_allclose(bounds[0], [-2.0])
    interaction.reset()
    waited = interaction.step(np.array([5.0]))  # far outside [-2, 2], nothing safe yet: waits
    assert -2.0 <= float(waited.executed_action[0]) <= 2.0
    assert EnvReward().judge(waited) == (0.0, False)
    step = interaction.step(np.array([1.0]))
    np.testing.assert_allclose(step.executed_action, [1.0])
    reward, success = EnvReward().judge(step)
    assert reward <= 0.0 and success is False
    interaction.hold()  # a simulation holds by not stepping
    interaction.close()


def test_a_reward_classifier_tells_success_from_the_observation() -> None:
    from rlctl.adapters.memory.success import ScriptedSuccessDetector
    from rlctl.adapters.rl.reward import ClassifierReward
    from rlctl.application.ports.reinforcement import InteractionStep

    judge = ClassifierReward(ScriptedSuccessDetector([0.2, 0.9], threshold=0.5), 2.0)
    step = InteractionStep(
        observation={"observation.images.front": np.zeros((3, 8, 8), np.float32)},
        executed_action=np.zeros(1, np.float32),
        reward=-5.0,  # the env's reward is not used
        terminated=False,
        truncated=False,
    )
    assert judge.judge(step) == (0.0, False)
    assert judge.judge(step) == (2.0, True)


def test_a_missing_reward_classifier_is_refused_clearly(tmp_path) -> None:
    from rlctl.adapters.rl.reward import classifier_reward
    from rlctl.domain.errors import RlctlError

    with pytest.raises(RlctlError):
        classifier_reward(str(tmp_path / "nowhere"))
