"""X-VLA's processor steps, under LeRobot 0.6.1's registry names, and its LIBERO env processors.

Policy pre-processor (LeRobot's order, after rename and batching): the BART tokenizer, then

    xvla_image_to_float          images in [0, 255] divided by 255 (already in [0, 1]: kept)
    xvla_imagenet_normalize      (image - ImageNet mean) / ImageNet std; images must be in [0, 1]
    xvla_add_domain_id           `domain_id` (one per row) beside the batch, for the soft prompts

and `xvla_image_scale` (x 255) for pipelines that ask for it. On LIBERO, X-VLA brings its own env
processors in place of the env's (`xvla_libero_processors`, LeRobot's
`make_xvla_libero_pre_post_processors`): the agent-view camera turned by 180 degrees and a 20-value
state [eef xyz, the first two columns of its rotation matrix, 0, then ten zeros] before the policy,
ImageNet normalisation and the domain id; after it, `xvla_rotation_6d_to_axis_angle` turns the
action's [xyz, 6D rotation, gripper] into LIBERO's [xyz, axis-angle, ±1 gripper].

Steps take numpy arrays (a simulator's observations) and torch tensors (training batches) alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import torch

from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec
from rlctl.domain.frames import Transition
from rlctl.domain.processors import NoConfig, ProcessorPipeline, Step, register_step

OBS_IMAGES = "observation.images"
OBS_STATE = "observation.state"
DOMAIN_ID = "domain_id"
# Beside the batch, `xvla_imagenet_normalized.<image key>` (one True per row) marks an image
# ImageNet-normalised already (by the env's X-VLA processors), so that the policy's own image steps
# leave it as it is instead of normalising it twice (LeRobot 0.6.1 applies both on LIBERO and then
# refuses the image, its issue #2955). A boolean array with the batch's rows travels to a policy
# served elsewhere (`rlctl policy serve`) like any other array of the observation.
NORMALIZED_MARK = "xvla_imagenet_normalized"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
LIBERO_AGENT_VIEW = f"{OBS_IMAGES}.image"
# rlctl's LIBERO feature map flattens `robot_state` into `observation.state.<piece>`.
LIBERO_EEF_POS = f"{OBS_STATE}.eef_pos"
LIBERO_EEF_MAT = f"{OBS_STATE}.eef_mat"
LIBERO_STATE_PREFIX = f"{OBS_STATE}."
LIBERO_STATE_DIM = 20


def _keys(transition: Transition, image_keys: tuple[str, ...] | None) -> list[str]:
    """The image keys a step works on: the configured ones (or every `observation.images*`
    key) the observation has, less those already ImageNet-normalised."""
    observation = transition.observation
    keys = (
        image_keys
        if image_keys is not None
        else [k for k in observation if k.startswith(OBS_IMAGES)]
    )
    done = set(_normalized(transition))
    return [
        k for k in keys if k in observation and hasattr(observation[k], "shape") and k not in done
    ]


def normalized_mark(key: str) -> str:
    """The batch key marking image `key` as ImageNet-normalised already."""
    return f"{NORMALIZED_MARK}.{key}"


def _normalized(transition: Transition) -> tuple[str, ...]:
    prefix = normalized_mark("")
    return tuple(
        key.removeprefix(prefix)
        for key, value in transition.complementary_data.items()
        if key.startswith(prefix) and bool(value.all() if hasattr(value, "all") else value)
    )


def _float(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.float()
    return np.asarray(x, dtype=np.float32)


def _range(x: Any) -> tuple[float, float]:
    if isinstance(x, torch.Tensor):
        return float(x.min().item()), float(x.max().item())
    array = np.asarray(x)
    return float(array.min()), float(array.max())


def _optional_keys(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(str(v) for v in value)


@attrs.frozen(kw_only=True)
class ImageKeysConfig:
    """Which observation keys are images (None: every `observation.images*` key)."""

    image_keys: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_keys)


@attrs.frozen(kw_only=True)
class ImageToFloatConfig:
    image_keys: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_keys)
    validate_range: bool = True


@register_step("xvla_image_scale")
class ImageScale(Step[ImageKeysConfig]):
    """Images x 255 ([0, 1] → [0, 255])."""

    config_class = ImageKeysConfig

    def __call__(self, transition: Transition) -> Transition:
        observation = dict(transition.observation)
        for key in _keys(transition, self.config.image_keys):
            observation[key] = observation[key] * 255
        return transition.evolve(observation=observation)


@register_step("xvla_image_to_float")
class ImageToFloat(Step[ImageToFloatConfig]):
    """Images in [0, 255] to float in [0, 1]; images already at most 1 only become float."""

    config_class = ImageToFloatConfig

    def __call__(self, transition: Transition) -> Transition:
        observation = dict(transition.observation)
        for key in _keys(transition, self.config.image_keys):
            image = observation[key]
            low, high = _range(image)
            if high <= 1.0:
                observation[key] = _float(image)
                continue
            if self.config.validate_range and (low < 0.0 or high > 255.0):
                raise InvalidInput(
                    f"image {key!r} has values in [{low:.4f}, {high:.4f}], outside [0, 255]",
                    where="xvla_image_to_float",
                    hint="X-VLA reads images in [0, 1] or [0, 255]; an image normalised "
                    "already (ImageNet statistics) must not pass this step again",
                )
            observation[key] = _float(image) / 255.0
        return transition.evolve(observation=observation)


def imagenet_normalize(image: Any) -> Any:
    """(image - mean) / std over the channel axis (third from last), in the image's dtype."""
    if isinstance(image, torch.Tensor):
        shape = (3, 1, 1)
        mean = torch.tensor(IMAGENET_MEAN, dtype=image.dtype, device=image.device).view(shape)
        std = torch.tensor(IMAGENET_STD, dtype=image.dtype, device=image.device).view(shape)
        return (image - mean) / std
    dtype = image.dtype
    mean = np.asarray(IMAGENET_MEAN, dtype=dtype).reshape(3, 1, 1)
    std = np.asarray(IMAGENET_STD, dtype=dtype).reshape(3, 1, 1)
    return (image - mean) / std


