"""Whether the next task's envs start ahead: off by default where envs render on a GPU.

LeRobot closes each task's envs before the next task's start, so that no two tasks' GL contexts
(EGL on the GPU) are alive at once. rlctl starts the next task's workers ahead by default
(`--eval.prefetch_next_task=auto`) except where rendering is on a GPU; forced off, a suite in
real worker processes never has more than one task's workers alive.
"""

from __future__ import annotations

import threading
import time

import pytest

from rlctl.adapters.memory.progress import RecordingProgress
from rlctl.adapters.sim import mujoco_gl
from rlctl.adapters.sim.random_policy import RandomPolicy
from rlctl.adapters.sim.registry import make_env_config
from rlctl.adapters.sim.simulation import GymSimulation
from rlctl.adapters.sim.vector import available_cores
from rlctl.application.use_cases.evaluate_policy import EvalSettings, EvaluatePolicy
from rlctl.domain.rollout_plan import worker_count

from .conftest import wait_for_no_workers, worker_processes


@pytest.fixture
def machine(monkeypatch):
    """Set the display, MUJOCO_GL and whether an NVIDIA device is visible."""

    def set_up(*, gl: str | None, display: str | None = None, gpu: bool = True) -> None:
        for name, value in (("MUJOCO_GL", gl), ("DISPLAY", display)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        monkeypatch.setattr(mujoco_gl, "nvidia_gpu_visible", lambda: gpu)

    return set_up


@pytest.mark.parametrize(
    ("gl", "display", "gpu", "mujoco", "other"),
    [
        ("egl", None, True, True, True),  # EGL on the GPU: every env type that renders with GL
        ("egl", None, False, False, False),  # EGL without a GPU is Mesa's, on the CPU
        ("osmesa", None, True, False, False),  # software rendering
        (None, None, True, True, False),  # headless: the MuJoCo types choose EGL themselves
        (None, ":0", True, False, False),  # a desktop: a GLFW window
        ("glfw", None, True, False, False),
    ],
)
def test_which_env_types_render_on_the_gpu(machine, gl, display, gpu, mujoco, other):
    machine(gl=gl, display=display, gpu=gpu)
    assert make_env_config("aloha").renders_on_gpu() is mujoco
    assert make_env_config("metaworld").renders_on_gpu() is mujoco
    assert make_env_config("gym", id="Pendulum-v1").renders_on_gpu() is other
    assert make_env_config("pusht").renders_on_gpu() is False  # pygame, on the CPU


def test_cuda_visible_devices_hiding_every_gpu_means_none(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert mujoco_gl.nvidia_gpu_visible() is False
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert mujoco_gl.nvidia_gpu_visible() is False


def test_the_spec_carries_it_and_auto_turns_prefetch_off(machine):
    machine(gl="egl", gpu=True)
    sim = GymSimulation(make_env_config("gym", id="Pendulum-v1"))
    spec = sim.spec()
    assert spec.renders_on_gpu is True
    use_case = EvaluatePolicy(
        sim, RandomPolicy(spec.action_low, spec.action_high, seed=0), RecordingProgress()
    )
    use_case(EvalSettings(n_episodes=1, batch_size=1, use_async_envs=False, max_episode_steps=2))
    assert use_case.prefetch is False
    machine(gl="osmesa", gpu=True)
    assert GymSimulation(make_env_config("gym", id="Pendulum-v1")).spec().renders_on_gpu is False


@pytest.mark.slow
def test_without_prefetch_a_suite_in_workers_has_one_tasks_workers_alive(toy_package):
    workers = worker_count(2, available_cores())
    sampled: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            sampled.append(len(worker_processes()))
            time.sleep(0.01)

    def run(prefetch):
        sim = GymSimulation(make_env_config("toy", task="a,b,c", length=3))
        spec = sim.spec()
        policy = RandomPolicy(spec.action_low, spec.action_high, seed=0)
        use_case = EvaluatePolicy(sim, policy, RecordingProgress())
        settings = EvalSettings(
            n_episodes=2, batch_size=2, use_async_envs=True, prefetch_next_task=prefetch
        )
        return use_case(settings)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        report = run(False)
    finally:
        stop.set()
        sampler.join()
    assert [t.task for t in report.tasks] == ["a", "b", "c"]
    assert max(sampled) == workers  # never the next task's beside the running one's
    assert wait_for_no_workers() == []
    assert report.to_info()["per_episode"] == run(True).to_info()["per_episode"]
    assert wait_for_no_workers() == []
