import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.rollout_plan import Timings, auto_batch_size, clamp_batch_size, plan_rollouts


@given(st.integers(1, 500), st.integers(1, 256))
def test_auto_batch_size_follows_lerobot(n_episodes, cores):
    size = auto_batch_size(n_episodes, cores)
    assert 1 <= size <= min(n_episodes, 64)
    assert size == max(1, min(int(cores * 0.7), n_episodes, 64))


def test_oversized_batches_are_clamped_and_negative_ones_refused():
    assert clamp_batch_size(100, 8) == 8
    with pytest.raises(Exception, match="batch_size"):
        clamp_batch_size(-1, 8)


def test_without_measurement_the_plan_is_lerobots():
    plan = plan_rollouts(50, 16)
    assert (plan.batch_size, plan.use_async) == (11, True)
    assert plan_rollouts(50, 2).use_async is False  # one env runs in-process


def test_forced_choices_are_kept_except_async_with_one_env():
    assert plan_rollouts(10, 2, batch_size=4, use_async=True).use_async is True
    assert plan_rollouts(10, 2, batch_size=1, use_async=True).use_async is False
    assert plan_rollouts(3, 2, batch_size=9, use_async=False).batch_size == 3


CHEAP = Timings(
    env_step_s=0.004, env_start_s=2.0, policy_calls=((1, 0.02), (8, 0.05)), n_action_steps=8
)
SLOW = Timings(
    env_step_s=0.2, env_start_s=3.0, policy_calls=((1, 0.01), (8, 0.02)), n_action_steps=8
)


def test_a_cheap_env_runs_in_process_in_one_batch():
    plan = plan_rollouts(8, 2, CHEAP)
    assert (plan.batch_size, plan.use_async) == (8, False)


def test_a_slow_env_on_many_cores_runs_in_workers():
    plan = plan_rollouts(32, 16, SLOW)
    assert plan.use_async is True
    assert 8 <= plan.batch_size <= 16


def test_forcing_one_choice_lets_the_measurement_pick_the_other():
    assert plan_rollouts(32, 16, SLOW, use_async=False).use_async is False
    plan = plan_rollouts(8, 2, CHEAP, batch_size=4)
    assert (plan.batch_size, plan.use_async) == (4, False)


@given(st.integers(1, 80), st.integers(1, 64), st.floats(1e-4, 1.0), st.floats(1e-4, 1.0))
def test_plans_are_always_valid(n_episodes, cores, step_s, policy_s):
    timings = Timings(step_s, 1.0, ((1, policy_s),), n_action_steps=4, episode_steps=50)
    plan = plan_rollouts(n_episodes, cores, timings)
    assert 1 <= plan.batch_size <= min(n_episodes, 64)
    assert not (plan.use_async and plan.batch_size == 1)
