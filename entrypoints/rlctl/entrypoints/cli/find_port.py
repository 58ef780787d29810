"""`rlctl find-port`: find the serial port of a motors board by unplugging it."""

from __future__ import annotations

import click


@click.command(name="find-port")
def find_port_command() -> None:
    """List serial ports, ask to unplug the board, and name the port that went away."""
    from rlctl.entrypoints.cli.config_options import start_command
    from rlctl.entrypoints.container import build_container

    start_command(click.get_current_context())
    build_container().find_port()()
