"""The bytes on the wire: the protobuf messages of `policy_service.proto`, their tensors as
safetensors buffers. Data only, never pickle.

Encoding turns the domain's requests, replies and features into those messages; decoding turns
bytes back, and checks everything before a single array is built, each failure an
`InvalidInput` naming what is wrong:

- the message: bytes that are not the expected protobuf message (a pickle, anything else), or
  that carry a field this version does not know or one of the wrong type, are refused whole;
- each safetensors buffer: its header's length within `MAX_HEADER_BYTES` and within the buffer,
  a JSON object naming each tensor once, with a dtype from a short allow-list (`DTYPES`), a
  shape of at most `MAX_DIMS` sizes, and a byte range of exactly its shape's size, the ranges
  following each other to the end of the buffer. Only then does the `safetensors` library read
  the tensors (and check the layout again); the arrays handed back are writable copies.

(What the values mean — NaN or infinity in an observation, features a policy cannot read — is
the service's to judge.) The message's whole size is bounded by gRPC before it is read
(`--max-message-mb`). Features travel whole (LeRobot's info.json entry plus their kind) and
arrive as `FeatureSpec`s, each dimension at least 1 and at most `MAX_FEATURE_ELEMENTS` values
in all.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import safetensors.numpy
from google.protobuf import unknown_fields
from google.protobuf.message import DecodeError, Message
from safetensors import SafetensorError

from rlctl.adapters.remote import policy_service_pb2 as pb
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.features import FeatureKind, FeatureSpec
from rlctl.domain.policies.rtc import RTCConfig
from rlctl.domain.remote_inference import ChunkReply, ChunkRequest, PolicyDescription

MAX_HEADER_BYTES = 1 << 20
MAX_DIMS = 8
# The most values one declared feature may have: 2**28 (a 16384 x 16384 RGB image is 2**29.6;
# 8K video frames, 7680 x 4320 x 3, are 2**26.6): generous for any robot, yet a peer cannot make
# a learner or a server allocate for a feature of 10**18 values.
MAX_FEATURE_ELEMENTS = 2**28
# safetensors' dtype names, and the numpy dtypes they travel as (little-endian).
DTYPES: dict[str, np.dtype[Any]] = {
    name: np.dtype(numpy).newbyteorder("<")
    for name, numpy in (
        ("F32", "float32"),
        ("F64", "float64"),
        ("F16", "float16"),
        ("U8", "uint8"),
        ("I8", "int8"),
        ("I16", "int16"),
        ("I32", "int32"),
        ("I64", "int64"),
        ("BOOL", "bool"),
    )
}
_TRAVELS = {dtype.name for dtype in DTYPES.values()}
_LENGTH = struct.Struct("<Q")
_METADATA = "__metadata__"
ACTIONS = "actions"  # the one tensor of a reply, and of real-time chunking's committed actions


# --- tensors -----------------------------------------------------------------------------------


def encode_tensors(tensors: Mapping[str, Any]) -> bytes:
    """Arrays as one safetensors buffer (C-contiguous copies only where needed)."""
    arrays: dict[str, np.ndarray] = {}
    for name, value in tensors.items():
        array = np.asarray(value)
        if array.dtype.name not in _TRAVELS or name == _METADATA:
            raise InvalidInput(f"{name}: dtype {array.dtype} cannot travel", where=name)
        # safetensors reads the array's memory as it is laid out (it swaps big-endian bytes
        # itself); 0-d arrays stay 0-d.
        arrays[name] = array if array.flags.c_contiguous else array.copy(order="C")
    return safetensors.numpy.save(arrays)


def decode_tensors(buffer: bytes, where: str) -> dict[str, np.ndarray]:
    """The arrays of a safetensors buffer, in its header's order, or an `InvalidInput` saying
    what is malformed; nothing is built before the header is checked whole."""
    if len(buffer) < _LENGTH.size:
        raise InvalidInput(
            f"{len(buffer)} bytes are too short to be a safetensors buffer", where=where
        )
    (header_len,) = _LENGTH.unpack_from(buffer)
    if header_len > MAX_HEADER_BYTES:
        raise InvalidInput(
            f"a header of {header_len} bytes is over the limit of {MAX_HEADER_BYTES}", where=where
        )
    if _LENGTH.size + header_len > len(buffer):
        raise InvalidInput(f"header length {header_len} past the buffer", where=where)
    try:
        header = json.loads(
            buffer[_LENGTH.size : _LENGTH.size + header_len].decode("utf-8"),
            object_pairs_hook=_no_repeats,
        )
    except _Repeated as err:
        raise InvalidInput(f"tensor {err.args[0]!r} appears twice", where=where) from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise InvalidInput(f"the header is not JSON: {err}", where=where) from None
    if not isinstance(header, dict):
        raise InvalidInput("the header must be a JSON object of tensors", where=where)
    data_bytes = len(buffer) - _LENGTH.size - header_len
    spans = sorted(
        (_span(name, entry, where), name) for name, entry in header.items() if name != _METADATA
    )
    end = 0
    for (begin, stop), name in spans:
        if stop > data_bytes:
            raise InvalidInput(f"{name}: {stop - begin} bytes announced, fewer sent", where=where)
        if begin != end:
            raise InvalidInput(
                f"{name}: its bytes begin at {begin}, not at {end} where the tensor before ends",
                where=where,
            )
        end = stop
    if end != data_bytes:
        raise InvalidInput(f"{data_bytes - end} bytes after the last tensor", where=where)
    try:
        arrays = safetensors.numpy.load(bytes(buffer))
    except SafetensorError as err:
        raise InvalidInput(f"not a safetensors buffer: {err}", where=where) from None
    # Writable copies (torch.from_numpy wants them), apart from the message's memory.
    return {name: np.array(arrays[name]) for name in header if name != _METADATA}


class _Repeated(Exception):
    pass


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Repeated(key)
        out[key] = value
    return out


def _span(name: str, entry: Any, where: str) -> tuple[int, int]:
    """The byte range `entry` announces for tensor `name`, checked against its dtype and shape."""
    if not name:
        raise InvalidInput("a tensor needs a name", where=where)
    if not isinstance(entry, dict):
        raise InvalidInput(f"{name}: a tensor entry must be an object", where=where)
    dtype_name, shape, offsets = (entry.get(k) for k in ("dtype", "shape", "data_offsets"))
    if not isinstance(dtype_name, str) or dtype_name not in DTYPES:
        raise InvalidInput(
            f"{name}: dtype {dtype_name!r} is not one of {', '.join(DTYPES)}", where=where
        )
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(map(_size, shape)):
        raise InvalidInput(
            f"{name}: shape {shape!r:.100} is not a list of at most {MAX_DIMS} sizes", where=where
        )
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(map(_size, offsets))
        or offsets[0] > offsets[1]
    ):
        raise InvalidInput(
            f"{name}: data_offsets {offsets!r:.100} are not a [begin, end] pair", where=where
        )
    expected = math.prod(shape) * DTYPES[dtype_name].itemsize
    if offsets[1] - offsets[0] != expected:
        raise InvalidInput(
            f"{name}: shape {shape} of {dtype_name} is {expected} bytes, "
            f"{offsets[1] - offsets[0]} announced",
            where=where,
        )
    return offsets[0], offsets[1]


def _size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# --- messages ----------------------------------------------------------------------------------


def parse[M: Message](kind: type[M], body: bytes, where: str) -> M:
    """`body` as a `kind` message holding no field this version does not know."""
    try:
        message = kind.FromString(body)
    except DecodeError as err:
        raise InvalidInput(
            f"not an rlctl {kind.DESCRIPTOR.name} message ({_reason(err)}); pickles and other "
            "formats are refused",
            where=where,
        ) from None
    check_known(message, where)
    return message


def _reason(err: DecodeError) -> str:
    return str(err).rpartition(": ")[2] or "malformed"


def check_known(message: Message, where: str) -> None:
    """Refuse a message (or a message inside it) carrying fields this version does not know,
    or a known field sent with another type: never silently ignored."""
    unknown = unknown_fields.UnknownFieldSet(message)
    if len(unknown):
        known = {field.number: field.name for field in message.DESCRIPTOR.fields}
        numbers = sorted({field.field_number for field in unknown})
        said = [f"{known[n]} of the wrong type" if n in known else f"field {n}" for n in numbers]
        raise InvalidInput(
            f"not an rlctl {message.DESCRIPTOR.name} message: {', '.join(said)} unknown here; "
            "pickles and other formats are refused",
            where=where,
            hint="the robot and the policy server must run the same rlctl version",
        )
    # Only the message fields are visited: reading a bytes field copies it (camera frames).
    for field in message.DESCRIPTOR.fields:
        if field.message_type is None:
            continue
        if field.is_repeated:
            for item in getattr(message, field.name):
                check_known(item, f"{where}.{field.name}")
        elif message.HasField(field.name):
            check_known(getattr(message, field.name), f"{where}.{field.name}")


# --- requests ----------------------------------------------------------------------------------


def request_message(request: ChunkRequest) -> pb.ChunkRequest:
    """The request as its message; `encode_request` writes the same bytes faster."""
    message = _request_head(request)
    message.observation = encode_tensors(request.observation)
    return message


def _request_head(request: ChunkRequest) -> pb.ChunkRequest:
    """The request's message without its observation."""
    message = pb.ChunkRequest(
        task=list(request.task),
        timestep=request.timestep,
        policy=request.policy,
        max_actions=request.max_actions,
    )
    if request.committed is not None and request.rtc is not None:
        message.rtc.CopyFrom(
            pb.RealTimeChunking(
                committed=encode_tensors({ACTIONS: request.committed}),
                inference_delay=request.inference_delay,
                settings=pb.RTCSettings(**attrs.asdict(request.rtc)),
            )
        )
    return message


