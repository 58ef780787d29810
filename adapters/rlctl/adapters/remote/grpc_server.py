"""The `PolicyServer` port on gRPC: the service of `policy_service.proto`, served on raw bytes.

The methods are the proto's, each declared taking a stream of one message: its handler runs
before that message is read, and decodes it itself (`wire`), so a malformed message gets
`INVALID_ARGUMENT` with the reason instead of gRPC's bare "Exception deserializing request".

Every call is checked before a byte of its message is read, cheapest first:

1. the token (constant-time compare), by an interceptor on the call's metadata: a call without
   a valid one is refused `UNAUTHENTICATED` with its message unread;
2. admission: at most `workers` requests at once, and `max_per_peer` from one host; past them a
   call is refused `RESOURCE_EXHAUSTED` at once instead of queueing (the methods are served as
   request-streaming, so a handler runs before its message is read);
3. the message's size (gRPC refuses one over the limit with `RESOURCE_EXHAUSTED` unread), then
   its bytes (`wire`: protobuf and safetensors): nothing a client sends is ever unpickled.

A call's message must arrive within `message_timeout_s` of its admission: a client that stalls
after its call's headers (its network gone mid-send, its process frozen) is cut off there, so
it holds its worker thread and its admission slots no longer; an honest client's own deadline
ends its call sooner. Without this bound the slots of a few such calls refused every other
client of that host (all actors on one robot computer share `max_per_peer`) for good.

Connections are bounded too: `max_connections` at once (the next ones are closed on arrival), a
connection that has not finished its handshake within seconds is closed, and one without calls
for `idle_timeout_s` is told to go. A refused call gets its status with a one-line reason, and
the server logs one line (the policy's traceback at debug level) and goes on serving the others.

Beyond this machine the token and the observations would cross the network in clear without
TLS: that needs `insecure=True`, said on purpose.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent import futures
from pathlib import Path
from typing import Any, NoReturn

import grpc
import structlog

from rlctl.adapters.remote import policy_service_pb2, wire
from rlctl.adapters.remote.errors import BUSY, NON_FINITE_CHUNK, REFUSAL_KEY
from rlctl.application.ports.policy_service import ChunkService
from rlctl.domain.errors import ConfigError, InvalidInput, RlctlError
from rlctl.domain.remote_inference import NonFiniteChunk, ServerBusy

log = structlog.get_logger()

_SERVICE = policy_service_pb2.DESCRIPTOR.services_by_name["PolicyService"]
SERVICE = _SERVICE.full_name  # rlctl.policy.v1.PolicyService
DEFAULT_MAX_MESSAGE_BYTES = 64 << 20
DEFAULT_WORKERS = 8
DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_IDLE_TIMEOUT_S = 300.0
DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0
# Longer than any client's own deadline (the robot's and the actor's are 10 s or less).
DEFAULT_MESSAGE_TIMEOUT_S = 30.0
# Threads beyond the admitted requests, so that refusals are answered while every admitted
# request waits on its policy.
SPARE_THREADS = 4
# Calls gRPC holds at once (admitted, being refused, waiting for a thread) per admitted one:
# past it gRPC itself answers RESOURCE_EXHAUSTED.
CALLS_PER_WORKER = 4
MAX_WORKERS = 1024
MAX_REASON_CHARS = 300


def read_token(path: str | Path | None) -> str | None:
    """The token in `path`, refused when others than its owner may read it (as ssh refuses a
    private key), or when it is too short to be a secret."""
    if path is None:
        return None
    file = Path(path).expanduser()
    try:
        with file.open() as handle:
            mode = os.fstat(handle.fileno()).st_mode
            token = handle.read().strip()
    except OSError as err:
        raise ConfigError(f"cannot read the token file: {err}", where=str(path)) from None
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"the token file is open to others (permissions {stat.S_IMODE(mode):04o}): "
            "anyone who can read it can drive the robot",
            where=str(path),
            hint=f"chmod 600 {file}",
        )
    if len(token) < 16:
        raise ConfigError(
            "a token must be at least 16 characters",
            where=str(path),
            hint="e.g. (umask 077; python -c 'import secrets; print(secrets.token_urlsafe(32))' "
            "> token)",
        )
    return token


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _count(value: Any, name: str, lowest: int, highest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lowest <= value <= highest:
        raise ConfigError(
            f"{name} must be a whole number within [{lowest}, {highest}], got {value!r}",
            where=f"--{name.replace('_', '-')}",
        )
    return value


def _milliseconds(seconds: Any, name: str) -> int:
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not 0 < seconds <= 86_400 * 365
    ):
        raise ConfigError(
            f"{name} must be a positive number of seconds, got {seconds!r}",
            where=f"--{name.replace('_', '-')}",
        )
    return max(1, int(seconds * 1000))


class GrpcPolicyServer:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        insecure: bool = False,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        workers: int = DEFAULT_WORKERS,
        max_per_peer: int | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S,
        message_timeout_s: float = DEFAULT_MESSAGE_TIMEOUT_S,
        handle_signals: bool = False,
    ) -> None:
        if (tls_cert is None) != (tls_key is None):
            raise ConfigError("TLS needs both --tls-cert and --tls-key", where="--tls-cert")
        if not is_loopback(host):
            if token is None:
                raise ConfigError(
                    f"serving on {host}, beyond this machine, needs a token",
                    where="--host",
                    hint="give --token-file (and --tls-cert/--tls-key), or serve on 127.0.0.1",
                )
            if tls_cert is None and not insecure:
                raise ConfigError(
                    f"serving on {host} without TLS sends the token, the observations and the "
                    "actions in clear to anyone on the network",
                    where="--host",
                    hint="give --tls-cert and --tls-key (robots pass --policy.tls_cert), reach "
                    "127.0.0.1 through an SSH tunnel, or add --insecure on a network you trust",
                )
        self.host, self.port = host, _count(port, "port", 0, 65535)
        self._token = token
        self._tls = (
            (Path(tls_cert).expanduser(), Path(tls_key).expanduser())
            if tls_cert and tls_key
            else None
        )
        self._max = _count(max_message_bytes, "max_message_bytes", 1024, (2**31) - 1)
        self._workers = _count(workers, "workers", 1, MAX_WORKERS)
        self._per_peer = _count(
            max_per_peer if max_per_peer is not None else max(1, self._workers // 2),
            "max_per_peer",
            1,
            self._workers,
        )
        self._max_connections = _count(max_connections, "max_connections", 1, 65535)
        self._idle_ms = _milliseconds(idle_timeout_s, "idle_timeout_s")
        self._handshake_ms = _milliseconds(handshake_timeout_s, "handshake_timeout_s")
        self._message_timeout_s = _milliseconds(message_timeout_s, "message_timeout_s") / 1000
        self._watchdog = _Watchdog()
        self._handle_signals = handle_signals
        self._server: Any = None
        self._stopped = threading.Event()
        self._admission = threading.Lock()
        self._in_flight = 0
        self._by_peer: dict[str, int] = {}
        self._refusals = _Throttled()
        # What a test or a status line reads: message bytes read from admitted calls.
        self.bytes_read = 0

    def serve(
        self, service: ChunkService, *, on_ready: Callable[[str], None] | None = None
    ) -> None:
        answers: dict[str, Callable[[bytes], bytes]] = {
            "Describe": lambda body: _describe(service, body),
            "Predict": lambda body: _predict(service, body),
        }
        self.serve_methods(SERVICE, answers, on_ready=on_ready)

    def serve_methods(
        self,
        service_name: str,
        answers: Mapping[str, Callable[[bytes], bytes]],
        *,
        on_ready: Callable[[str], None] | None = None,
        what: str = "serving policies",
    ) -> None:
        """Serve `answers` (method name -> raw request bytes to raw reply bytes) as the gRPC
        service `service_name`, each method a stream of one message, behind this server's token,
        admission caps, size limits and refusals (another service reuses them: the RL learner's).
        Blocks until `stop()`."""
        self._watchdog = _Watchdog()
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._workers + SPARE_THREADS),
            interceptors=(_TokenGate(self._token, self._refusals),),
            options=[
                ("grpc.max_receive_message_length", self._max),
                ("grpc.max_send_message_length", self._max),
                ("grpc.so_reuseport", 0),
                ("grpc.max_allowed_incoming_connections", self._max_connections),
                ("grpc.max_concurrent_streams", self._workers + SPARE_THREADS),
                ("grpc.server_handshake_timeout_ms", self._handshake_ms),
                ("grpc.max_connection_idle_ms", self._idle_ms),
                # No flow-control window grown by bandwidth probes: a stream the token gate
                # refuses can then have sent no more than the initial window before its reset,
                # where grown windows let a flood park megabytes per stream in the server.
                ("grpc.http2.bdp_probe", 0),
            ],
            maximum_concurrent_rpcs=(self._workers + SPARE_THREADS) * CALLS_PER_WORKER,
        )
        handlers = {method: self._handler(answer) for method, answer in answers.items()}
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service_name, handlers),)
        )
        where = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        if self._tls is not None:
            try:
                cert, key = (p.read_bytes() for p in self._tls)
            except OSError as err:
                raise ConfigError(f"cannot read the TLS files: {err}", where="--tls-cert") from None
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
        log.info(
            what,
            address=address,
            tls=self._tls is not None,
            workers=self._workers,
            per_peer=self._per_peer,
            max_connections=self._max_connections,
        )
        if on_ready is not None:
            on_ready(address)
        self._stopped.wait()
        server.stop(grace=1.0).wait()
        self._watchdog.stop()

    def stop(self) -> None:
        self._stopped.set()

    @property
    def in_flight(self) -> int:
        """Requests admitted and not answered yet."""
        with self._admission:
            return self._in_flight

    # --- one call ---------------------------------------------------------------------------

    def _handler(self, answer: Callable[[bytes], bytes]) -> grpc.RpcMethodHandler:
        def handle(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
            peer = context.peer()
            # The interceptor refused calls without the token; checked again, cheaply, here.
            if not _authorised(self._token, context.invocation_metadata()):
                _abort(context, grpc.StatusCode.UNAUTHENTICATED, "a valid token is required")
            host = _peer_host(peer)
            refusal = self._admit(host)
            if refusal is not None:
                self._refusals.warn("refused: busy", peer=peer, reason=refusal)
                context.set_trailing_metadata(((REFUSAL_KEY, BUSY),))
                _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
            try:
                body = self._awaited_message(requests, context, peer)
                self.bytes_read += len(body)
                return self._answer(answer, body, peer, context)
            finally:
                self._release(host)

        return grpc.stream_unary_rpc_method_handler(handle)

    def _awaited_message(
        self, requests: Iterator[bytes], context: grpc.ServicerContext, peer: str
    ) -> bytes:
        """The call's one message, or the call cancelled once `message_timeout_s` has passed
        without it (gRPC's request iterator itself waits without a bound)."""
        ticket = self._watchdog.arm(context, self._message_timeout_s)
        try:
            return _one_message(requests, context)
        except BaseException:
            if ticket.expired:
                self._refusals.warn(
                    "dropped a call: its message did not arrive",
                    peer=peer,
                    within_s=self._message_timeout_s,
                )
            raise
        finally:
            self._watchdog.disarm(ticket)

    def _answer(
        self,
        answer: Callable[[bytes], bytes],
        body: bytes,
        peer: str,
        context: grpc.ServicerContext,
    ) -> bytes:
        try:
            return answer(body)
        except ServerBusy as err:
            # A service's own "full, ask again" (the RL learner's queue): what the admission cap
            # answers, so the caller backs off and sends again.
            self._refusals.warn("refused: busy", peer=peer, reason=_text(err))
            context.set_trailing_metadata(((REFUSAL_KEY, BUSY),))
            _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, _text(err))
        except InvalidInput as err:
            log.warning("refused a request", peer=peer, reason=_text(err))
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, _text(err))
        except ConfigError as err:
            log.warning("refused a request", peer=peer, reason=_text(err))
            _abort(context, grpc.StatusCode.NOT_FOUND, _text(err))
        except NonFiniteChunk as err:
            log.warning("refused to send a chunk", peer=peer, reason=_text(err))
            context.set_trailing_metadata(((REFUSAL_KEY, NON_FINITE_CHUNK),))
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, _text(err))
        except RlctlError as err:
            log.warning("refused a request", peer=peer, reason=_text(err))
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, _text(err))
        except Exception as err:
            reason = f"the policy failed on this request: {one_line(err)}"
            log.error("the policy failed on a request", peer=peer, reason=one_line(err))
            log.debug("the policy's traceback", exc_info=True)
            _abort(context, grpc.StatusCode.INTERNAL, reason)

    def _admit(self, host: str) -> str | None:
        with self._admission:
            if self._in_flight >= self._workers:
                return (
                    f"the server is busy: {self._in_flight} requests in flight (--workers); "
                    "try again"
                )
            if self._by_peer.get(host, 0) >= self._per_peer:
                return (
                    f"{self._per_peer} requests from {host} in flight already "
                    "(--max-per-peer); wait for their answers"
                )
            self._in_flight += 1
            self._by_peer[host] = self._by_peer.get(host, 0) + 1
            return None

    def _release(self, host: str) -> None:
        with self._admission:
            self._in_flight -= 1
            left = self._by_peer.get(host, 1) - 1
            if left:
                self._by_peer[host] = left
            else:
                self._by_peer.pop(host, None)


