"""Which policy an evaluation runs, chosen through the container with in-memory adapters."""

from __future__ import annotations

import pytest
from dependency_injector import providers

from rlctl.adapters.memory.policy import InMemoryPolicyLoader, ScriptedPolicy
from rlctl.domain.errors import ConfigError
from rlctl.domain.eval_settings import EvalPolicySettings
from rlctl.entrypoints.container import build_container


@pytest.fixture
def container():
    saved, built = ScriptedPolicy(2), ScriptedPolicy(3)
    loader = InMemoryPolicyLoader({"runs/act": saved}, {"scripted": lambda simulation, seed: built})
    c = build_container()
    c.policy_loader.override(providers.Object(loader))
    return c, saved, built


def test_a_path_loads_the_saved_policy(container):
    c, saved, _ = container
    chosen = c.eval_policy(EvalPolicySettings(path="runs/act"), simulation=None, seed=0)
    assert chosen is saved


def test_without_a_path_the_type_is_built_for_the_simulation(container):
    c, _, built = container
    chosen = c.eval_policy(EvalPolicySettings(type="scripted"), simulation=None, seed=0)
    assert chosen is built
    with pytest.raises(ConfigError, match="unknown policy type 'act'"):
        c.eval_policy(EvalPolicySettings(type="act"), simulation=None, seed=0)


def test_a_server_connects_a_remote_policy_that_waits_for_its_chunks(container):
    from rlctl.adapters.memory.policy_server import InProcessPolicyConnector, ScriptedChunkService

    c, _, _ = container
    c.policy_connector.override(providers.Object(InProcessPolicyConnector(ScriptedChunkService(3))))
    chosen = c.eval_policy(EvalPolicySettings(server="127.0.0.1:9"), simulation=None, seed=0)
    state = {"observation.state": [[0.0, 0.0]], "task": ["push"]}
    # A simulation has no real time to keep: every tick waits for its own action, none is held.
    assert [float(chosen.select_action(state)[0, 0]) for _ in range(7)] == list(range(7))
    assert chosen.held_ticks == 0
    chosen.close()
    with pytest.raises(ConfigError, match="not both"):
        c.eval_policy(
            EvalPolicySettings(server="127.0.0.1:9", path="runs/act"), simulation=None, seed=0
        )
