"""EvaluatePolicy with `max_parallel_tasks > 1`: tasks run at once, the same report as in turn.

The scripted simulator pays a reward that follows the policy's actions, and the scripted policy
acts on what it observes, so a task run with the wrong policy state, the wrong seeds or the
wrong envs shows in the report.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.adapters.memory.progress import RecordingProgress
from rlctl.adapters.memory.simulator import FakeEpisode, FakeSimulation
from rlctl.adapters.memory.video import InMemoryVideos
from rlctl.application.ports.simulation import SimTask, SimulationError
from rlctl.application.use_cases.evaluate_policy import EvalSettings, EvaluatePolicy
from rlctl.domain.errors import ConfigError

SUITES = {"easy": ["a", "b", "c"], "hard": ["d", "e"]}
TIMINGS = ("eval_s", "eval_ep_s")


def script(seed: int | None, task: SimTask) -> FakeEpisode:
    s = 0 if seed is None else seed
    length = 2 + (s * 3 + task.task_id + len(task.suite)) % 6
    return FakeEpisode(length, [(t + task.task_id) / 10 for t in range(length)], s % 2 == 0)


def chunker(batch):
    # Actions from what the policy sees: the seed and the step of each env (agent_pos).
    state = np.asarray(batch["observation.state"], dtype=np.float64)
    steps = np.arange(3)[None, :, None]
    first = np.sin(state[:, None, :1] * 0.7 + state[:, None, 1:2] + steps)
    return np.concatenate([first, -first], axis=2)


def policy() -> ScriptedPolicy:
    return ScriptedPolicy(2, chunk_size=3, n_action_steps=2, chunker=chunker)


def evaluate(parallel: int, *, cpu_count: int = 4, videos_dir=None, prefetch="auto", **sim_options):
    sim = FakeSimulation(
        SUITES,
        script=script,
        max_parallel_tasks=parallel,
        action_reward=1.0,
        step_sleep_s=5e-3,
        **sim_options,
    )
    encoder = InMemoryVideos()
    use_case = EvaluatePolicy(
        sim, policy(), RecordingProgress(), encoder, cpu_count=cpu_count, policy_copies=policy
    )
    settings = EvalSettings(
        n_episodes=3,
        batch_size=2,
        use_async_envs=True,
        seed=11,
        videos_dir=str(videos_dir) if videos_dir else None,
        max_episodes_rendered=2,
        prefetch_next_task=prefetch,
    )
    return sim, use_case, use_case(settings), encoder


def without_timings(info: dict) -> dict:
    info = dict(info)
    info["overall"] = {k: v for k, v in info["overall"].items() if k not in TIMINGS}
    return info


@pytest.mark.parametrize("parallel", [2, 3])
def test_parallel_tasks_give_the_sequential_report_videos_and_task_texts(tmp_path, parallel):
    _, _, sequential, seq_videos = evaluate(1, videos_dir=tmp_path)
    sim, use_case, report, videos = evaluate(parallel, videos_dir=tmp_path)
    assert use_case.slots is not None and use_case.slots.count == parallel
    # Tasks did run side by side.
    assert sim.record.max_running == parallel
    info = report.to_info()
    assert without_timings(info) == without_timings(sequential.to_info())
    assert [(t["task_group"], t["task_id"]) for t in info["per_task"]] == [
        ("easy", 0),
        ("easy", 1),
        ("easy", 2),
        ("hard", 0),
        ("hard", 1),
    ]
    # The actions mattered: rewards are not the script's alone.
    assert any(r != round(r, 1) for r in info["per_task"][0]["metrics"]["sum_rewards"])
    assert {e["task"] for e in info["per_episode"] if e["task_group"] == "hard"} == {
        "fake task hard/0",
        "fake task hard/1",
    }
    assert len(info["overall"]["video_paths"]) == 2 * 5
    assert sorted(videos.files) == sorted(seq_videos.files)
    for path, video in videos.files.items():
        assert Path(path).parent.name in {"easy_0", "easy_1", "easy_2", "hard_0", "hard_1"}
        assert len(video.frames) == len(seq_videos.files[path].frames)
        assert all(
            np.array_equal(a, b)
            for a, b in zip(video.frames, seq_videos.files[path].frames, strict=True)
        )


def test_n_parallel_tasks_keep_at_most_n_plus_one_tasks_envs_alive():
    sim, _, report, _ = evaluate(2)
    assert len(report.tasks) == 5
    # Two running (2 workers each) and the next one started ahead: never more.
    assert sim.record.max_running == 2
    assert sim.record.max_live_workers == 3 * 2
    assert sim.record.live_workers == 0
    assert sorted(sim.record.closed) == sorted(set(sim.record.closed))
    assert len(sim.record.closed) == 5
    # Each running task's workers get half of the 4 cores.
    assert sim.record.worker_cores == [2]


@pytest.mark.parametrize(
    ("prefetch", "renders_on_gpu"), [(False, False), ("auto", True), (False, True)]
)
def test_without_prefetch_n_parallel_tasks_keep_at_most_n_tasks_envs_alive(
    prefetch, renders_on_gpu
):
    sim, use_case, report, _ = evaluate(2, prefetch=prefetch, renders_on_gpu=renders_on_gpu)
    assert use_case.prefetch is False
    assert sim.record.max_running == 2
    assert sim.record.max_live_workers == 2 * 2  # the two running tasks', none ahead
    assert sim.record.live_workers == 0 and len(sim.record.closed) == 5
    _, _, with_prefetch, _ = evaluate(2, prefetch=True, renders_on_gpu=renders_on_gpu)
    assert without_timings(report.to_info()) == without_timings(with_prefetch.to_info())


def test_one_task_at_a_time_keeps_every_core_and_two_tasks_alive():
    sim, _, _, _ = evaluate(1)
    assert sim.record.max_running == 1
    assert sim.record.max_live_workers == 2 * 2
    assert sim.record.worker_cores == [None]


def test_more_parallel_tasks_than_tasks_run_every_task_at_once():
    _, use_case, report, _ = evaluate(4, cpu_count=8)
    assert use_case.slots is not None and use_case.slots.count == 4
    sim2, use_case2, report2, _ = evaluate(8, cpu_count=8)
    assert use_case2.slots is not None and use_case2.slots.count == 5
    assert sim2.record.worker_cores == [1]
    assert without_timings(report2.to_info()) == without_timings(report.to_info())


def test_more_parallel_tasks_than_cores_is_refused_before_anything_starts():
    with pytest.raises(
        ConfigError, match="max_parallel_tasks=3 is more than the 2 cores"
    ) as caught:
        evaluate(3, cpu_count=2)
    assert caught.value.where == "env.max_parallel_tasks"
    assert "at most 2" in (caught.value.hint or "")


def test_parallel_tasks_without_a_way_to_copy_the_policy_are_refused():
    sim = FakeSimulation(SUITES, max_parallel_tasks=2)
    use_case = EvaluatePolicy(sim, policy(), RecordingProgress(), cpu_count=4)
    with pytest.raises(ConfigError, match="its own policy") as caught:
        use_case(EvalSettings(n_episodes=1, batch_size=1, use_async_envs=False))
    assert "max_parallel_tasks=1" in (caught.value.hint or "")
    assert sim.record.created == []


def test_a_crash_in_one_task_stops_the_others_and_closes_everything():
    sim = FakeSimulation(SUITES, script=script, max_parallel_tasks=3, fail_at_step=9)
    use_case = EvaluatePolicy(sim, policy(), RecordingProgress(), cpu_count=4, policy_copies=policy)
    with pytest.raises(SimulationError, match="scripted crash"):
        use_case(EvalSettings(n_episodes=3, batch_size=2, use_async_envs=True))
    assert sim.record.live_workers == 0
    assert len(sim.record.closed) == 5
    # The other two runners stop at their next step (one more each at most).
    assert sim.record.steps <= 9 + 2


def test_tasks_at_once_step_even_a_single_env_in_a_worker():
    # In one process, simulators share global state; each task gets its own workers.
    sim = FakeSimulation(SUITES, script=script, max_parallel_tasks=2, step_sleep_s=5e-3)
    use_case = EvaluatePolicy(sim, policy(), RecordingProgress(), cpu_count=4, policy_copies=policy)
    use_case(EvalSettings(n_episodes=2, batch_size=1))
    assert use_case.plan is not None and use_case.plan.use_async
    assert {(n, a) for _, _, n, a in sim.record.created} == {(1, True)}
    assert sim.record.max_running == 2
    assert sim.record.max_live_workers == 3


def test_tasks_at_once_with_in_process_envs_are_refused():
    sim = FakeSimulation(SUITES, max_parallel_tasks=2)
    use_case = EvaluatePolicy(sim, policy(), RecordingProgress(), cpu_count=4, policy_copies=policy)
    with pytest.raises(ConfigError, match="worker processes"):
        use_case(EvalSettings(n_episodes=2, batch_size=2, use_async_envs=False))
    assert sim.record.created == []


def test_ctrl_c_in_one_runner_stops_every_task_and_closes_everything():
    class Interrupting(ScriptedPolicy):
        def select_action(self, observation):
            raise KeyboardInterrupt

    copies = iter([Interrupting(2)])
    sim = FakeSimulation(SUITES, script=script, max_parallel_tasks=2, step_sleep_s=1e-3)
    use_case = EvaluatePolicy(
        sim, policy(), RecordingProgress(), cpu_count=4, policy_copies=lambda: next(copies)
    )
    with pytest.raises(KeyboardInterrupt):
        use_case(EvalSettings(n_episodes=3, batch_size=2))
    assert sim.record.live_workers == 0
    assert len(sim.record.closed) == 5
    # The other runner stopped at its next step instead of going through the suite's
    # 5 tasks x 2 batches.
    assert len(sim.record.resets) < 10
