"""The robot's end of the wire: the two calls of `policy_service.proto` (Describe, Predict).

Each method takes a stream of one message; on the wire that is exactly a unary call, which is
how this client makes it (the generated stub's streaming call spends a thread per call: half a
millisecond a round trip here). Messages are written and read by `wire`.

gRPC reconnects a channel by itself; a call made while the server is away fails at once with
UNAVAILABLE (no wait-for-ready), so the caller decides how to wait. Failures become errors the
`RemotePolicy` can tell apart: the server away, the deadline passed, a refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import grpc

from rlctl.adapters.remote import wire
from rlctl.adapters.remote.errors import (
    BUSY,
    NON_FINITE_CHUNK,
    REFUSAL_KEY,
    ChunkLate,
    ChunkUnusable,
    ServerBusy,
    ServerRefused,
    ServerUnavailable,
)
from rlctl.adapters.remote.grpc_server import DEFAULT_MAX_MESSAGE_BYTES, SERVICE
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.remote_inference import ChunkReply, ChunkRequest, PolicyDescription


class GrpcPolicyClient:
    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        tls_cert: str | Path | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.address = address
        self._channel, self._metadata = open_channel(
            address, token=token, tls_cert=tls_cert, max_message_bytes=max_message_bytes
        )
        self._describe = self._channel.unary_unary(f"/{SERVICE}/Describe")
        self._predict = self._channel.unary_unary(f"/{SERVICE}/Predict")

    def describe(
        self,
        policy: str = "",
        provided: Mapping[str, FeatureSpec] | None = None,
        *,
        timeout: float = 10.0,
    ) -> PolicyDescription:
        body = self._call(self._describe, wire.encode_describe(policy, provided), timeout)
        return wire.decode_description(body)

    def predict(self, request: ChunkRequest, *, timeout: float) -> ChunkReply:
        return wire.decode_reply(self.send_predict(wire.encode_request(request), timeout=timeout))

    def send_predict(self, body: bytes, *, timeout: float) -> bytes:
        """Raw bytes to Predict: what the tests use to send what no honest client would."""
        return self._call(self._predict, body, timeout)

    def _call(self, method: Any, body: bytes, timeout: float) -> bytes:
        try:
            reply: bytes = method(body, timeout=timeout, metadata=self._metadata)
            return reply
        except grpc.RpcError as err:
            code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
            details = (err.details() if hasattr(err, "details") else "") or ""
            if code == grpc.StatusCode.UNAVAILABLE:
                raise ServerUnavailable(
                    f"the policy server at {self.address} is unreachable: {details}",
                    where="policy.server",
                    hint="is `rlctl policy serve` running there?",
                ) from None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise ChunkLate(
                    f"no answer within {timeout:.3f} s", where="policy.server"
                ) from None
            refusal = _refusal(err)
            if refusal == NON_FINITE_CHUNK:
                raise ChunkUnusable(details, where="policy.server") from None
            if refusal == BUSY or (
                # gRPC's own bound on the calls a server holds at once.
                code == grpc.StatusCode.RESOURCE_EXHAUSTED
                and details.startswith("Concurrent RPC limit exceeded")
            ):
                raise ServerBusy(details, where="policy.server") from None
            raise ServerRefused(code.name, details, self.address) from None

    def close(self) -> None:
        self._channel.close()


def open_channel(
    address: str,
    *,
    token: str | None,
    tls_cert: str | Path | None,
    max_message_bytes: int,
    reconnect_backoff_ms: int = 50,
) -> tuple[grpc.Channel, tuple[tuple[str, str], ...]]:
    """A channel to `address` (TLS when `tls_cert` names the server's certificate) and the
    metadata that carries the token: what every rlctl client (policy, learner) opens."""
    options = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        # Come back quickly after a server restart instead of gRPC's default (up to 120 s).
        ("grpc.initial_reconnect_backoff_ms", reconnect_backoff_ms),
        ("grpc.min_reconnect_backoff_ms", reconnect_backoff_ms),
        ("grpc.max_reconnect_backoff_ms", 1000),
        ("grpc.enable_retries", 0),
    ]
    if tls_cert is not None:
        try:
            root = Path(tls_cert).expanduser().read_bytes()
        except OSError as err:
            raise ConfigError(
                f"cannot read the TLS certificate: {err}", where=str(tls_cert)
            ) from None
        credentials = grpc.ssl_channel_credentials(root_certificates=root)
        channel = grpc.secure_channel(address, credentials, options=options)
    else:
        channel = grpc.insecure_channel(address, options=options)
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    return channel, metadata


def _refusal(err: grpc.RpcError) -> str | None:
    trailing = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    return dict(trailing or ()).get(REFUSAL_KEY)