@register_step("xvla_imagenet_normalize")
class ImageNetNormalize(Step[ImageKeysConfig]):
    """Images in [0, 1] normalised with ImageNet's mean and standard deviation (once: the keys
    it normalised are marked beside the batch)."""

    config_class = ImageKeysConfig

    def __call__(self, transition: Transition) -> Transition:
        observation = dict(transition.observation)
        keys = _keys(transition, self.config.image_keys)
        for key in keys:
            image = observation[key]
            low, high = _range(image)
            if low < 0.0 or high > 1.0:
                raise InvalidInput(
                    f"image {key!r} has values in [{low:.4f}, {high:.4f}]; ImageNet "
                    "normalisation takes images in [0, 1]",
                    where="xvla_imagenet_normalize",
                    hint="the image was normalised already (by the env's processors and again "
                    "by the policy's?), or is in [0, 255]: put xvla_image_to_float before it",
                )
            observation[key] = imagenet_normalize(image)
        if not keys:
            return transition
        marks = {
            normalized_mark(key): np.ones((_image_rows(observation[key]),), dtype=bool)
            for key in keys
        }
        return transition.evolve(
            observation=observation,
            complementary_data={**transition.complementary_data, **marks},
        )


@attrs.frozen(kw_only=True)
class DomainIdConfig:
    domain_id: int = attrs.field(default=0, converter=int)


def _image_rows(image: Any) -> int:
    """The batch rows of an image (C, H, W) or (B, C, H, W)."""
    return int(image.shape[0]) if len(image.shape) == 4 else 1


def _rows(observation: Mapping[str, Any]) -> int:
    for value in observation.values():
        shape = getattr(value, "shape", None)
        if isinstance(value, (torch.Tensor, np.ndarray)) and shape:
            return int(shape[0])
    return 1


