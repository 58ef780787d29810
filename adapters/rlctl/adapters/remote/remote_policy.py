"""`RemotePolicy`: the `Policy` port served by a policy server, for a robot's control loop.

It is the acting engine (`rlctl.application.acting_engine.AsyncActing`) over the gRPC client:
the loop calls `select_action` once a tick and never waits on the network; chunks are merged
into a queue as they arrive, a tick with nothing queued holds, and a late or unusable chunk is
never acted on. The same engine runs a model in this process (`--inference.type=async|rtc` of
`rlctl rollout`), so local and remote acting differ only in where the chunk is computed.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import structlog

from rlctl.application.acting_engine import AsyncActing
from rlctl.application.ports.policy_service import ChunkClient
from rlctl.domain.errors import InvalidInput
from rlctl.domain.remote_inference import RemotePolicySettings

log = structlog.get_logger()


class RemotePolicy(AsyncActing):
    """The acting engine over a policy server's client."""

    def __init__(
        self,
        client: ChunkClient,
        settings: RemotePolicySettings,
        *,
        realtime: bool = True,
        queue_threshold: int | None = None,
    ) -> None:
        super().__init__(
            client,
            settings,
            realtime=realtime,
            label="policy server",
            queue_threshold=queue_threshold,
        )


class GrpcPolicyConnector:
    """The `PolicyConnector` port over gRPC."""

    def connect(
        self,
        settings: RemotePolicySettings,
        *,
        realtime: bool = True,
        queue_threshold: int | None = None,
    ) -> RemotePolicy:
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
            return RemotePolicy(
                client, settings, realtime=realtime, queue_threshold=queue_threshold
            )
        except BaseException:
            with contextlib.suppress(Exception):
                client.close()
            raise
