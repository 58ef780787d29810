"""What can go wrong talking to a policy server, told apart for the `RemotePolicy`."""

from __future__ import annotations

from rlctl.domain.errors import HardwareError, RlctlError


class ServerUnavailable(HardwareError):
    """The policy server cannot be reached (down, restarting, network lost)."""


class ChunkLate(HardwareError):
    """The server did not answer before the chunk's deadline."""


class ChunkUnusable(HardwareError):
    """The server's policy answered this observation with NaN or infinite actions (the server
    refused to send them, or they arrived anyway): no action of it may reach the arm. Like a
    late chunk, the robot holds and asks again with its next observation."""


class ServerBusy(HardwareError):
    """The server has as many requests in flight as it admits (from this host, or in all):
    asked again a little later, it answers. The robot holds meanwhile, as for a late chunk."""


# The trailing metadata a server sets on a refusal the robot can act on: hold and ask again.
REFUSAL_KEY = "rlctl-refusal"
NON_FINITE_CHUNK = "non-finite-chunk"
BUSY = "busy"


class ServerRefused(RlctlError):
    """The server answered with an error status: the request will not succeed as sent."""

    def __init__(self, code: str, details: str, where: str) -> None:
        self.code = code  # the gRPC status name: UNAUTHENTICATED, INVALID_ARGUMENT, …
        super().__init__(f"the policy server refused: {code}: {details}", where=where)
