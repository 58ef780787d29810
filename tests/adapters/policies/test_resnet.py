"""Our ResNet, FrozenBatchNorm2d and image resize/crop are torchvision's, bit for bit: same
state-dict keys and shapes, same initial weights for a seed, same outputs for the same weights;
and loading a policy never imports torchvision."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from rlctl.adapters.policies import backbones, denoising
from rlctl.adapters.policies.resnet import FrozenBatchNorm2d
from rlctl.domain.errors import ConfigError

tv_models = pytest.importorskip("torchvision.models")
tv_ops = pytest.importorskip("torchvision.ops")
tv_functional = pytest.importorskip("torchvision.transforms.functional")

CASES = [
    ("resnet18", "batch", None),
    ("resnet18", "frozen", [False, False, False]),
    ("resnet50", "batch", None),
    ("resnet50", "frozen", [False, False, True]),
]


def _pair(name: str, norm: str, dilation: list[bool] | None, seed: int = 0):
    ours_norm = FrozenBatchNorm2d if norm == "frozen" else None
    theirs_norm = tv_ops.FrozenBatchNorm2d if norm == "frozen" else nn.BatchNorm2d
    torch.manual_seed(seed)
    ours = backbones.resnet(
        name,
        None,
        load_weights=False,
        norm_layer=ours_norm,
        replace_stride_with_dilation=dilation,
    )
    torch.manual_seed(seed)
    theirs = getattr(tv_models, name)(
        weights=None, norm_layer=theirs_norm, replace_stride_with_dilation=dilation
    )
    return ours, theirs


@pytest.mark.parametrize(("name", "norm", "dilation"), CASES)
def test_same_state_dict_initial_weights_and_outputs(name, norm, dilation) -> None:
    ours, theirs = _pair(name, norm, dilation)
    mine, reference = ours.state_dict(), theirs.state_dict()
    assert list(mine) == list(reference)
    for key, value in reference.items():
        assert mine[key].shape == value.shape, key
        # The same seed draws the same weights: construction order and init are torchvision's.
        assert torch.equal(mine[key], value), key

    # Arbitrary weights and statistics (not the init's ones and zeros), loaded strictly.
    generator = torch.Generator().manual_seed(1)
    weights = {
        key: (torch.rand(value.shape, generator=generator) + 0.5).to(value.dtype)
        if value.is_floating_point()
        else value
        for key, value in reference.items()
    }
    theirs.load_state_dict(weights)
    ours.load_state_dict(theirs.state_dict())
    ours.eval()
    theirs.eval()
    x = torch.randn(2, 3, 64, 80, generator=generator)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=0)
        trunk = nn.Sequential(*list(ours.children())[:-2])
        reference_trunk = nn.Sequential(*list(theirs.children())[:-2])
        torch.testing.assert_close(trunk(x), reference_trunk(x), rtol=0, atol=0)


def test_frozen_batch_norm_matches_torchvisions_and_loads_a_batch_norm() -> None:
    batch_norm = nn.BatchNorm2d(8)
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for tensor in (batch_norm.weight, batch_norm.bias, batch_norm.running_mean):
            tensor.copy_(torch.randn(8, generator=generator))
        batch_norm.running_var.copy_(torch.rand(8, generator=generator) + 0.1)
    state = batch_norm.state_dict()
    assert "num_batches_tracked" in state

    ours, theirs = FrozenBatchNorm2d(8), tv_ops.FrozenBatchNorm2d(8)
    ours.load_state_dict(state)  # strict: the counter is dropped, not unexpected
    theirs.load_state_dict(state)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert not list(ours.parameters())
    assert ours.eps == theirs.eps == 1e-5
    x = torch.randn(3, 8, 5, 7, generator=generator)
    torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=0)
    assert repr(ours) == repr(theirs)


RESIZES = [
    ((24, 32), torch.float32),
    ((61, 90), torch.float32),
    ((48, 64), torch.float32),
    ((30, 41), torch.float64),
    ((30, 41), torch.bfloat16),
]


@pytest.mark.parametrize(("size", "dtype"), RESIZES)
def test_resize_is_torchvisions(size, dtype) -> None:
    x = torch.rand(2, 3, 48, 64, generator=torch.Generator().manual_seed(3)).to(dtype)
    expected = tv_functional.resize(x, list(size), antialias=True)
    got = denoising.resize_images(x, size)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize(("crop_h", "crop_w"), [(40, 56), (43, 57), (47, 63), (48, 64), (1, 2)])
def test_centre_crop_is_torchvisions(crop_h, crop_w) -> None:
    x = torch.rand(2, 3, 48, 64)
    got = denoising.crop_images(x, (crop_h, crop_w), random=False)
    torch.testing.assert_close(got, tv_functional.center_crop(x, [crop_h, crop_w]))


@pytest.mark.parametrize("name", ["resnet", "resnet19", "resnext50_32x4d", "vit_b_16"])
def test_unknown_backbone(name: str) -> None:
    with pytest.raises(ConfigError, match="unknown vision backbone") as info:
        backbones.resnet(name, None, load_weights=False)
    assert info.value.where == "policy.vision_backbone"
    assert "resnet18" in info.value.hint


@pytest.mark.parametrize(
    "weights", ["ResNet50_Weights.IMAGENET1K_V1", "ResNet18_Weights.NOPE", "nonsense"]
)
def test_weights_that_do_not_fit_the_backbone(weights: str) -> None:
    with pytest.raises(ConfigError, match="cannot load the backbone weights") as info:
        backbones.resnet("resnet18", weights, load_weights=True)
    assert info.value.where == "policy.pretrained_backbone_weights"


def test_weights_are_not_fetched_for_a_checkpoint(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torchvision", None)  # any import of it would fail
    net = backbones.resnet("resnet18", "ResNet18_Weights.IMAGENET1K_V1", load_weights=False)
    assert net.fc.out_features == 1000


@pytest.mark.parametrize("norm_layer", [None, FrozenBatchNorm2d])
def test_pretrained_weights_load_through_torchvision(monkeypatch, norm_layer) -> None:
    torch.manual_seed(4)
    imagenet = tv_models.resnet18(weights=None).state_dict()  # stands in for the download
    asked = []

    def get_state_dict(self, **kwargs):
        asked.append((self, kwargs))
        return dict(imagenet)

    monkeypatch.setattr(tv_models.ResNet18_Weights, "get_state_dict", get_state_dict)
    net = backbones.resnet(
        "resnet18", "ResNet18_Weights.IMAGENET1K_V1", load_weights=True, norm_layer=norm_layer
    )
    assert asked == [
        (tv_models.ResNet18_Weights.IMAGENET1K_V1, {"progress": True, "check_hash": True})
    ]
    for key, value in net.state_dict().items():
        assert torch.equal(value, imagenet[key]), key


PROBE = """
import sys
from rlctl.api import load_policy
for folder in sys.argv[1:]:
    load_policy(folder, device="cpu")
print(sorted(m for m in ("torchvision", "torch._dynamo", "torch._inductor") if m in sys.modules))
"""


@pytest.mark.slow
def test_loading_a_policy_does_not_import_torchvision(fixtures_dir: Path) -> None:
    folders = [str(fixtures_dir / name) for name in ("act_tiny", "diffusion_tiny")]
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *folders],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.strip().splitlines()[-1]
    assert "torchvision" not in loaded, f"loading the fixture policies imported {loaded}"
