"""The one plugin registry: entry points read once, a failed plugin named when its type is asked
for, and structuring (`--part.type=NAME`) finding plugin types."""

from __future__ import annotations

import sys
import types
from importlib.metadata import EntryPoint
from typing import ClassVar

import attrs
import pytest

from rlctl.domain import plugins
from rlctl.domain.config import Register, structure, tagged_union
from rlctl.domain.errors import ConfigError, NotSupported
from rlctl.domain.plugins import PluginKind, load_adapter, plugin_kind


@tagged_union
@attrs.frozen(kw_only=True)
class GadgetConfig:
    register: ClassVar[Register]
    size: int = 1


@GadgetConfig.register("builtin")
@attrs.frozen(kw_only=True)
class BuiltinGadget(GadgetConfig):
    pass


@attrs.frozen(kw_only=True)
class PluginGadget(GadgetConfig):
    colour: str = "red"


class NotAGadget:
    pass


@attrs.frozen
class Settings:
    gadget: GadgetConfig = attrs.field(factory=BuiltinGadget)


def module_that_registers() -> types.ModuleType:
    module = types.ModuleType("rlctl_test_gadget_module")

    @GadgetConfig.register("from_module")
    @attrs.frozen(kw_only=True)
    class ModuleGadget(GadgetConfig):
        pass

    module.ModuleGadget = ModuleGadget  # type: ignore[attr-defined]
    return module


@pytest.fixture(scope="module")
def kind() -> PluginKind[GadgetConfig]:
    this = sys.modules[__name__]
    sys.modules.setdefault("rlctl_test_gadgets", this)
    sys.modules["rlctl_test_gadget_module"] = module_that_registers()
    group = "rlctl.test_gadgets"
    declared = [
        EntryPoint("plugin", "rlctl_test_gadgets:PluginGadget", group),
        EntryPoint("broken", "rlctl_no_such_module:Gadget", group),
        EntryPoint("stranger", "rlctl_test_gadgets:NotAGadget", group),
        EntryPoint("from_module", "rlctl_test_gadget_module", group),
        EntryPoint("silent", "rlctl_test_gadget_module", group),  # registers no "silent"
    ]
    calls = []

    def fake_entry_points():
        calls.append("read")
        return declared

    original = plugins.entry_points
    plugins.entry_points = fake_entry_points  # type: ignore[assignment]
    plugins._ENTRY_POINTS = None  # the installed metadata is read once per process
    try:
        made = PluginKind(GadgetConfig, group, (), noun="gadget")
        made.known()
        made.known()
        assert calls == ["read"]  # read once
        yield made
    finally:
        plugins.entry_points = original  # type: ignore[assignment]
        plugins._ENTRY_POINTS = None


def test_plugin_types_join_the_built_in_ones(kind):
    assert next(iter(kind.known())) == "builtin"
    assert set(kind.known()) == {"builtin", "plugin", "from_module"}
    assert kind.config_class("plugin") is PluginGadget
    assert plugin_kind(GadgetConfig) is kind


def test_structuring_finds_a_plugin_type(kind):
    settings = structure({"gadget": {"type": "plugin", "colour": "blue"}}, Settings)
    assert settings.gadget == PluginGadget(colour="blue")
    assert kind.make("plugin", size=3) == PluginGadget(size=3)


def test_a_plugin_that_failed_is_named_when_its_type_is_asked_for(kind):
    with pytest.raises(ConfigError) as caught:
        structure({"gadget": {"type": "broken"}}, Settings)
    said = f"{caught.value.where}: {caught.value.message} {caught.value.hint or ''}"
    assert "gadget: unknown gadget type 'broken'" in said
    assert "the plugin providing it failed to load" in said
    assert "rlctl_no_such_module" in said and "ModuleNotFoundError" in said
    for name, reason in [("stranger", "is not a GadgetConfig"), ("silent", "registered no type")]:
        with pytest.raises(ConfigError) as caught:
            kind.config_class(name)
        assert reason in caught.value.hint


def test_an_unknown_type_lists_the_known_ones_and_the_group(kind):
    with pytest.raises(ConfigError) as caught:
        kind.config_class("nothing")
    assert "builtin, " in caught.value.hint and "plugin" in caught.value.hint
    assert "rlctl.test_gadgets" in caught.value.hint


def test_one_kind_per_base(kind):
    with pytest.raises(ConfigError, match="has a plugin kind already"):
        PluginKind(GadgetConfig, "rlctl.other", (), noun="gadget")


def test_every_part_of_rlctl_has_its_kind():
    import rlctl.domain.policies  # noqa: F401

    groups = {kind.group for kind in plugins.plugin_kinds()}
    assert {"rlctl.policies"} <= groups


def test_an_adapter_is_loaded_by_its_path_and_a_missing_one_is_named():
    assert load_adapter("rlctl.domain.plugins:PluginKind", part="gadget x") is PluginKind
    with pytest.raises(NotSupported, match="gadget x cannot be built: rlctl_no_such_sdk") as caught:
        load_adapter("rlctl_no_such_sdk.driver:Gadget", part="gadget x", install="pip install sdk")
    assert caught.value.where == "gadget x" and caught.value.hint == "pip install sdk"
    with pytest.raises(ConfigError, match="has no 'Missing'"):
        load_adapter("rlctl.domain.plugins:Missing", part="gadget x")
    with pytest.raises(ConfigError, match=r"is not 'package\.module:name'"):
        load_adapter("rlctl.domain.plugins", part="gadget x")


def test_the_type_names_are_listed_without_importing_the_types():
    """`--help` lists every type by name; importing every config module to do so cost start-up."""
    import subprocess

    probe = (
        "import sys; from rlctl.domain.policies.registry import POLICY_TYPES as k;"
        "names = k.names(); print('rlctl.domain.policies.groot' in sys.modules);"
        "print(sorted(names) == sorted(k.known()))"
    )
    said = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    assert said == ["False", "True"]
