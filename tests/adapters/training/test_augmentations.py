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


# --- as a dataset transform, LeRobot's way: `dataset.set_image_transforms(transforms)` -----

CAMERA = "observation.images.front"


def loaded_images(dataset, *, workers: int = 2, loader_seed: int | None = None) -> list:
    """Frame 0 four times through a DataLoader: batches 0 and 2 come from worker 0, 1 and 3
    from worker 1."""
    from torch.utils.data import DataLoader

    generator = None if loader_seed is None else torch.Generator().manual_seed(loader_seed)
    loader = DataLoader(
        dataset, batch_size=1, sampler=[0, 0, 0, 0], num_workers=workers, generator=generator
    )
    return [batch[CAMERA][0] for batch in loader]


@pytest.fixture
def dataset(fixtures_dir):
    from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset

    return LeRobotTorchDataset(fixtures_dir / "sim_images")


def test_the_augmentations_are_a_dataset_transform_seeded_per_worker(dataset):
    plain = dataset[0][CAMERA]
    settings = ImageTransformsSettings(enable=True)
    dataset.set_image_transforms(ImageAugmentations(settings, seed=7))
    first = loaded_images(dataset)
    assert all(image.shape == plain.shape for image in first)
    assert all(not torch.equal(image, plain) for image in first)
    # Each worker draws its own: the same frame differs between the workers' first draws.
    assert not torch.equal(first[0], first[1])
    assert not torch.equal(first[0], first[2])  # a worker's second draw is a new one
    # The same seed, the same images; another seed, others.
    dataset.set_image_transforms(ImageAugmentations(settings, seed=7))
    assert all(torch.equal(a, b) for a, b in zip(first, loaded_images(dataset), strict=True))
    dataset.set_image_transforms(ImageAugmentations(settings, seed=8))
    assert not torch.equal(loaded_images(dataset)[0], first[0])
    dataset.clear_image_transforms()
    assert torch.equal(dataset[0][CAMERA], plain)


def test_without_a_seed_the_loaders_seed_decides(dataset):
    augment = ImageAugmentations({"enable": True, "max_num_transforms": 2})
    dataset.set_image_transforms(augment)
    first = loaded_images(dataset, loader_seed=3)
    assert all(torch.equal(a, b) for a, b in zip(first, loaded_images(dataset, loader_seed=3)))
    assert not torch.equal(first[0], first[1])
    assert not torch.equal(loaded_images(dataset, loader_seed=4)[0], first[0])
    # In this process (no workers), from torch's seed.
    dataset.clear_image_transforms()
    plain = dataset[0][CAMERA]
    torch.manual_seed(5)
    here = ImageAugmentations({"enable": True})(plain)
    torch.manual_seed(5)
    assert torch.equal(here, ImageAugmentations({"enable": True})(plain))
    assert not torch.equal(here, plain)


def test_lerobots_settings_names_are_read_and_a_disabled_transform_changes_nothing():
    class LeRobotTransformConfig:  # the shape of LeRobot's ImageTransformConfig
        def __init__(self, weight, type, kwargs):
            self.weight, self.type, self.kwargs = weight, type, kwargs

    class LeRobotConfig:  # and of its ImageTransformsConfig
        enable = True
        max_num_transforms = 1
        random_order = False
        tfs = {"b": LeRobotTransformConfig(1.0, "ColorJitter", {"brightness": (0.5, 0.6)})}

    augment = ImageAugmentations(LeRobotConfig(), seed=0)
    assert augment.names == ["b"] and augment.count == 1 and augment.enabled
    img = image()
    # Brightness by a factor in [0.5, 0.6]: every pixel darker, none by more than half.
    out = augment(img)
    assert torch.all(out <= img * 0.6 + 1e-6) and torch.all(out >= img * 0.5 - 1e-6)
    off = ImageAugmentations({"enable": False}, seed=0)
    assert off(img) is img
    with pytest.raises(ConfigError, match="LeRobot's names"):
        ImageAugmentations(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_num_transforms"):
        ImageAugmentations({"enable": True, "max_num_transforms": 0})
