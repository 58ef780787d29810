"""Real gymnasium envs through EvaluatePolicy: PushT, Meta-World, and a toy plugin env.

Runs are a few steps long; the ones that start worker processes or Meta-World are marked slow.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.progress import RecordingProgress
from rlctl.adapters.sim.envs.pusht import PushtEnv
from rlctl.adapters.sim.random_policy import RandomPolicy
from rlctl.adapters.sim.registry import make_env_config
from rlctl.adapters.sim.simulation import GymSimulation, GymVectorSimulator
from rlctl.adapters.sim.vector import available_cores
from rlctl.application.ports.simulation import SimulationError
from rlctl.application.use_cases.evaluate_policy import EvalSettings, EvaluatePolicy
from rlctl.domain.rollout_plan import worker_count

from .conftest import wait_for_no_workers, worker_processes


def run(config, policy=None, encoder=None, **settings):
    sim = GymSimulation(config)
    spec = sim.spec()
    policy = policy or RandomPolicy(spec.action_low, spec.action_high, seed=0, chunk_size=4)
    use_case = EvaluatePolicy(sim, policy, RecordingProgress(), encoder)
    return use_case, use_case(EvalSettings(**settings))


def test_pusht_in_process_with_a_video(tmp_path):
    from rlctl.adapters.video.pyav_encoder import PyAVVideoEncoder

    _, report = run(
        PushtEnv(episode_length=6),
        encoder=PyAVVideoEncoder(),
        n_episodes=3,
        batch_size=3,
        use_async_envs=False,
        seed=7,
        videos_dir=str(tmp_path),
        max_episodes_rendered=1,
    )
    episodes = report.episodes
    assert [e.seed for e in episodes] == [7, 8, 9]
    assert all(e.length == 6 and np.isfinite(e.sum_reward) for e in episodes)
    [video] = report.to_info()["overall"]["video_paths"]
    assert Path(video) == tmp_path / "pusht_0" / "eval_episode_0.mp4"
    info = PyAVVideoEncoder().probe(Path(video))
    assert info.frame_count == 7 and info.fps == 10


def test_same_seeds_give_the_same_episodes():
    def outcome():
        _, report = run(
            PushtEnv(episode_length=5), n_episodes=2, batch_size=2, use_async_envs=False
        )
        return report.to_info()["per_episode"]

    assert outcome() == outcome()


@pytest.mark.slow
def test_pusht_in_worker_processes_matches_in_process():
    def outcome(use_async):
        _, report = run(
            PushtEnv(episode_length=5), n_episodes=3, batch_size=2, use_async_envs=use_async
        )
        return report.to_info()["per_episode"]

    assert outcome(True) == outcome(False)
    assert wait_for_no_workers() == []


@pytest.mark.slow
def test_metaworld_expert_solves_a_two_task_suite_state_only():
    from rlctl.adapters.sim.metaworld_expert import MetaWorldExpertPolicy

    config = make_env_config(
        "metaworld", task="reach-v3,push-v3", obs_type="state", episode_length=120
    )
    policy = MetaWorldExpertPolicy([t.name for t in config.tasks()])
    _, report = run(config, policy=policy, n_episodes=2, batch_size=2, use_async_envs=False)
    info = report.to_info()
    assert set(info["per_group"]) == {"reach-v3", "push-v3"}
    assert info["overall"]["n_episodes"] == 4
    assert info["overall"]["pc_success"] == 100.0
    assert all(e.length < 120 for e in report.episodes)  # success ends the episode


@pytest.mark.slow
def test_suite_tasks_prefetch_the_next_and_never_have_more_than_two_alive(toy_package, monkeypatch):
    workers = worker_count(2, available_cores())  # one per env, never more than the cores
    before_close: list[int] = []
    sampled: list[int] = []
    original_close = GymVectorSimulator.close

    def counting_close(self):
        if self.vector_env.closed:  # the final close-everything pass
            return original_close(self)
        # The next task's workers start while this one runs: wait for them, then count.
        deadline = time.monotonic() + 20
        while len(worker_processes()) < 2 * workers and time.monotonic() < deadline:
            if self._task.task_id == 2:
                break  # the last task has no next one
            time.sleep(0.05)
        before_close.append(len(worker_processes()))
        original_close(self)

    def sample(stop: threading.Event) -> None:
        while not stop.is_set():
            sampled.append(len(worker_processes()))
            time.sleep(0.02)

    monkeypatch.setattr(GymVectorSimulator, "close", counting_close)
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(stop,), daemon=True)
    sampler.start()
    try:
        config = make_env_config("toy", task="a,b,c", length=3)
        _, report = run(config, n_episodes=2, batch_size=2, use_async_envs=True)
    finally:
        stop.set()
        sampler.join()
    assert [t.task for t in report.tasks] == ["a", "b", "c"]
    assert [e.length for e in report.episodes] == [3] * 6
    # Tasks a and b close with the next task's workers alive beside theirs; c closes alone.
    assert before_close[:2] == [2 * workers, 2 * workers]
    assert before_close[2] == workers
    assert max(sampled) <= 2 * workers
    assert wait_for_no_workers() == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("crash", "message"),
    [("raise", "toy env a exploded at step 2"), ("exit", "worker process died")],
)
def test_a_crash_inside_a_worker_is_reported_and_leaves_no_orphans(toy_package, crash, message):
    config = make_env_config("toy", task="a,b", crash=crash, crash_step=2, length=5)
    with pytest.raises(SimulationError, match=message) as caught:
        run(config, n_episodes=2, batch_size=2, use_async_envs=True)
    assert "toy/0" in str(caught.value)
    assert wait_for_no_workers() == []


def test_task_text_comes_from_the_env_in_process(toy_package):
    config = make_env_config("toy", task="a", length=2)
    sim = GymSimulation(config)
    [[env]] = [list(g.values()) for g in sim.create(2, use_async=False).values()]
    try:
        env.reset([0, 1])
        assert env.task_descriptions() == ["toy task a", "toy task a"]
        assert env.render(1).shape == (1, 8, 8, 3)
    finally:
        env.close()


class InterruptingPolicy(RandomPolicy):
    def __init__(self) -> None:
        super().__init__([-1, -1], [1, 1], seed=0)
        self.calls = 0

    def select_action(self, observation):
        self.calls += 1
        if self.calls == 2:
            raise KeyboardInterrupt
        return super().select_action(observation)


@pytest.mark.slow
def test_ctrl_c_closes_the_workers(toy_package):
    config = make_env_config("toy", task="a,b", length=5)
    with pytest.raises(KeyboardInterrupt):
        run(config, policy=InterruptingPolicy(), n_episodes=2, batch_size=2, use_async_envs=True)
    assert wait_for_no_workers() == []


@pytest.mark.slow
def test_aloha_declares_lerobots_features():
    pytest.importorskip("gym_aloha")
    spec = GymSimulation(make_env_config("aloha", task="AlohaTransferCube-v0")).spec()
    assert spec.action_dim == 14 and spec.fps == 50 and spec.max_episode_steps == 400
    assert spec.features["pixels/top"].shape == (480, 640, 3)
    assert spec.feature_map["pixels/top"] == "observation.images.top"


@pytest.mark.slow
def test_metaworld_renders_offscreen_without_a_display(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    config = make_env_config(
        "metaworld", task="reach-v3", episode_length=2, observation_height=32, observation_width=32
    )
    sim = GymSimulation(config)
    [[env]] = [list(g.values()) for g in sim.create(1, use_async=False).values()]
    try:
        observation = env.reset([3])
        assert observation["pixels"].shape == (1, 32, 32, 3)
        assert observation["pixels"].dtype == np.uint8 and observation["pixels"].any()
        assert observation["agent_pos"].shape == (1, 4)
        assert env.task_descriptions() == ["Reach a goal position"]
    finally:
        env.close()


class KeepingPolicy(RandomPolicy):
    """A random policy that keeps the observation batches it was given."""

    def __init__(self, spec) -> None:
        super().__init__(spec.action_low, spec.action_high, seed=0, chunk_size=2)
        self.batches = []

    def predict_chunk(self, observation, noise=None):
        self.batches.append(dict(observation))
        return super().predict_chunk(observation, noise)


@pytest.mark.slow
def test_aloha_steps_with_the_observations_it_declares():
    pytest.importorskip("gym_aloha")
    from rlctl.adapters.sim.mujoco_gl import is_rendering_error
    from rlctl.domain.env_observation import env_policy_features

    # Each step renders a 480x640 camera three times: two steps are enough.
    sim = GymSimulation(make_env_config("aloha", task="AlohaInsertion-v0", episode_length=2))
    spec = sim.spec()
    policy = KeepingPolicy(spec)
    use_case = EvaluatePolicy(sim, policy, RecordingProgress())
    try:
        report = use_case(EvalSettings(n_episodes=1, batch_size=1, use_async_envs=False, seed=3))
    except SimulationError as error:
        if is_rendering_error(error.__cause__ or error):
            pytest.skip(f"MuJoCo cannot render offscreen here: {error.hint}")
        raise
    [episode] = report.episodes
    assert episode.length == 2 and episode.seed == 3 and np.isfinite(episode.sum_reward)
    declared = env_policy_features(spec.features, spec.feature_map)
    assert set(declared) == {"observation.state", "observation.images.top"}
    for batch in policy.batches:
        observed = {k: v.shape[1:] for k, v in batch.items() if k.startswith("observation.")}
        assert observed == {k: s.shape for k, s in declared.items()}
        image = batch["observation.images.top"]
        assert image.dtype == np.float32 and image.min() >= 0 and image.max() <= 1
        assert image.std() > 0  # a rendered scene, not a blank frame


@pytest.mark.slow
def test_the_metaworld_expert_teleoperates_a_sim_robot_that_records_pixels(monkeypatch):
    from rlctl.adapters.robots.config import SimRobotConfig
    from rlctl.adapters.robots.sim_robot import SimRobot
    from rlctl.adapters.teleop.metaworld_expert import MetaWorldExpertTeleop

    monkeypatch.delenv("DISPLAY", raising=False)
    env = make_env_config("metaworld", task="reach-v3", observation_height=32, observation_width=32)
    robot = SimRobot(SimRobotConfig(env=env))
    teleop = MetaWorldExpertTeleop()
    # Pixels and the hand position are recorded; the full state only reaches the expert.
    assert set(robot.observation_features) == {"observation.image", "observation.state"}
    robot.connect()
    teleop.connect()
    try:
        robot.reset()
        for _ in range(3):
            observation = robot.get_observation()
            assert observation["observation.image"].shape == (32, 32, 3)
            action = teleop.get_action(observation)
            assert action.shape == (4,) and np.all(np.abs(action) <= 1)
            robot.send_action(action)
    finally:
        teleop.disconnect()
        robot.disconnect()


@pytest.mark.slow
def test_metaworld_renders_in_worker_processes(monkeypatch):
    """Each worker builds its own renderer (EGL) on its first reset; none comes from the parent."""
    monkeypatch.delenv("DISPLAY", raising=False)
    pytest.importorskip("metaworld")
    config = make_env_config(
        "metaworld", task="reach-v3", episode_length=2, observation_height=32, observation_width=32
    )
    sim = GymSimulation(config)
    [[env]] = [list(g.values()) for g in sim.create(2, use_async=True).values()]
    try:
        observation = env.reset([3, 4])
        assert len(env.vector_env.processes) == worker_count(2, available_cores())
        assert observation["pixels"].shape == (2, 32, 32, 3) and observation["pixels"].any()
        frames = env.render(2)
        assert frames is not None and frames.shape == (2, 32, 32, 3) and frames.any()
    finally:
        env.close()
    assert wait_for_no_workers() == []
