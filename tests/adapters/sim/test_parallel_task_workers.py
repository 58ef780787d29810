"""A suite run with `max_parallel_tasks=2` in real worker processes (the toy plugin env).

Counts the live worker processes while it runs: two tasks stepping and the next one started
ahead, never more, each task's workers within its share of the cores; and the report is the
one a sequential run writes.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.adapters.memory.progress import RecordingProgress
from rlctl.adapters.sim.registry import make_env_config
from rlctl.adapters.sim.simulation import GymSimulation
from rlctl.application.use_cases.evaluate_policy import EvalSettings, EvaluatePolicy

from .conftest import wait_for_no_workers, worker_processes

CORES = 2  # as if the machine had two: each of two parallel tasks gets one worker


def policy() -> ScriptedPolicy:
    def chunker(batch):
        time.sleep(0.05)  # a model's worth of time: the tasks overlap long enough to be seen
        state = np.asarray(batch["observation.state"], dtype=np.float64)
        return np.repeat(np.tanh(state)[:, None, :], 2, axis=1)

    return ScriptedPolicy(2, chunk_size=2, chunker=chunker)


def evaluate(parallel: int):
    config = make_env_config("toy", task="a,b,c,d", length=4, max_parallel_tasks=parallel)
    use_case = EvaluatePolicy(
        GymSimulation(config), policy(), RecordingProgress(), cpu_count=CORES, policy_copies=policy
    )
    settings = EvalSettings(n_episodes=3, batch_size=2, use_async_envs=True, seed=5)
    return use_case, use_case(settings)


@pytest.mark.slow
def test_two_tasks_at_once_in_worker_processes_never_have_more_than_three_alive(toy_package):
    sampled: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            sampled.append(len(worker_processes()))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        use_case, report = evaluate(2)
    finally:
        stop.set()
        sampler.join()
    assert use_case.slots is not None and use_case.slots.cores_per_task == 1
    # Each task's two envs share the one worker its core share allows; two tasks step while a
    # third starts ahead: three workers, never more.
    assert max(sampled) == 3
    assert wait_for_no_workers() == []

    _, sequential = evaluate(1)
    parallel_info, sequential_info = report.to_info(), sequential.to_info()
    assert parallel_info["per_task"] == sequential_info["per_task"]
    assert parallel_info["per_group"] == sequential_info["per_group"]
    assert parallel_info["per_episode"] == sequential_info["per_episode"]
    assert [t.task for t in report.tasks] == ["a", "b", "c", "d"]
    assert {e["task"] for e in parallel_info["per_episode"]} == {f"toy task {n}" for n in "abcd"}
    assert wait_for_no_workers() == []
