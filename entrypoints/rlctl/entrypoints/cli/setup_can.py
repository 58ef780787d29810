"""`rlctl setup-can`: CAN interfaces for Damiao motors (the OpenArm), as LeRobot's
`lerobot-setup-can`.

    rlctl setup-can --mode=setup --interfaces=can0,can1     # bitrate, CAN FD, up (sudo)
    rlctl setup-can --mode=test --interfaces=can0           # which motor ids answer
    rlctl setup-can --mode=speed --interfaces=can0          # round-trip time to one motor

A mode that finds nothing fails (exit 1) with what to check.
"""

from __future__ import annotations

from typing import Literal

import attrs
import click

from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.settings import AppSettings


@attrs.frozen(kw_only=True)
class SetupCanCommandSettings(AppSettings):
    # setup: configure and bring up the links; test: find the motors; speed: time round trips.
    mode: Literal["setup", "test", "speed"] = "test"
    # Comma-separated CAN interfaces (can0,can1).
    interfaces: str = "can0"
    bitrate: int = 1_000_000
    # CAN FD's data-phase bitrate.
    data_bitrate: int = 5_000_000
    use_fd: bool = True
    # The motor ids to look for (the OpenArm's 1..8).
    motor_ids: list[int] = attrs.field(factory=lambda: list(range(1, 9)))
    # Seconds to wait for the motors' answers.
    timeout: float = 1.0
    speed_iterations: int = 100
    # rlctl's: python-can's interface (socketcan; slcan, or virtual for emulated motors).
    can_interface: str = "socketcan"

    def interface_names(self) -> list[str]:
        return [name.strip() for name in self.interfaces.split(",") if name.strip()]


@settings_command("setup-can")
@config_options(SetupCanCommandSettings)
def setup_can_command(config: SetupCanCommandSettings) -> None:
    """Set up CAN interfaces for Damiao motors, find the motors on them, time their answers."""
    from rlctl.domain.errors import InvalidInput
    from rlctl.entrypoints.container import build_container

    interfaces = config.interface_names()
    if not interfaces:
        raise InvalidInput("no interface given", where="--interfaces", hint="--interfaces=can0")
    tool = build_container(config).can_setup(
        can_interface=config.can_interface,
        bitrate=config.bitrate,
        data_bitrate=config.data_bitrate,
        use_fd=config.use_fd,
        timeout_s=config.timeout,
    )
    if config.mode == "setup":
        tool.setup(interfaces)
    elif config.mode == "test":
        found = tool.test(interfaces, config.motor_ids)
        click.echo(f"motors found: {sum(len(answers) for answers in found.values())}")
    else:
        for name in interfaces:
            tool.speed(name, config.motor_ids, config.speed_iterations)
