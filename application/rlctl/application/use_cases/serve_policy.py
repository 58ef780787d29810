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

from rlctl.application.ports.policy import Policy, PolicyLoader
from rlctl.application.ports.policy_service import PolicyServer
from rlctl.domain.config import unstructure
from rlctl.domain.errors import ConfigError, FeatureMismatch, InvalidInput
from rlctl.domain.features import FeatureKind, FeatureSpec
from rlctl.domain.policies.rtc import CommittedActions
from rlctl.domain.remote_inference import (
    ChunkReply,
    ChunkRequest,
    NonFiniteChunk,
    PolicyDescription,
    first_non_finite,
    largest_magnitude,
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
        # Nothing is predicted from NaN or infinity: a policy fed them answers garbage.
        for arrays in (request.observation, {"rtc.committed": request.committed}):
            bad = first_non_finite({k: v for k, v in arrays.items() if v is not None})
            if bad is not None:
                raise InvalidInput(
                    f"{bad} holds NaN or infinite values",
                    where=bad,
                    hint="a sensor or the robot's processing produced them; nothing was predicted",
                )
        _check_fits(name, chosen, request.observation)
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
            chunk = chosen.predict_chunk(observation, committed=committed)
            actions = _host_array(chunk.actions)
            spent = time.perf_counter() - started
        if request.max_actions:
            actions = actions[:, : request.max_actions]
        if first_non_finite({"actions": actions}) is not None:
            raise NonFiniteChunk(
                f"policy {name!r} answered with NaN or infinite actions; none is sent",
                where="policy.predict",
                hint=_far_out(request.observation),
            )
        return ChunkReply(actions=actions, timestep=request.timestep, inference_s=spent)


# The kinds a robot sends as vectors: present and of the declared size, or no policy runs.
_VECTOR_KINDS = (FeatureKind.STATE, FeatureKind.ENV)


def _check_fits(name: str, policy: Policy, observation: Mapping[str, np.ndarray]) -> None:
    """Refuse, naming every difference, an observation the policy cannot read: a vector it
    reads missing or of another size, a camera of another rank or channel count. Cameras
    missing or of another size are the policy's to judge (some resize, some fill them in)."""
    sent = {
        key: FeatureSpec(key, str(value.dtype), tuple(value.shape[1:]))
        for key, value in observation.items()
    }
    seen = policy.observation_features(sent)
    # A policy reading a history gets it stacked on the axis after the batch's.
    history = policy.config.n_obs_steps
    problems: list[str] = []
    for key, feature in policy.input_features.items():
        wanted = tuple(feature.shape)
        spec = seen.get(key)
        if feature.kind in _VECTOR_KINDS:
            if spec is None:
                problems.append(f"it reads {key} {_shape(wanted)}, which the request lacks")
            elif not _fits(tuple(spec.shape), wanted, history):
                problems.append(
                    f"it reads {key} as {_shape(wanted)}, the request has {_shape(spec.shape)}"
                )
        elif feature.kind is FeatureKind.VISUAL and spec is not None and len(wanted) == 3:
            got = tuple(spec.shape)
            if not _fits(got[:-2], wanted[:1], history) or len(got) < 3:
                problems.append(
                    f"it reads {key} as channels-first {_shape(wanted)}, "
                    f"the request has {_shape(got)}"
                )
    if problems:
        raise FeatureMismatch(
            f"the observation does not fit policy {name!r}: " + "; ".join(problems),
            where="request.observation",
            hint="send the features the policy was trained on (batch first, a history "
            "stacked on axis 1 when it reads one; images float, channels first)",
        )


def _fits(shape: tuple[int, ...], wanted: tuple[int, ...], history: int) -> bool:
    # `shape` without its batch axis: `wanted`, or (history, *wanted) for a policy reading one.
    return shape == wanted or (history > 1 and shape == (history, *wanted))


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(v) for v in shape) + ("," if len(shape) == 1 else "") + ")"


def _far_out(observation: Mapping[str, np.ndarray]) -> str:
    found = largest_magnitude(observation)
    where = f" ({found[0]} reaches {found[1]:.3g})" if found is not None else ""
    return (
        f"the observation may be far outside what the policy was trained on{where}; "
        "the robot holds and asks again with its next observation"
    )


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
