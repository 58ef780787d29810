"""Env configs that build their envs themselves (a `create_envs` override, LeRobot's way), run
through `rlctl eval` as a user would: plain gymnasium vector envs, no rlctl wrapper.

The first test is LeRobot 0.6.1's `test_custom_create_envs_override` carried over: there the
override's `{"custom_suite": {0: vec_env}}` only had to come back from `make_env`; here it is
evaluated. Its env is gymnasium's Pendulum instead of CartPole: an evaluated policy needs a
continuous action space. The others cover worker processes (AsyncVectorEnv), envs that cannot
render or have no task text, the step limit, and what a wrong return value gets.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, ClassVar

import attrs
import gymnasium as gym
import pytest
from click.testing import CliRunner

from rlctl.adapters.sim.config import EnvConfig
from rlctl.adapters.sim.envs.gym_generic import GymEnv
from rlctl.adapters.sim.simulation import GymSimulation
from rlctl.entrypoints.cli.main import cli

from .conftest import wait_for_no_workers


def pendulum(**kwargs: Any) -> gym.Env:
    return gym.make("Pendulum-v1", **kwargs)


# Worker processes cannot import this test module: what they build is gymnasium's own.
make_pendulum = functools.partial(gym.make, "Pendulum-v1")


@EnvConfig.register("_test_seed_override")
@attrs.frozen(kw_only=True)
class SeedOverrideEnv(EnvConfig):
    """LeRobot's test config: a task, no features, and `create_envs` returning a prebuilt env."""

    task: str | None = "x"
    envs: ClassVar[dict[str, Any]] = {}

    def create_envs(self, n_envs, use_async_envs=False):
        return {"custom_suite": {0: self.envs["mock_vec"]}}


@EnvConfig.register("_test_lerobot_style")
@attrs.frozen(kw_only=True)
class LeRobotStyleEnv(EnvConfig):
    """What a LeRobot user ports: the env kind, async or not, and how many, from the arguments."""

    task: str | None = "swing it up"
    kind: str = "pendulum"  # pendulum (no task text, no render mode) or toy (both)
    rendered: bool = False
    calls: ClassVar[list[tuple[int, bool]]] = []
    made: ClassVar[list[gym.vector.VectorEnv]] = []

    def create_envs(self, n_envs, use_async_envs=False):
        self.calls.append((n_envs, use_async_envs))
        out: dict[str, dict[int, gym.vector.VectorEnv]] = {}
        names = ("a", "b") if self.kind == "toy" else ("a",)
        for task_id, name in enumerate(names):
            if self.kind == "toy":
                import rlctl_toy_env

                make = functools.partial(rlctl_toy_env.ToyEnv, name=name, length=3 + task_id)
            else:
                make = functools.partial(
                    make_pendulum, render_mode="rgb_array" if self.rendered else None
                )
            if use_async_envs:
                env = gym.vector.AsyncVectorEnv([make] * n_envs, context="forkserver")
            else:
                env = gym.vector.SyncVectorEnv([make] * n_envs)
            self.made.append(env)
            out.setdefault(f"{self.kind}_suite", {})[task_id] = env
        return out


@EnvConfig.register("_test_wrong_return")
@attrs.frozen(kw_only=True)
class WrongReturnEnv(EnvConfig):
    task: str | None = "x"

    def create_envs(self, n_envs, use_async_envs=False):
        return {"suite": {0: pendulum()}}  # a single env, not a vector env


@EnvConfig.register("_test_super_override")
@attrs.frozen(kw_only=True)
class SuperOverrideEnv(GymEnv):
    """An override in rlctl's terms that adds to what rlctl builds."""

    id: str = "Pendulum-v1"
    seen: ClassVar[list[int]] = []

    def create_envs(self, n_envs, **kwargs):
        self.seen.append(n_envs)
        return super().create_envs(n_envs, **kwargs)


@pytest.fixture
def runner():
    return CliRunner()


def evaluate(runner: CliRunner, out: Path, *args: str):
    result = runner.invoke(cli, ["eval", *args, f"--output_dir={out}"])
    info = json.loads((out / "eval_info.json").read_text()) if result.exit_code == 0 else None
    return result, info


