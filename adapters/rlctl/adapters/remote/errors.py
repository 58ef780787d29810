"""What can go wrong talking to a policy server, told apart for the acting engine.

The kinds the engine acts on (hold, ask again) live in the domain, shared with a model running
here; this module adds what only the wire knows (a server's refusal and its metadata)."""

from __future__ import annotations

from rlctl.domain.errors import RlctlError
from rlctl.domain.remote_inference import (
    ChunkLate as ChunkLate,
)
from rlctl.domain.remote_inference import (
    ChunkUnusable as ChunkUnusable,
)
from rlctl.domain.remote_inference import (
    ServerBusy as ServerBusy,
)
from rlctl.domain.remote_inference import (
    ServerUnavailable as ServerUnavailable,
)

# The trailing metadata a server sets on a refusal the robot can act on: hold and ask again.
REFUSAL_KEY = "rlctl-refusal"
NON_FINITE_CHUNK = "non-finite-chunk"
BUSY = "busy"


class ServerRefused(RlctlError):
    """The server answered with an error status: the request will not succeed as sent."""

    def __init__(self, code: str, details: str, where: str) -> None:
        self.code = code  # the gRPC status name: UNAUTHENTICATED, INVALID_ARGUMENT, …
        super().__init__(f"the policy server refused: {code}: {details}", where=where)
