"""The `PolicyServer` port on gRPC: generic handlers over raw bytes (no generated code).

Every call is checked before the service sees it: the token (constant-time compare), the message
size (gRPC refuses a message over the limit with RESOURCE_EXHAUSTED before reading it), then the
bytes themselves (`wire.decode`). A refused call gets its status and the server goes on serving
the others; nothing a client sends is ever unpickled, because nothing here unpickles.
"""

from __future__ import annotations

import hmac
import ipaddress
import signal
import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import structlog

from rlctl.adapters.remote import wire
from rlctl.adapters.remote.errors import NON_FINITE_CHUNK, REFUSAL_KEY
from rlctl.application.ports.policy_service import ChunkService
from rlctl.domain.errors import ConfigError, InvalidInput, RlctlError
from rlctl.domain.remote_inference import NonFiniteChunk

log = structlog.get_logger()

SERVICE = "rlctl.policy.v1.PolicyService"
DEFAULT_MAX_MESSAGE_BYTES = 64 << 20
MAX_REASON_CHARS = 300


def read_token(path: str | Path | None) -> str | None:
    if path is None:
        return None
    try:
        token = Path(path).expanduser().read_text().strip()
    except OSError as err:
        raise ConfigError(f"cannot read the token file: {err}", where=str(path)) from None
    if len(token) < 16:
        raise ConfigError(
            "a token must be at least 16 characters",
            where=str(path),
            hint="e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))' > token",
        )
    return token


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class GrpcPolicyServer:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        workers: int = 8,
        handle_signals: bool = False,
    ) -> None:
        if not is_loopback(host) and token is None:
            raise ConfigError(
                f"serving on {host}, beyond this machine, needs a token",
                where="--host",
                hint="give --token-file (and --tls-cert/--tls-key), or serve on 127.0.0.1",
            )
        if (tls_cert is None) != (tls_key is None):
            raise ConfigError("TLS needs both --tls-cert and --tls-key", where="--tls-cert")
        self.host, self.port = host, port
        self._token = token
        self._tls = (
            (Path(tls_cert).expanduser(), Path(tls_key).expanduser())
            if tls_cert and tls_key
            else None
        )
        self._max = max_message_bytes
        self._workers = workers
        self._handle_signals = handle_signals
        self._server: Any = None
        self._stopped = threading.Event()

    def serve(
        self, service: ChunkService, *, on_ready: Callable[[str], None] | None = None
    ) -> None:
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._workers),
            options=[
                ("grpc.max_receive_message_length", self._max),
                ("grpc.max_send_message_length", self._max),
                ("grpc.so_reuseport", 0),
            ],
        )
        handlers = {
            "Describe": self._unary(lambda body: _describe(service, body)),
            "Predict": self._unary(lambda body: _predict(service, body)),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        where = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        if self._tls is not None:
            cert, key = (p.read_bytes() for p in self._tls)
            port = server.add_secure_port(where, grpc.ssl_server_credentials([(key, cert)]))
        else:
            port = server.add_insecure_port(where)
        if not port:
            raise ConfigError(f"cannot listen on {where}", where="--port")
        self.port = port
        server.start()
        self._server = server
        if self._handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        address = f"{self.host}:{port}"
        log.info("serving policies", address=address, tls=self._tls is not None)
        if on_ready is not None:
            on_ready(address)
        self._stopped.wait()
        server.stop(grace=1.0).wait()

    def stop(self) -> None:
        self._stopped.set()

    def _unary(self, answer: Callable[[bytes], bytes]) -> grpc.RpcMethodHandler:
        def handle(body: bytes, context: grpc.ServicerContext) -> bytes:
            if not self._authorised(context):
                log.warning("refused: no valid token", peer=context.peer())
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "a valid token is required")
            try:
                return answer(body)
            except InvalidInput as err:
                log.warning("refused a malformed request", peer=context.peer(), error=err.message)
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, _text(err))
            except ConfigError as err:
                context.abort(grpc.StatusCode.NOT_FOUND, _text(err))
            except NonFiniteChunk as err:
                log.warning("refused to send a chunk", peer=context.peer(), reason=_text(err))
                context.set_trailing_metadata(((REFUSAL_KEY, NON_FINITE_CHUNK),))
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, _text(err))
            except RlctlError as err:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, _text(err))
            except Exception as err:
                reason = f"the policy failed on this request: {one_line(err)}"
                log.error(
                    "the policy failed on a request", peer=context.peer(), reason=one_line(err)
                )
                log.debug("the policy's traceback", exc_info=True)
                context.abort(grpc.StatusCode.INTERNAL, reason)
            raise AssertionError("unreachable: abort raises")

        return grpc.unary_unary_rpc_method_handler(handle)

    def _authorised(self, context: grpc.ServicerContext) -> bool:
        if self._token is None:
            return True
        sent = dict(context.invocation_metadata()).get("authorization", "")
        expected = f"Bearer {self._token}"
        return isinstance(sent, str) and hmac.compare_digest(sent.encode(), expected.encode())


def _describe(service: ChunkService, body: bytes) -> bytes:
    policy, provided = wire.decode_describe(body)
    return wire.encode_description(service.describe(policy, provided))


def _predict(service: ChunkService, body: bytes) -> bytes:
    return wire.encode_reply(service.predict(wire.decode_request(body)))


def one_line(err: BaseException) -> str:
    """`Type: message`, on one line and cut short: what a client is told of a failure."""
    text = " ".join(str(err).split())
    line = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return line if len(line) <= MAX_REASON_CHARS else line[: MAX_REASON_CHARS - 1] + "…"


def _text(err: RlctlError) -> str:
    where = f" ({err.where})" if err.where else ""
    hint = f"; {err.hint}" if err.hint else ""
    return " ".join(f"{err.message}{where}{hint}".split())
