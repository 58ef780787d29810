"""Env configs: the tagged union, plugins through entry points, clear errors."""

from __future__ import annotations

import attrs
import pytest

from rlctl.adapters.sim.config import EnvConfig
from rlctl.adapters.sim.envs.gym_generic import GymEnv
from rlctl.adapters.sim.envs.metaworld import MetaworldEnv
from rlctl.adapters.sim.envs.pusht import PushtEnv
from rlctl.adapters.sim.registry import env_config_class, known_env_types, make_env_config
from rlctl.adapters.sim.simulation import GymSimulation
from rlctl.adapters.sim.vector import available_cores
from rlctl.application.ports.simulation import SimulationError
from rlctl.domain.config import parse_overrides, resolve, structure, unstructure
from rlctl.domain.errors import ConfigError
from rlctl.domain.rollout_plan import worker_count


@attrs.frozen
class Settings:
    env: EnvConfig = attrs.field(factory=PushtEnv)


def test_builtin_types_are_known():
    assert {"pusht", "aloha", "metaworld", "gym"} <= set(known_env_types())


def test_overrides_pick_the_type_like_lerobots_command_line():
    overrides = parse_overrides(["--env.type=metaworld", "--env.task=easy,push-v3"])
    settings = resolve(Settings, unstructure(Settings()), overrides=overrides)
    assert isinstance(settings.env, MetaworldEnv)
    assert settings.env.task == "easy,push-v3"
    assert structure(unstructure(settings), Settings) == settings


def test_unknown_type_lists_the_known_ones():
    with pytest.raises(ConfigError) as caught:
        structure({"env": {"type": "mujoco_soccer"}}, Settings)
    assert "mujoco_soccer" in str(caught.value)
    assert "pusht" in str(caught.value) and "metaworld" in str(caught.value)


def test_metaworld_suites_expand_difficulties_and_keep_single_tasks():
    tasks = MetaworldEnv(task="push-v3,easy").tasks()
    assert tasks[0].suite == "push-v3" and tasks[0].task_id == 0
    easy = [t for t in tasks if t.suite == "easy"]
    assert len(easy) == 28 and [t.task_id for t in easy] == list(range(28))
    with pytest.raises(ConfigError, match="pushh-v3"):
        MetaworldEnv(task="pushh-v3").tasks()


def test_pusht_declares_lerobots_features_and_map():
    env = PushtEnv()
    specs = env.env_features()
    assert specs["pixels"].shape == (96, 96, 3) and specs["pixels"].is_visual
    assert specs["agent_pos"].shape == (2,)
    assert env.features_map["agent_pos"] == "observation.state"
    state_only = PushtEnv(obs_type="environment_state_agent_pos").env_features()
    assert "pixels" not in state_only and state_only["environment_state"].shape == (16,)


def test_missing_simulator_package_names_the_package_and_the_extra():
    @EnvConfig.register("nosuchsim")
    @attrs.frozen(kw_only=True)
    class NoSuchSim(EnvConfig):
        extra = "nosuchsim"
        task: str | None = "Thing-v0"

    with pytest.raises(SimulationError) as caught:
        GymSimulation(NoSuchSim()).spec()
    assert "gym_nosuchsim" in str(caught.value)
    assert "rlctl[nosuchsim]" in caught.value.hint


def test_gym_type_runs_any_registered_id():
    sim = GymSimulation(GymEnv(id="Pendulum-v1", episode_length=50))
    spec = sim.spec()
    assert spec.action_dim == 1 and spec.max_episode_steps == 50
    probe = sim.probe()
    assert probe.observation["state"].shape == (1, 3) and probe.step_s > 0
    with pytest.raises(SimulationError, match="gym_nothere"):
        GymSimulation(GymEnv(id="gym_nothere/Foo-v0")).spec()
    with pytest.raises(ConfigError, match="does not register"):
        GymSimulation(GymEnv(id="gymnasium/NoSuchEnv-v9", package="gymnasium")).spec()


def test_a_third_party_env_type_registers_through_an_entry_point(toy_package):
    cls = env_config_class("toy")
    assert cls.__name__ == "ToyEnvConfig"
    config = make_env_config("toy", task="x,y")
    assert [t.name for t in config.tasks()] == ["x", "y"]
    settings = structure({"env": {"type": "toy", "length": 2}}, Settings)
    assert settings.env.length == 2


def test_a_broken_plugin_is_named_when_its_type_is_asked_for(toy_package):
    with pytest.raises(ConfigError) as caught:
        env_config_class("broken")
    assert "rlctl_toy_missing_module" in caught.value.hint
    assert "toy" in known_env_types()  # the others still load


def test_aloha_refuses_an_image_size_gym_aloha_does_not_render():
    with pytest.raises(ConfigError, match=r"480x640, not 96x96.*480 and 640"):
        make_env_config("aloha", observation_height=96, observation_width=96)


