"""The statistics a new learner's policy normalises with: the robot's action bounds win over the
config's placeholder action statistics (LeRobot's min 0 / max 1 default, which a
`--policy.dataset_stats` override merges into), so the actor's tanh output spans what the robot
takes; statistics a user gives are kept; the critics judge the executed actions in the range the
actor proposes its own in. The discrete critic's target is shaped as the policy's
discrete critic."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlctl.adapters.policies.base import build_policy
from rlctl.adapters.policies.gaussian_actor import GaussianActorPolicy
from rlctl.adapters.rl.sac import SoftActorCritic
from rlctl.adapters.rl.trainer import TorchSACTrainer, TorchSACTrainerFactory, TrainerSettings
from rlctl.application.ports.reinforcement import ActorHello
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
from rlctl.domain.rl.replay import RLTransition, stack
from rlctl.domain.rl.sac import SACSettings

SMALL = SACSettings(critic_network_kwargs={"hidden_dims": [8]})
# gym-hil's end-effector arm: (x, y, z) deltas in [-1, 1] and a gripper command in [0, 2].
HELLO = ActorHello(
    {
        "observation.state": typed_feature("STATE", (2,), "observation.state"),
        "action": typed_feature("ACTION", (4,), "action"),
    },
    np.array([-1.0, -1.0, -1.0, 0.0]),
    np.array([1.0, 1.0, 1.0, 2.0]),
)


def trainer(**overrides: Any) -> TorchSACTrainer:
    config = GaussianActorConfig(
        latent_dim=8,
        state_encoder_hidden_dim=8,
        actor_network_kwargs={"hidden_dims": [8]},
        discrete_critic_network_kwargs={"hidden_dims": [8]},
        **overrides,
    )
    factory = TorchSACTrainerFactory(TrainerSettings(policy=config, algorithm=SMALL, device="cpu"))
    return factory.create(HELLO)


def action_stats(**overrides: Any) -> dict[str, np.ndarray]:
    return dict(trainer(**overrides).description.stats["action"])


def test_robot_bounds_replace_the_placeholder_action_stats_of_a_discrete_gripper_policy() -> None:
    stats = action_stats(num_discrete_actions=3)
    np.testing.assert_array_equal(stats["min"], [-1.0, -1.0, -1.0])
    np.testing.assert_array_equal(stats["max"], [1.0, 1.0, 1.0])


def test_robot_bounds_normalise_a_continuous_gripper() -> None:
    stats = action_stats()
    np.testing.assert_array_equal(stats["min"], [-1.0, -1.0, -1.0, 0.0])
    np.testing.assert_array_equal(stats["max"], [1.0, 1.0, 1.0, 2.0])


def test_action_stats_a_user_gives_are_kept() -> None:
    given = {"action": {"min": [-0.5, -0.5, -0.2], "max": [0.5, 0.5, 0.2]}}
    stats = action_stats(num_discrete_actions=3, dataset_stats=given)
    np.testing.assert_allclose(stats["min"], [-0.5, -0.5, -0.2])
    np.testing.assert_allclose(stats["max"], [0.5, 0.5, 0.2])


def test_the_discrete_critic_target_takes_the_policy_critics_shape() -> None:
    # Only the policy's discrete critic is sized (the algorithm's settings keep [256, 256]).
    config = GaussianActorConfig(
        input_features={"observation.state": typed_feature("STATE", (2,))},
        output_features={"action": typed_feature("ACTION", (1,))},
        latent_dim=8,
        num_discrete_actions=3,
        discrete_critic_network_kwargs={"hidden_dims": [8]},
    )
    model = build_policy(config)
    assert isinstance(model, GaussianActorPolicy)
    sac = SoftActorCritic(model, SMALL)
    assert sac.discrete_critic_target is not None and model.discrete_critic is not None
    target = {k: v.shape for k, v in sac.discrete_critic_target.state_dict().items()}
    assert target == {k: v.shape for k, v in model.discrete_critic.state_dict().items()}


def executed(*actions: list[float]) -> Any:
    state = {"observation.state": np.zeros(2, np.float32)}
    return stack(
        [RLTransition(state, np.asarray(a, np.float32), 0.0, state, False, False) for a in actions]
    )


def test_the_critics_judge_a_continuous_gripper_command_in_the_actors_range() -> None:
    # The robot took (x, y, z) in [-1, 1] and the gripper command in [0, 2]; the actor proposes
    # all four in [-1, 1] (its tanh output, unnormalised with the robot's bounds on the way out).
    learner = trainer()
    prepared = learner._prepared(executed([0.5, -1.0, 1.0, 2.0], [0.0, 0.0, 0.0, 0.0]))
    np.testing.assert_allclose(
        prepared["action"].numpy(), [[0.5, -1.0, 1.0, 1.0], [0.0, 0.0, 0.0, -1.0]], atol=1e-6
    )


def test_actions_the_statistics_map_onto_themselves_reach_the_critics_untouched() -> None:
    # LeRobot's gym-hil recipe: (x, y, z) in [-1, 1] and a discrete gripper (its index kept).
    actions = [[0.3, -0.7, 0.1, 2.0], [1.0, -1.0, 0.123456789, 0.0]]
    prepared = trainer(num_discrete_actions=3)._prepared(executed(*actions))
    np.testing.assert_array_equal(prepared["action"].numpy(), np.asarray(actions, np.float32))


ARM_LOW, ARM_HIGH = np.array([-2.9, -0.5]), np.array([2.9, 255.0])


def state_stats(dataset_stats: Any = None) -> dict[str, np.ndarray]:
    hello = ActorHello(
        HELLO.features,
        HELLO.action_low,
        HELLO.action_high,
        {"observation.state": (ARM_LOW, ARM_HIGH)},
    )
    config = GaussianActorConfig(
        latent_dim=8,
        state_encoder_hidden_dim=8,
        actor_network_kwargs={"hidden_dims": [8]},
        num_discrete_actions=3,
        **({"dataset_stats": dataset_stats} if dataset_stats is not None else {}),
    )
    factory = TorchSACTrainerFactory(TrainerSettings(policy=config, algorithm=SMALL, device="cpu"))
    return dict(factory.create(hello).description.stats["observation.state"])


def test_the_robots_observation_ranges_normalise_the_state_in_place_of_the_placeholder() -> None:
    # The config's default holds LeRobot's placeholder for a 2-value state, min 0 / max 1: the
    # robot's ranges win over it, as its action bounds win over the action's.
    stats = state_stats()
    np.testing.assert_array_equal(stats["min"], ARM_LOW.astype(np.float32))
    np.testing.assert_array_equal(stats["max"], ARM_HIGH.astype(np.float32))


def test_state_stats_a_user_gives_win_over_the_robots_ranges() -> None:
    given = {"observation.state": {"min": [-1.0, -2.0], "max": [1.0, 2.0]}}
    stats = state_stats(given)
    np.testing.assert_allclose(stats["min"], [-1.0, -2.0])
    np.testing.assert_allclose(stats["max"], [1.0, 2.0])
