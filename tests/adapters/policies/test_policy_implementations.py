"""The class serving each policy type is found by the type's name in `rlctl.policy_models`, typed,
checked, and its processor hooks are declared methods, not names looked up."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from rlctl.adapters.policies import implementations
from rlctl.adapters.policies.base import PolicyModel
from rlctl.adapters.policies.implementations import PolicyImplementation, implementation_of
from rlctl.adapters.policies.processors import make_pre_post_processors
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import ACTConfig, PolicyConfig, known_policy_types
from rlctl.domain.processors import (
    AddBatchDimension,
    Normalizer,
    ProcessorStep,
    RenameConfig,
    RenameObservations,
)


def test_every_policy_type_is_served_by_a_class_for_its_config():
    for name, config_class in known_policy_types().items():
        served_by = implementation_of(config_class)
        assert issubclass(served_by, PolicyImplementation), name
        assert issubclass(config_class, served_by.config_class), name
        assert issubclass(served_by, PolicyModel) == config_class.trainable, name


@attrs.frozen(kw_only=True)
class HookedConfig(PolicyConfig):
    """A policy type of this test only, never registered: its name is its class name."""


class HookedPolicy(PolicyImplementation[HookedConfig]):
    config_class = HookedConfig

    @classmethod
    def preprocessor_steps(cls, config: HookedConfig) -> list[ProcessorStep]:
        return [RenameObservations(RenameConfig({"raw": "observation.state"}))]

    @classmethod
    def arrange_processors(
        cls, config: HookedConfig, pre: list[ProcessorStep], post: list[ProcessorStep]
    ) -> tuple[list[ProcessorStep], list[ProcessorStep]]:
        return [step for step in pre if not isinstance(step, AddBatchDimension)], post


class NotAPolicy:
    pass


@attrs.frozen
class FakeEntryPoint:
    name: str
    value: str
    target: Any

    def load(self) -> Any:
        if isinstance(self.target, Exception):
            raise self.target
        return self.target


def installed(monkeypatch, *points: FakeEntryPoint) -> None:
    def entry_points(*, group: str, name: str) -> list[FakeEntryPoint]:
        assert group == implementations.ENTRY_POINT_GROUP
        return [point for point in points if point.name == name]

    monkeypatch.setattr(implementations, "entry_points", entry_points)
    monkeypatch.setattr(implementations, "_found", {})


def test_the_hooks_of_the_class_serving_a_type_shape_its_processors(monkeypatch):
    installed(monkeypatch, FakeEntryPoint("HookedConfig", "test:HookedPolicy", HookedPolicy))
    config = HookedConfig(
        input_features={"observation.state": typed_feature("STATE", shape=(2,))},
        output_features={"action": typed_feature("ACTION", shape=(2,))},
    )
    assert implementation_of(HookedConfig) is HookedPolicy
    pre, _ = make_pre_post_processors(config)
    kinds = [type(step) for step in pre]
    assert AddBatchDimension not in kinds  # arrange_processors ran
    assert kinds.count(RenameObservations) == 2  # the rename of every policy, and the hook's
    assert kinds.index(RenameObservations, 1) < kinds.index(Normalizer)


def test_a_type_without_an_installed_implementation_says_how_to_declare_one(monkeypatch):
    installed(monkeypatch)
    with pytest.raises(ConfigError, match="no installed package implements policy type 'act'") as e:
        implementation_of(ACTConfig)
    assert "rlctl.policy_models" in (e.value.hint or "")


@pytest.mark.parametrize(
    ("points", "message"),
    [
        (
            [FakeEntryPoint("act", f"{pkg}:X", HookedPolicy) for pkg in ("a", "b")],
            "several installed packages implement policy type 'act': a:X, b:X",
        ),
        (
            [FakeEntryPoint("act", "gone:Model", ImportError("No module named 'gone'"))],
            "cannot be imported: ImportError: No module named 'gone'",
        ),
        ([FakeEntryPoint("act", "pkg:NotAPolicy", NotAPolicy)], "is not a PolicyImplementation"),
        ([FakeEntryPoint("act", "pkg:make", lambda: None)], "is not a PolicyImplementation"),
        (
            [FakeEntryPoint("act", "pkg:HookedPolicy", HookedPolicy)],
            "serves HookedConfig, not policy type 'act'",
        ),
    ],
)
def test_a_wrong_entry_point_is_named_in_one_clear_error(monkeypatch, points, message):
    installed(monkeypatch, *points)
    with pytest.raises(ConfigError, match=message):
        implementation_of(ACTConfig)


def test_the_loader_builds_a_type_that_needs_no_training_for_the_env():
    from rlctl.adapters.memory.simulator import FakeSimulation
    from rlctl.adapters.policies.loaded_policy import LeRobotPolicyLoader
    from rlctl.adapters.sim.random_policy import RandomPolicy

    loader = LeRobotPolicyLoader()
    policy = loader.create_for_simulation("random", FakeSimulation(), seed=3)
    assert isinstance(policy, RandomPolicy)
    with pytest.raises(ConfigError, match="policy type 'mlp' acts only once trained") as caught:
        loader.create_for_simulation("mlp", FakeSimulation())
    assert "random" in (caught.value.hint or "")