def encode_request(request: ChunkRequest) -> bytes:
    # The observation (megabytes of camera frames) is framed as protobuf frames a bytes field and
    # appended: parsed, the same message as `request_message` (fields may come in any order),
    # without copying the frames into a message and out again (a millisecond a frame here).
    head = _request_head(request).SerializeToString()
    return b"".join([head, *_bytes_field(_OBSERVATION, encode_tensors(request.observation))])


_OBSERVATION = pb.ChunkRequest.DESCRIPTOR.fields_by_name["observation"].number


def _bytes_field(number: int, data: bytes) -> list[bytes]:
    """A bytes field as protobuf writes it: its key (number, length-delimited), length, bytes."""
    return [_varint(number << 3 | 2), _varint(len(data)), data]


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_request(body: bytes) -> ChunkRequest:
    message = parse(pb.ChunkRequest, body, "request")
    observation = decode_tensors(message.observation, "request.observation")
    if not observation:
        raise InvalidInput(
            "a request carries at least one observation tensor", where="request.observation"
        )
    committed, rtc, delay = None, None, 0
    if message.HasField("rtc"):
        tensors = decode_tensors(message.rtc.committed, "request.rtc.committed")
        committed = tensors.get(ACTIONS)
        if set(tensors) != {ACTIONS} or committed is None:
            raise InvalidInput(
                f"committed actions are one tensor named {ACTIONS!r}, got {sorted(tensors)}",
                where="request.rtc",
            )
        if committed.ndim != 3 or committed.dtype.kind != "f":
            raise InvalidInput(
                "committed actions are floats (batch, steps, action_dim)", where="request.rtc"
            )
        if not message.rtc.HasField("settings"):
            raise InvalidInput(
                "committed actions come with their rtc settings", where="request.rtc"
            )
        rtc = _rtc(message.rtc.settings)
        delay = message.rtc.inference_delay
    # ChunkRequest bounds its counts (max_actions, timestep, inference_delay) itself.
    return ChunkRequest(
        observation=observation,
        task=tuple(message.task),
        timestep=message.timestep,
        policy=message.policy,
        max_actions=message.max_actions,
        committed=committed,
        inference_delay=delay,
        rtc=rtc,
    )


