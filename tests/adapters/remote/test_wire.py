"""The wire format (policy_service.proto's messages, tensors as safetensors) carries data only,
and refuses what it cannot check, saying why."""

from __future__ import annotations

import json
import pickle
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlctl.adapters.remote import policy_service_pb2 as pb
from rlctl.adapters.remote import wire
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureKind, FeatureSpec, typed_feature
from rlctl.domain.policies.rtc import RTCConfig
from rlctl.domain.remote_inference import ChunkReply, ChunkRequest, PolicyDescription

DTYPES = st.sampled_from(["float32", "float64", "float16", "uint8", "int32", "int64", "bool"])


@given(
    arrays=st.dictionaries(
        st.text("abcdefgh.", min_size=1, max_size=12),
        DTYPES.flatmap(lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=0, max_dims=4))),
        max_size=4,
    ),
)
def test_tensors_round_trip(arrays: dict[str, np.ndarray]) -> None:
    tensors = wire.decode_tensors(wire.encode_tensors(arrays), "test")
    assert set(tensors) == set(arrays)
    for name, array in arrays.items():
        assert tensors[name].dtype == array.dtype and tensors[name].shape == array.shape
        np.testing.assert_array_equal(tensors[name], array)


@given(task=st.lists(st.text(max_size=20), max_size=3), timestep=st.integers(0, 2**53))
def test_requests_and_replies_round_trip(task: list[str], timestep: int) -> None:
    request = ChunkRequest(
        observation={"observation.state": np.arange(6, dtype=np.float32).reshape(1, 6)},
        task=tuple(task),
        timestep=timestep,
        policy="act",
        max_actions=50,
    )
    back = wire.decode_request(wire.encode_request(request))
    assert (back.task, back.timestep, back.policy, back.max_actions) == (
        tuple(task),
        timestep,
        "act",
        50,
    )
    assert back.committed is None and back.rtc is None
    np.testing.assert_array_equal(back.observation["observation.state"], np.arange(6)[None])
    reply = wire.decode_reply(
        wire.encode_reply(ChunkReply(actions=np.ones((1, 5, 6)), timestep=3, inference_s=0.25))
    )
    assert reply.actions.shape == (1, 5, 6) and reply.actions.dtype == np.float32
    assert (reply.timestep, reply.inference_s) == (3, 0.25)


def safetensors(header: Any, payload: bytes = b"") -> bytes:
    """A safetensors buffer written by hand: whatever header, whatever bytes."""
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(body)) + body + payload


def request(observation: bytes, **fields: Any) -> bytes:
    return pb.ChunkRequest(observation=observation, **fields).SerializeToString()


STATE = {"dtype": "F32", "shape": [1, 6], "data_offsets": [0, 24]}
GOOD = safetensors({"observation.state": STATE}, bytes(24))


def committed(delay: int) -> pb.RealTimeChunking:
    actions = wire.encode_tensors({"actions": np.zeros((1, 3, 2), np.float32)})
    settings = pb.RTCSettings(prefix_attention_schedule="LINEAR", execution_horizon=3)
    settings.max_guidance_weight, settings.debug_maxlen = 10.0, 100
    return pb.RealTimeChunking(committed=actions, inference_delay=delay, settings=settings)


