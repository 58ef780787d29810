"""What a policy is asked and what it answers, checked the same way wherever it runs.

`rlctl policy serve` (`use_cases.serve_policy`) checks each request with these, and so does a
loaded policy on every `predict_chunk` and `select_action` (`rlctl.api.load_policy`): nothing is
predicted from NaN or infinity, an observation the policy cannot read is refused naming every
difference, and NaN or infinite actions are never handed back.

Arrays are numpy arrays, or torch tensors on any device (recognised by their methods: this
layer never imports torch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlctl.application.ports.policy import Policy
from rlctl.domain.errors import FeatureMismatch, InvalidInput
from rlctl.domain.features import FeatureKind, FeatureSpec
from rlctl.domain.remote_inference import NonFiniteChunk, first_non_finite, largest_magnitude

# The kinds a robot sends as vectors: present and of the declared size, or no policy runs.
_VECTOR_KINDS = (FeatureKind.STATE, FeatureKind.ENV)


def check_observation(
    name: str,
    policy: Policy,
    observation: Mapping[str, Any],
    *,
    committed: Any | None = None,
    where: str = "request.observation",
    sender: str = "the request",
    batched: bool = True,
) -> None:
    """Refuse an observation holding NaN or infinity (`InvalidInput` naming the key), then one
    the policy cannot read (`FeatureMismatch` naming every difference, see `check_fits`).
    `committed`: the real-time chunking actions sent along, checked as `rtc.committed`."""
    # Nothing is predicted from NaN or infinity: a policy fed them answers garbage.
    for arrays in (_arrays(observation), {"rtc.committed": committed}):
        bad = _first_non_finite({k: v for k, v in arrays.items() if v is not None})
        if bad is not None:
            raise InvalidInput(
                f"{bad} holds NaN or infinite values",
                where=bad,
                hint="a sensor or the robot's processing produced them; nothing was predicted",
            )
    check_fits(name, policy, observation, where=where, sender=sender, batched=batched)


def check_fits(
    name: str,
    policy: Policy,
    observation: Mapping[str, Any],
    *,
    where: str = "request.observation",
    sender: str = "the request",
    batched: bool = True,
) -> None:
    """Refuse, naming every difference, an observation the policy cannot read: a vector it
    reads missing, not numbers or of another size, a camera of another rank or channel count.
    Cameras missing or of another size are the policy's to judge (some resize, some fill them
    in). `batched`: every array has a leading batch axis; otherwise a single sample without one
    is read too (as a loaded policy's pre-processor adds it)."""
    arrays = _arrays(observation)
    sent = {
        key: FeatureSpec(key, str(value.dtype), tuple(value.shape[1:]))
        for key, value in arrays.items()
    }
    seen = policy.observation_features(sent)
    whole = (
        {}
        if batched
        else policy.observation_features(
            {k: FeatureSpec(k, str(v.dtype), tuple(v.shape)) for k, v in arrays.items()}
        )
    )
    # What is sent but is no array, under the key the policy reads it by.
    others = policy.observation_features(
        {
            key: FeatureSpec(key, type(value).__name__, ())
            for key, value in observation.items()
            if key not in arrays
        }
    )
    # A policy reading a history gets it stacked on the axis after the batch's.
    history = policy.config.n_obs_steps
    # What the policy fills in when it is missing (GR00T's state).
    optional: frozenset[str] = getattr(policy, "optional_inputs", frozenset())
    problems: list[str] = []
    for key, feature in policy.input_features.items():
        wanted = tuple(feature.shape)
        spec = seen.get(key)
        single = whole.get(key)
        if feature.kind not in _VECTOR_KINDS and feature.kind is not FeatureKind.VISUAL:
            continue
        if key in others:
            problems.append(f"it reads {key} as an array, {sender} has a {others[key].dtype}")
        elif spec is not None and not _numeric(spec.dtype):
            problems.append(f"it reads {key} as numbers, {sender} has an array of {spec.dtype}")
        elif feature.kind in _VECTOR_KINDS:
            if spec is None:
                if key not in optional:
                    problems.append(f"it reads {key} {_shape(wanted)}, which {sender} lacks")
            elif not _fits(tuple(spec.shape), wanted, history) and not (
                single is not None and _fits(tuple(single.shape), wanted, history)
            ):
                shown = spec.shape if batched or single is None else single.shape
                problems.append(
                    f"it reads {key} as {_wanted(wanted, history)}, {sender} has {_shape(shown)}"
                )
        elif (
            spec is not None
            and len(wanted) == 3
            and not _camera_fits(tuple(spec.shape), wanted, history)
            and not (single is not None and _camera_fits(tuple(single.shape), wanted, history))
        ):
            shown = spec.shape if batched or single is None else single.shape
            problems.append(
                f"it reads {key} as channels-first {_wanted(wanted, history)}, {sender} has "
                f"{_shape(shown)}"
            )
    if problems:
        raise FeatureMismatch(
            f"the observation does not fit policy {name!r}: " + "; ".join(problems),
            where=where,
            hint="send the features the policy was trained on (batch first, a history "
            "stacked on axis 1 when it reads one; images float, channels first)",
        )


def check_actions(
    name: str,
    actions: Any,
    observation: Mapping[str, Any],
    *,
    where: str = "policy.predict",
    what: str = "none is sent",
) -> None:
    """Refuse (`NonFiniteChunk`) NaN or infinite actions: none of them may reach an arm."""
    if _first_non_finite({"actions": actions}) is not None:
        raise non_finite_chunk(name, observation, where=where, what=what)


def non_finite_chunk(
    name: str,
    observation: Mapping[str, Any],
    *,
    where: str = "policy.predict",
    what: str = "none is sent",
) -> NonFiniteChunk:
    """The error for policy `name` answering `observation` with NaN or infinite actions."""
    return NonFiniteChunk(
        f"policy {name!r} answered with NaN or infinite actions; {what}",
        where=where,
        hint=far_out(observation),
    )


def far_out(observation: Mapping[str, Any]) -> str:
    """Why a policy may answer NaN: the observation value reaching furthest from zero."""
    found = largest_magnitude({k: _host(v) for k, v in _arrays(observation).items()})
    where = f" ({found[0]} reaches {found[1]:.3g})" if found is not None else ""
    return (
        f"the observation may be far outside what the policy was trained on{where}; "
        "the robot holds and asks again with its next observation"
    )


def _arrays(observation: Mapping[str, Any]) -> dict[str, Any]:
    # numpy arrays and torch tensors alike; task texts and other values are not arrays.
    return {
        key: value
        for key, value in observation.items()
        if hasattr(value, "shape") and hasattr(value, "dtype")
    }


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "detach") and hasattr(value, "isfinite")