def _rtc(settings: pb.RTCSettings) -> RTCConfig:
    try:
        return RTCConfig(
            enabled=settings.enabled,
            prefix_attention_schedule=settings.prefix_attention_schedule,
            max_guidance_weight=settings.max_guidance_weight,
            execution_horizon=settings.execution_horizon,
            debug=settings.debug,
            debug_maxlen=settings.debug_maxlen,
        )
    except ConfigError as err:
        raise InvalidInput(f"rtc settings: {err.message}", where="request.rtc") from None


# --- replies -----------------------------------------------------------------------------------


def reply_message(reply: ChunkReply) -> pb.ChunkReply:
    return pb.ChunkReply(
        actions=encode_tensors({ACTIONS: reply.actions}),
        timestep=reply.timestep,
        inference_s=reply.inference_s,
    )


def encode_reply(reply: ChunkReply) -> bytes:
    return reply_message(reply).SerializeToString()


def reply_from(message: pb.ChunkReply) -> ChunkReply:
    check_known(message, "reply")
    actions = decode_tensors(message.actions, "reply.actions").get(ACTIONS)
    if actions is None or actions.ndim != 3:
        raise InvalidInput("a reply carries actions (batch, steps, action_dim)", where="reply")
    return ChunkReply(
        actions=actions.astype(np.float32, copy=False),
        timestep=message.timestep,
        inference_s=message.inference_s if math.isfinite(message.inference_s) else 0.0,
    )