@pytest.mark.parametrize(
    ("message", "complaint"),
    [
        (pickle.dumps({"observation": [1, 2, 3]}), "not an rlctl ChunkRequest message"),
        (b"RLC1\x00\x00\x00\x00{}", "not an rlctl ChunkRequest message"),
        (request(b"RLC"), "too short to be a safetensors buffer"),
        (request(struct.pack("<Q", 1000) + b"{}"), "past the buffer"),
        (request(struct.pack("<Q", 2**40) + b"{}"), "over the limit of 1048576"),
        (request(safetensors(b"{{{")), "not JSON"),
        (request(safetensors(b'["x"]')), "JSON object"),
        (request(safetensors({"x": {**STATE, "dtype": "object"}}, bytes(24))), "dtype 'object'"),
        (request(safetensors({"x": {**STATE, "dtype": "BF16"}}, bytes(24))), "'BF16' is not one"),
        (request(safetensors({"x": {**STATE, "dtype": "C64"}}, bytes(24))), "'C64' is not one"),
        (
            request(safetensors({"x": {**STATE, "data_offsets": [0, 20]}}, bytes(20))),
            "is 24 bytes, 20 announced",
        ),
        (
            request(safetensors({"x": {**STATE, "shape": [2**62, 2**62]}}, bytes(24))),
            "announced",
        ),
        (request(safetensors({"x": {**STATE, "shape": [1, -6]}}, bytes(24))), "list of at most"),
        (request(safetensors({"x": {**STATE, "shape": [1] * 9}}, bytes(24))), "at most 8 sizes"),
        (request(safetensors({"x": {**STATE, "data_offsets": [24]}}, bytes(24))), "begin, end"),
        (request(safetensors({"x": STATE}, bytes(16))), "fewer sent"),
        (request(safetensors({"x": STATE}, bytes(32))), "8 bytes after the last tensor"),
        (
            request(safetensors({"x": STATE, "y": STATE}, bytes(48))),
            "not at 24 where the tensor before ends",
        ),
        (
            request(safetensors(b'{"x": %s, "x": %s}' % ((json.dumps(STATE).encode(),) * 2))),
            "'x' appears twice",
        ),
        (request(safetensors({"x": [1, 6]}, bytes(24))), "must be an object"),
        (request(safetensors({})), "at least one observation"),
        (request(safetensors({"__metadata__": {"a": "b"}})), "at least one observation"),
        (request(GOOD, max_actions=-1), "max_actions must be between 0 and 10000, got -1"),
        (request(GOOD, timestep=-1), "timestep must be between 0"),
        (request(GOOD, timestep=2**60), "timestep must be between 0"),
        (request(GOOD, rtc=committed(-2)), "inference_delay must be"),
        (request(GOOD, rtc=committed(10**9)), "inference_delay must"),
        # Bytes that are protobuf, but not this message as this version knows it.
        (request(GOOD) + b"\xb8\x01\x05", "field 23 unknown here"),
        (request(GOOD) + b"\x2a\x01x", "max_actions of the wrong type"),
        (request(GOOD) + b"\x12\x02\xff\xfe", "bad UTF-8"),
    ],
)
def test_malformed_requests_are_refused_with_the_reason(message: bytes, complaint: str) -> None:
    with pytest.raises(InvalidInput, match=complaint):
        wire.decode_request(message)


def test_a_field_unknown_inside_a_nested_message_is_refused_too() -> None:
    rtc = committed(0)
    rtc.settings.MergeFromString(b"\xb8\x01\x05")  # field 23 of RTCSettings
    with pytest.raises(InvalidInput, match="RTCSettings message: field 23") as raised:
        wire.decode_request(request(GOOD, rtc=rtc))
    assert raised.value.where == "request.rtc.settings"
    assert "same rlctl version" in (raised.value.hint or "")


def test_a_field_unknown_inside_a_repeated_message_is_refused_too() -> None:
    feature = pb.Feature(key="observation.state", dtype="float32", shape=[6])
    feature.MergeFromString(b"\xb8\x01\x05")  # field 23 of Feature
    body = pb.DescribeRequest(provided=pb.Features(features=[feature])).SerializeToString()
    with pytest.raises(InvalidInput, match="Feature message: field 23") as raised:
        wire.decode_describe(body)
    assert raised.value.where == "request.provided.features"


def test_malformed_replies_are_refused_with_the_reason() -> None:
    for body, complaint in [
        (pickle.dumps([1.0]), "not an rlctl ChunkReply message"),
        (pb.ChunkReply(actions=GOOD).SerializeToString(), r"actions \(batch, steps"),
        (
            pb.ChunkReply(actions=safetensors({"actions": STATE}, bytes(20))).SerializeToString(),
            "fewer sent",
        ),
    ]:
        with pytest.raises(InvalidInput, match=complaint):
            wire.decode_reply(body)


@given(
    array=DTYPES.flatmap(lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=2, max_dims=4))),
    big_endian=st.booleans(),
)
def test_strided_and_big_endian_arrays_travel_as_their_values(
    array: np.ndarray, big_endian: bool
) -> None:
    # Encoding reads the array's memory directly when it can: what it cannot (a transposed view,
    # big-endian bytes) must still arrive as the same values.
    sent = array.T
    if big_endian:
        sent = sent.astype(sent.dtype.newbyteorder(">"))
    tensors = wire.decode_tensors(wire.encode_tensors({"x": sent}), "test")
    assert tensors["x"].shape == sent.shape and tensors["x"].dtype == array.dtype
    np.testing.assert_array_equal(tensors["x"], sent)


def test_decoded_arrays_are_writable_copies_of_the_message() -> None:
    message = wire.encode_tensors({"x": np.arange(12, dtype=np.float32).reshape(3, 4)})
    tensors = wire.decode_tensors(message, "test")
    tensors["x"][0, 0] = 99.0  # torch.from_numpy needs writable arrays
    assert wire.decode_tensors(message, "test")["x"][0, 0] == 0.0


def test_what_cannot_travel_is_said_when_sending() -> None:
    for bad in (np.array(["text"]), np.zeros(2, np.complex64), np.array([object()])):
        with pytest.raises(InvalidInput, match="cannot travel"):
            wire.encode_tensors({"x": bad})