@pytest.fixture(autouse=True)
def _fresh_records():
    LeRobotStyleEnv.calls.clear()
    yield
    for env in LeRobotStyleEnv.made:
        env.close()
    LeRobotStyleEnv.made.clear()


def test_custom_create_envs_override(runner, tmp_path):
    mock_vec = gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1")])
    SeedOverrideEnv.envs["mock_vec"] = mock_vec
    try:
        result, info = evaluate(
            runner,
            tmp_path,
            "--env.type=_test_seed_override",
            "--eval.n_episodes=3",
            "--eval.max_episode_steps=5",
        )
    finally:
        mock_vec.close()
        SeedOverrideEnv.envs.clear()
    assert result.exit_code == 0, result.output
    assert "custom_suite" in info["per_group"]
    episodes = info["per_episode"]
    assert [e["seed"] for e in episodes] == [1000, 1001, 1002]
    assert {(e["task_group"], e["task_id"], e["length"]) for e in episodes} == {
        ("custom_suite", 0, 5)
    }
    # No task_description nor task on the env: the config's task is the text.
    assert {e["task"] for e in episodes} == {"x"}
    # Pendulum made without a render mode gives no frames: no videos, and no failure.
    assert info["overall"]["video_paths"] == []
    assert "gives no frames to film" in result.output


def test_the_step_limit_comes_from_the_sub_envs_specs_or_the_config(runner, tmp_path):
    sim = GymSimulation(LeRobotStyleEnv())
    assert sim.spec().max_episode_steps == 200  # Pendulum-v1's registered limit
    result, info = evaluate(
        runner,
        tmp_path,
        "--env.type=_test_lerobot_style",
        "--env.episode_length=7",
        "--eval.n_episodes=2",
        "--eval.max_episodes_rendered=0",
    )
    assert result.exit_code == 0, result.output
    assert [e["length"] for e in info["per_episode"]] == [7, 7]


def test_the_first_envs_serve_the_evaluation_or_are_closed(runner, tmp_path):
    # One env in-process is what the spec was read from: the override is called once.
    result, _ = evaluate(
        runner,
        tmp_path / "one",
        "--env.type=_test_lerobot_style",
        "--eval.n_episodes=1",
        "--eval.batch_size=1",
        "--eval.use_async_envs=false",
        "--eval.max_episode_steps=3",
    )
    assert result.exit_code == 0, result.output
    assert LeRobotStyleEnv.calls == [(1, False)]
    LeRobotStyleEnv.calls.clear()
    LeRobotStyleEnv.made.clear()
    result, info = evaluate(
        runner,
        tmp_path / "two",
        "--env.type=_test_lerobot_style",
        "--eval.n_episodes=2",
        "--eval.batch_size=2",
        "--eval.use_async_envs=false",
        "--eval.max_episode_steps=3",
    )
    assert result.exit_code == 0, result.output
    assert LeRobotStyleEnv.calls == [(1, False), (2, False)]
    first, second = LeRobotStyleEnv.made
    assert first.closed and second.closed
    assert len(info["per_episode"]) == 2


@pytest.mark.slow
def test_async_vector_envs_with_task_text_and_frames_are_evaluated_and_filmed(
    runner, tmp_path, toy_package
):
    result, info = evaluate(
        runner,
        tmp_path,
        "--env.type=_test_lerobot_style",
        "--env.kind=toy",
        "--env.episode_length=10",  # the toy env is built without a registered limit
        "--eval.n_episodes=2",
        "--eval.batch_size=2",
        "--eval.use_async_envs=true",
        "--eval.max_episodes_rendered=1",
    )
    assert result.exit_code == 0, result.output
    assert LeRobotStyleEnv.calls == [(1, False), (2, True)]
    assert all(isinstance(e, gym.vector.AsyncVectorEnv) for e in LeRobotStyleEnv.made[2:])
    per_episode = info["per_episode"]
    assert [(e["task_id"], e["task"], e["length"]) for e in per_episode] == [
        (0, "toy task a", 3),
        (0, "toy task a", 3),
        (1, "toy task b", 4),
        (1, "toy task b", 4),
    ]
    videos = info["overall"]["video_paths"]
    assert [Path(v).parent.name for v in videos] == ["toy_suite_0", "toy_suite_1"]
    assert all(Path(v).stat().st_size > 0 for v in videos)
    assert wait_for_no_workers() == []


