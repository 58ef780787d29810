"""Image augmentations like LeRobot's `ImageTransforms`, drawn from an explicit generator.

Per camera frame: pick `max_num_transforms` of the configured transforms by weight (without
replacement), apply them in the listed order or a random one. The kinds and ranges are LeRobot's
(`ColorJitter` brightness / contrast / saturation / hue, `SharpnessJitter`, `RandomAffine`,
`Identity`), and the pixel operations are torchvision's, on float CHW images in [0, 1]; a
`(T, C, H, W)` history gets one draw for all its frames.

Unlike LeRobot, randomness comes from a `torch.Generator` the caller seeds per sample, not from
the worker's global RNG: the same sample position gets the same augmentation whatever the
number of loader workers, and a resumed run sees exactly what the uninterrupted one saw.

Called with the image alone, as LeRobot's `ImageTransforms` is (a dataset's
`set_image_transforms(augment)` / `image_transforms=augment`), it draws from a generator of its
own, made afresh in each process and each DataLoader worker: seeded from `seed` and the worker's
number when a seed is given (the same images on every run, each worker its own stream, which
restarts with the worker), else from the loader's per-worker seed (what its `generator=` or
`torch.manual_seed` decides; it changes with every epoch) or, outside a loader's workers, from
`torch.initial_seed()`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rlctl.domain.config import structure
from rlctl.domain.errors import ConfigError
from rlctl.domain.train_settings import ImageTransformSpec, ImageTransformsSettings

Params = dict[str, Any]


def _vision() -> Any:
    # torchvision costs seconds to import (it pulls torch._dynamo); only augmenting needs it.
    from torchvision.transforms.v2 import functional

    return functional


def _uniform(low: float, high: float, generator: torch.Generator) -> float:
    return low + (high - low) * float(torch.rand((), generator=generator))


def _range(
    value: Any, *, centre: float, name: str, lowest: float | None = 0.0
) -> tuple[float, float]:
    """torchvision's convention: a number x means [centre - x, centre + x]; a pair is (lo, hi)."""
    if isinstance(value, (int, float)):
        low, high = centre - float(value), centre + float(value)
        if lowest is not None:
            low = max(low, lowest)
    elif isinstance(value, Sequence) and len(value) == 2:
        low, high = float(value[0]), float(value[1])
    else:
        raise ConfigError(f"{name} must be a number or a [low, high] pair, got {value!r}")
    if low > high or (lowest is not None and low < lowest):
        raise ConfigError(f"{name} range [{low}, {high}] is not valid")
    return low, high


class Augmentation:
    """One transform: draw parameters, then apply them."""

    def draw(self, generator: torch.Generator) -> Params:
        return {}

    def apply(self, image: Tensor, params: Params) -> Tensor:
        return image


class ColorJitter(Augmentation):
    # torchvision's order of the four adjustments, which `draw` permutes.
    _NAMES = ("brightness", "contrast", "saturation", "hue")

    def __init__(self, **kwargs: Any) -> None:
        unknown = set(kwargs) - set(self._NAMES)
        if unknown:
            raise ConfigError(
                f"ColorJitter takes brightness, contrast, saturation, hue; got {sorted(unknown)}"
            )
        self.ranges: dict[str, tuple[float, float]] = {}
        for name, value in kwargs.items():
            if value is None:
                continue
            if name == "hue":
                self.ranges[name] = _range(value, centre=0.0, name=name, lowest=None)
                if not -0.5 <= self.ranges[name][0] <= self.ranges[name][1] <= 0.5:
                    raise ConfigError(f"hue must lie within [-0.5, 0.5], got {value!r}")
            else:
                self.ranges[name] = _range(value, centre=1.0, name=name)

    def draw(self, generator: torch.Generator) -> Params:
        # torchvision applies the four adjustments in a random order.
        order = torch.randperm(len(self._NAMES), generator=generator).tolist()
        names = [self._NAMES[i] for i in order if self._NAMES[i] in self.ranges]
        return {"steps": [(name, _uniform(*self.ranges[name], generator)) for name in names]}

    def apply(self, image: Tensor, params: Params) -> Tensor:
        functional = _vision()
        for name, factor in params["steps"]:
            image = getattr(functional, f"adjust_{name}")(image, factor)
        return image


class SharpnessJitter(Augmentation):
    def __init__(self, sharpness: Any) -> None:
        self.range = _range(sharpness, centre=1.0, name="sharpness")

    def draw(self, generator: torch.Generator) -> Params:
        return {"factor": _uniform(*self.range, generator)}

    def apply(self, image: Tensor, params: Params) -> Tensor:
        return _vision().adjust_sharpness(image, params["factor"])


class RandomAffine(Augmentation):
    """Rotation by `degrees`, shift by up to `translate` (fractions of width, height), and
    optionally a `scale` range; nearest-neighbour, black fill, as torchvision's defaults."""

    def __init__(
        self,
        degrees: Any,
        translate: Sequence[float] | None = None,
        scale: Sequence[float] | None = None,
    ) -> None:
        self.degrees = _range(degrees, centre=0.0, name="degrees", lowest=None)
        self.translate = (float(translate[0]), float(translate[1])) if translate else None
        self.scale = (float(scale[0]), float(scale[1])) if scale else None

    def draw(self, generator: torch.Generator) -> Params:
        params: Params = {"angle": _uniform(*self.degrees, generator), "fractions": (0.0, 0.0)}
        if self.translate is not None:
            tx, ty = self.translate
            params["fractions"] = (_uniform(-tx, tx, generator), _uniform(-ty, ty, generator))
        params["scale"] = _uniform(*self.scale, generator) if self.scale else 1.0
        return params

    def apply(self, image: Tensor, params: Params) -> Tensor:
        height, width = image.shape[-2:]
        fx, fy = params["fractions"]
        return _vision().affine(
            image,
            angle=params["angle"],
            translate=[round(fx * width), round(fy * height)],
            scale=params["scale"],
            shear=[0.0, 0.0],
        )