def test_large_finite_values_and_empty_arrays_are_accepted() -> None:
    # Close to float32's limit: a check that summed the values would overflow and refuse these.
    huge = np.full((1, 1000), 3e38, dtype=np.float32)
    request = ChunkRequest(
        observation={"observation.state": huge, "observation.empty": np.zeros((1, 0), np.float32)}
    )
    back = wire.decode_request(wire.encode_request(request))
    np.testing.assert_array_equal(back.observation["observation.state"], huge)
    assert back.observation["observation.empty"].shape == (1, 0)


def test_real_time_chunking_travels_whole() -> None:
    rtc = RTCConfig(execution_horizon=4, prefix_attention_schedule="EXP", max_guidance_weight=5.0)
    actions = np.arange(12, dtype=np.float32).reshape(1, 6, 2)
    sent = ChunkRequest(
        observation={"observation.state": np.zeros((1, 2), np.float32)},
        committed=actions,
        inference_delay=3,
        rtc=rtc,
    )
    back = wire.decode_request(wire.encode_request(sent))
    np.testing.assert_array_equal(back.committed, actions)
    assert (back.inference_delay, back.rtc) == (3, rtc)


def test_features_arrive_as_feature_specs_whole() -> None:
    features = {
        "observation.state": typed_feature("STATE", (6,), "observation.state"),
        "observation.images.top": typed_feature(
            "VISUAL", (96, 96, 3), "observation.images.top", channels_last=True
        ),
        "observation.environment_state": FeatureSpec.from_info(
            "observation.environment_state",
            {"dtype": "float32", "shape": [16], "names": ["x"] * 16, "info": {"unit": "m"}},
        ),
    }
    policy, provided = wire.decode_describe(wire.encode_describe("act", features))
    assert policy == "act" and provided == features
    assert list(provided) == list(features)  # in order
    assert all(isinstance(spec, FeatureSpec) for spec in provided.values())
    assert provided["observation.images.top"].hwc == (96, 96, 3)
    assert provided["observation.state"].kind is FeatureKind.STATE
    description = PolicyDescription(
        name="act", config={"type": "act"}, actions_per_chunk=5, observation_features=features
    )
    back = wire.decode_description(wire.encode_description(description))
    assert back == description
    assert wire.decode_describe(wire.encode_describe("", None)) == ("", None)
    assert wire.decode_describe(wire.encode_describe("", {})) == ("", {})


@pytest.mark.parametrize(
    ("feature", "complaint"),
    [
        ({"key": "observation.state", "dtype": "float32", "info_json": "[6]"}, "JSON object"),
        ({"key": "observation.state", "dtype": "float32", "info_json": "{"}, "JSON object"),
        ({"key": "observation.state", "shape": [6]}, "a dtype name and a list"),
        ({"key": "observation.state", "dtype": "float32", "shape": [-1]}, "list of at most"),
        ({"key": "observation.state", "dtype": "float32", "shape": [1] * 9}, "list of at most"),
        ({"key": "observation.state", "dtype": "float32", "kind": "tool"}, "kind 'tool'"),
        ({"dtype": "float32", "shape": [6]}, "lacks its key"),
    ],
)
def test_malformed_features_are_refused_with_the_reason(
    feature: dict[str, Any], complaint: str
) -> None:
    message = pb.DescribeRequest(provided=pb.Features(features=[pb.Feature(**feature)]))
    with pytest.raises(InvalidInput, match=complaint):
        wire.decode_describe(message.SerializeToString())


def test_a_feature_given_twice_is_refused() -> None:
    state = pb.Feature(key="observation.state", dtype="float32", shape=[6])
    message = pb.DescribeRequest(provided=pb.Features(features=[state, state]))
    with pytest.raises(InvalidInput, match="given twice"):
        wire.decode_describe(message.SerializeToString())


def test_a_description_without_its_config_is_refused() -> None:
    for config in ("", "[1]", "{"):
        body = pb.PolicyDescription(name="act", config_json=config).SerializeToString()
        with pytest.raises(InvalidInput, match="config"):
            wire.decode_description(body)


@pytest.mark.parametrize("shape", [[0], [3, 0], [2**15, 2**15, 3]])
def test_features_with_an_empty_or_absurd_size_are_refused(shape: list[int]) -> None:
    message = pb.Features()
    message.features.add(
        key="observation.state", dtype="float32", shape=shape, kind=FeatureKind.STATE.value
    )
    with pytest.raises(InvalidInput, match=r"at least 1|values is past"):
        wire.decode_features(message, "features")
    message = pb.Features()
    message.features.add(
        key="observation.state", dtype="float32", shape=[3], kind=FeatureKind.STATE.value
    )
    assert wire.decode_features(message, "features")["observation.state"].shape == (3,)
