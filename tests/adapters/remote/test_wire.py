"""The wire format carries data only, and refuses what it cannot check."""

from __future__ import annotations

import json
import pickle
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlctl.adapters.remote import wire
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureKind, FeatureSpec, typed_feature
from rlctl.domain.remote_inference import ChunkReply, ChunkRequest, PolicyDescription

DTYPES = st.sampled_from(["float32", "float64", "float16", "uint8", "int32", "int64", "bool"])


@given(
    arrays=st.dictionaries(
        st.text("abcdefgh.", min_size=1, max_size=12),
        DTYPES.flatmap(lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=0, max_dims=4))),
        max_size=4,
    ),
    task=st.lists(st.text(max_size=20), max_size=3),
)
def test_messages_round_trip(arrays: dict[str, np.ndarray], task: list[str]) -> None:
    fields, tensors = wire.decode(wire.encode({"task": task, "timestep": 7}, arrays))
    assert fields == {"task": task, "timestep": 7}
    assert list(tensors) == list(arrays)
    for name, array in arrays.items():
        assert tensors[name].dtype == array.dtype and tensors[name].shape == array.shape
        np.testing.assert_array_equal(tensors[name], array)


def test_requests_and_replies_round_trip() -> None:
    request = ChunkRequest(
        observation={"observation.state": np.arange(6, dtype=np.float32).reshape(1, 6)},
        task=("pick the cube",),
        timestep=12,
        policy="act",
        max_actions=50,
    )
    back = wire.decode_request(wire.encode_request(request))
    assert (back.task, back.timestep, back.policy, back.max_actions) == (
        ("pick the cube",),
        12,
        "act",
        50,
    )
    np.testing.assert_array_equal(back.observation["observation.state"], np.arange(6)[None])
    reply = wire.decode_reply(wire.encode_reply(ChunkReply(actions=np.ones((1, 5, 6)), timestep=3)))
    assert reply.actions.shape == (1, 5, 6) and reply.actions.dtype == np.float32


def raw(header: dict[str, object], payload: bytes = b"") -> bytes:
    body = json.dumps(header).encode()
    return struct.pack("<4sI", wire.MAGIC, len(body)) + body + payload


STATE = {"name": "observation.state", "dtype": "float32", "shape": [1, 6], "nbytes": 24}


@pytest.mark.parametrize(
    ("message", "complaint"),
    [
        (pickle.dumps({"observation": [1, 2, 3]}), "wrong magic"),
        (b"RLC", "too short"),
        (struct.pack("<4sI", wire.MAGIC, 1000) + b"{}", "past the message"),
        (struct.pack("<4sI", wire.MAGIC, 3) + b"{{{", "not JSON"),
        (raw({"tensors": [{**STATE, "dtype": "object"}]}, bytes(24)), "dtype 'object'"),
        (raw({"tensors": [{**STATE, "dtype": "complex128"}]}, bytes(24)), "complex128"),
        (raw({"tensors": [{**STATE, "nbytes": 20}]}, bytes(20)), "24 bytes, 20 announced"),
        (raw({"tensors": [{**STATE, "shape": [1, -6]}]}, bytes(24)), "not a list of sizes"),
        (raw({"tensors": [{**STATE, "shape": [1] * 9}]}, bytes(24)), "not a list of sizes"),
        (raw({"tensors": [STATE]}, bytes(16)), "fewer sent"),
        (raw({"tensors": [STATE]}, bytes(32)), "bytes after the last tensor"),
        (raw({"tensors": [STATE, STATE]}, bytes(48)), "appears twice"),
        (raw({"tensors": "all of them"}), "tensors list"),
        (raw({"tensors": []}), "at least one observation"),
        (raw({"tensors": [STATE], "task": "not a list"}, bytes(24)), "list of strings"),
        (raw({"tensors": [STATE], "timestep": "soon"}, bytes(24)), "integer"),
        (raw({"tensors": [STATE], "max_actions": -1}, bytes(24)), "max_actions must be between"),
        (raw({"tensors": [STATE], "max_actions": 1.5}, bytes(24)), "max_actions must be an"),
        (raw({"tensors": [STATE], "inference_delay": -2}, bytes(24)), "inference_delay must be"),
        (raw({"tensors": [STATE], "inference_delay": 10**9}, bytes(24)), "inference_delay must"),
    ],
)
def test_malformed_requests_are_refused_with_the_reason(message: bytes, complaint: str) -> None:
    with pytest.raises(InvalidInput, match=complaint):
        wire.decode_request(message)


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
    _, tensors = wire.decode(wire.encode({}, {"x": sent}))
    assert tensors["x"].shape == sent.shape and tensors["x"].dtype == array.dtype
    np.testing.assert_array_equal(tensors["x"], sent)


def test_decoded_arrays_are_writable_copies_of_the_message() -> None:
    message = wire.encode({}, {"x": np.arange(12, dtype=np.float32).reshape(3, 4)})
    _, tensors = wire.decode(message)
    tensors["x"][0, 0] = 99.0  # torch.from_numpy needs writable arrays
    _, again = wire.decode(message)
    assert again["x"][0, 0] == 0.0


def test_large_finite_values_and_empty_arrays_are_accepted() -> None:
    # Close to float32's limit: a check that summed the values would overflow and refuse these.
    huge = np.full((1, 1000), 3e38, dtype=np.float32)
    request = ChunkRequest(
        observation={"observation.state": huge, "observation.empty": np.zeros((1, 0), np.float32)}
    )
    back = wire.decode_request(wire.encode_request(request))
    np.testing.assert_array_equal(back.observation["observation.state"], huge)


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
    assert all(isinstance(spec, FeatureSpec) for spec in provided.values())
    assert provided["observation.images.top"].hwc == (96, 96, 3)
    assert provided["observation.state"].kind is FeatureKind.STATE
    description = PolicyDescription(
        name="act", config={"type": "act"}, actions_per_chunk=5, observation_features=features
    )
    back = wire.decode_description(wire.encode_description(description))
    assert back == description
    assert wire.decode_describe(wire.encode_describe("", None)) == ("", None)


@pytest.mark.parametrize(
    ("provided", "complaint"),
    [
        ("all of them", "object of key to feature"),
        ({"observation.state": [6]}, "must be an object"),
        ({"observation.state": {"dtype": "float32"}}, "a dtype name and a list of sizes"),
        ({"observation.state": {"dtype": "float32", "shape": [-1]}}, "list of sizes"),
        ({"observation.state": {"dtype": 3, "shape": [6]}}, "list of sizes"),
        ({"observation.state": {"dtype": "float32", "shape": [6], "kind": "tool"}}, "kind"),
    ],
)
def test_malformed_features_are_refused_with_the_reason(provided: object, complaint: str) -> None:
    with pytest.raises(InvalidInput, match=complaint):
        wire.decode_describe(wire.encode({"policy": "", "provided": provided}))
