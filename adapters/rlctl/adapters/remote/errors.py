"""What can go wrong talking to a policy server, told apart for the `RemotePolicy`."""

from __future__ import annotations

from rlctl.domain.errors import HardwareError, RlctlError


class ServerUnavailable(HardwareError):
    """The policy server cannot be reached (down, restarting, network lost)."""


class ChunkLate(HardwareError):
    """The server did not answer before the chunk's deadline."""


class ServerRefused(RlctlError):
    """The server answered with an error status: the request will not succeed as sent."""

    def __init__(self, code: str, details: str, where: str) -> None:
        self.code = code  # the gRPC status name: UNAUTHENTICATED, INVALID_ARGUMENT, …
        super().__init__(f"the policy server refused: {code}: {details}", where=where)
