"""`PolicyModel.device` and `.dtype` find the first parameter once and stay right: after `.to()`
(a dtype, the meta device), after `load_state_dict(assign=True)`, after a parameter or a module
replaced by hand, and in a deep copy; and they walk the modules no more once found."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from rlctl.adapters.policies.base import PolicyModel, build_policy
from rlctl.adapters.policies.gaussian_actor import GaussianActorPolicy
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig


def model() -> GaussianActorPolicy:
    config = GaussianActorConfig(
        input_features={"observation.state": typed_feature("STATE", (2,))},
        output_features={"action": typed_feature("ACTION", (1,))},
        latent_dim=8,
        actor_network_kwargs={"hidden_dims": [8]},
    )
    built = build_policy(config)
    assert isinstance(built, GaussianActorPolicy)
    return built


def first(m: nn.Module) -> tuple[str, nn.Parameter]:
    return next(iter(m.named_parameters()))


def test_found_once_then_no_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    m = model()
    assert (m.device, m.dtype) == (torch.device("cpu"), torch.float32)
    walks = []
    original = nn.Module.named_parameters

    def counting(self: nn.Module, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        walks.append(type(self).__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(nn.Module, "named_parameters", counting)
    monkeypatch.setattr(nn.Module, "parameters", lambda self, recurse=True: iter(()))
    for _ in range(100):
        assert m.device == torch.device("cpu") and m.dtype == torch.float32
    assert walks == []


def test_conversions_show_at_once() -> None:
    m = model()
    assert m.dtype == torch.float32
    m.to(torch.float64)
    assert m.dtype == torch.float64
    m.half()
    assert m.dtype == torch.float16
    m.float()
    m.to("meta")
    assert m.device == torch.device("meta") and m.dtype == torch.float32


def test_a_submodule_converted_alone_shows() -> None:
    m = model()
    name, _ = first(m)
    owner = m.get_submodule(name.rpartition(".")[0])
    owner.to(torch.float64)
    assert m.dtype == torch.float64


def test_conversions_that_make_new_parameters_are_found_again() -> None:
    m = model()
    assert m.dtype == torch.float32
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        m.to(torch.float64)
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(False)
    _, parameter = first(m)
    assert parameter.dtype == torch.float64
    assert m.dtype == torch.float64


def test_assigned_state_and_hand_made_swaps_are_found_again() -> None:
    m = model()
    assert m.dtype == torch.float32
    state = {k: v.to(torch.float64) for k, v in m.state_dict().items()}
    m.load_state_dict(state, assign=True)
    assert m.dtype == torch.float64

    name, parameter = first(m)
    path, _, leaf = name.rpartition(".")
    owner = m.get_submodule(path)
    setattr(owner, leaf, nn.Parameter(parameter.detach().to(torch.float16)))
    assert m.dtype == torch.float16

    # A whole module on the path replaced (in its parent) by one of another dtype.
    top = path.split(".")[0]
    setattr(m, top, copy.deepcopy(getattr(m, top)).to(torch.bfloat16))
    assert m.dtype == torch.bfloat16


def test_a_deep_copy_answers_for_itself() -> None:
    m = model()
    assert m.dtype == torch.float32
    twin = copy.deepcopy(m)
    twin.to(torch.float64)
    assert (m.dtype, twin.dtype) == (torch.float32, torch.float64)


def test_no_reference_cycle_keeps_a_model_alive() -> None:
    import gc
    import weakref

    m = model()
    _ = m.device
    ref = weakref.ref(m)
    gc.disable()
    try:
        del m
        assert ref() is None  # freed by reference counting alone
    finally:
        gc.enable()


def test_a_model_without_parameters_says_so() -> None:
    class Empty(PolicyModel):
        config_class = GaussianActorConfig

    empty = Empty(GaussianActorConfig())
    with pytest.raises(ConfigError, match="no parameters"):
        _ = empty.device
