"""Where a robot, a camera or a server is on the network, as settings give it: a host (a name or
an IP address, the port in its own setting) and ports."""

from __future__ import annotations

import ipaddress

from rlctl.domain.errors import ConfigError


def check_host(host: str, *, where: str, what: str, example: str, port_setting: str) -> None:
    """`host` names `what` (e.g. "the robot"): not empty, no spaces or slashes, and no port
    (an IPv6 address, bare or in brackets, keeps its colons)."""
    name = where.rsplit(".", 1)[-1]
    text = host.strip()
    if not text:
        raise ConfigError(f"{name} must name {what}", where=where, hint=f"e.g. {example}")
    if any(c.isspace() or c in "/\\@?#" for c in text):
        raise ConfigError(
            f"{name} {host!r} is not a host name or an IP address",
            where=where,
            hint=f"e.g. {example}",
        )
    if ":" in text and not _ipv6(text):
        raise ConfigError(
            f"{name} {host!r} holds a port: give the host alone",
            where=where,
            hint=f"{name}={text.rsplit(':', 1)[0]} and the port in {port_setting}",
        )


def check_port(port: int, *, where: str) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port <= 65535:
        name = where.rsplit(".", 1)[-1]
        raise ConfigError(f"{name} must be in 1..65535, got {port}", where=where)


def _ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text.removeprefix("[").removesuffix("]")).version == 6
    except ValueError:
        return False
