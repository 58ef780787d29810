"""TLS and the token on an in-process gRPC server (no policy process: the scripted service)."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.policy_server import ScriptedChunkService
from rlctl.adapters.remote.errors import ServerRefused, ServerUnavailable
from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
from rlctl.adapters.remote.grpc_server import GrpcPolicyServer
from rlctl.domain.errors import ConfigError
from rlctl.domain.remote_inference import ChunkRequest

TOKEN = "another-token-for-the-tls-test-0123"
REQUEST = ChunkRequest(observation={"observation.state": np.zeros((1, 2), np.float32)})


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_with_a_token(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    server = GrpcPolicyServer(port=0, token=TOKEN, tls_cert=cert, tls_key=key)
    ready = threading.Event()
    service = ScriptedChunkService(4)
    thread = threading.Thread(
        target=server.serve, args=(service,), kwargs={"on_ready": lambda _: ready.set()}
    )
    thread.start()
    try:
        assert ready.wait(30)
        address = f"localhost:{server.port}"
        secure = GrpcPolicyClient(address, token=TOKEN, tls_cert=cert)
        assert secure.predict(REQUEST, timeout=10).actions.shape == (1, 4, 2)
        with pytest.raises(ServerRefused, match="UNAUTHENTICATED"):
            GrpcPolicyClient(address, tls_cert=cert).predict(REQUEST, timeout=10)
        with pytest.raises(ServerUnavailable):  # plaintext to a TLS port: no connection
            GrpcPolicyClient(address, token=TOKEN).predict(REQUEST, timeout=10)
    finally:
        server.stop()
        thread.join(10)


def test_beyond_loopback_a_token_is_required() -> None:
    with pytest.raises(ConfigError, match="needs a token"):
        GrpcPolicyServer(host="0.0.0.0", port=0)
