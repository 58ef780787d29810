"""EvaluatePolicy against the scripted simulator: counting, seeding, aggregation, clean-up."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.adapters.memory.progress import RecordingProgress
from rlctl.adapters.memory.simulator import FakeEpisode, FakeSimulation
from rlctl.adapters.sim.random_policy import RandomPolicy
from rlctl.application.ports.simulation import SimTask, SimulationError
from rlctl.application.use_cases.evaluate_policy import EvalSettings, EvaluatePolicy
from rlctl.domain.errors import FeatureMismatch
from rlctl.domain.features import typed_feature
from rlctl.domain.remote_inference import NonFiniteChunk


def evaluate(sim: FakeSimulation, progress=None, encoder=None, policy=None, **settings):
    policy = policy or RandomPolicy([-1, -1], [1, 1], seed=0, chunk_size=3, n_action_steps=2)
    use_case = EvaluatePolicy(sim, policy, progress or RecordingProgress(), encoder, cpu_count=4)
    return use_case, use_case(EvalSettings(**settings))


def expected(episode: FakeEpisode, max_steps: int) -> tuple[float, float, bool]:
    steps = min(episode.length, max_steps)
    rewards = [episode.reward_at(t) for t in range(steps)]
    return sum(rewards), max(rewards), episode.success and episode.length <= max_steps


scripts = st.lists(
    st.tuples(st.integers(1, 12), st.booleans(), st.floats(-2, 2, allow_nan=False)),
    min_size=1,
    max_size=6,
)


def script_from(table):
    def script(seed, task: SimTask) -> FakeEpisode:
        length, success, scale = table[(seed + task.task_id) % len(table)]
        return FakeEpisode(length, [scale * (t + 1) for t in range(length)], success)

    return script


@settings(max_examples=40, deadline=None)
@given(
    n_episodes=st.integers(1, 9),
    batch_size=st.integers(1, 12),
    use_async=st.booleans(),
    n_tasks=st.integers(1, 3),
    seed=st.integers(0, 50),
    table=scripts,
    max_steps=st.integers(1, 10),
)
def test_counts_seeds_and_aggregates_every_episode(
    n_episodes, batch_size, use_async, n_tasks, seed, table, max_steps
):
    script = script_from(table)
    sim = FakeSimulation(
        {"suite": [f"t{i}" for i in range(n_tasks)]}, script=script, max_episode_steps=max_steps
    )
    progress = RecordingProgress()
    use_case, report = evaluate(
        sim,
        progress,
        n_episodes=n_episodes,
        batch_size=batch_size,
        use_async_envs=use_async,
        seed=seed,
    )
    effective = min(batch_size, n_episodes)
    assert use_case.plan.batch_size == effective
    assert use_case.plan.use_async == (use_async and effective > 1)
    assert sim.record.probes == 0  # both choices forced: nothing to measure

    info = report.to_info()
    assert info["overall"]["n_episodes"] == n_episodes * n_tasks
    assert len(sim.record.resets) == n_tasks * math.ceil(n_episodes / effective)
    sums, maxes, wins = [], [], []
    for task in report.tasks:
        assert [e.index for e in task.episodes] == list(range(n_episodes))
        assert [e.seed for e in task.episodes] == [seed + i for i in range(n_episodes)]
        for e in task.episodes:
            want = expected(script(e.seed, SimTask("suite", task.task_id)), max_steps)
            assert e.sum_reward == pytest.approx(want[0])
            assert e.max_reward == pytest.approx(want[1])
            assert e.success == want[2]
            sums.append(want[0])
            maxes.append(want[1])
            wins.append(want[2])
    assert info["overall"]["avg_sum_reward"] == pytest.approx(np.mean(sums))
    assert info["overall"]["avg_max_reward"] == pytest.approx(np.mean(maxes))
    assert info["overall"]["pc_success"] == pytest.approx(100 * np.mean(wins))
    assert info["per_group"]["suite"]["n_episodes"] == n_episodes * n_tasks
    [bar] = progress.tasks
    assert bar.total == bar.done == n_episodes * n_tasks and bar.closed


@settings(max_examples=25, deadline=None)
@given(n_episodes=st.integers(1, 10), a=st.integers(1, 10), b=st.integers(1, 10))
def test_results_do_not_depend_on_the_batch_size(n_episodes, a, b):
    def run(batch_size):
        sim = FakeSimulation(max_episode_steps=6)
        _, report = evaluate(
            sim, n_episodes=n_episodes, batch_size=batch_size, use_async_envs=False
        )
        return report.to_info()["per_episode"]

    assert run(a) == run(b)


def test_what_an_env_says_after_its_episode_ended_is_ignored():
    # The fake pays 100 and reports success on every step after an episode ended.
    sim = FakeSimulation(
        script=lambda seed, task: FakeEpisode(1 + seed % 5, [0.5] * 5, success=False),
        after_end_reward=100.0,
    )
    _, report = evaluate(sim, n_episodes=5, batch_size=5, use_async_envs=False, seed=0)
    assert [e.length for e in report.episodes] == [1, 2, 3, 4, 5]
    assert all(e.max_reward == 0.5 and not e.success for e in report.episodes)
    # The batch ran until its longest episode ended, not to the step limit.
    assert sim.record.steps == 5


def test_unseeded_runs_report_no_seed():
    sim = FakeSimulation()
    _, report = evaluate(sim, n_episodes=3, batch_size=2, use_async_envs=False, seed=None)
    assert [e.seed for e in report.episodes] == [None, None, None]
    assert sim.record.resets == [[None, None], [None, None]]


def test_eval_info_uses_lerobot_field_names():
    sim = FakeSimulation({"easy": ["a", "b"], "hard": ["c"]})
    _, report = evaluate(sim, n_episodes=2, batch_size=2, use_async_envs=False)
    info = report.to_info()
    for block in [info["overall"], *info["per_group"].values()]:
        assert {
            "avg_sum_reward",
            "avg_max_reward",
            "pc_success",
            "n_episodes",
            "video_paths",
        } <= set(block)
    assert {"eval_s", "eval_ep_s"} <= set(info["overall"])
    assert [(t["task_group"], t["task_id"]) for t in info["per_task"]] == [
        ("easy", 0),
        ("easy", 1),
        ("hard", 0),
    ]
    assert set(info["per_task"][0]["metrics"]) >= {"sum_rewards", "max_rewards", "successes"}
    assert info["per_group"]["easy"]["n_episodes"] == 4


def test_suite_tasks_prefetch_the_next_and_keep_at_most_two_alive():
    sim = FakeSimulation({"easy": ["a", "b", "c"], "hard": ["d", "e"]})
    _, report = evaluate(sim, n_episodes=3, batch_size=3, use_async_envs=True)
    assert len(report.tasks) == 5
    # The next task's workers start while the current task runs, and each task is closed
    # when it is done: never more than two tasks' workers (3 each) at once.
    assert sim.record.max_live_workers == 6
    assert sim.record.live_workers == 0
    assert sim.record.started[:2] == [("easy", 0), ("easy", 1)]
    assert len(set(sim.record.closed)) == 5
    assert sim.record.closed == [("easy", 0), ("easy", 1), ("easy", 2), ("hard", 0), ("hard", 1)]


@pytest.mark.parametrize(
    ("prefetch", "renders_on_gpu", "expected"),
    [
        ("auto", False, True),
        ("auto", True, False),  # LeRobot's way: GL contexts on the GPU are never doubled
        (True, True, True),
        (False, False, False),
    ],
)
def test_prefetching_the_next_task_is_a_setting_whose_default_follows_gpu_rendering(
    prefetch, renders_on_gpu, expected
):
    sim = FakeSimulation({"easy": ["a", "b", "c"], "hard": ["d"]}, renders_on_gpu=renders_on_gpu)
    use_case, report = evaluate(
        sim, n_episodes=3, batch_size=3, use_async_envs=True, prefetch_next_task=prefetch
    )
    assert use_case.prefetch is expected
    assert len(report.tasks) == 4 and sim.record.live_workers == 0
    order = [("easy", 0), ("easy", 1), ("easy", 2), ("hard", 0)]
    assert sim.record.closed == order
    if expected:
        assert sim.record.max_live_workers == 6  # the running task's 3 and the next one's
    else:
        # Each task's envs start only once the previous task's are closed: one task's alive.
        assert sim.record.max_live_workers == 3
        assert sim.record.started == order


def test_prefetch_reads_yes_no_words_and_auto():
    from rlctl.domain.config import structure
    from rlctl.domain.errors import ConfigError

    def read(value):
        return structure({"prefetch_next_task": value}, EvalSettings).prefetch_next_task

    assert [read(v) for v in ("auto", "AUTO", "true", "off", False)] == [
        "auto",
        "auto",
        True,
        False,
        False,
    ]
    with pytest.raises(ConfigError, match="write true, false or auto"):
        read("sometimes")


def test_every_episode_keeps_its_task_text():
    sim = FakeSimulation({"easy": ["a", "b"]})
    _, report = evaluate(sim, n_episodes=3, batch_size=2, use_async_envs=False)
    texts = {(e["task_id"], e["task"]) for e in report.to_info()["per_episode"]}
    assert texts == {(0, "fake task easy/0"), (1, "fake task easy/1")}
    assert len(report.to_info()["per_episode"]) == 6


def test_measured_plan_for_a_cheap_env_runs_in_process_with_one_batch():
    sim = FakeSimulation(step_s=1e-3, start_s=2.0)
    use_case, report = evaluate(sim, n_episodes=8)
    assert sim.record.probes == 1
    assert use_case.plan.use_async is False
    assert use_case.plan.batch_size == 8
    assert report.to_info()["overall"]["n_episodes"] == 8


def test_batch_size_above_n_episodes_is_clamped():
    sim = FakeSimulation()
    use_case, report = evaluate(sim, n_episodes=3, batch_size=50, use_async_envs=True)
    assert use_case.plan.batch_size == 3
    assert len(report.episodes) == 3


class Boom(Exception):
    pass


class ExplodingPolicy(RandomPolicy):
    def __init__(self, error: BaseException, after: int) -> None:
        super().__init__([-1, -1], [1, 1], seed=0)
        self.error, self.after, self.calls = error, after, 0

    def select_action(self, observation):
        self.calls += 1
        if self.calls > self.after:
            raise self.error
        return super().select_action(observation)


@pytest.mark.parametrize("error", [KeyboardInterrupt(), Boom("policy bug")])
def test_every_simulator_is_closed_when_the_policy_fails(error):
    sim = FakeSimulation({"s": ["a", "b", "c"]}, max_episode_steps=50)
    policy = ExplodingPolicy(error, after=3)
    progress = RecordingProgress()
    with pytest.raises(type(error)):
        evaluate(sim, progress, policy=policy, n_episodes=4, batch_size=2, use_async_envs=True)
    assert len(sim.simulators) == 3
    assert all(s._closed for s in sim.simulators)
    assert sim.record.live_workers == 0
    assert progress.tasks[0].closed


class NaNPolicy(RandomPolicy):
    """Answers NaN for the second env from its `after`-th call on."""

    def __init__(self, after: int) -> None:
        super().__init__([-1, -1], [1, 1], seed=0)
        self.after, self.calls = after, 0

    def select_action(self, observation):
        self.calls += 1
        action = super().select_action(observation)
        if self.calls > self.after:
            action = np.array(action, dtype=np.float32)
            action[1, 0] = np.nan
        return action


def test_a_non_finite_action_never_reaches_the_simulator_and_stops_the_run():
    sim = FakeSimulation({"s": ["a"]}, max_episode_steps=50)
    with pytest.raises(NonFiniteChunk) as raised:
        evaluate(sim, policy=NaNPolicy(after=3), n_episodes=4, batch_size=2, use_async_envs=False)
    assert sim.record.steps == 3  # the fourth actions were refused, not stepped
    error = raised.value
    assert "policy 'random' answered step 3 of episode 1 of task s/0" in error.message
    assert "NaN or infinite actions" in error.message
    assert error.where == "policy.select_action" and "NaN weights" in (error.hint or "")
    assert all(s._closed for s in sim.simulators)


def test_a_simulator_crash_surfaces_and_closes_everything():
    sim = FakeSimulation({"s": ["a", "b"]}, fail_at_step=4)
    with pytest.raises(SimulationError, match="scripted crash"):
        evaluate(sim, n_episodes=4, batch_size=2, use_async_envs=True)
    assert all(s._closed for s in sim.simulators)
    assert sim.record.live_workers == 0


class MemoryEncoder:
    """Keeps the frames each video would hold."""

    def __init__(self) -> None:
        self.videos: dict[Path, list[np.ndarray]] = {}

    def begin(self, path, fps, encoding):
        frames = self.videos.setdefault(Path(path), [])

        class Writer:
            def add_frame(self, frame):
                frames.append(frame)

            def finish(self):
                return None

            def abort(self):
                frames.clear()

        return Writer()


def test_videos_of_the_first_episodes_hold_every_frame_of_their_episode(tmp_path):
    sim = FakeSimulation(
        {"s": ["a", "b"]}, script=lambda seed, task: FakeEpisode(1 + seed % 4, [0.0] * 4)
    )
    encoder = MemoryEncoder()
    _, report = evaluate(
        sim,
        encoder=encoder,
        n_episodes=5,
        batch_size=2,
        use_async_envs=False,
        seed=0,
        videos_dir=str(tmp_path),
        max_episodes_rendered=3,
    )
    info = report.to_info()
    assert len(info["overall"]["video_paths"]) == 6
    first = report.tasks[0]
    assert [Path(p).name for p in first.video_paths] == [
        "eval_episode_0.mp4",
        "eval_episode_1.mp4",
        "eval_episode_2.mp4",
    ]
    for path, episode in zip(first.video_paths, first.episodes, strict=False):
        frames = encoder.videos[Path(path)]
        # The frame after reset, then one per step up to and including the last one.
        assert len(frames) == episode.length + 1
        assert [int(f[0, 0, 0]) for f in frames] == list(range(episode.length + 1))


def test_settings_reject_nonsense():
    with pytest.raises(Exception, match="n_episodes"):
        EvalSettings(n_episodes=0)
    with pytest.raises(Exception, match="batch_size"):
        EvalSettings(batch_size=-1)


# --- does the policy fit the env? ---------------------------------------------------------


class RecordingPolicy(RandomPolicy):
    """A random policy that declares input features and keeps the batches it was given."""

    def __init__(self, inputs, action_dim=2):
        super().__init__(
            [-1] * action_dim,
            [1] * action_dim,
            seed=0,
            input_features={k: typed_feature(t, shape=s) for k, (t, s) in inputs.items()},
        )
        self.batches = []

    def predict_chunk(self, observation, noise=None):
        self.batches.append(dict(observation))
        return super().predict_chunk(observation, noise)


def evaluate_through_container(sim, policy, rename_map=None, **settings):
    """EvaluatePolicy as `rlctl eval` builds it, from the container, with the fake simulation."""
    from dependency_injector import providers

    from rlctl.entrypoints.cli.eval import EvalCommandSettings
    from rlctl.entrypoints.container import build_container

    container = build_container(EvalCommandSettings())
    container.simulation.override(providers.Object(sim))
    container.progress.override(providers.Object(RecordingProgress()))
    use_case = container.evaluate_policy(
        container.simulation(None), policy, rename_map=rename_map or {}
    )
    return use_case(EvalSettings(**settings))


def test_a_policy_for_another_robot_is_refused_before_the_first_step_naming_every_difference():
    # The fake env observes observation.state (2,) and takes actions (2,); the policy was
    # trained on a 6-joint arm with a front camera (LeRobot's act_tiny).
    sim = FakeSimulation()
    policy = RecordingPolicy(
        {"observation.state": ("STATE", (6,)), "observation.images.front": ("VISUAL", (3, 48, 64))},
        action_dim=6,
    )
    with pytest.raises(FeatureMismatch) as caught:
        evaluate_through_container(sim, policy, n_episodes=2)
    error = caught.value
    assert "observation.images.front (3, 48, 64), which the env does not provide" in error.message
    assert "observation.state as (6,), the env provides (2,)" in error.message
    assert "actions of shape (6,), the env takes (2,)" in error.message
    assert "the env provides observation.state (2,) and takes action (2,)" in error.hint
    assert "--rename_map" in error.hint and "env (and robot) it was trained on" in error.hint
    # Nothing ran: no probe, no simulator, no policy call.
    assert sim.record.probes == 0 and sim.simulators == [] and policy.batches == []


def test_an_action_dimension_mismatch_alone_is_refused():
    policy = RecordingPolicy({"observation.state": ("STATE", (2,))}, action_dim=3)
    with pytest.raises(FeatureMismatch, match=r"actions of shape \(3,\), the env takes \(2,\)"):
        evaluate_through_container(FakeSimulation(), policy, n_episodes=1)


def test_keys_that_only_differ_in_name_get_a_rename_map_that_then_works():
    sim = FakeSimulation()
    policy = RecordingPolicy({"observation.environment_state": ("ENV", (2,))})
    with pytest.raises(FeatureMismatch) as caught:
        evaluate_through_container(sim, policy, n_episodes=1)
    renames = '{"observation.state": "observation.environment_state"}'
    assert f"--rename_map='{renames}'" in caught.value.hint

    report = evaluate_through_container(
        sim,
        policy,
        rename_map={"observation.state": "observation.environment_state"},
        n_episodes=2,
        batch_size=2,
        use_async_envs=False,
    )
    assert len(report.episodes) == 2
    assert policy.batches and all(
        "observation.environment_state" in b and "observation.state" not in b
        for b in policy.batches
    )


def test_a_policy_that_fits_and_extra_env_features_run():
    # The env may observe more than the policy reads; task text and language are not checked.
    policy = RecordingPolicy({"observation.state": ("STATE", (2,)), "task": ("LANGUAGE", (1,))})
    report = evaluate_through_container(
        FakeSimulation(), policy, n_episodes=1, batch_size=1, use_async_envs=False
    )
    assert len(report.episodes) == 1
