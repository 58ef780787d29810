"""LeRobot-like image augmentations: seeded, shape-preserving, off unless enabled."""

from __future__ import annotations

import pytest
import torch

from rlctl.adapters.training.augmentations import ImageAugmentations
from rlctl.domain.errors import ConfigError
from rlctl.domain.train_settings import ImageTransformSpec, ImageTransformsSettings


def image(*lead: int) -> torch.Tensor:
    return torch.rand(*lead, 3, 24, 32, generator=torch.Generator().manual_seed(0))


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_disabled_by_default_returns_the_image_untouched():
    augment = ImageAugmentations(ImageTransformsSettings())
    img = image()
    assert augment(img, generator(0)) is img


@pytest.mark.parametrize("lead", [(), (2,)])
def test_lerobot_defaults_change_the_image_and_keep_shape_and_range(lead):
    augment = ImageAugmentations(ImageTransformsSettings(enable=True))
    img = image(*lead)
    out = augment(img, generator(1))
    assert out.shape == img.shape and out.dtype == img.dtype
    assert not torch.equal(out, img)
    assert out.min() >= 0 and out.max() <= 1


def test_the_same_seed_gives_the_same_augmentation():
    augment = ImageAugmentations(ImageTransformsSettings(enable=True, random_order=True))
    img = image()
    assert torch.equal(augment(img, generator(7)), augment(img, generator(7)))
    assert not torch.equal(augment(img, generator(7)), augment(img, generator(8)))


def test_a_history_gets_one_draw_for_all_its_frames():
    spec = ImageTransformSpec(1.0, "ColorJitter", {"brightness": [0.5, 0.6]})
    augment = ImageAugmentations(ImageTransformsSettings(enable=True, tfs={"b": spec}))
    frame = image()
    history = torch.stack([frame, frame])
    out = augment(history, generator(3))
    assert torch.equal(out[0], out[1])


def test_at_most_max_num_transforms_in_listed_order():
    augment = ImageAugmentations(ImageTransformsSettings(enable=True, max_num_transforms=2))
    for seed in range(20):
        picked = augment.pick(generator(seed))
        assert len(picked) == 2 and picked == sorted(picked)
    weights_zero = ImageTransformsSettings(
        enable=True, tfs={"off": ImageTransformSpec(0.0, "Identity"), "on": ImageTransformSpec()}
    )
    assert ImageAugmentations(weights_zero).names == ["on"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ImageTransformSpec(1.0, "GaussianBlur", {}), "unknown image transform type"),
        (ImageTransformSpec(1.0, "ColorJitter", {"gamma": 1}), "ColorJitter takes"),
        (ImageTransformSpec(1.0, "ColorJitter", {"hue": [0.2, 0.9]}), "hue"),
        (ImageTransformSpec(1.0, "SharpnessJitter", {"sharpness": [2, 1]}), "not valid"),
        (ImageTransformSpec(1.0, "RandomAffine", {"shear": 3}), "bad arguments"),
    ],
)
def test_bad_specs_name_the_transform(spec, message):
    with pytest.raises(ConfigError, match=message) as err:
        ImageAugmentations(ImageTransformsSettings(enable=True, tfs={"mine": spec}))
    assert "image_transforms.tfs.mine" in (err.value.where or "")
