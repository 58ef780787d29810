"""The bytes of `rl_service.proto`: transitions, parameters and descriptions as data, checked.

The policy service's safety pieces are reused as they are (`wire`): a message that is not the
expected protobuf (a pickle, anything else) or carries an unknown field is refused whole, and each
safetensors buffer is checked (header, dtypes, shapes, byte ranges) before an array is built.
What this module adds is what the values must be: a transition batch has the columns a replay
holds, one row per transition in every column, at most `MAX_ROWS` rows, state and next state of
the same observations, and nothing non-finite (LeRobot's learner skips such transitions; on this
wire they are refused, as the policy server refuses a NaN observation); parameters are finite
float tensors; a report is a JSON object of finite numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlctl.adapters.remote import rl_service_pb2 as pb
from rlctl.adapters.remote import wire
from rlctl.application.ports.reinforcement import ActorHello, LearnerDescription
from rlctl.domain.config import structure
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies import PolicyConfig, lerobot_config_data
from rlctl.domain.rl.replay import COLUMNS, DISCRETE_PENALTY, IS_INTERVENTION, TransitionBatch

MAX_ROWS = 100_000
MAX_REPORT_CHARS = 10_000
_STATE, _NEXT = "state.", "next_state."


# --- transitions -------------------------------------------------------------------------------


def transition_columns(batch: TransitionBatch) -> dict[str, np.ndarray]:
    columns: dict[str, np.ndarray] = {}
    for key, value in batch.state.items():
        columns[_STATE + key] = value
    for key, value in batch.next_state.items():
        columns[_NEXT + key] = value
    columns["action"] = batch.action.astype(np.float32)
    columns["reward"] = batch.reward.astype(np.float32)
    columns["done"] = batch.done.astype(np.float32)
    columns["truncated"] = batch.truncated.astype(np.float32)
    columns[IS_INTERVENTION] = batch.is_intervention.astype(bool)
    columns[DISCRETE_PENALTY] = batch.discrete_penalty.astype(np.float32)
    return columns


def encode_push(batch: TransitionBatch | None, report: Mapping[str, float] | None) -> bytes:
    message = pb.TransitionBatch(
        transitions=b"" if batch is None else wire.encode_tensors(transition_columns(batch)),
        report_json="" if report is None else json.dumps(dict(report)),
    )
    return message.SerializeToString()


def decode_push(body: bytes) -> tuple[TransitionBatch | None, dict[str, float] | None]:
    message = wire.parse(pb.TransitionBatch, body, "TransitionBatch")
    batch = None
    if message.transitions:
        batch = _batch(wire.decode_tensors(message.transitions, "transitions"))
    report = _report(message.report_json) if message.report_json else None
    return batch, report


def _batch(columns: dict[str, np.ndarray]) -> TransitionBatch:
    where = "transitions"
    missing = [name for name in COLUMNS if name not in columns]
    if missing:
        raise InvalidInput(f"the batch lacks {', '.join(missing)}", where=where)
    state = {k[len(_STATE) :]: v for k, v in columns.items() if k.startswith(_STATE)}
    following = {k[len(_NEXT) :]: v for k, v in columns.items() if k.startswith(_NEXT)}
    unknown = [k for k in columns if k not in COLUMNS and not k.startswith((_STATE, _NEXT))]
    if unknown:
        raise InvalidInput(f"unknown column(s) {', '.join(sorted(unknown))}", where=where)
    if not state:
        raise InvalidInput("the batch carries no observation (state.<key>)", where=where)
    if set(state) != set(following):
        raise InvalidInput(
            f"states {sorted(state)} and next states {sorted(following)} differ", where=where
        )
    rows = columns["reward"].shape[0] if columns["reward"].ndim == 1 else -1
    if not 1 <= rows <= MAX_ROWS:
        raise InvalidInput(
            f"a batch holds 1 to {MAX_ROWS} transitions, `reward` a vector of them", where=where
        )
    for name, values in columns.items():
        if values.ndim == 0 or values.shape[0] != rows:
            raise InvalidInput(f"{name} has {values.shape[:1]} rows, reward {rows}", where=where)
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            raise InvalidInput(f"{name} holds NaN or infinity", where=where)
    for name in ("reward", "done", "truncated", DISCRETE_PENALTY):
        if columns[name].ndim != 1 or columns[name].dtype.kind != "f":
            raise InvalidInput(f"{name} must be a float vector", where=where)
    if columns[IS_INTERVENTION].dtype != np.bool_ or columns[IS_INTERVENTION].ndim != 1:
        raise InvalidInput(f"{IS_INTERVENTION} must be a bool vector", where=where)
    if columns["action"].ndim != 2 or columns["action"].dtype.kind != "f":
        raise InvalidInput("action must be a float matrix (transitions, action_dim)", where=where)
    for key in state:
        if state[key].shape != following[key].shape or state[key].dtype != following[key].dtype:
            raise InvalidInput(f"state and next state of {key} differ in shape", where=where)
    return TransitionBatch(
        state=state,
        action=columns["action"].astype(np.float32),
        reward=columns["reward"].astype(np.float32),
        next_state=following,
        done=columns["done"].astype(np.float32),
        truncated=columns["truncated"].astype(np.float32),
        is_intervention=columns[IS_INTERVENTION],
        discrete_penalty=columns[DISCRETE_PENALTY].astype(np.float32),
    )


def _report(text: str) -> dict[str, float]:
    where = "report_json"
    if len(text) > MAX_REPORT_CHARS:
        raise InvalidInput(f"a report of {len(text)} characters is too long", where=where)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        raise InvalidInput(f"the report is not JSON: {err}", where=where) from None
    if not isinstance(data, dict):
        raise InvalidInput("the report must be a JSON object", where=where)
    out: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidInput(f"report value {key!r} is not a number", where=where)
        if not math.isfinite(value):
            raise InvalidInput(f"report value {key!r} is not finite", where=where)
        out[str(key)] = float(value)
    return out


def encode_push_reply(accepted: int, version: int) -> bytes:
    return pb.PushReply(accepted=accepted, parameters_version=version).SerializeToString()


def decode_push_reply(body: bytes) -> int:
    return int(wire.parse(pb.PushReply, body, "PushReply").parameters_version)


# --- parameters --------------------------------------------------------------------------------


def encode_fetch(have_version: int) -> bytes:
    return pb.ParametersRequest(have_version=have_version).SerializeToString()


def decode_fetch(body: bytes) -> int:
    return int(wire.parse(pb.ParametersRequest, body, "ParametersRequest").have_version)


def encode_parameters(version: int, weights: bytes) -> bytes:
    return pb.Parameters(version=version, weights=weights).SerializeToString()


def decode_parameters(body: bytes) -> tuple[int, dict[str, np.ndarray] | None]:
    message = wire.parse(pb.Parameters, body, "Parameters")
    if not message.weights:
        return int(message.version), None
    weights = wire.decode_tensors(message.weights, "weights")
    for name, value in weights.items():
        if value.dtype.kind != "f" or not np.isfinite(value).all():
            raise InvalidInput(f"parameter {name} is not finite floats", where="weights")
    return int(message.version), weights


# --- hello and description ---------------------------------------------------------------------


def encode_hello(hello: ActorHello) -> bytes:
    bounds = b""
    if hello.action_low is not None and hello.action_high is not None:
        bounds = wire.encode_tensors(
            {
                "low": np.asarray(hello.action_low, dtype=np.float64),
                "high": np.asarray(hello.action_high, dtype=np.float64),
            }
        )
    observed = b""
    if hello.observation_bounds:
        observed = wire.encode_tensors(
            {
                f"{key}.{end}": np.asarray(value, dtype=np.float64)
                for key, pair in hello.observation_bounds.items()
                for end, value in zip(("low", "high"), pair, strict=True)
            }
        )
    message = pb.ActorHello(
        features=wire.encode_features(hello.features),
        action_bounds=bounds,
        observation_bounds=observed,
    )
    return message.SerializeToString()


def decode_hello(body: bytes) -> ActorHello:
    message = wire.parse(pb.ActorHello, body, "ActorHello")
    features = wire.decode_features(message.features, "features")
    low = high = None
    if message.action_bounds:
        bounds = wire.decode_tensors(message.action_bounds, "action_bounds")
        if set(bounds) != {"low", "high"}:
            raise InvalidInput("action_bounds holds `low` and `high`", where="action_bounds")
        low, high = bounds["low"], bounds["high"]
        if low.shape != high.shape or low.ndim != 1 or np.isnan(low).any() or np.isnan(high).any():
            raise InvalidInput(
                "action bounds must be two vectors of numbers", where="action_bounds"
            )
    observed = (
        _observation_bounds(message.observation_bounds, features)
        if message.observation_bounds
        else {}
    )
    return ActorHello(features, low, high, observed)


def _observation_bounds(
    buffer: bytes, features: Mapping[str, FeatureSpec]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """`<feature>.low` / `<feature>.high` pairs, each of a feature the hello names, finite,
    of its shape, low <= high."""
    arrays = wire.decode_tensors(buffer, "observation_bounds")
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in arrays:
        key, _, end = name.rpartition(".")
        if end not in ("low", "high") or not key:
            raise InvalidInput(
                f"{name}: observation bounds are named <feature>.low and <feature>.high",
                where="observation_bounds",
            )
        if key in out:
            continue
        low, high = arrays.get(f"{key}.low"), arrays.get(f"{key}.high")
        feature = features.get(key)
        if low is None or high is None or feature is None:
            raise InvalidInput(
                f"{key}: observation bounds need both ends, for a feature the actor observes",
                where="observation_bounds",
            )
        if (
            low.shape != tuple(feature.shape)
            or high.shape != low.shape
            or not (np.isfinite(low).all() and np.isfinite(high).all())
            or (low > high).any()
        ):
            raise InvalidInput(
                f"{key}: observation bounds must be finite, low <= high, of the feature's shape "
                f"{tuple(feature.shape)}",
                where="observation_bounds",
            )
        out[key] = (low, high)
    return out


def encode_description(description: LearnerDescription) -> bytes:
    stats = {
        f"{key}.{name}": np.asarray(value, dtype=np.float32)
        for key, per_key in description.stats.items()
        for name, value in per_key.items()
    }
    message = pb.LearnerDescription(
        config_json=json.dumps(lerobot_config_data(description.config)),
        stats=wire.encode_tensors(stats) if stats else b"",
        parameters_version=description.parameters_version,
    )
    return message.SerializeToString()


def decode_description(body: bytes) -> LearnerDescription:
    message = wire.parse(pb.LearnerDescription, body, "LearnerDescription")
    try:
        data: Any = json.loads(message.config_json)
    except json.JSONDecodeError as err:
        raise InvalidInput(f"the policy config is not JSON: {err}", where="config_json") from None
    if not isinstance(data, dict):
        raise InvalidInput("the policy config must be a JSON object", where="config_json")
    config = structure(data, PolicyConfig)
    stats: dict[str, dict[str, np.ndarray]] = {}
    if message.stats:
        for flat, value in wire.decode_tensors(message.stats, "stats").items():
            key, dot, name = flat.rpartition(".")
            if not dot or not np.isfinite(value).all():
                raise InvalidInput(f"bad statistic {flat!r}", where="stats")
            stats.setdefault(key, {})[name] = value
    return LearnerDescription(config, stats, int(message.parameters_version))
