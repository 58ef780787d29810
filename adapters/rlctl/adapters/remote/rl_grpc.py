"""The actor/learner wire on gRPC: the learner's `LearnerEndpoint` and the actor's `LearnerLink`.

The learner serves `rl_service.proto` through the policy server's own machinery
(`GrpcPolicyServer.serve_methods`): the token checked before a message is read, admission caps,
size limits, connection bounds, one-line refusals. Pushed transitions are decoded and checked
(`rl_wire`, then the use case's `check`) in the handler and queued for the learner's loop; a
full queue is refused `RESOURCE_EXHAUSTED` with the busy mark (the actor keeps its transitions,
holds, backs off and sends them again). Any number of actors share one endpoint: their pushes
land in the one queue, and parameters are encoded once per version and handed to every actor
that asks.

The actor's link turns UNAVAILABLE and DEADLINE_EXCEEDED into `LearnerUnavailable` (it holds the
arm and reconnects), a busy learner (its queue full, or its admission cap) into `LearnerBusy`;
any other refusal is a `ServerRefused` naming it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from rlctl.adapters.remote import rl_service_pb2, rl_wire, wire
from rlctl.adapters.remote.errors import BUSY, REFUSAL_KEY, ServerRefused
from rlctl.adapters.remote.grpc_client import open_channel
from rlctl.adapters.remote.grpc_server import DEFAULT_MAX_MESSAGE_BYTES, GrpcPolicyServer
from rlctl.application.ports.reinforcement import (
    ActorHello,
    LearnerBusy,
    LearnerDescription,
    LearnerUnavailable,
    Pushed,
)
from rlctl.domain.errors import ConfigError
from rlctl.domain.remote_inference import ServerBusy
from rlctl.domain.rl.replay import TransitionBatch

_SERVICE = rl_service_pb2.DESCRIPTOR.services_by_name["LearnerService"]
SERVICE = _SERVICE.full_name  # rlctl.rl.v1.LearnerService
DEFAULT_QUEUE = 1_000


class GrpcLearnerEndpoint:
    def __init__(self, server: GrpcPolicyServer, *, max_queued: int = DEFAULT_QUEUE) -> None:
        self._server = server
        self._queue: queue.Queue[Pushed] = queue.Queue(maxsize=max_queued)
        self._lock = threading.Lock()
        self._version = 0
        self._weights = b""
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def start(
        self,
        describe: Callable[[ActorHello], LearnerDescription],
        check: Callable[[TransitionBatch], None],
    ) -> str:
        def answer_describe(body: bytes) -> bytes:
            description = describe(rl_wire.decode_hello(body))
            with self._lock:
                version = self._version
            return rl_wire.encode_description(
                LearnerDescription(description.config, description.stats, version)
            )

        def answer_push(body: bytes) -> bytes:
            batch, report = rl_wire.decode_push(body)
            if batch is not None:
                check(batch)
            try:
                self._queue.put_nowait(Pushed(batch, report))
            except queue.Full:
                raise _Busy(
                    f"the learner's queue is full ({self._queue.maxsize} batches waiting); "
                    "send again shortly",
                    where="transitions",
                ) from None
            with self._lock:
                version = self._version
            return rl_wire.encode_push_reply(0 if batch is None else len(batch), version)

        def answer_fetch(body: bytes) -> bytes:
            have = rl_wire.decode_fetch(body)
            with self._lock:
                version, weights = self._version, self._weights
            return rl_wire.encode_parameters(version, b"" if have == version else weights)

        answers = {
            "Describe": answer_describe,
            "PushTransitions": answer_push,
            "FetchParameters": answer_fetch,
        }
        ready = threading.Event()
        address: list[str] = []

        def on_ready(where: str) -> None:
            address.append(where)
            ready.set()

        def run() -> None:
            try:
                self._server.serve_methods(
                    SERVICE, answers, on_ready=on_ready, what="learner listening"
                )
            except BaseException as err:  # surfaced to the caller below
                self._failure = err
                ready.set()

        self._thread = threading.Thread(target=run, name="rl-learner-server", daemon=True)
        self._thread.start()
        ready.wait(timeout=30)
        if self._failure is not None:
            raise self._failure
        if not address:
            raise ConfigError("the learner's server did not start within 30 s", where="--port")
        return address[0]

    def take(self) -> list[Pushed]:
        out = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

    def publish(self, version: int, weights: Mapping[str, np.ndarray]) -> None:
        encoded = wire.encode_tensors(weights)
        with self._lock:
            self._version, self._weights = version, encoded

    def stop(self) -> None:
        self._server.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)


class _Busy(ServerBusy):
    """Raised inside a handler: the policy server's `_answer` refuses the call
    `RESOURCE_EXHAUSTED` with the busy mark, as its admission cap does."""


class GrpcLearnerLink:
    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        tls_cert: str | Path | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timeout_s: float = 10.0,
    ) -> None:
        self.address = address
        self._timeout = timeout_s
        self._channel, self._metadata = open_channel(
            address,
            token=token,
            tls_cert=tls_cert,
            max_message_bytes=max_message_bytes,
            reconnect_backoff_ms=100,
        )
        self._methods = {
            name: self._channel.unary_unary(f"/{SERVICE}/{name}")
            for name in ("Describe", "PushTransitions", "FetchParameters")
        }

    def describe(self, hello: ActorHello) -> LearnerDescription:
        # The first hello builds the learner's policy: give it longer than a push.
        body = self._call("Describe", rl_wire.encode_hello(hello), max(self._timeout, 60.0))
        return rl_wire.decode_description(body)

    def push(self, batch: TransitionBatch | None, report: Mapping[str, float] | None) -> int:
        return rl_wire.decode_push_reply(
            self._call("PushTransitions", rl_wire.encode_push(batch, report))
        )

    def fetch(self, have_version: int) -> tuple[int, dict[str, np.ndarray] | None]:
        return rl_wire.decode_parameters(
            self._call("FetchParameters", rl_wire.encode_fetch(have_version))
        )

    def send_raw(self, method: str, body: bytes) -> bytes:
        """Raw bytes to a method: what the tests use to send what no honest actor would."""
        return self._call(method, body)

    def _call(self, method: str, body: bytes, timeout: float | None = None) -> bytes:
        try:
            reply: bytes = self._methods[method](
                body, timeout=timeout or self._timeout, metadata=self._metadata
            )
            return reply
        except grpc.RpcError as err:
            code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
            details = (err.details() if hasattr(err, "details") else "") or ""
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise LearnerUnavailable(
                    f"the learner at {self.address} is unreachable ({code.name}): {details}",
                    where="--learner",
                    hint="is `rlctl rl learn` running there?",
                ) from None
            trailing = (
                dict(err.trailing_metadata() or ()) if hasattr(err, "trailing_metadata") else {}
            )
            if code is grpc.StatusCode.RESOURCE_EXHAUSTED and trailing.get(REFUSAL_KEY) == BUSY:
                raise LearnerBusy(
                    f"the learner is busy ({code.name}): {details}", where="--learner"
                ) from None
            raise ServerRefused(code.name, details, self.address) from None

    def close(self) -> None:
        self._channel.close()


def served_methods() -> list[str]:
    return [m.name for m in _SERVICE.methods if m.client_streaming and not m.server_streaming]


def learner_endpoint(server: GrpcPolicyServer, **options: Any) -> GrpcLearnerEndpoint:
    return GrpcLearnerEndpoint(server, **options)