@pytest.mark.slow
def test_async_workers_survive_envs_without_task_text_or_render_mode(runner, tmp_path):
    # Asking a worker's env for an attribute it lacks would kill the worker (gymnasium ends
    # its loop on any error); the adapter only asks what every gym env answers.
    result, info = evaluate(
        runner,
        tmp_path,
        "--env.type=_test_lerobot_style",
        "--eval.n_episodes=2",
        "--eval.batch_size=2",
        "--eval.use_async_envs=true",
        "--eval.max_episode_steps=4",
    )
    assert result.exit_code == 0, result.output
    assert {(e["task"], e["length"]) for e in info["per_episode"]} == {("swing it up", 4)}
    assert info["overall"]["video_paths"] == []
    assert wait_for_no_workers() == []


def test_a_create_envs_returning_something_else_is_one_clear_message(runner, tmp_path):
    result = runner.invoke(
        cli, ["eval", "--env.type=_test_wrong_return", f"--output_dir={tmp_path}"]
    )
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "WrongReturnEnv.create_envs returned a " in result.output
    assert "for task suite/0" in result.output
    assert "gym.vector.SyncVectorEnv([lambda: env])" in result.output


def test_envs_without_a_step_limit_ask_for_one(runner, tmp_path, toy_package):
    result = runner.invoke(
        cli,
        ["eval", "--env.type=_test_lerobot_style", "--env.kind=toy", f"--output_dir={tmp_path}"],
    )
    assert result.exit_code == 1
    assert "no step limit" in result.output and "--env.episode_length=N" in result.output


def test_an_override_in_rlctl_terms_keeps_rlctls_own_envs(runner, tmp_path):
    SuperOverrideEnv.seen.clear()
    result, info = evaluate(
        runner,
        tmp_path,
        "--env.type=_test_super_override",
        "--eval.n_episodes=2",
        "--eval.max_episode_steps=3",
        "--eval.max_episodes_rendered=0",
    )
    assert result.exit_code == 0, result.output
    assert SuperOverrideEnv.seen and all(n >= 1 for n in SuperOverrideEnv.seen)
    assert [e["length"] for e in info["per_episode"]] == [3, 3]


DUMMY_ID = "_rlctl_dispatch_test/Pendulum-v99"


@EnvConfig.register("_test_lerobot_dummy")
@attrs.frozen(kw_only=True)
class DummyEnv(EnvConfig):
    """LeRobot's `test_factory_custom_gym_id` config, as written for LeRobot: `gym_kwargs` is a
    property there (a method in rlctl's own configs)."""

    task: str | None = "Pendulum-v99"
    fps: int = 10

    @property
    def package_name(self) -> str:
        return "_rlctl_dispatch_test"

    @property
    def gym_id(self) -> str:
        return DUMMY_ID

    @property
    def gym_kwargs(self) -> dict[str, Any]:  # type: ignore[override]
        return {"g": 9.81}


def test_factory_custom_gym_id(runner, tmp_path):
    from gymnasium.envs.registration import register, registry

    register(
        id=DUMMY_ID,
        entry_point="gymnasium.envs.classic_control.pendulum:PendulumEnv",
        max_episode_steps=50,
    )
    try:
        sim = GymSimulation(DummyEnv())
        groups = sim.create(1, use_async=False)
        [[env]] = [list(group.values()) for group in groups.values()]
        assert list(groups) == ["_test_lerobot_dummy"] and env.num_envs == 1
        env.close()
        assert sim.spec().max_episode_steps == 50
        result, info = evaluate(
            runner,
            tmp_path,
            "--env.type=_test_lerobot_dummy",
            "--eval.n_episodes=1",
            "--eval.batch_size=1",
            "--eval.use_async_envs=false",
            "--eval.max_episodes_rendered=0",
        )
    finally:
        del registry[DUMMY_ID]
    assert result.exit_code == 0, result.output
    assert [e["length"] for e in info["per_episode"]] == [50]
