"""A virtual bus of six motors per family, an adapter connected to it, and a recording port
that stands in for the SDKs' PortHandler in codec tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
import pytest

from rlctl.adapters.motors.dynamixel import DynamixelMotorBus
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.serial_bus import SerialServoBus
from rlctl.adapters.motors.tables import servo_model
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.domain.calibration import MotorNormMode
from rlctl.domain.motors import Motor

IDS = (1, 2, 3, 4, 5, 6)
NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
FAMILIES = {
    "feetech": ("sts3215", FeetechMotorBus),
    "dynamixel": ("xl430-w250", DynamixelMotorBus),
}
# Replies through a pty are late when the kernel's tty worker waits for a CPU, by tens of ms on
# a loaded 2-core machine: generous limits keep the happy path deterministic (they cost nothing
# while replies come), and tests that wait for timeouts on purpose use `fault_bus` instead.
BROADCAST_WINDOW_MS = 100.0
TIMEOUT_MARGIN_MS = 250.0
FAULT_TIMEOUT_MARGIN_MS = 40.0


@attrs.define
class Rig:
    """A virtual bus, the adapter class for its family, and a connected adapter (or None)."""

    family: str
    virtual: VirtualServoBus
    bus: SerialServoBus | None = None
    names: tuple[str, ...] = NAMES
    ids: tuple[int, ...] = IDS
    extra_buses: list[SerialServoBus] = attrs.field(factory=list)

    @property
    def model(self) -> str:
        return FAMILIES[self.family][0]

    @property
    def model_number(self) -> int:
        return servo_model(self.model).model_number

    def motors(self) -> dict[str, Motor]:
        modes = [MotorNormMode.RANGE_M100_100] * 5 + [MotorNormMode.RANGE_0_100]
        return {n: Motor(i, self.model, m) for n, i, m in zip(self.names, self.ids, modes)}

    def new_bus(self, *, port: str | None = None, **kwargs: object) -> SerialServoBus:
        bus_type = FAMILIES[self.family][1]
        kwargs.setdefault("broadcast_window_ms", BROADCAST_WINDOW_MS)
        kwargs.setdefault("timeout_margin_ms", TIMEOUT_MARGIN_MS)
        return bus_type(port or self.virtual.port, self.motors(), **kwargs)  # type: ignore[arg-type]

    def fault_bus(self, **kwargs: object) -> SerialServoBus:
        """A connected bus with short timeouts, for tests that make replies go missing."""
        kwargs.setdefault("timeout_margin_ms", FAULT_TIMEOUT_MARGIN_MS)
        bus = self.new_bus(**kwargs)
        bus.connect(handshake=False)
        self.extra_buses.append(bus)
        return bus


@pytest.fixture(params=sorted(FAMILIES))
def family(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_virtual(family: str) -> Iterator[Callable[..., VirtualServoBus]]:
    """Start a virtual bus of this family: `make_virtual(ids=[1], baudrate=57_600)`."""
    started: list[VirtualServoBus] = []

    def make(ids: Iterable[int] = IDS, **kwargs: Any) -> VirtualServoBus:
        kwargs.setdefault("tau_s", 0.02)
        bus = VirtualServoBus.uniform(family, FAMILIES[family][0], ids, **kwargs).start()
        started.append(bus)
        return bus

    yield make
    for bus in started:
        bus.stop()


@pytest.fixture
def make_rig(family: str, make_virtual: Callable[..., VirtualServoBus]) -> Callable[..., Rig]:
    """A rig whose adapter is left to the test: `make_rig(ids=[1], baudrate=57_600)`."""
    return lambda **kwargs: Rig(family, make_virtual(**kwargs))


@pytest.fixture
def rig(make_rig: Callable[..., Rig]) -> Iterator[Rig]:
    rig = make_rig()
    rig.bus = rig.new_bus()
    rig.bus.connect()
    yield rig
    for bus in [rig.bus, *rig.extra_buses]:
        bus.disconnect(disable_torque=False)


class RecordingPort:
    def __init__(self, replies: bytes = b"") -> None:
        self.is_using = False
        self.written = bytearray()
        self._replies = bytearray(replies)

    def clearPort(self) -> None:  # noqa: N802 (the SDK's names)
        pass

    def writePort(self, packet: list[int]) -> int:  # noqa: N802
        self.written += bytes(packet)
        return len(packet)

    def readPort(self, length: int) -> bytes:  # noqa: N802
        out = bytes(self._replies[:length])
        del self._replies[:length]
        return out

    def setPacketTimeout(self, packet_length: int) -> None:  # noqa: N802
        pass

    def setPacketTimeoutMillis(self, msec: float) -> None:  # noqa: N802
        pass

    def isPacketTimeout(self) -> bool:  # noqa: N802
        return not self._replies

    def getBaudRate(self) -> int:  # noqa: N802
        return 1_000_000


@pytest.fixture(scope="session")
def recording_port() -> type[RecordingPort]:
    return RecordingPort