class _TokenGate(grpc.ServerInterceptor):  # type: ignore[misc]
    """Refuses a call without the token from its metadata alone: its message is never read."""

    def __init__(self, token: str | None, refusals: _Throttled) -> None:
        self._token = token
        self._refusals = refusals

        def refuse(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
            self._refusals.warn("refused: no valid token", peer=context.peer())
            _abort(context, grpc.StatusCode.UNAUTHENTICATED, "a valid token is required")

        self._refuse = grpc.stream_unary_rpc_method_handler(refuse)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        if not _authorised(self._token, details.invocation_metadata):
            return self._refuse
        return continuation(details)


class _Ticket:
    __slots__ = ("context", "deadline", "expired")

    def __init__(self, context: grpc.ServicerContext, deadline: float) -> None:
        self.context = context
        self.deadline = deadline
        self.expired = False


class _Watchdog:
    """Cancels the calls whose message has not arrived by their deadline: one thread for all
    of them (started with the first), waking at the earliest deadline."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._tickets: set[_Ticket] = set()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def arm(self, context: grpc.ServicerContext, timeout_s: float) -> _Ticket:
        ticket = _Ticket(context, time.monotonic() + timeout_s)
        with self._lock:
            self._tickets.add(ticket)
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(
                    target=self._run, name="grpc-message-watchdog", daemon=True
                )
                self._thread.start()
            self._lock.notify()
        return ticket

    def disarm(self, ticket: _Ticket) -> None:
        with self._lock:
            self._tickets.discard(ticket)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                now = time.monotonic()
                due = [t for t in self._tickets if t.deadline <= now]
                for ticket in due:
                    ticket.expired = True
                    self._tickets.discard(ticket)
                if not due:
                    nearest = min((t.deadline for t in self._tickets), default=now + 60.0)
                    self._lock.wait(timeout=max(0.0, nearest - now))
                    continue
            for ticket in due:
                # Wakes the handler's wait for the message; it ends and frees its slots.
                ticket.context.cancel()


class _Throttled:
    """A warning per second at most, with how many like it were not logged: a flood of
    refused calls must not become a flood of log lines."""

    def __init__(self, every_s: float = 1.0) -> None:
        self._every = every_s
        self._lock = threading.Lock()
        self._next: dict[str, float] = {}
        self._quiet: dict[str, int] = {}

    def warn(self, event: str, **fields: Any) -> None:
        now = time.monotonic()
        with self._lock:
            if now < self._next.get(event, 0.0):
                self._quiet[event] = self._quiet.get(event, 0) + 1
                return
            self._next[event] = now + self._every
            quiet = self._quiet.pop(event, 0)
        log.warning(event, **fields, **({"not_logged": quiet} if quiet else {}))


def _authorised(token: str | None, metadata: Any) -> bool:
    if token is None:
        return True
    sent = ""
    for key, value in metadata or ():
        if key == "authorization":
            sent = value
    expected = f"Bearer {token}"
    return isinstance(sent, str) and hmac.compare_digest(sent.encode(), expected.encode())


def _one_message(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
    # The first message is the request; a client that streams more is answered on the first.
    body = next(requests, None)
    if body is None:
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "a call carries one message")
    return body


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, details: str) -> NoReturn:
    context.abort(code, details)
    raise AssertionError("unreachable: abort raises")


def _peer_host(peer: str) -> str:
    # "ipv4:10.0.0.7:51234", "ipv6:[::1]:51234": the host, whatever port the connection has.
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        return rest.rpartition(":")[0] or rest
    return peer


def served_methods(service: Any = None) -> list[str]:
    """The proto's methods (`service`: a service descriptor; the policy service by default),
    each taking a stream of one message and answering one: what the handlers serve (and a test
    checks)."""
    names = []
    for method in (service or _SERVICE).methods:
        if not method.client_streaming or method.server_streaming:
            raise AssertionError(f"{method.name} must take a stream of one message, answer one")
        names.append(method.name)
    return names


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