def decode_reply(body: bytes) -> ChunkReply:
    return reply_from(parse(pb.ChunkReply, body, "reply"))


# --- describing a policy -----------------------------------------------------------------------


def describe_message(policy: str, provided: Mapping[str, FeatureSpec] | None) -> pb.DescribeRequest:
    message = pb.DescribeRequest(policy=policy)
    if provided is not None:
        message.provided.CopyFrom(encode_features(provided))
    return message


def encode_describe(policy: str, provided: Mapping[str, FeatureSpec] | None) -> bytes:
    return describe_message(policy, provided).SerializeToString()


def decode_describe(body: bytes) -> tuple[str, dict[str, FeatureSpec] | None]:
    message = parse(pb.DescribeRequest, body, "request")
    provided = message.provided if message.HasField("provided") else None
    features = decode_features(provided, "request.provided") if provided is not None else None
    return message.policy, features


def description_message(description: PolicyDescription) -> pb.PolicyDescription:
    return pb.PolicyDescription(
        name=description.name,
        config_json=json.dumps(description.config, allow_nan=False),
        actions_per_chunk=description.actions_per_chunk,
        observation_features=encode_features(description.observation_features),
    )


def encode_description(description: PolicyDescription) -> bytes:
    return description_message(description).SerializeToString()


def description_from(message: pb.PolicyDescription) -> PolicyDescription:
    check_known(message, "reply")
    try:
        config = json.loads(message.config_json)
    except (json.JSONDecodeError, RecursionError):
        config = None
    if not isinstance(config, dict):
        raise InvalidInput("a description carries the policy's config", where="reply.config")
    return PolicyDescription(
        name=message.name,
        config=config,
        actions_per_chunk=message.actions_per_chunk,
        observation_features=decode_features(
            message.observation_features, "reply.observation_features"
        ),
    )


def decode_description(body: bytes) -> PolicyDescription:
    return description_from(parse(pb.PolicyDescription, body, "reply"))


# --- features ----------------------------------------------------------------------------------


def encode_features(features: Mapping[str, FeatureSpec]) -> pb.Features:
    """Each feature as its info.json entry (dtype, shape, names, info…) plus its kind."""
    message = pb.Features()
    for key, spec in features.items():
        if not isinstance(spec, FeatureSpec):
            raise InvalidInput(
                f"{key}: a feature to send must be a FeatureSpec, got {type(spec).__name__}",
                where=key,
            )
        rest = spec.to_info()
        dtype, shape = rest.pop("dtype"), rest.pop("shape")
        message.features.add(
            key=key,
            dtype=dtype,
            shape=shape,
            kind=spec.kind.value,
            info_json=json.dumps(rest, allow_nan=False),
        )
    return message


def decode_features(message: pb.Features, where: str) -> dict[str, FeatureSpec]:
    """`encode_features`'s message back as specs keyed by their keys, in order; an
    `InvalidInput` naming the feature for anything else."""
    out: dict[str, FeatureSpec] = {}
    for feature in message.features:
        key = feature.key
        if not key or key in out:
            said = f"{key} is given twice" if key else "a feature lacks its key"
            raise InvalidInput(said, where=where)
        place = f"{where}.{key}"
        try:
            rest = json.loads(feature.info_json) if feature.info_json else {}
        except (json.JSONDecodeError, RecursionError):
            rest = None
        if not isinstance(rest, dict):
            raise InvalidInput(f"{key}: a feature's info must be a JSON object", where=place)
        shape = list(feature.shape)
        if not feature.dtype or len(shape) > MAX_DIMS or not all(d >= 1 for d in shape):
            raise InvalidInput(
                f"{key}: a feature has a dtype name and a list of at most {MAX_DIMS} sizes, "
                f"each at least 1, got {feature.dtype!r} {shape!r:.100}",
                where=place,
            )
        if math.prod(shape) > MAX_FEATURE_ELEMENTS:
            raise InvalidInput(
                f"{key}: a feature of {math.prod(shape)} values is past the "
                f"{MAX_FEATURE_ELEMENTS} a feature may have",
                where=place,
            )
        try:
            kind = FeatureKind(feature.kind) if feature.kind else None
        except ValueError:
            raise InvalidInput(
                f"{key}: unknown feature kind {feature.kind!r:.50}",
                where=place,
                hint=f"one of {', '.join(k.value for k in FeatureKind)}",
            ) from None
        spec = FeatureSpec.from_info(key, {**rest, "dtype": feature.dtype, "shape": shape})
        out[key] = attrs.evolve(spec, declared_kind=kind)
    return out
