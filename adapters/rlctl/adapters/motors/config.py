"""Motor buses by name: a tagged union on `type`, each member naming the bus class it builds.

An arm picks its bus by name (`motor_bus("feetech", motors, port=...)` in
`rlctl.adapters.robots.buses`), and a package adds a bus family the way it adds a robot: a config
class here or in the package, a bus class serving the `MotorBus` port, and an entry point in the
group `rlctl.motors`. Importing this module is cheap: the vendor libraries load when a bus is
built, and a missing one is named with the extra that installs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from rlctl.domain.config import Register, tagged_union
from rlctl.domain.motors import Motor
from rlctl.domain.plugins import PluginKind, load_adapter

if TYPE_CHECKING:
    from rlctl.application.ports.motors import MotorBus


@tagged_union
@attrs.frozen(kw_only=True)
class MotorBusConfig:
    # The device the bus is on (/dev/ttyACM0).
    port: str

    type_name: ClassVar[str]
    register: ClassVar[Register]
    # "package.module:Class", called as Class(port, motors, **options()).
    adapter: ClassVar[str]
    # What a person calls the library, and the extra of rlctl that installs it.
    library: ClassVar[str]
    extra: ClassVar[str]

    def options(self) -> dict[str, Any]:
        """The bus class's keyword arguments besides the port and the motors."""
        return {}

    def build(self, motors: Mapping[str, Motor]) -> MotorBus:
        bus_class = load_adapter(
            self.adapter,
            part=f"{self.type_name} motor bus",
            install=f"{self.library} is missing: pip install 'rlctl[{self.extra}]'",
        )
        bus: MotorBus = bus_class(self.port, motors, **self.options())
        return bus


@attrs.frozen(kw_only=True)
class SerialBusConfig(MotorBusConfig):
    # Extra attempts after a lost or corrupt reply.
    retries: int = 2

    def options(self) -> dict[str, Any]:
        return {"retries": self.retries}


@MotorBusConfig.register("feetech")
@attrs.frozen(kw_only=True)
class FeetechBusConfig(SerialBusConfig):
    adapter: ClassVar[str] = "rlctl.adapters.motors.feetech:FeetechMotorBus"
    library: ClassVar[str] = "the Feetech SDK"
    extra: ClassVar[str] = "feetech"


@MotorBusConfig.register("dynamixel")
@attrs.frozen(kw_only=True)
class DynamixelBusConfig(SerialBusConfig):
    adapter: ClassVar[str] = "rlctl.adapters.motors.dynamixel:DynamixelMotorBus"
    library: ClassVar[str] = "the Dynamixel SDK"
    extra: ClassVar[str] = "dynamixel"


@MotorBusConfig.register("damiao")
@attrs.frozen(kw_only=True)
class DamiaoBusConfig(MotorBusConfig):
    """Damiao motors on a CAN bus (`port`: the channel, `can0`), LeRobot 0.6.1's settings."""

    adapter: ClassVar[str] = "rlctl.adapters.motors.damiao:DamiaoMotorBus"
    library: ClassVar[str] = "python-can"
    extra: ClassVar[str] = "can"

    # python-can's interface: socketcan (Linux), slcan (a serial adapter), virtual, or auto.
    interface: str = "socketcan"
    use_can_fd: bool = True
    bitrate: int = 1_000_000
    # CAN FD's data phase (socketcan only).
    data_bitrate: int | None = 5_000_000
    # Each motor's answer id, when not its id + 0x10.
    recv_ids: dict[str, int] = attrs.field(factory=dict)
    # How long the answers to one exchange may take, and extra attempts after none came.
    timeout_s: float = 0.01
    retries: int = 2

    def options(self) -> dict[str, Any]:
        return {
            "interface": self.interface,
            "use_can_fd": self.use_can_fd,
            "bitrate": self.bitrate,
            "data_bitrate": self.data_bitrate,
            "recv_ids": dict(self.recv_ids),
            "timeout_s": self.timeout_s,
            "retries": self.retries,
        }


@MotorBusConfig.register("robstride")
@attrs.frozen(kw_only=True)
class RobstrideBusConfig(MotorBusConfig):
    """Robstride motors in MIT mode on a CAN bus (`port`: the channel, `can0`), as LeRobot
    0.6.1's `RobstrideMotorsBus` (classic CAN frames at 1 Mbit/s)."""

    adapter: ClassVar[str] = "rlctl.adapters.motors.robstride:RobstrideMotorBus"
    library: ClassVar[str] = "python-can"
    extra: ClassVar[str] = "can"

    # python-can's interface: socketcan (Linux), slcan (a serial adapter), virtual, or auto.
    interface: str = "auto"
    bitrate: int = 1_000_000
    # The id each motor puts first in its answers, when not its own id.
    recv_ids: dict[str, int] = attrs.field(factory=dict)
    # How long the answers to one exchange may take, and extra attempts after none came.
    timeout_s: float = 0.01
    retries: int = 2

    def options(self) -> dict[str, Any]:
        return {
            "interface": self.interface,
            "bitrate": self.bitrate,
            "recv_ids": dict(self.recv_ids),
            "timeout_s": self.timeout_s,
            "retries": self.retries,
        }


# Every bus type: the ones above and the `rlctl.motors` entry points of installed packages
# (rlctl's own are declared there too, in adapters/pyproject.toml).
MOTOR_BUS_TYPES = PluginKind(MotorBusConfig, "rlctl.motors", (), noun="motor bus")
