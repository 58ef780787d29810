"""rlctl's own robots, teleoperators, cameras, motor buses and envs go through the one plugin
registry as a plugin's would: each is declared as an entry point of rlctl-adapters, and each
declared type can be built (its adapter exists), so no type is offered that cannot be used."""

from __future__ import annotations

import importlib
from importlib.metadata import distribution
from typing import ClassVar

import attrs
import pytest

from rlctl.adapters.cameras.config import CAMERA_TYPES, CameraConfig
from rlctl.adapters.motors.config import MOTOR_BUS_TYPES, MotorBusConfig
from rlctl.adapters.robots.buses import motor_bus
from rlctl.adapters.robots.config import ROBOT_TYPES, RobotConfig
from rlctl.adapters.sim.registry import ENV_TYPES
from rlctl.adapters.teleop.config import TELEOPERATOR_TYPES
from rlctl.domain.errors import ConfigError, NotSupported
from rlctl.domain.motors import Motor, MotorNormMode

KINDS = [ROBOT_TYPES, TELEOPERATOR_TYPES, CAMERA_TYPES, MOTOR_BUS_TYPES, ENV_TYPES]


def declared(group: str) -> dict[str, str]:
    """rlctl-adapters' entry points of `group`, by name."""
    eps = distribution("rlctl-adapters").entry_points
    return {ep.name: ep.value for ep in eps if ep.group == group}


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.group)
def test_every_built_in_type_is_an_entry_point_and_every_entry_point_a_type(kind):
    points = declared(kind.group)
    # rlctl's own types: other tests register types of their own in this process.
    known = {n: c for n, c in kind.known().items() if c.__module__.startswith("rlctl.")}
    assert points, f"rlctl-adapters declares nothing in {kind.group}"
    assert set(points) == set(known), kind.group
    for name, value in points.items():
        module, _, attr = value.partition(":")
        assert known[name].__module__ == module and known[name].__qualname__ == attr
    assert {name: error for name, error in kind.errors.items() if name in points} == {}


@pytest.mark.parametrize("kind", KINDS[:4], ids=lambda kind: kind.group)
def test_every_declared_type_names_an_adapter_that_exists(kind):
    # A config whose adapter is missing would be listed by --help and fail only when built.
    for name, cls in kind.known().items():
        module, _, attr = cls.adapter.partition(":")
        assert hasattr(importlib.import_module(module), attr), f"{kind.noun} {name}: {cls.adapter}"


MOTORS = {"shoulder": Motor(1, "sts3215", MotorNormMode.DEGREES)}


def test_an_unknown_bus_type_lists_the_known_ones_and_the_group():
    with pytest.raises(ConfigError, match="unknown motor bus type 'kinova_can'") as caught:
        motor_bus("kinova_can", MOTORS, port="can0")
    assert caught.value.hint is not None
    assert "feetech, dynamixel" in caught.value.hint and "'rlctl.motors'" in caught.value.hint


def test_a_bus_whose_library_is_missing_names_the_extra_that_installs_it():
    @attrs.frozen(kw_only=True)
    class ElsewhereBusConfig(MotorBusConfig):
        type_name: ClassVar[str] = "elsewhere"
        adapter: ClassVar[str] = "rlctl_no_such_vendor_sdk.bus:Bus"
        library: ClassVar[str] = "the Elsewhere SDK"
        extra: ClassVar[str] = "elsewhere"

    with pytest.raises(NotSupported, match="rlctl_no_such_vendor_sdk is not installed") as caught:
        ElsewhereBusConfig(port="/dev/ttyX").build(MOTORS)
    assert caught.value.hint == "the Elsewhere SDK is missing: pip install 'rlctl[elsewhere]'"
    assert caught.value.where == "elsewhere motor bus"


def test_a_robot_or_camera_whose_adapter_cannot_be_imported_says_what_is_missing():
    # A plugin's adapter imports its device library only when the part is built: a missing one
    # is an error that names it, not a traceback.
    @attrs.frozen(kw_only=True)
    class FarawayRobotConfig(RobotConfig):
        adapter: ClassVar[str] = "rlctl_no_such_robot_library.arm:make"

    @attrs.frozen(kw_only=True)
    class FarawayCameraConfig(CameraConfig):
        adapter: ClassVar[str] = "rlctl.adapters.cameras.config:NoSuchCamera"

    with pytest.raises(NotSupported, match="robot FarawayRobotConfig cannot be built") as caught:
        FarawayRobotConfig().build(None)  # type: ignore[arg-type]
    assert "rlctl_no_such_robot_library is not installed" in caught.value.message
    assert caught.value.hint == "install the package that provides rlctl_no_such_robot_library"
    with pytest.raises(ConfigError, match="has no 'NoSuchCamera'"):
        FarawayCameraConfig().build()


def test_an_arm_builds_its_bus_by_name():
    from rlctl.adapters.motors.feetech import FeetechMotorBus

    bus = motor_bus("feetech", MOTORS, port="/dev/rlctl-no-such-port", retries=0)
    assert isinstance(bus, FeetechMotorBus) and not bus.is_connected
