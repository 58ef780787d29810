"""From a simulator's raw observation to the keys and layout a LeRobot policy reads.

A gym env returns keys such as `pixels`, `pixels/top` (nested dicts are flattened with "/"),
`agent_pos` and `environment_state`, images as uint8 (batch, height, width, channels). Policies
read `observation.image`, `observation.images.top`, `observation.state`,
`observation.environment_state`, images as float32 (batch, channels, height, width) in [0, 1].
This is LeRobot's `preprocess_observation` on numpy, driven by the env's feature map: an entry
of the map wins, the conventional names follow, and any other key passes through as
`observation.<key>`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec

OBS_PREFIX = "observation"
ACTION = "action"
OBS_IMAGE = "observation.image"
OBS_IMAGES = "observation.images"
OBS_STATE = "observation.state"
OBS_ENV_STATE = "observation.environment_state"
PIXELS = "pixels"
NESTED_SEPARATOR = "/"

_CONVENTIONAL = {
    PIXELS: OBS_IMAGE,
    "agent_pos": OBS_STATE,
    "environment_state": OBS_ENV_STATE,
}


def flatten_observation(observation: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"pixels": {"top": x}}` → `{"pixels/top": x}`; flat mappings are returned as they are."""
    out: dict[str, Any] = {}
    for key, value in observation.items():
        name = f"{prefix}{NESTED_SEPARATOR}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(flatten_observation(value, name))
        else:
            out[name] = value
    return out


def policy_key(raw_key: str, features_map: Mapping[str, str]) -> str:
    if raw_key in features_map:
        return features_map[raw_key]
    if raw_key in _CONVENTIONAL:
        return _CONVENTIONAL[raw_key]
    head, _, camera = raw_key.partition(NESTED_SEPARATOR)
    if head == PIXELS and camera:
        return f"{OBS_IMAGES}.{camera}"
    return raw_key if raw_key.startswith(f"{OBS_PREFIX}.") else f"{OBS_PREFIX}.{raw_key}"


def is_image(value: Any) -> bool:
    """A batch of channel-last uint8 images: (batch, height, width, channels), channels small."""
    shape: tuple[int, ...] = getattr(value, "shape", ())
    return (
        getattr(value, "dtype", None) == np.uint8
        and len(shape) == 4
        and shape[3] < shape[1]
        and shape[3] < shape[2]
    )


def image_to_policy(images: np.ndarray) -> np.ndarray:
    """uint8 (B, H, W, C) → float32 (B, C, H, W) in [0, 1]."""
    out = np.ascontiguousarray(np.moveaxis(images, -1, 1), dtype=np.float32)
    out /= 255.0
    return out


def to_policy_observation(
    raw: Mapping[str, Any], features_map: Mapping[str, str] | None = None
) -> dict[str, np.ndarray]:
    """Rename raw keys to policy keys and convert images and float64 state to float32."""
    mapping = features_map or {}
    out: dict[str, np.ndarray] = {}
    for raw_key, value in flatten_observation(raw).items():
        key = policy_key(raw_key, mapping)
        if key in out:
            raise InvalidInput(
                f"two observation keys map to {key!r}",
                where=f"features_map[{raw_key!r}]",
                hint="give each raw observation key its own policy key in the env's features_map",
            )
        array = np.asarray(value)
        if is_image(array):
            out[key] = image_to_policy(array)
        elif array.dtype.kind in "fiub" and array.dtype != np.float32:
            out[key] = array.astype(np.float32)
        else:
            out[key] = array
    return out


def env_policy_features(
    features: Mapping[str, FeatureSpec], features_map: Mapping[str, str] | None = None
) -> dict[str, FeatureSpec]:
    """An env's declared raw features as a policy sees them: `to_policy_observation`'s keys, and
    images channel-first ((height, width, channels) → (channels, height, width)).

    The action is left out: it is what the env takes, not what it observes.
    """
    mapping = features_map or {}
    out: dict[str, FeatureSpec] = {}
    for raw_key, spec in features.items():
        key = policy_key(raw_key, mapping)
        if key == ACTION or raw_key == ACTION:
            continue
        shape = tuple(spec.shape)
        if spec.is_visual and len(shape) == 3:
            out[key] = FeatureSpec(
                key, spec.dtype, (shape[2], shape[0], shape[1]), ["channels", "height", "width"]
            )
        else:
            out[key] = FeatureSpec(key, spec.dtype, shape, spec.names)
    return out
