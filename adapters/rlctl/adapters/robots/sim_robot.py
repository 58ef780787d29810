"""Any registered simulator as a `Robot`: one env, stepped once per tick.

The observation is the env's, under the keys and dtypes a dataset stores (`agent_pos` becomes
`observation.state`, `pixels` `observation.image`, …) plus the env's task text under `task`;
the action passes the domain's `ActionGuard` against the action space (an overshoot is clipped,
a non-finite or absurd action holds the last safe one, said once per episode). Each episode resets
the env with seed `seed + n`; once the env ends the episode (success, time limit) the robot
says so and ignores further actions until the next reset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import structlog

from rlctl.adapters.robots.config import SimRobotConfig
from rlctl.adapters.sim.simulation import GymSimulation
from rlctl.application.ports.robot import ACTION_KEY, CalibrationStore, CalibrationTarget
from rlctl.application.ports.simulation import SimSpec, SimStep, VectorSimulator
from rlctl.domain.action_guard import ActionGuard, ActionLimits
from rlctl.domain.env_observation import policy_key
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec

TASK_KEY = "task"
log = structlog.get_logger(__name__)


def _dataset_spec(key: str, spec: FeatureSpec) -> FeatureSpec:
    if spec.is_visual:
        return FeatureSpec(key, "video", spec.shape, names=["height", "width", "channels"])
    return FeatureSpec(key, "float32", spec.shape, names=spec.names)


class SimRobot:
    def __init__(self, config: SimRobotConfig, simulation: GymSimulation | None = None) -> None:
        self.config = config
        self._simulation = simulation or GymSimulation(config.env)
        self._spec: SimSpec | None = None
        self._env: VectorSimulator | None = None
        self._raw: dict[str, Any] = {}
        self._task_text = ""
        self._episodes = 0
        self._over = False
        self._guard: ActionGuard | None = None
        # The env's last step (reward, termination, info): what an RL actor reads.
        self.last_step: SimStep | None = None

    @property
    def robot_type(self) -> str:
        return f"sim_{self.config.env.type}"

    @property
    def spec(self) -> SimSpec:
        if self._spec is None:
            self._spec = self._simulation.spec()
        return self._spec

    @property
    def observation_features(self) -> dict[str, FeatureSpec]:
        spec = self.spec
        out = {}
        for raw, feature in spec.features.items():
            if raw == ACTION_KEY:
                continue
            key = policy_key(raw, spec.feature_map)
            out[key] = _dataset_spec(key, feature)
        return out

    @property
    def observation_bounds(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """(low, high) of the observations the env's observation space bounds (gym-hil's arm:
        its joint ranges), under the keys `get_observation` gives them."""
        spec = self.spec
        return {
            policy_key(raw, spec.feature_map): (np.asarray(low), np.asarray(high))
            for raw, (low, high) in spec.observation_bounds.items()
            if raw != ACTION_KEY
        }

    @property
    def action_features(self) -> dict[str, FeatureSpec]:
        action = self.spec.features[ACTION_KEY]
        return {ACTION_KEY: FeatureSpec(ACTION_KEY, "float32", action.shape, names=action.names)}

    @property
    def realtime(self) -> bool:
        return self.config.realtime

    @property
    def is_connected(self) -> bool:
        return self._env is not None

    def connect(self) -> None:
        if self._env is not None:
            return
        groups = self._simulation.create(1, use_async=False)
        first = next(iter(next(iter(groups.values())).values()))
        for group in groups.values():
            for env in group.values():
                if env is not first:
                    env.close()
        self._env = first
        self._over = True  # nothing to act on until the first reset

    def calibration_targets(self) -> Sequence[CalibrationTarget]:
        return []

    def reset(self) -> None:
        env = self._require_env()
        self._raw = env.reset([self.config.seed + self._episodes])
        self._task_text = env.task_descriptions()[0]
        self._episodes += 1
        self._over = False
        self.last_step = None
        self.action_guard.begin_episode()
        self.action_guard.forget()  # a new scene: the last episode's command means nothing here

    @property
    def episode_over(self) -> bool:
        return self._over

    def get_observation(self) -> dict[str, Any]:
        self._require_env()
        spec = self.spec
        observation: dict[str, Any] = {}
        for raw, values in self._raw.items():
            key = policy_key(raw, spec.feature_map)
            value = np.asarray(values)[0]
            observation[key] = value if value.dtype == np.uint8 else value.astype(np.float32)
        observation[TASK_KEY] = self._task_text
        return observation

    @property
    def action_guard(self) -> ActionGuard:
        if self._guard is None:
            spec = self.spec
            low = np.asarray(spec.action_low, dtype=np.float64).reshape(-1)
            high = np.asarray(spec.action_high, dtype=np.float64).reshape(-1)
            names = self.action_features[ACTION_KEY].names
            labels = (
                tuple(str(n) for n in names)
                if names is not None and len(names) == low.shape[0]
                else tuple(f"action[{i}]" for i in range(low.shape[0]))
            )
            self._guard = ActionGuard(ActionLimits(labels, low, high))
        return self._guard

    def send_action(self, action: np.ndarray) -> np.ndarray:
        env = self._require_env()
        shape = self.spec.action_low.shape
        decision = self.action_guard(action)
        if decision.held and decision.first_hold:
            log.warning(
                "action refused, holding the last safe command",
                robot=self.robot_type,
                reason=decision.reason,
                note="said once per episode; every refused action is held the same way",
            )
        if decision.values is None:
            # Nothing safe was commanded in this episode yet: the scene waits for one.
            return np.clip(np.zeros(shape), self.spec.action_low, self.spec.action_high).astype(
                np.float32
            )
        sent = decision.values.reshape(shape)
        if self._over:
            return sent
        step = env.step(sent[None])
        self.last_step = step
        self._raw = step.observation
        self._over = bool(step.terminated[0] or step.truncated[0])
        return _executed(step.info, sent)

    def disconnect(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            env.close()

    def _require_env(self) -> VectorSimulator:
        if self._env is None:
            raise InvalidInput("the simulated robot is not connected", where=self.robot_type)
        return self._env


def _executed(info: Any, sent: np.ndarray) -> np.ndarray:
    """What the env executed: a person's action where the env let them take over (gym-hil
    tags such steps `is_intervention` with the action in `teleop_action`), else `sent`."""
    try:
        intervening = bool(np.asarray(info["is_intervention"]).reshape(-1)[0])
        executed = np.asarray(info["teleop_action"], dtype=np.float32).reshape(-1)
    except (KeyError, IndexError, TypeError, ValueError):
        return sent
    if not intervening or executed.shape[0] != sent.size:
        return sent
    return executed.reshape(sent.shape)


def sim_robot(
    config: SimRobotConfig, *, calibration_store: CalibrationStore | None = None
) -> SimRobot:
    return SimRobot(config)
