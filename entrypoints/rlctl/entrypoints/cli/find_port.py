"""`rlctl find-port`: find the serial port of a motors board by unplugging it."""

from __future__ import annotations

import click


@click.command(name="find-port")
def find_port_command() -> None:
    """List serial ports, ask to unplug the board, and name the port that went away."""
    from rlctl.adapters.control.terminal import TerminalConsole
    from rlctl.adapters.robots.serial_ports import list_serial_ports
    from rlctl.application.use_cases.setup_motors import FindPort
    from rlctl.entrypoints.cli.config_options import start_command

    start_command(click.get_current_context())
    FindPort(list_serial_ports, TerminalConsole())()
