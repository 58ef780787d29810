"""`RemotePolicy`: the `Policy` port served by a policy server, for a robot's control loop.

The loop calls `select_action` once a tick and never waits on the network: a background thread
sends the tick's observation when the queue falls to `chunk_size_threshold` of a chunk, and
merges each arriving chunk into the queue (acting's `TimedActionQueue`, LeRobot's aggregations,
with the history and the inference delay from the same `rlctl.domain.acting`). Every
chunk has a deadline; a tick whose action has not arrived holds the last commanded action (or
the configured safe action), logged once per stall, and acting resumes with the next chunk.
Actions for ticks already past are dropped, so a late chunk is never replayed. A server that
goes away is retried with backoff; the loop goes on holding meanwhile.

A chunk holding NaN or infinity (refused by the server, or found here) is a missed chunk too:
none of its actions is used, the robot holds, the log says so once until a usable chunk arrives.

Without `realtime` (a simulation, which can wait), a tick with no action waits for its chunk;
a chunk that cannot be used is an error there (the same observation would get the same answer).

With real-time chunking (`rtc_config`), each request carries the actions queued from its tick on
(up to the execution horizon) and the inference delay, measured as the most ticks acted between
a request and its chunk lately (or `rtc_inference_delay`); the server's flow-matching policy
generates a chunk that follows them, and it replaces the queue (`latest_only`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs
import numpy as np
import structlog

from rlctl.adapters.remote.errors import ChunkLate, ChunkUnusable, ServerBusy, ServerUnavailable
from rlctl.domain.acting import (
    ConfigDescribed,
    InferenceDelay,
    ObservationHistory,
    TimedActionQueue,
    aggregation,
)
from rlctl.domain.action_chunk import ActionChunk
from rlctl.domain.config import structure
from rlctl.domain.errors import HardwareError, InvalidInput, RlctlError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.policies.rtc import CommittedActions
from rlctl.domain.remote_inference import (
    ChunkReply,
    ChunkRequest,
    PolicyDescription,
    RemotePolicySettings,
    first_non_finite,
)

log = structlog.get_logger()

FIRST_BACKOFF_S = 0.05
DELAY_WINDOW = 100


class ChunkClient(Protocol):
    def describe(
        self,
        policy: str = "",
        provided: Mapping[str, FeatureSpec] | None = None,
        *,
        timeout: float = 10.0,
    ) -> PolicyDescription: ...

    def predict(self, request: ChunkRequest, *, timeout: float) -> ChunkReply: ...

    def close(self) -> None: ...


class RemotePolicy(ConfigDescribed[PolicyConfig]):
    def __init__(
        self, client: ChunkClient, settings: RemotePolicySettings, *, realtime: bool = True
    ) -> None:
        self._client = client
        self._settings = settings
        self._realtime = realtime
        # Real-time chunking: every request carries the actions still queued, and a chunk
        # generated to follow them replaces them (no averaging with what it already follows).
        rtc = settings.rtc_config
        self._rtc = rtc if rtc is not None and rtc.enabled else None
        self._merge = aggregation("latest_only" if self._rtc else settings.aggregate)
        # Ticks acted between a request and its chunk, for the inference delay (recent max).
        self.delay = InferenceDelay(DELAY_WINDOW, fixed=settings.rtc_inference_delay)
        self.description = self._with_retries(
            lambda: client.describe(settings.server_policy, timeout=settings.connect_timeout_s)
        )
        self._config = structure(self.description.config, PolicyConfig)  # type: ignore[type-abstract]
        self._chunk_size = settings.actions_per_chunk or max(1, self.description.actions_per_chunk)
        self._history: ObservationHistory | None = None
        self._queue = TimedActionQueue()
        self._cond = threading.Condition()
        self._slot: ChunkRequest | None = None
        self._in_flight = False
        self._generation = 0
        self._tick = 0
        self._executed = -1
        self._last: np.ndarray | None = None
        self._stalled = False
        self._error: RlctlError | None = None
        self._closed = False
        self._unusable_said = False
        # Why the last request brought no chunk (a deadline, an unusable chunk), for the error
        # a loop that cannot hold is given.
        self._last_problem: str | None = None
        # What a benchmark or a test reads.
        self.held_ticks = 0
        self.stalls = 0
        self.chunks_received = 0
        self.chunks_unusable = 0
        self.round_trips_s: list[float] = []
        self.inference_s: list[float] = []
        self._worker = threading.Thread(target=self._work, name="remote-policy", daemon=True)
        self._worker.start()

    # --- the Policy port ----------------------------------------------------------------------

    @property
    def actions_per_chunk(self) -> int:
        return self.description.actions_per_chunk

    def observation_features(self, provided: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]:
        description: PolicyDescription = self._with_retries(
            lambda: self._client.describe(
                self._settings.server_policy,
                dict(provided),
                timeout=self._settings.connect_timeout_s,
            )
        )
        return dict(description.observation_features)

    def predict_chunk(
        self,
        observation: Mapping[str, Any],
        noise: Any | None = None,
        *,
        committed: CommittedActions | None = None,
    ) -> ActionChunk:
        arrays, task = _split(observation)
        request = _following(self._request(arrays, task, 0), committed)
        reply = self._with_retries(
            lambda: self._client.predict(request, timeout=self._settings.connect_timeout_s)
        )
        _check_usable(reply)
        return ActionChunk(actions=reply.actions)

    def select_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        arrays, task = _split(observation)
        if self._config.n_obs_steps > 1:
            if self._history is None:
                self._history = ObservationHistory(self._config.n_obs_steps, list(arrays))
            arrays = self._history.push(arrays)
        with self._cond:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            tick = self._tick
            if not self._in_flight and self._queue.needs_chunk(
                tick, self._chunk_size, self._settings.chunk_size_threshold
            ):
                self._submit(self._request(arrays, task, tick))
            action = self._queue.pop(tick)
            if action is None and (not self._realtime or self._last is None):
                action = self._wait_for(tick, arrays, task)
            if action is None:
                action = self._stall_action()
            elif self._stalled:
                self._stalled = False
                log.info("policy server: acting again", tick=tick, held_ticks=self.held_ticks)
            self._last = action
            self._executed = tick
            self._tick += 1
            return action

    def reset(self) -> None:
        with self._cond:
            self._generation += 1
            self._queue.clear()
            self._slot = None
            self._tick, self._executed = 0, -1
            self._last = None
            self._stalled = False
            self._error = None
        if self._history is not None:
            self._history.reset()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._worker.join(timeout=self._settings.chunk_deadline_s + 1.0)
        self._client.close()

    # --- the loop's side ----------------------------------------------------------------------

    def _request(self, arrays: dict[str, np.ndarray], task: list[str], tick: int) -> ChunkRequest:
        request = ChunkRequest(
            observation=arrays,
            task=tuple(task),
            timestep=tick,
            policy=self._settings.server_policy,
            max_actions=self._settings.actions_per_chunk,
        )
        if self._rtc is None:
            return request
        left = self._queue.leftover(tick, self._rtc.execution_horizon, self.delay.ticks())
        return request if left is None else _following(request, left.committed(self._rtc))

    def _submit(self, request: ChunkRequest) -> None:
        self._slot = request
        self._in_flight = True
        self._cond.notify_all()

    def _wait_for(self, tick: int, arrays: dict[str, np.ndarray], task: list[str]) -> Any:
        """Block (lock held by the caller, released while waiting) until `tick` has an action."""
        give_up = time.monotonic() + self._settings.connect_timeout_s
        while True:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            if not self._in_flight:
                self._submit(self._request(arrays, task, tick))
            left = give_up - time.monotonic()
            if left <= 0:
                break
            self._cond.wait(min(left, 0.05))
            action = self._queue.pop(tick)
            if action is not None:
                return action
        if self._settings.safe_action is not None and self._realtime:
            return None  # the stall path sends the safe action
        raise HardwareError(
            f"no action from the policy server within {self._settings.connect_timeout_s} s"
            + (f" (the last request: {self._last_problem})" if self._last_problem else ""),
            where="policy.server",
            hint="check `rlctl policy serve` is running and reachable; "
            "--policy.connect_timeout_s waits longer",
        )

    def _stall_action(self) -> np.ndarray:
        if not self._stalled:
            self._stalled = True
            self.stalls += 1
            log.warning(
                "policy server: no fresh action, holding",
                tick=self._tick,
                holding="safe action" if self._settings.on_stall == "safe_action" else "last",
            )
        self.held_ticks += 1
        if self._settings.on_stall == "safe_action" or self._last is None:
            safe = np.asarray(self._settings.safe_action, dtype=np.float32)
            shape = self._last.shape if self._last is not None else (1, safe.shape[-1])
            return np.broadcast_to(safe, shape).copy()
        return self._last

    # --- the network's side -------------------------------------------------------------------

    def _work(self) -> None:
        backoff = FIRST_BACKOFF_S
        down = False
        deadline = self._settings.chunk_deadline_s
        while True:
            with self._cond:
                while self._slot is None and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                request = self._slot
                self._slot = None
                if request is None:
                    continue
                generation = self._generation
            sent = time.perf_counter()
            try:
                reply = self._client.predict(request, timeout=deadline)
                _check_usable(reply)
            except ChunkUnusable as err:
                self.chunks_unusable += 1
                self._last_problem = err.message
                if not self._realtime:
                    self._done(None, generation, error=err)
                    continue
                if not self._unusable_said:
                    self._unusable_said = True
                    log.warning(
                        "policy server: chunk unusable, holding; asking again with the next "
                        "observation",
                        reason=err.message,
                    )
                self._done(None, generation)
                continue
            except ChunkLate as err:
                self._last_problem = err.message
                log.warning("policy server: chunk past its deadline", deadline_s=deadline)
                self._done(None, generation)
                continue
            except (ServerUnavailable, ServerBusy) as err:
                self._last_problem = err.message
                if not down:
                    log.warning(
                        "policy server busy, asking again"
                        if isinstance(err, ServerBusy)
                        else "policy server unreachable, reconnecting",
                        error=err.message,
                    )
                down = True
                time.sleep(backoff)
                backoff = min(backoff * 2, self._settings.reconnect_max_s)
                self._done(None, generation)
                continue
            except RlctlError as err:
                self._done(None, generation, error=err)
                continue
            if down:
                log.info("policy server answering again")
                down, backoff = False, FIRST_BACKOFF_S
            if self._unusable_said:
                log.info("policy server: usable chunks again")
                self._unusable_said = False
            self._last_problem = None
            self.round_trips_s.append(time.perf_counter() - sent)
            self.inference_s.append(reply.inference_s)
            self._done(reply, generation)

    def _done(
        self, reply: ChunkReply | None, generation: int, error: RlctlError | None = None
    ) -> None:
        with self._cond:
            self._in_flight = False
            if generation == self._generation:
                if error is not None:
                    self._error = error
                if reply is not None:
                    self.delay.arrived(reply.timestep, self._executed)
                    self._queue.merge(reply.timestep, reply.actions, self._executed, self._merge)
                    self._chunk_size = reply.actions.shape[-2]
                    self.chunks_received += 1
            self._cond.notify_all()

    def _with_retries(self, call: Any) -> Any:
        give_up = time.monotonic() + self._settings.connect_timeout_s
        backoff = FIRST_BACKOFF_S
        while True:
            try:
                return call()
            except (ServerUnavailable, ServerBusy):
                if time.monotonic() + backoff > give_up:
                    raise
                time.sleep(backoff)
                backoff = min(backoff * 2, self._settings.reconnect_max_s)


def _check_usable(reply: ChunkReply) -> None:
    """Whatever a server sent, no NaN or infinity reaches the queue (or an arm)."""
    if first_non_finite({"actions": reply.actions}) is not None:
        raise ChunkUnusable(
            "the chunk holds NaN or infinite actions; none is used", where="policy.server"
        )


def _following(request: ChunkRequest, committed: CommittedActions | None) -> ChunkRequest:
    """`request` asking for a chunk that follows `committed` (real-time chunking)."""
    if committed is None:
        return request
    return attrs.evolve(
        request,
        committed=_host(committed.actions),
        inference_delay=committed.inference_delay,
        rtc=committed.rtc,
    )


def _host(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float32)


def _split(observation: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], list[str]]:
    arrays: dict[str, np.ndarray] = {}
    task: list[str] = []
    for key, value in observation.items():
        if key == "task":
            task = [value] if isinstance(value, str) else [str(t) for t in value]
            continue
        if hasattr(value, "detach"):
            value = value.detach().cpu().numpy()
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise InvalidInput(f"{key}: {array.dtype} values cannot be sent", where=key)
        arrays[key] = array
    return arrays, task


class GrpcPolicyConnector:
    """The `PolicyConnector` port over gRPC."""

    def connect(self, settings: RemotePolicySettings, *, realtime: bool = True) -> RemotePolicy:
        from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
        from rlctl.adapters.remote.grpc_server import is_loopback, read_token
        from rlctl.domain.remote_inference import parse_address

        if settings.server is None:
            raise InvalidInput("no policy server given", where="policy.server")
        token = read_token(settings.token_file)
        host, _ = parse_address(settings.server)
        if token is not None and settings.tls_cert is None and not is_loopback(host):
            log.warning(
                "the token goes to the policy server in clear (no TLS)",
                server=settings.server,
                hint="--policy.tls_cert=CERT when the server has --tls-cert, or an SSH tunnel",
            )
        client = GrpcPolicyClient(
            settings.server,
            token=token,
            tls_cert=Path(settings.tls_cert) if settings.tls_cert else None,
        )
        try:
            return RemotePolicy(client, settings, realtime=realtime)
        except BaseException:
            with contextlib.suppress(Exception):
                client.close()
            raise
