"""The composition root names real adapters: every lazy target imports, before a user meets it."""

from __future__ import annotations

import importlib

import pytest

from rlctl.entrypoints.container import Container, build_container


def lazy_targets() -> list[str]:
    targets = set()
    for provider in build_container().traverse():
        provides = getattr(provider, "provides", None)
        target = getattr(provides, "target", None)
        if isinstance(target, str):
            targets.add(target)
    return sorted(targets)


def test_the_container_is_walked() -> None:
    # Guards the walk itself: a container whose targets are not found would pass vacuously.
    targets = lazy_targets()
    assert "rlctl.adapters.policies.loaded_policy:LeRobotPolicyLoader" in targets
    assert "rlctl.adapters.memory.dataset_store:InMemoryDatasetStore" in targets  # in a Selector
    assert len(targets) >= 30


@pytest.mark.parametrize("target", lazy_targets())
def test_every_lazy_target_imports(target: str) -> None:
    module_name, _, name = target.partition(":")
    module = importlib.import_module(module_name)
    assert callable(getattr(module, name)), f"{target} is not callable"


def test_providers_are_declared_on_the_container_class() -> None:
    # Tests and embedders override providers by these names.
    for name in ("policy_loader", "eval_policy", "torch_dataset", "simulation", "train_policy"):
        assert name in Container.providers
