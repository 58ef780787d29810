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


class Resolver:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, location, **options):
        self.asked.append(str(location))
        return "runs/act"  # where the repo id was pulled to


def test_the_acting_policy_of_a_recording_is_loaded_from_its_resolved_path(container):
    c, saved, _ = container
    resolver = Resolver()
    c.resolve_policy.override(providers.Object(resolver))
    settings = EvalPolicySettings(path="alice/act", device="cpu")
    assert c.acting_policy(settings) is saved
    assert resolver.asked == ["alice/act"]  # once
    assert c.policy_loader().loads[-1]["location"] == "runs/act"
    assert c.policy_loader().loads[-1]["device"] == "cpu"


def test_without_a_path_or_a_server_nothing_acts_and_both_are_refused(container):
    c, _, _ = container
    resolver = Resolver()
    c.resolve_policy.override(providers.Object(resolver))
    assert c.acting_policy(EvalPolicySettings()) is None
    with pytest.raises(ConfigError, match="not both"):
        c.acting_policy(EvalPolicySettings(server="127.0.0.1:9", path="alice/act"))
    assert resolver.asked == []  # refused before anything is pulled
