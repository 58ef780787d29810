"""Remote inference without a network: a server that holds the service in memory, and a
connector whose `RemotePolicy` calls that service directly (the same queue, merge and stall
logic as over gRPC, for tests of the loops), and a scripted service to answer it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

import numpy as np

from rlctl.adapters.remote.remote_policy import RemotePolicy
from rlctl.application.ports.policy_service import ChunkService
from rlctl.domain.config import unstructure
from rlctl.domain.features import FeatureSpec, typed_feature
from rlctl.domain.policies import MLPConfig
from rlctl.domain.remote_inference import (
    ChunkReply,
    ChunkRequest,
    PolicyDescription,
    RemotePolicySettings,
)


class InProcessPolicyServer:
    """Serves nothing over a network: keeps the service for a test to call."""

    def __init__(self) -> None:
        self.service: ChunkService | None = None
        self._stopped = threading.Event()

    def serve(
        self, service: ChunkService, *, on_ready: Callable[[str], None] | None = None
    ) -> None:
        self.service = service
        if on_ready is not None:
            on_ready("memory")
        self._stopped.wait()

    def stop(self) -> None:
        self._stopped.set()


class InProcessChunkClient:
    def __init__(self, service: ChunkService) -> None:
        self.service = service
        self.requests: list[ChunkRequest] = []

    def describe(
        self,
        policy: str = "",
        provided: Mapping[str, FeatureSpec] | None = None,
        *,
        timeout: float = 10.0,
    ) -> PolicyDescription:
        return self.service.describe(policy, provided)

    def predict(self, request: ChunkRequest, *, timeout: float) -> ChunkReply:
        self.requests.append(request)
        return self.service.predict(request)

    def close(self) -> None:
        pass


class InProcessPolicyConnector:
    def __init__(self, service: ChunkService) -> None:
        self.service = service

    def connect(
        self,
        settings: RemotePolicySettings,
        *,
        realtime: bool = True,
        queue_threshold: int | None = None,
    ) -> RemotePolicy:
        return RemotePolicy(
            InProcessChunkClient(self.service),
            settings,
            realtime=realtime,
            queue_threshold=queue_threshold,
        )


TICK_DIM = 2


def tick_chunk(start: int, steps: int, offset: float = 0.0) -> np.ndarray:
    ticks = np.arange(start, start + steps, dtype=np.float32) + offset
    return np.repeat(ticks[None, :, None], TICK_DIM, axis=2)


class ScriptedChunkService:
    """A `ChunkService` whose action for tick t is t (plus the n-th chunk's offset), so that a
    stale or misplaced action shows; clear `gate` to stall it."""

    def __init__(self, steps: int = 10) -> None:
        self.steps = steps
        self.gate = threading.Event()
        self.gate.set()
        self.requests: list[ChunkRequest] = []
        self.offsets: list[float] = []  # added to the values of the n-th chunk
        self.offset_after = 0.0  # added to the values of every chunk after those

    def describe(
        self, policy: str, provided: Mapping[str, FeatureSpec] | None
    ) -> PolicyDescription:
        config = MLPConfig(
            input_features={"observation.state": typed_feature("STATE", (TICK_DIM,))},
            output_features={"action": typed_feature("ACTION", (TICK_DIM,))},
            chunk_size=self.steps,
            n_action_steps=self.steps,
        )
        return PolicyDescription(
            name="ticks",
            config=unstructure(config),
            actions_per_chunk=self.steps,
            observation_features=dict(provided or {}),
        )

    def predict(self, request: ChunkRequest) -> ChunkReply:
        n = len(self.requests)
        self.requests.append(request)
        self.gate.wait()
        offset = self.offsets[n] if n < len(self.offsets) else self.offset_after
        return ChunkReply(
            actions=tick_chunk(request.timestep, self.steps, offset), timestep=request.timestep
        )
