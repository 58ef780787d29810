"""How a suite's tasks share the cores when several run at once (`task_slots`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.errors import ConfigError
from rlctl.domain.rollout_plan import TaskSlots, Timings, plan_rollouts, task_slots


@given(cores=st.integers(1, 64), n_tasks=st.integers(0, 200), data=st.data())
def test_tasks_at_once_never_outnumber_the_tasks_and_their_cores_fit(cores, n_tasks, data):
    wanted = data.draw(st.integers(1, cores))
    slots = task_slots(wanted, n_tasks, cores)
    assert 1 <= slots.count <= wanted
    assert slots.count == min(wanted, max(1, n_tasks))
    assert slots.cores_per_task >= 1
    assert slots.count * slots.cores_per_task <= cores


def test_one_task_at_a_time_keeps_every_core():
    assert task_slots(1, 50, 16) == TaskSlots(1, 16)
    assert task_slots(4, 50, 16) == TaskSlots(4, 4)
    assert task_slots(3, 50, 16) == TaskSlots(3, 5)
    assert task_slots(8, 2, 16) == TaskSlots(2, 8)


@pytest.mark.parametrize(
    ("wanted", "cores", "message"), [(0, 4, "at least 1"), (5, 4, "more than the 4 cores")]
)
def test_nonsense_and_more_than_the_cores_are_refused(wanted, cores, message):
    with pytest.raises(ConfigError, match=message) as caught:
        task_slots(wanted, 10, cores)
    assert caught.value.where == "env.max_parallel_tasks"


@given(
    n_episodes=st.integers(1, 20),
    cores=st.integers(1, 16),
    batch_size=st.integers(0, 30),
    use_async=st.sampled_from([None, True]),
    measured=st.booleans(),
)
def test_tasks_running_at_once_always_step_in_workers(
    n_episodes, cores, batch_size, use_async, measured
):
    timings = (
        Timings(env_step_s=1e-4, env_start_s=2.0, policy_calls=((1, 1e-3),)) if measured else None
    )
    plan = plan_rollouts(
        n_episodes, cores, timings, batch_size=batch_size, use_async=use_async, workers_only=True
    )
    assert plan.use_async
    # Without the constraint a cheap env with one episode runs in-process.
    assert not plan_rollouts(1, cores, timings, batch_size=1, use_async=use_async).use_async


def test_in_process_envs_with_tasks_at_once_are_refused():
    with pytest.raises(ConfigError, match="worker processes") as caught:
        plan_rollouts(4, 4, None, batch_size=2, use_async=False, workers_only=True)
    assert caught.value.where == "eval.use_async_envs"
