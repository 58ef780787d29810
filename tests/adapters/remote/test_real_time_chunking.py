"""Real-time chunking through the policy server: the robot sends the actions still queued and the
measured delay with its observation (as data), the served policy is asked with them, and the
chunk that comes back replaces the queue."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import pytest

from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.adapters.remote import policy_service_pb2 as pb
from rlctl.adapters.remote import wire
from rlctl.adapters.remote.remote_policy import GrpcPolicyConnector
from rlctl.application.use_cases.serve_policy import PolicyService
from rlctl.domain.errors import InvalidInput
from rlctl.domain.policies.rtc import RTCConfig
from rlctl.domain.remote_inference import ChunkRequest, RemotePolicySettings

STEPS = 10


def from_the_tick(batch: Mapping[str, Any]) -> np.ndarray:
    """The chunk for an observation taken at tick t (its state) acts t, t + 1, …"""
    start = np.asarray(batch["observation.state"])[:, :1, None]  # (batch, 1, 1)
    ticks = start + np.arange(STEPS, dtype=np.float32)[None, :, None]
    return np.repeat(ticks, 2, axis=2)


def test_the_committed_actions_and_settings_travel_as_data() -> None:
    rtc = RTCConfig(execution_horizon=4, prefix_attention_schedule="EXP")
    committed = np.arange(12, dtype=np.float32).reshape(1, 6, 2)
    request = ChunkRequest(
        observation={"observation.state": np.zeros((1, 2), np.float32)},
        committed=committed,
        inference_delay=3,
        rtc=rtc,
    )
    back = wire.decode_request(wire.encode_request(request))
    np.testing.assert_array_equal(back.committed, committed)
    assert (back.inference_delay, back.rtc) == (3, rtc)
    assert set(back.observation) == {"observation.state"}
    plain = wire.decode_request(wire.encode_request(ChunkRequest(observation=request.observation)))
    assert plain.committed is None and plain.rtc is None


SETTINGS = attrs.asdict(RTCConfig())


@pytest.mark.parametrize(
    ("settings", "committed", "complaint"),
    [
        ({"execution_horizon": 0}, {"actions": np.zeros((1, 3, 2), np.float32)}, "horizon"),
        ({"prefix_attention_schedule": "x"}, {"actions": np.zeros((1, 3, 2))}, "rtc settings"),
        (b"\x38\x03", {"actions": np.zeros((1, 3, 2), np.float32)}, "RTCSettings message"),
        (None, {"actions": np.zeros((1, 3, 2), np.float32)}, "rtc settings"),
        ({}, {"actions": np.zeros((3, 2), np.float32)}, "batch, steps, action_dim"),
        ({}, {"actions": np.zeros((1, 3, 2), np.int64)}, "are floats"),
        ({}, {"queued": np.zeros((1, 3, 2), np.float32)}, "one tensor named 'actions'"),
    ],
)
def test_malformed_committed_actions_are_refused(
    settings: dict[str, Any] | bytes | None, committed: dict[str, np.ndarray], complaint: str
) -> None:
    rtc = pb.RealTimeChunking(committed=wire.encode_tensors(committed), inference_delay=1)
    if isinstance(settings, bytes):  # a field RTCSettings does not have (7: "horizon")
        rtc.settings.CopyFrom(pb.RTCSettings(**SETTINGS))
        rtc.settings.MergeFromString(settings)
    elif settings is not None:
        rtc.settings.CopyFrom(pb.RTCSettings(**{**SETTINGS, **settings}))
    message = pb.ChunkRequest(
        observation=wire.encode_tensors({"observation.state": np.zeros((1, 2), np.float32)}),
        rtc=rtc,
    )
    with pytest.raises(InvalidInput, match=complaint):
        wire.decode_request(message.SerializeToString())


def test_a_served_policy_is_asked_with_what_the_robot_has_queued() -> None:
    from rlctl.adapters.remote.grpc_server import GrpcPolicyServer

    served = ScriptedPolicy(2, chunk_size=STEPS, chunker=from_the_tick)
    server = GrpcPolicyServer(port=0)
    ready = threading.Event()
    thread = threading.Thread(
        target=server.serve,
        args=(PolicyService({"vla": served}),),
        kwargs={"on_ready": lambda _: ready.set()},
    )
    thread.start()
    try:
        assert ready.wait(30)
        rtc = RTCConfig(execution_horizon=3)
        settings = RemotePolicySettings(server=f"127.0.0.1:{server.port}", rtc_config=rtc)
        robot = GrpcPolicyConnector().connect(settings, realtime=False)
        executed = []
        for tick in range(16):
            state = np.full((1, 2), tick, np.float32)
            executed.append(float(robot.select_action({"observation.state": state})[0, 0]))
        robot.close()
    finally:
        server.stop()
        thread.join(10)
    # Every tick acted on its own action: chunks replaced the queue where they arrived.
    assert executed == list(range(16))
    asked = served.committed
    assert asked[0] is None  # nothing queued before the first chunk
    later = [c for c in asked[1:] if c is not None]
    assert later, "no request carried the queued actions"
    for committed, observed in zip(asked[1:], served.predicted_from[1:], strict=True):
        assert committed is not None and committed.rtc == rtc
        tick = float(np.asarray(observed["observation.state"])[0, 0])
        # The queued actions from the observation's tick on, up to the execution horizon.
        np.testing.assert_array_equal(committed.actions[0, :, 0], tick + np.arange(3))
    # Measured: the first chunk was waited for (0 ticks); every later one arrived after the
    # tick it was asked at had acted on the queue, so the delay sent grows to at least 1.
    delays = [c.inference_delay for c in later]
    assert delays[0] == 0 and min(delays[1:]) >= 1, delays