@register_step("xvla_add_domain_id")
class AddDomainId(Step[DomainIdConfig]):
    """`domain_id` (int64, one per batch row) beside the batch: which soft prompts and
    domain projections the model uses."""

    config_class = DomainIdConfig

    def __call__(self, transition: Transition) -> Transition:
        rows = _rows(transition.observation)
        ids = torch.full((rows,), self.config.domain_id, dtype=torch.long)
        return transition.evolve(
            complementary_data={**transition.complementary_data, DOMAIN_ID: ids}
        )


@attrs.frozen(kw_only=True)
class RotationConfig:
    expected_action_dim: int = 10


def rotation_6d_to_matrix(r6d: np.ndarray) -> np.ndarray:
    """(N, 6) two rotation-matrix columns → (N, 3, 3), by Gram-Schmidt (X-VLA's arithmetic)."""
    a1, a2 = r6d[:, 0:3], r6d[:, 3:6]
    b1 = a1 / (np.linalg.norm(a1, axis=-1, keepdims=True) + 1e-6)
    b2 = a2 - np.sum(b1 * a2, axis=-1, keepdims=True) * b1
    b2 = b2 / (np.linalg.norm(b2, axis=-1, keepdims=True) + 1e-6)
    return np.stack([b1, b2, np.cross(b1, b2, axis=-1)], axis=-1)


def matrix_to_quaternion(matrix: np.ndarray) -> np.ndarray:
    """A 3x3 rotation matrix → its (x, y, z, w) quaternion, w ≥ 0 (robosuite's `mat2quat`:
    the eigenvector of the largest eigenvalue of the symmetric K matrix)."""
    m = np.asarray(matrix, dtype=np.float32)[:3, :3]
    k = np.array(
        [
            [m[0, 0] - m[1, 1] - m[2, 2], 0.0, 0.0, 0.0],
            [m[0, 1] + m[1, 0], m[1, 1] - m[0, 0] - m[2, 2], 0.0, 0.0],
            [m[0, 2] + m[2, 0], m[1, 2] + m[2, 1], m[2, 2] - m[0, 0] - m[1, 1], 0.0],
            [m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1], m[0, 0] + m[1, 1] + m[2, 2]],
        ],
        dtype=np.float32,
    )
    k /= 3.0
    values, vectors = np.linalg.eigh(k)
    q = vectors[[3, 0, 1, 2], np.argmax(values)]
    if q[0] < 0.0:
        q = -q
    return q[[1, 2, 3, 0]]


def quaternion_to_axis_angle(quat: np.ndarray) -> np.ndarray:
    """(x, y, z, w) → the axis scaled by the angle; zero for (nearly) no rotation."""
    w = min(max(float(quat[3]), -1.0), 1.0)
    den = np.sqrt(1.0 - w * w)
    if np.isclose(den, 0.0, rtol=1e-09, atol=0.0):
        return np.zeros(3)
    return (quat[:3] * 2.0 * np.arccos(w)) / den


def rotation_6d_to_axis_angle(r6d: np.ndarray) -> np.ndarray:
    matrices = rotation_6d_to_matrix(r6d)
    return np.stack([quaternion_to_axis_angle(matrix_to_quaternion(m)) for m in matrices])