def _host(value: Any) -> Any:
    # A tensor as numpy on the host; floats as float32 (numpy has no bfloat16).
    if not _is_tensor(value):
        return value
    value = value.detach()
    return (value.float() if value.is_floating_point() else value).cpu().numpy()


def _first_non_finite(arrays: Mapping[str, Any]) -> str | None:
    """`first_non_finite`, torch tensors checked where they are (a GPU's stay there)."""
    for key, value in arrays.items():
        if _is_tensor(value):
            if (value.is_floating_point() or value.is_complex()) and not bool(
                value.isfinite().all()
            ):
                return key
        elif first_non_finite({key: value}) is not None:
            return key
    return None


def _numeric(dtype: str) -> bool:
    # torch's dtypes ("torch.float32") are all numbers; numpy's may hold objects or text.
    if dtype.startswith("torch."):
        return True
    try:
        return np.dtype(dtype).kind in "biufc"
    except TypeError:
        return False


def _fits(shape: tuple[int, ...], wanted: tuple[int, ...], history: int) -> bool:
    # `shape` without its batch axis: `wanted`, or (history, *wanted) with the history axis
    # (of one step too, for a policy reading one step).
    return shape == wanted or shape == (history, *wanted)


def _camera_fits(got: tuple[int, ...], wanted: tuple[int, ...], history: int) -> bool:
    return len(got) >= 3 and _fits(got[:-2], wanted[:1], history)


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(v) for v in shape) + ("," if len(shape) == 1 else "") + ")"


def _wanted(shape: tuple[int, ...], history: int) -> str:
    if history <= 1:
        return _shape(shape)
    return f"{_shape(shape)} or {history} observation steps of it {_shape((history, *shape))}"
