"""`ShardedVectorEnv`: more envs than workers, the same episodes as in-process envs.

The envs are the toy package's (see conftest), with a different length each, so that shards
end episodes at different steps and next-step autoreset happens inside a shard.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.adapters.sim.registry import make_env_config
from rlctl.adapters.sim.sharded import ShardedVectorEnv, split_evenly

from .conftest import wait_for_no_workers, worker_processes

LENGTHS = [2, 3, 4, 5, 6]
SHM = Path("/dev/shm")


@given(st.integers(1, 200), st.integers(1, 64))
def test_shards_cover_every_env_once_and_differ_by_at_most_one(n, parts):
    shards = split_evenly(n, parts)
    assert [i for shard in shards for i in shard] == list(range(n))
    sizes = [len(s) for s in shards]
    assert len(shards) == min(n, parts) and max(sizes) - min(sizes) <= 1


def _factories():
    out = []
    for length in LENGTHS:
        config = make_env_config("toy", task="a", length=length)
        out.append(config.env_factory(config.tasks()[0]))
    return out


def _run(env: gym.vector.VectorEnv) -> list:
    seen = [env.reset(seed=[10, 11, 12, 13, 14])]
    actions = np.zeros((len(LENGTHS), 2), dtype=np.float32)
    for _ in range(8):
        seen.append(env.step(actions))
    return seen


def _assert_same(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, tuple | list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_five_envs_in_two_workers_step_and_render_like_in_process_envs(toy_package):
    mode = gym.vector.AutoresetMode.NEXT_STEP
    local = gym.vector.SyncVectorEnv(_factories(), autoreset_mode=mode)
    sharded = ShardedVectorEnv(
        _factories(),
        2,
        observation_space=local.single_observation_space,
        action_space=local.single_action_space,
    )
    try:
        assert [len(s) for s in sharded.shards] == [3, 2]
        assert len(sharded.processes) == 2 and len(worker_processes()) == 2
        _assert_same(_run(sharded), _run(local))
        assert sharded.call("task_description") == ("toy task a",) * 5
        expected = [local.envs[i].render() for i in range(4)]
        for _ in range(2):  # the second time, the frames come through shared memory
            _assert_same(sharded.render_first(4), expected)
        buffers = [b.memory.name.lstrip("/") for b in sharded._frames.values()]
        assert buffers and all((SHM / name).exists() for name in buffers)
    finally:
        sharded.close()
        local.close()
    assert not any((SHM / name).exists() for name in buffers)
    assert wait_for_no_workers() == []