@register_step("xvla_rotation_6d_to_axis_angle")
class Rotation6DToAxisAngle(Step[RotationConfig]):
    """Actions [xyz (3), 6D rotation (6), gripper (1), ...] → [xyz, axis-angle (3), gripper ±1]
    (7 values): the end-effector commands LIBERO takes from an `ee6d` X-VLA."""

    config_class = RotationConfig

    def __call__(self, transition: Transition) -> Transition:
        action = transition.action
        if action is None or not hasattr(action, "shape"):
            return transition
        is_tensor = isinstance(action, torch.Tensor)
        values = action.detach().cpu().numpy() if is_tensor else np.asarray(action)
        if values.ndim != 2 or values.shape[-1] < self.config.expected_action_dim:
            raise InvalidInput(
                f"actions of shape {tuple(values.shape)} hold no [xyz, 6D rotation, gripper] "
                f"layout (at least {self.config.expected_action_dim} values per row)",
                where="xvla_rotation_6d_to_axis_angle",
                hint="this step follows an X-VLA trained in the ee6d action space",
            )
        axis_angle = rotation_6d_to_axis_angle(values[:, 3:9])
        out = np.concatenate([values[:, :3], axis_angle, values[:, 9:10]], axis=-1)
        out[:, -1] = np.where(out[:, -1] > 0.5, 1.0, -1.0)
        if is_tensor:
            result: Any = torch.from_numpy(out).to(device=action.device, dtype=action.dtype)
        else:
            result = out.astype(values.dtype, copy=False)
        return transition.evolve(action=result)

    def transform_features(self, features: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]:
        out = dict(features)
        action = out.get("action")
        if action is not None:
            out["action"] = FeatureSpec("action", action.dtype, (7,), None)
        return out


def _flip(image: Any) -> Any:
    if isinstance(image, torch.Tensor):
        return torch.flip(image, dims=[2, 3])
    return np.ascontiguousarray(np.asarray(image)[:, :, ::-1, ::-1])


@register_step("xvla_libero_processor")
class XVLALiberoObservation(Step[NoConfig]):
    """LIBERO's observation as X-VLA reads it (LeRobot's X-VLA `LiberoProcessorStep`): the
    agent-view camera turned by 180 degrees (the wrist camera as it is) and the 20-value state
    [eef xyz, rotation matrix columns 1 and 2, 0, ten zeros]; the other state pieces dropped."""

    def __call__(self, transition: Transition) -> Transition:
        observation = dict(transition.observation)
        if LIBERO_AGENT_VIEW in observation:
            observation[LIBERO_AGENT_VIEW] = _flip(observation[LIBERO_AGENT_VIEW])
        pieces = {
            k: observation.pop(k) for k in list(observation) if k.startswith(LIBERO_STATE_PREFIX)
        }
        if pieces:
            if LIBERO_EEF_POS not in pieces or LIBERO_EEF_MAT not in pieces:
                raise InvalidInput(
                    "X-VLA reads LIBERO's end-effector position and rotation matrix, and the "
                    f"observation has only {', '.join(sorted(pieces))}",
                    where="xvla_libero_processor",
                    hint="keep robot_state/eef/pos and robot_state/eef/mat in the env's "
                    "features_map (LIBERO's default)",
                )
            position = torch.as_tensor(np.asarray(pieces[LIBERO_EEF_POS])).reshape(-1, 3)
            matrix = torch.as_tensor(np.asarray(pieces[LIBERO_EEF_MAT])).reshape(-1, 3, 3)
            rotation = torch.cat([matrix[:, :3, 0], matrix[:, :3, 1]], dim=-1).float()
            extra = torch.zeros((position.shape[0], 1), dtype=torch.float32)
            state = torch.cat([position, rotation, extra], dim=-1)
            state = torch.cat([state, torch.zeros_like(state)], dim=-1).float()
            observation[OBS_STATE] = state.numpy()
        return transition.evolve(observation=observation)

    def transform_features(self, features: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]:
        out = {k: v for k, v in features.items() if not k.startswith(LIBERO_STATE_PREFIX)}
        if any(k.startswith(LIBERO_STATE_PREFIX) for k in features):
            out[OBS_STATE] = FeatureSpec(OBS_STATE, "float32", (LIBERO_STATE_DIM,))
        return out


def xvla_libero_processors() -> tuple[ProcessorPipeline, ProcessorPipeline]:
    """X-VLA's env processors on LIBERO (LeRobot's `make_xvla_libero_pre_post_processors`)."""
    return (
        ProcessorPipeline(
            [XVLALiberoObservation(), ImageNetNormalize(), AddDomainId()], name="env_preprocessor"
        ),
        ProcessorPipeline([Rotation6DToAxisAngle()], name="env_postprocessor"),
    )
