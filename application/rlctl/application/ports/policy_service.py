"""Ports for remote inference: serving policies to robots, and acting from a served policy.

A `PolicyServer` is a transport (gRPC in the adapters) that hands every request it accepts to a
`ChunkService` and returns its answer; authentication, message limits and decoding are its job,
what to answer is the service's. A `PolicyConnector` gives a robot a `Policy` that runs on a server.
A `ChunkClient` is where the acting engine (`rlctl.application.acting_engine`) gets its chunks:
a server over the network, or a model running in this process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from rlctl.application.ports.policy import Policy
from rlctl.domain.features import FeatureSpec
from rlctl.domain.remote_inference import (
    ChunkReply,
    ChunkRequest,
    PolicyDescription,
    RemotePolicySettings,
)


class ChunkService(Protocol):
    """What a server answers; raises `RlctlError`s (`InvalidInput`, `ConfigError`) to refuse."""

    def describe(
        self, policy: str, provided: Mapping[str, FeatureSpec] | None
    ) -> PolicyDescription:
        """The policy named `policy` (empty: the only one); with `provided`, the features a
        robot offers, its `observation_features` are the policy's view of them (renamed)."""
        ...

    def predict(self, request: ChunkRequest) -> ChunkReply: ...


class ChunkClient(Protocol):
    """Chunks for a robot's acting engine: from a server (the gRPC client), or from a model in
    this process (`LocalChunks`). Called from the engine's worker thread, one call at a time;
    after a reset, the new episode's first call may start while the last episode's still runs
    (its chunk is dropped): a client that cannot compute both at once lets it wait.

    `predict` raises the domain's `ServerUnavailable`/`ServerBusy`/`ChunkLate` (the robot
    holds and asks again, backing off), `ChunkUnusable`/`PolicyFailed` (the robot holds and
    asks again with its next observation), or another `RlctlError` (the loop stops)."""

    def describe(
        self,
        policy: str = "",
        provided: Mapping[str, FeatureSpec] | None = None,
        *,
        timeout: float = 10.0,
    ) -> PolicyDescription: ...

    def predict(self, request: ChunkRequest, *, timeout: float) -> ChunkReply: ...

    def close(self) -> None: ...


class PolicyServer(Protocol):
    def serve(
        self, service: ChunkService, *, on_ready: Callable[[str], None] | None = None
    ) -> None:
        """Serve until `stop()` (or the process is told to stop); `on_ready(address)` once
        listening, with the address clients connect to."""
        ...

    def stop(self) -> None: ...


class PolicyConnector(Protocol):
    def connect(
        self,
        settings: RemotePolicySettings,
        *,
        realtime: bool = True,
        queue_threshold: int | None = None,
    ) -> Policy:
        """A `Policy` acting from the server `settings.server`.

        `realtime`: the caller's loop keeps its own pace (a robot), so a tick whose action has
        not arrived holds instead of waiting; otherwise (a simulation) the tick waits for it.
        `queue_threshold`: ask for a chunk when at most this many actions are queued (else
        `settings.chunk_size_threshold`)."""
        ...
