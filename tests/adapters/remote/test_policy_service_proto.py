"""The service is the one `policy_service.proto` describes: the generated modules checked in
beside it are what protoc makes of it now, and the server and the wire follow it."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import attrs
import grpc
import numpy as np

from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.adapters.remote import policy_service_pb2 as pb
from rlctl.adapters.remote import policy_service_pb2_grpc, wire
from rlctl.adapters.remote.grpc_server import SERVICE, GrpcPolicyServer, served_methods
from rlctl.application.use_cases.serve_policy import PolicyService
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.rtc import RTCConfig
from rlctl.domain.remote_inference import ChunkRequest

REPO = Path(__file__).resolve().parents[3]
PROTO = Path("rlctl/adapters/remote/policy_service.proto")
GENERATED = ("policy_service_pb2.py", "policy_service_pb2.pyi", "policy_service_pb2_grpc.py")


def test_the_generated_modules_are_up_to_date_with_the_proto(tmp_path: Path) -> None:
    # The command the .proto's header gives, into a temporary folder.
    outputs = [f"--{kind}_out={tmp_path}" for kind in ("python", "pyi", "grpc_python")]
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-Iadapters", *outputs, f"adapters/{PROTO}"],
        cwd=REPO,
        check=True,
        timeout=120,
    )
    for name in GENERATED:
        fresh = (tmp_path / PROTO.parent / name).read_text()
        checked_in = (REPO / "adapters" / PROTO.parent / name).read_text()
        assert checked_in == fresh, (
            f"{name} is stale: regenerate it as policy_service.proto's header says"
        )


def test_the_server_serves_each_method_of_the_proto_as_a_stream_of_one_message() -> None:
    service = pb.DESCRIPTOR.services_by_name["PolicyService"]
    assert SERVICE == service.full_name == "rlctl.policy.v1.PolicyService"
    assert served_methods() == ["Describe", "Predict"] == [m.name for m in service.methods]
    # Streaming requests: the handler runs (token, admission) before the message is read.
    assert all(m.client_streaming and not m.server_streaming for m in service.methods)


def test_the_rtc_settings_message_carries_every_rtc_config_setting() -> None:
    assert [f.name for f in pb.RTCSettings.DESCRIPTOR.fields] == [
        f.name for f in attrs.fields(RTCConfig)
    ]


def test_a_client_generated_from_the_proto_is_served_as_rlctls_own() -> None:
    # Any gRPC client made from policy_service.proto: the generated stub, streaming one message.
    state = {"observation.state": typed_feature("STATE", (2,), "observation.state")}
    service = PolicyService({"scripted": ScriptedPolicy(2, chunk_size=3, input_features=state)})
    server = GrpcPolicyServer(port=0)
    ready = threading.Event()
    thread = threading.Thread(
        target=server.serve, args=(service,), kwargs={"on_ready": lambda _: ready.set()}
    )
    thread.start()
    try:
        assert ready.wait(30)
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = policy_service_pb2_grpc.PolicyServiceStub(channel)
            described = stub.Describe(iter([pb.DescribeRequest()]), timeout=10)
            assert described.name == "scripted" and described.actions_per_chunk == 3
            request = ChunkRequest(
                observation={"observation.state": np.ones((1, 2), np.float32)}, timestep=4
            )
            reply = stub.Predict(iter([wire.request_message(request)]), timeout=10)
            assert isinstance(reply, pb.ChunkReply) and reply.timestep == 4
            assert wire.reply_from(reply).actions.shape == (1, 3, 2)
    finally:
        server.stop()
        thread.join(10)


def test_the_fast_request_encoding_is_the_generated_message() -> None:
    request = ChunkRequest(
        observation={"observation.images.top": np.ones((1, 3, 300, 400), np.float32)},
        task=("pick",),
        timestep=7,
        max_actions=5,
        committed=np.zeros((1, 2, 3), np.float32),
        inference_delay=1,
        rtc=RTCConfig(),
    )
    assert pb.ChunkRequest.FromString(wire.encode_request(request)) == wire.request_message(request)
