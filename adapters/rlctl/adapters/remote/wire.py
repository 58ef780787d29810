"""The bytes on the wire: a JSON header and raw tensor bytes. Data only, never pickle.

    message = b"RLC1" | header length (u32, little-endian) | header (UTF-8 JSON) | tensor bytes

The header is a JSON object with the message's fields and a `tensors` list, each entry naming a
tensor, its dtype (from a short allow-list), its shape and its byte count; the tensors' bytes
follow in that order, C-contiguous, little-endian. Decoding checks every one of these before a
single array is built: a wrong magic (a pickle, anything else), a header that is not a JSON
object, an unknown dtype, a shape whose size does not match its bytes, bytes left over or
missing — each is an `InvalidInput` naming what is wrong. (What the values mean — NaN or
infinity in an observation, features a policy cannot read — is the service's to judge.)

Features travel whole (LeRobot's info.json entry plus their kind), and arrive as `FeatureSpec`s.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from rlctl.domain.config import structure, unstructure
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.features import FeatureKind, FeatureSpec
from rlctl.domain.policies.rtc import RTCConfig
from rlctl.domain.remote_inference import ChunkReply, ChunkRequest, PolicyDescription

MAGIC = b"RLC1"
_HEAD = struct.Struct("<4sI")
MAX_HEADER_BYTES = 1 << 20
MAX_DIMS = 8
DTYPES = {
    name: np.dtype(name).newbyteorder("<")
    for name in (
        "float32",
        "float64",
        "float16",
        "uint8",
        "int8",
        "int16",
        "int32",
        "int64",
        "bool",
    )
}


def encode(fields: Mapping[str, Any], tensors: Mapping[str, Any] | None = None) -> bytes:
    entries = []
    blobs: list[memoryview] = []
    for name, value in (tensors or {}).items():
        array = np.asarray(value)
        if array.dtype.name not in DTYPES:
            raise InvalidInput(f"{name}: dtype {array.dtype} cannot travel", where=name)
        # A view of the array's memory (copied only when not C-contiguous little-endian): the
        # join below is the one copy, which matters for camera frames of megabytes.
        contiguous = np.ascontiguousarray(array, dtype=DTYPES[array.dtype.name])
        data = memoryview(contiguous.reshape(-1).view(np.uint8))
        entries.append(
            {
                "name": name,
                "dtype": array.dtype.name,
                "shape": list(array.shape),
                "nbytes": data.nbytes,
            }
        )
        blobs.append(data)
    header = json.dumps({**fields, "tensors": entries}, allow_nan=False).encode()
    return b"".join([_HEAD.pack(MAGIC, len(header)), header, *blobs])


def decode(message: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header's fields and the tensors, or an `InvalidInput` saying what is malformed."""
    if len(message) < _HEAD.size:
        raise InvalidInput("message too short to be an rlctl message", where="message")
    magic, header_len = _HEAD.unpack_from(message)
    if magic != MAGIC:
        raise InvalidInput(
            "not an rlctl message (wrong magic bytes); pickles and other formats are refused",
            where="message",
        )
    if header_len > min(MAX_HEADER_BYTES, len(message) - _HEAD.size):
        raise InvalidInput(f"header length {header_len} past the message", where="message")
    body = _HEAD.size + header_len
    try:
        fields = json.loads(bytes(message[_HEAD.size : body]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise InvalidInput(f"header is not JSON: {err}", where="message.header") from None
    if not isinstance(fields, dict) or not isinstance(fields.get("tensors", []), list):
        raise InvalidInput("header must be a JSON object with a tensors list", where="header")
    # The one copy of the tensors' bytes, writable (torch.from_numpy wants that).
    payload = bytearray(memoryview(message)[body:])
    tensors: dict[str, np.ndarray] = {}
    offset = 0
    for entry in fields.pop("tensors", []):
        name, dtype, shape, nbytes = _entry(entry)
        if name in tensors:
            raise InvalidInput(f"tensor {name!r} appears twice", where=name)
        if offset + nbytes > len(payload):
            raise InvalidInput(f"{name}: {nbytes} bytes announced, fewer sent", where=name)
        array = np.frombuffer(payload, dtype=dtype, count=math.prod(shape), offset=offset)
        tensors[name] = array.reshape(shape).astype(dtype.newbyteorder("="), copy=False)
        offset += nbytes
    if offset != len(payload):
        raise InvalidInput(f"{len(payload) - offset} bytes after the last tensor", where="message")
    return fields, tensors


def _entry(entry: Any) -> tuple[str, np.dtype[Any], tuple[int, ...], int]:
    if not isinstance(entry, dict):
        raise InvalidInput("a tensor entry must be an object", where="header.tensors")
    name, dtype_name, shape, nbytes = (entry.get(k) for k in ("name", "dtype", "shape", "nbytes"))
    if not isinstance(name, str) or not name:
        raise InvalidInput("a tensor needs a name", where="header.tensors")
    if not isinstance(dtype_name, str) or dtype_name not in DTYPES:
        raise InvalidInput(
            f"{name}: dtype {dtype_name!r} is not one of {', '.join(DTYPES)}", where=name
        )
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_DIMS
        or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
    ):
        raise InvalidInput(f"{name}: shape {shape!r} is not a list of sizes", where=name)
    dtype = DTYPES[dtype_name]
    expected = math.prod(shape) * dtype.itemsize
    if not isinstance(nbytes, int) or nbytes != expected:
        raise InvalidInput(
            f"{name}: shape {shape} of {dtype_name} is {expected} bytes, {nbytes!r} announced",
            where=name,
        )
    return name, dtype, tuple(shape), nbytes


# --- the messages ------------------------------------------------------------------------------


COMMITTED = "rtc.committed"  # the committed actions' tensor name, apart from observations


def encode_request(request: ChunkRequest) -> bytes:
    fields: dict[str, Any] = {
        "policy": request.policy,
        "task": list(request.task),
        "timestep": request.timestep,
        "max_actions": request.max_actions,
    }
    tensors = dict(request.observation)
    if request.committed is not None and request.rtc is not None:
        fields["rtc"] = unstructure(request.rtc)
        fields["inference_delay"] = request.inference_delay
        tensors[COMMITTED] = request.committed
    return encode(fields, tensors)


def decode_request(message: bytes) -> ChunkRequest:
    fields, tensors = decode(message)
    task = fields.get("task", [])
    if not isinstance(task, list) or not all(isinstance(t, str) for t in task):
        raise InvalidInput("task must be a list of strings", where="request.task")
    committed = tensors.pop(COMMITTED, None)
    if not tensors:
        raise InvalidInput("a request carries at least one observation tensor", where="request")
    rtc = _rtc(fields.get("rtc")) if committed is not None else None
    if committed is not None and (committed.ndim != 3 or committed.dtype.kind != "f"):
        raise InvalidInput(
            "committed actions are floats (batch, steps, action_dim)", where="request.rtc"
        )
    # ChunkRequest bounds its counts (max_actions, timestep, inference_delay) itself.
    return ChunkRequest(
        observation=tensors,
        task=tuple(task),
        timestep=_int(fields, "timestep"),
        policy=_str(fields, "policy"),
        max_actions=_int(fields, "max_actions"),
        committed=committed,
        inference_delay=_int(fields, "inference_delay"),
        rtc=rtc,
    )


def _rtc(data: Any) -> RTCConfig:
    if not isinstance(data, dict):
        raise InvalidInput("committed actions come with their rtc settings", where="request.rtc")
    try:
        return structure(data, RTCConfig)
    except ConfigError as err:
        raise InvalidInput(f"rtc settings: {err.message}", where="request.rtc") from None


def encode_reply(reply: ChunkReply) -> bytes:
    return encode(
        {"timestep": reply.timestep, "inference_s": reply.inference_s}, {"actions": reply.actions}
    )


def decode_reply(message: bytes) -> ChunkReply:
    fields, tensors = decode(message)
    actions = tensors.get("actions")
    if actions is None or actions.ndim != 3:
        raise InvalidInput("a reply carries actions (batch, steps, action_dim)", where="reply")
    inference_s = fields.get("inference_s", 0.0)
    return ChunkReply(
        actions=actions.astype(np.float32, copy=False),
        timestep=_int(fields, "timestep"),
        inference_s=float(inference_s) if isinstance(inference_s, int | float) else 0.0,
    )


def encode_describe(policy: str, provided: Mapping[str, FeatureSpec] | None) -> bytes:
    features = encode_features(provided) if provided is not None else None
    return encode({"policy": policy, "provided": features})


def decode_describe(message: bytes) -> tuple[str, dict[str, FeatureSpec] | None]:
    fields, _ = decode(message)
    provided = fields.get("provided")
    features = decode_features(provided, "request.provided") if provided is not None else None
    return _str(fields, "policy"), features


def encode_description(description: PolicyDescription) -> bytes:
    return encode(
        {
            "name": description.name,
            "config": description.config,
            "actions_per_chunk": description.actions_per_chunk,
            "observation_features": encode_features(description.observation_features),
        }
    )


def decode_description(message: bytes) -> PolicyDescription:
    fields, _ = decode(message)
    config = fields.get("config")
    if not isinstance(config, dict):
        raise InvalidInput("a description carries the policy's config", where="reply.config")
    return PolicyDescription(
        name=_str(fields, "name"),
        config=config,
        actions_per_chunk=_int(fields, "actions_per_chunk"),
        observation_features=decode_features(
            fields.get("observation_features") or {}, "reply.observation_features"
        ),
    )


# --- features ----------------------------------------------------------------------------------

_KIND = "kind"


def encode_features(features: Mapping[str, FeatureSpec]) -> dict[str, dict[str, Any]]:
    """Each feature as its info.json entry (dtype, shape, names, info…) plus its kind."""
    out: dict[str, dict[str, Any]] = {}
    for key, spec in features.items():
        if not isinstance(spec, FeatureSpec):
            raise InvalidInput(
                f"{key}: a feature to send must be a FeatureSpec, got {type(spec).__name__}",
                where=key,
            )
        out[key] = {**spec.to_info(), _KIND: spec.kind.value}
    return out


def decode_features(data: Any, where: str) -> dict[str, FeatureSpec]:
    """`encode_features`'s mapping back as specs keyed by their keys; an `InvalidInput` naming
    the feature for anything else."""
    if not isinstance(data, dict):
        raise InvalidInput("features must be an object of key to feature", where=where)
    out: dict[str, FeatureSpec] = {}
    for key, entry in data.items():
        if not isinstance(entry, dict):
            raise InvalidInput(f"{key}: a feature must be an object", where=f"{where}.{key}")
        fields = dict(entry)
        kind_name = fields.pop(_KIND, None)
        try:
            kind = FeatureKind(kind_name) if kind_name is not None else None
        except ValueError:
            raise InvalidInput(
                f"{key}: unknown feature kind {kind_name!r}",
                where=f"{where}.{key}",
                hint=f"one of {', '.join(k.value for k in FeatureKind)}",
            ) from None
        shape = fields.get("shape")
        if (
            not isinstance(fields.get("dtype"), str)
            or not isinstance(shape, list)
            or len(shape) > MAX_DIMS
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        ):
            raise InvalidInput(
                f"{key}: a feature has a dtype name and a list of sizes, got {entry!r:.200}",
                where=f"{where}.{key}",
            )
        out[key] = attrs.evolve(FeatureSpec.from_info(key, fields), declared_kind=kind)
    return out


def _int(fields: Mapping[str, Any], key: str) -> int:
    value = fields.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput(f"{key} must be an integer", where=f"message.{key}")
    return value


def _str(fields: Mapping[str, Any], key: str) -> str:
    value = fields.get(key, "")
    if not isinstance(value, str):
        raise InvalidInput(f"{key} must be a string", where=f"message.{key}")
    return value