def test_mujoco_envs_render_offscreen_on_a_headless_machine(monkeypatch):
    from rlctl.adapters.sim.envs.aloha import make_aloha_env

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    seen = make_aloha_env(lambda: __import__("os").environ.get("MUJOCO_GL"))
    assert seen == "egl"
    # A backend the user chose is kept.
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    assert make_aloha_env(lambda: __import__("os").environ.get("MUJOCO_GL")) == "osmesa"


def test_rendering_failures_say_which_backend_and_package():
    from rlctl.adapters.sim.mujoco_gl import is_rendering_error, rendering_hint

    class FatalError(Exception):  # mujoco's, raised without a GL context
        pass

    assert is_rendering_error(FatalError("an OpenGL platform library has not been loaded"))
    # MUJOCO_GL=osmesa without libOSMesa.
    assert is_rendering_error(AttributeError("'NoneType' object has no attribute 'glGetError'"))
    assert not is_rendering_error(ValueError("illegal action shape"))
    hint = rendering_hint()
    assert "MUJOCO_GL=egl" in hint and "libegl1" in hint and "libosmesa6" in hint


def test_max_parallel_tasks_reaches_the_spec_and_below_one_is_refused(toy_package):
    config = make_env_config("toy", task="a,b", max_parallel_tasks=2)
    assert GymSimulation(config).spec().max_parallel_tasks == 2
    with pytest.raises(ConfigError, match=r"env\.max_parallel_tasks: .* at least 1, got 0"):
        make_env_config("toy", task="a,b", max_parallel_tasks=0)
    with pytest.raises(ConfigError, match="at least 1") as caught:
        PushtEnv(max_parallel_tasks=-1)
    assert caught.value.where == "env.max_parallel_tasks"


def test_worker_cores_caps_each_tasks_worker_processes(toy_package):
    config = make_env_config("toy", task="a,b")
    envs = config.create_envs(4, use_async=True, worker_cores=1)
    uncapped = config.create_envs(4, use_async=True)
    try:
        assert [env.n_workers for env in envs["toy"].values()] == [1, 1]
        assert uncapped["toy"][0].n_workers == worker_count(4, available_cores())
        # Nothing started: the envs are lazy.
        assert all(env.env is None for env in [*envs["toy"].values(), *uncapped["toy"].values()])
    finally:
        for env in [*envs["toy"].values(), *uncapped["toy"].values()]:
            env.close()


def test_an_env_without_task_text_warns_once_naming_it():
    import structlog

    sim = GymSimulation(make_env_config("gym", task="Pendulum-v1", episode_length=3))
    with structlog.testing.capture_logs() as logs:
        assert sim.probe().task == ""
        [[env]] = [list(g.values()) for g in sim.create(2, use_async=False).values()]
        try:
            env.reset([0, 1])
            assert env.task_descriptions() == ["", ""]
            assert env.task_descriptions() == ["", ""]
        finally:
            env.close()
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1
    assert warnings[0]["event"] == (
        "the environment has neither task_description nor task; "
        "language-conditioned policies need one"
    )
    assert warnings[0]["env"] == "gym"


def test_task_text_prefers_task_description_then_task():
    import gymnasium as gym

    from rlctl.adapters.sim.vector import EvalEnvWrapper

    class Described(gym.Env):
        task_description = "put the bowl on the plate"
        task = "KITCHEN_put_bowl"

    class Named(gym.Env):
        task = "push-v3"

    class Empty(gym.Env):
        task_description = ""

    assert EvalEnvWrapper(Described()).rlctl_task_text == "put the bowl on the plate"
    assert EvalEnvWrapper(Named()).rlctl_task_text == "push-v3"
    assert EvalEnvWrapper(Empty()).rlctl_task_text == ""
    assert EvalEnvWrapper(gym.make("Pendulum-v1")).rlctl_task_text is None


def test_metaworld_multitask_sets_expand_like_difficulties():
    config = make_env_config("metaworld", task="mt10")
    tasks = config.tasks()
    assert [t.suite for t in tasks] == ["mt10"] * 10
    assert [t.name for t in tasks][:3] == ["reach-v3", "push-v3", "pick-place-v3"]
    assert [t.task_id for t in tasks] == list(range(10))
    assert len(make_env_config("metaworld", task="mt50").tasks()) == 50


def test_creating_envs_after_the_spec_builds_no_env_to_read_its_spaces(toy_package, monkeypatch):
    from rlctl.adapters.sim.vector import EnvShape

    probed: list[object] = []
    original = EnvShape.probe.__func__

    def counting(cls, factory):
        probed.append(factory)
        return original(cls, factory)

    monkeypatch.setattr(EnvShape, "probe", classmethod(counting))
    sim = GymSimulation(make_env_config("toy", task="a,b"))
    sim.spec()
    envs = sim.create(2, use_async=False)
    try:
        assert probed == []  # the spec's env told the spaces of the suite
        assert envs["toy"][1].num_envs == 2
    finally:
        for env in envs["toy"].values():
            env.close()