KINDS: dict[str, Callable[..., Augmentation]] = {
    "Identity": Augmentation,
    "ColorJitter": ColorJitter,
    "SharpnessJitter": SharpnessJitter,
    "RandomAffine": RandomAffine,
}


def _build(name: str, spec: ImageTransformSpec) -> Augmentation:
    kind = KINDS.get(spec.type)
    where = f"dataset.image_transforms.tfs.{name}"
    if kind is None:
        raise ConfigError(
            f"unknown image transform type {spec.type!r}",
            where=f"{where}.type",
            hint=f"rlctl implements: {', '.join(KINDS)}",
        )
    try:
        return kind(**spec.kwargs)
    except TypeError as err:
        raise ConfigError(f"bad arguments for {spec.type}: {err}", where=f"{where}.kwargs") from err
    except ConfigError as err:
        raise ConfigError(err.message, where=f"{where}.kwargs", hint=err.hint) from err


def _settings(value: Any) -> ImageTransformsSettings:
    """rlctl's settings, or LeRobot's names as a mapping or as its `ImageTransformsConfig`."""
    if isinstance(value, ImageTransformsSettings):
        return value
    if value is None:
        return ImageTransformsSettings()
    if not isinstance(value, Mapping) and hasattr(value, "tfs"):
        tfs = {
            name: {"weight": t.weight, "type": t.type, "kwargs": dict(t.kwargs)}
            for name, t in dict(value.tfs).items()
        }
        names = ("enable", "max_num_transforms", "random_order")
        value = {**{n: getattr(value, n) for n in names if hasattr(value, n)}, "tfs": tfs}
    if isinstance(value, Mapping):
        return structure(dict(value), ImageTransformsSettings)
    raise ConfigError(
        f"image transforms settings must be ImageTransformsSettings or a mapping with LeRobot's "
        f"names (enable, max_num_transforms, random_order, tfs), got {type(value).__name__}",
        where="image_transforms",
    )


def _mixed_seed(seed: int, worker: int) -> int:
    state = np.random.SeedSequence([seed & (2**64 - 1), worker]).generate_state(2, np.uint32)
    return int(state[0]) << 32 | int(state[1])


class ImageAugmentations:
    """`augment(image)` or `augment(image, generator)`; nothing happens unless `enable`.

    `settings` are LeRobot's `ImageTransformsConfig` names (`enable`, `max_num_transforms`,
    `random_order`, `tfs` of `weight` / `type` / `kwargs`): rlctl's `ImageTransformsSettings`,
    a mapping, or LeRobot's config object itself. `seed` fixes the draws of `augment(image)`
    (see the module's notes); a generator passed in is used as it is.
    """

    def __init__(
        self,
        settings: ImageTransformsSettings | Mapping[str, Any] | None = None,
        *,
        seed: int | None = None,
    ) -> None:
        settings = _settings(settings)
        self.seed = None if seed is None else int(seed)
        self._generator: torch.Generator | None = None
        self._owner: tuple[int, int | None] | None = None
        chosen = [(n, s) for n, s in settings.tfs.items() if s.weight > 0]
        self.names = [n for n, _ in chosen]
        self.transforms = [_build(n, s) for n, s in chosen]
        self.weights = torch.tensor([s.weight for _, s in chosen], dtype=torch.float64)
        self.count = min(len(chosen), settings.max_num_transforms)
        self.random_order = settings.random_order
        self.enabled = settings.enable and self.count > 0

    def pick(self, generator: torch.Generator) -> list[int]:
        picked = torch.multinomial(self.weights, self.count, replacement=False, generator=generator)
        return picked.tolist() if self.random_order else sorted(picked.tolist())

    def __call__(self, image: Tensor, generator: torch.Generator | None = None) -> Tensor:
        if not self.enabled:
            return image
        if generator is None:
            generator = self.own_generator()
        for index in self.pick(generator):
            transform = self.transforms[index]
            image = transform.apply(image, transform.draw(generator))
        return image

    def own_generator(self) -> torch.Generator:
        """The generator `augment(image)` draws from: one per process and loader worker."""
        info = torch.utils.data.get_worker_info()
        owner = (os.getpid(), None if info is None else int(info.id))
        if self._generator is None or self._owner != owner:
            if self.seed is not None:
                seed = _mixed_seed(self.seed, 0 if info is None else int(info.id) + 1)
            else:
                seed = int(info.seed) if info is not None else torch.initial_seed()
            self._generator = torch.Generator().manual_seed(seed)
            self._owner = owner
        return self._generator

    def __getstate__(self) -> dict[str, Any]:
        # A process the object is sent to (a spawned loader worker) makes its own generator.
        state = dict(self.__dict__)
        state["_generator"] = None
        state["_owner"] = None
        return state

    def __repr__(self) -> str:
        picked = ", ".join(self.names) if self.enabled else "off"
        return f"{type(self).__name__}({picked}, up to {self.count}, seed={self.seed})"


# LeRobot's name for the same thing (`lerobot.transforms.ImageTransforms(cfg)`).
ImageTransforms = ImageAugmentations
