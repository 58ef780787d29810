"""`rlctl lekiwi-host`: run on the LeKiwi's own computer; a laptop drives it as
`--robot.type=lekiwi_client --robot.remote_ip=<this robot's address>`.

    rlctl lekiwi-host --robot.id=my_kiwi --host.connection_time_s=600

LeRobot 0.6.1's `python -m lerobot.robots.lekiwi.lekiwi_host`, with its settings: `robot.*` (the
bus port, cameras, safety) and `host.*` (ports, how long to run, the watchdog, the loop rate).
"""

from __future__ import annotations

import attrs
import click

from rlctl.entrypoints.cli.config_options import config_options, settings_command
from rlctl.entrypoints.parts import LeKiwiConfig, RobotConfig
from rlctl.entrypoints.settings import AppSettings


@attrs.frozen(kw_only=True)
class LeKiwiHostSettings:
    """LeRobot's `LeKiwiHostConfig`."""

    # Where the client's actions arrive (PULL).
    port_zmq_cmd: int = 5555
    # Where observations leave (PUSH).
    port_zmq_observations: int = 5556
    # How long the host runs, in seconds.
    connection_time_s: float = 30
    # The base stops when no action came for this long.
    watchdog_timeout_ms: int = 500
    # The most loops (command, observation) a second.
    max_loop_freq_hz: float = 30


@attrs.frozen(kw_only=True)
class LeKiwiHostCommandSettings(AppSettings):
    # The LeKiwi this computer drives (`lekiwi`, LeRobot's settings).
    robot: RobotConfig = attrs.field(factory=LeKiwiConfig)
    host: LeKiwiHostSettings = attrs.field(factory=LeKiwiHostSettings)


@settings_command("lekiwi-host")
@config_options(LeKiwiHostCommandSettings)
@click.pass_context
def lekiwi_host_command(ctx: click.Context, config: LeKiwiHostCommandSettings) -> None:
    """Serve a LeKiwi to a client over ZeroMQ (run it on the robot)."""
    from rlctl.domain.errors import ConfigError
    from rlctl.entrypoints.container import build_container

    if not isinstance(config.robot, LeKiwiConfig):
        raise ConfigError(
            "the host serves a LeKiwi only",
            where="robot.type",
            hint="leave --robot.type out (or give lekiwi); on the laptop, "
            "--robot.type=lekiwi_client --robot.remote_ip=<this robot's address>",
        )
    host = config.host
    if host.watchdog_timeout_ms <= 0 or host.max_loop_freq_hz <= 0:
        raise ConfigError(
            "the watchdog timeout and the loop rate must be positive",
            where="host.watchdog_timeout_ms"
            if host.watchdog_timeout_ms <= 0
            else "host.max_loop_freq_hz",
        )
    container = build_container(config, owns_process=True)
    server = container.lekiwi_host(
        robot=container.robot(config.robot),
        port_zmq_cmd=host.port_zmq_cmd,
        port_zmq_observations=host.port_zmq_observations,
        connection_time_s=host.connection_time_s,
        watchdog_timeout_ms=host.watchdog_timeout_ms,
        max_loop_freq_hz=host.max_loop_freq_hz,
    )
    try:
        report = server.run()
    except KeyboardInterrupt:
        click.echo("stopped")
        ctx.exit(130)
    click.echo(
        f"lekiwi host: {report.loops} loops, {report.commands} commands, "
        f"{report.watchdog_stops} watchdog stops, {report.dropped} commands dropped"
    )
