"""Serve loaded policies to robots: `rlctl policy serve`.

The service is stateless per request: a robot sends an observation (with its history stacked
when the policy reads one) and gets back the policy's raw chunk, so one server serves any number
of robots and a robot that reconnects loses nothing. Each policy answers one request at a time:
a model is not assumed to be safe to run from several threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np
import structlog

from rlctl.application.policy_checks import check_actions, check_observation, non_finite_chunk
from rlctl.application.ports.policy import Policy, PolicyLoader
from rlctl.application.ports.policy_service import PolicyServer
from rlctl.domain.config import unstructure
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies.rtc import CommittedActions
from rlctl.domain.remote_inference import (
    ChunkReply,
    ChunkRequest,
    NonFiniteChunk,
    PolicyDescription,
)

log = structlog.get_logger()


class PolicyService:
    """The `ChunkService` over named policies."""

    def __init__(self, policies: Mapping[str, Policy]) -> None:
        if not policies:
            raise ConfigError("no policy to serve", where="policy.path")
        self._policies = dict(policies)
        self._locks = {name: threading.Lock() for name in policies}

    @property
    def names(self) -> list[str]:
        return list(self._policies)

    def _named(self, name: str) -> tuple[str, Policy]:
        if not name and len(self._policies) == 1:
            name = next(iter(self._policies))
        if name not in self._policies:
            raise ConfigError(
                f"this server has no policy {name!r}"
                if name
                else "this server serves several policies: name one",
                where="policy.server_policy",
                hint=f"it serves: {', '.join(self._policies)}",
            )
        return name, self._policies[name]

    def describe(
        self, policy: str, provided: Mapping[str, FeatureSpec] | None
    ) -> PolicyDescription:
        name, chosen = self._named(policy)
        seen = chosen.observation_features(dict(provided)) if provided else {}
        return PolicyDescription(
            name=name,
            config=unstructure(chosen.config),
            actions_per_chunk=chosen.actions_per_chunk,
            observation_features=seen,
        )

    def predict(self, request: ChunkRequest) -> ChunkReply:
        name, chosen = self._named(request.policy)
        rows = {int(np.shape(v)[0]) if np.ndim(v) else 0 for v in request.observation.values()}
        if len(rows) != 1 or 0 in rows:
            raise InvalidInput(
                "every observation array needs the same leading batch axis",
                where="request.observation",
            )
        (batch,) = rows
        if request.task and len(request.task) != batch:
            raise InvalidInput(
                f"{len(request.task)} task texts for a batch of {batch}", where="request.task"
            )
        check_observation(name, chosen, request.observation, committed=request.committed)
        observation: dict[str, Any] = dict(request.observation)
        observation["task"] = list(request.task) or [""] * batch
        committed = None
        if request.committed is not None and request.rtc is not None:
            if request.committed.shape[0] not in (1, batch):
                raise InvalidInput(
                    f"committed actions for a batch of {request.committed.shape[0]}, "
                    f"observations for {batch}",
                    where="request.rtc",
                )
            committed = CommittedActions(
                actions=request.committed, inference_delay=request.inference_delay, rtc=request.rtc
            )
        with self._locks[name]:
            started = time.perf_counter()
            try:
                chunk = chosen.predict_chunk(observation, committed=committed)
            except NonFiniteChunk as refused:
                # A policy that checks its own answer (a loaded one does) is refused as here.
                raise non_finite_chunk(name, request.observation) from refused
            actions = _host_array(chunk.actions)
            spent = time.perf_counter() - started
        if request.max_actions:
            actions = actions[:, : request.max_actions]
        check_actions(name, actions, request.observation)
        return ChunkReply(actions=actions, timestep=request.timestep, inference_s=spent)


def _host_array(actions: Any) -> np.ndarray:
    # A policy hands back raw actions on the host (its post-processor ends on the CPU): numpy
    # arrays, or CPU tensors, which numpy reads through the array protocol.
    out = np.asarray(actions, dtype=np.float32)
    return out if out.ndim == 3 else out[None]


@attrs.frozen
class ServedPolicy:
    name: str
    location: str


class ServePolicy:
    """Load the policies, then serve them until stopped."""

    def __init__(self, loader: PolicyLoader, server: PolicyServer) -> None:
        self._loader = loader
        self._server = server

    def __call__(
        self,
        policies: list[ServedPolicy],
        *,
        device: str | None = None,
        on_ready: Callable[[str], None] | None = None,
    ) -> None:
        names = [p.name for p in policies]
        if len(set(names)) != len(names):
            raise ConfigError(
                f"two served policies share a name: {names}",
                where="policy.path",
                hint="name them: --policy.path=NAME=PATH",
            )
        loaded = {p.name: self._loader.load(p.location, device=device) for p in policies}
        for p in policies:
            log.info("policy loaded", name=p.name, location=p.location)
        self._server.serve(PolicyService(loaded), on_ready=on_ready)
