"""LeRobot's HIL-SERL processor steps for gym-hil, by their LeRobot registry names.

- `gym_hil_adapter_processor`: copies gym-hil's `teleop_action` and `discrete_penalty` from
  `info` into `complementary_data`, and keeps `is_intervention` in `info`, where LeRobot's
  learner and recorder read them.
- `intervention_action_processor`: when the person intervenes, the action becomes theirs; the
  episode is done when they end it (or on success with `terminate_on_success`); the reward is
  1.0 on a success they signal. `complementary_data["teleop_action"]` is the action executed.
- `image_crop_resize_processor`: crops each named image to (top, left, height, width) and
  resizes every image to `resize_size`, as torchvision's `crop` and `resize` (antialiased
  bilinear), values clamped to [0, 1]. Images are (..., channels, height, width) floats.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.frames import Transition
from rlctl.domain.processors.registry import register_step
from rlctl.domain.processors.step import NoConfig, Step

if TYPE_CHECKING:
    from rlctl.adapters.sim.envs.hil import HilEnv

TELEOP_ACTION_KEY = "teleop_action"
DISCRETE_PENALTY_KEY = "discrete_penalty"
IS_INTERVENTION = "is_intervention"
TERMINATE_EPISODE = "terminate_episode"
SUCCESS = "success"
RERECORD_EPISODE = "rerecord_episode"


@register_step("gym_hil_adapter_processor")
class GymHILAdapter(Step[NoConfig]):
    def __call__(self, transition: Transition) -> Transition:
        info = dict(transition.info)
        data = dict(transition.complementary_data)
        for key in (TELEOP_ACTION_KEY, DISCRETE_PENALTY_KEY):
            if key in info:
                data[key] = info[key]
        return transition.evolve(info=info, complementary_data=data)


@attrs.frozen
class InterventionConfig:
    use_gripper: bool = False
    terminate_on_success: bool = True


@register_step("intervention_action_processor")
class InterventionAction(Step[InterventionConfig]):
    config_class = InterventionConfig

    def __call__(self, transition: Transition) -> Transition:
        if transition.action is None:
            raise ConfigError(
                "the intervention step needs the policy's action",
                where="intervention_action_processor",
            )
        info = dict(transition.info)
        data = dict(transition.complementary_data)
        teleop = data.get(TELEOP_ACTION_KEY)
        intervening = bool(info.get(IS_INTERVENTION, False))
        success = bool(info.get(SUCCESS, False))
        action = transition.action
        if intervening and teleop is not None:
            if isinstance(teleop, Mapping):
                values = [teleop.get(k, 0.0) for k in ("delta_x", "delta_y", "delta_z")]
                if self.config.use_gripper:
                    values.append(teleop.get("gripper", 1.0))
            else:
                values = np.asarray(teleop).tolist()
            action = _like(values, action)
        done = bool(info.get(TERMINATE_EPISODE, False)) or (
            self.config.terminate_on_success and success
        )
        info[IS_INTERVENTION] = intervening
        info[RERECORD_EPISODE] = bool(info.get(RERECORD_EPISODE, False))
        info[SUCCESS] = success
        data[TELEOP_ACTION_KEY] = action
        return transition.evolve(
            action=action, done=done, reward=float(success), info=info, complementary_data=data
        )


def _like(values: Any, reference: Any) -> Any:
    """`values` as an array of `reference`'s kind, dtype and device."""
    if type(reference).__module__.startswith("torch"):
        import torch

        return torch.tensor(values, dtype=reference.dtype, device=reference.device)
    return np.asarray(values, dtype=np.asarray(reference).dtype)


def _crops(value: Any) -> dict[str, tuple[int, int, int, int]] | None:
    if value is None:
        return None
    out = {}
    for key, box in dict(value).items():
        box = tuple(int(v) for v in box)
        if len(box) != 4 or box[2] <= 0 or box[3] <= 0 or box[0] < 0 or box[1] < 0:
            raise ConfigError(
                f"the crop of {key!r} must be (top, left, height, width) with a positive size, "
                f"got {box}",
                where="crop_params_dict",
            )
        out[str(key)] = box
    return out


def _size(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    size = tuple(int(v) for v in value)
    if len(size) != 2 or min(size) <= 0:
        raise ConfigError(
            f"resize_size must be (height, width), both positive, got {value!r}",
            where="resize_size",
        )
    return size  # type: ignore[return-value]


@attrs.frozen
class CropResizeConfig:
    crop_params_dict: dict[str, tuple[int, int, int, int]] | None = attrs.field(
        default=None, converter=_crops
    )
    resize_size: tuple[int, int] | None = attrs.field(default=None, converter=_size)


def crop_resize(
    image: Any, crop: tuple[int, int, int, int] | None, size: tuple[int, int] | None
) -> Any:
    """torchvision's crop then resize of (..., C, H, W): numpy in, numpy out; torch, torch."""
    import torch
    from torchvision.transforms import functional as tvf

    is_numpy = not isinstance(image, torch.Tensor)
    tensor = torch.as_tensor(np.asarray(image)) if is_numpy else image
    if crop is not None:
        top, left, height, width = crop
        h, w = tensor.shape[-2:]
        if top + height > h or left + width > w:
            raise ConfigError(
                f"the crop (top={top}, left={left}, height={height}, width={width}) goes past "
                f"the {h}x{w} image",
                where="crop_params_dict",
                hint="give a region inside the image",
            )
        tensor = tvf.crop(tensor, top, left, height, width)
    if size is not None:
        tensor = tvf.resize(tensor, list(size)).clamp(0.0, 1.0)
    return tensor.numpy() if is_numpy else tensor


@register_step("image_crop_resize_processor")
class ImageCropResize(Step[CropResizeConfig]):
    config_class = CropResizeConfig

    def __call__(self, transition: Transition) -> Transition:
        crops, size = self.config.crop_params_dict or {}, self.config.resize_size
        if size is None and not crops:
            return transition
        observation = dict(transition.observation)
        for key, value in transition.observation.items():
            if "image" in key:
                observation[key] = crop_resize(value, crops.get(key), size)
        return transition.evolve(observation=observation)

    def transform_features(self, features: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]:
        out = dict(features)
        crops, size = self.config.crop_params_dict or {}, self.config.resize_size
        for key, spec in features.items():
            if "image" not in key or not spec.is_visual:
                continue
            channels = spec.shape[0]
            if size is not None:
                out[key] = attrs.evolve(spec, shape=(channels, *size))
            elif key in crops:
                out[key] = attrs.evolve(spec, shape=(channels, crops[key][2], crops[key][3]))
        return out


def env_pipelines(config: HilEnv) -> tuple[Any, Any]:
    """The env's (pre, post) pipelines, as LeRobot's `make_processors` builds them for gym-hil."""
    from rlctl.domain.processors import ProcessorPipeline

    steps: list[Any] = [GymHILAdapter()]
    images = config.processor.image_preprocessing
    if images is not None and (images.crop_params_dict or images.resize_size):
        steps.append(ImageCropResize(CropResizeConfig(images.crop_params_dict, images.resize_size)))
    return (
        ProcessorPipeline(steps, name="env_preprocessor"),
        ProcessorPipeline(name="env_postprocessor"),
    )
