"""HIL-SERL's ResNet-10 (`lerobot/resnet10`), built by rlctl instead of running its Hub code:
JAX's "SAME" padding, its parameter names, its folder read without executing anything, and the
Gaussian actor and reward classifier using it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import save_file

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.policies.resnet10 import (
    ResNet10,
    ResNet10Settings,
    load_resnet10,
    same_padding,
)
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig

MARKER = "remote_code_ran"
# HIL-SERL's widths divided by 8: the same network, quick to run (the full one is counted).
SMALL = ResNet10Settings(embedding_size=8, hidden_sizes=(8, 16, 32, 64))
# Code of its own, as the Hub repo holds: it must never run.
MODELING = f"""
from pathlib import Path
Path(__file__).with_name("{MARKER}").write_text("ran")
"""


@given(size=st.integers(1, 300), kernel=st.integers(1, 7), stride=st.integers(1, 3))
def test_same_padding_gives_jaxs_output_size_with_the_odd_pixel_after(size, kernel, stride):
    before, after = same_padding(size, kernel, stride)
    out = (size + before + after - kernel) // stride + 1
    assert out == math.ceil(size / stride) or before + after == 0
    assert after - before in (0, 1)


def reference_forward(model: ResNet10, x: torch.Tensor) -> torch.Tensor:
    """The network written out for a 128x128 frame, every pad spelled as JAX computes it."""

    def gn(module, y):
        return F.group_norm(y, 4, module.group_norm.weight, module.group_norm.bias, 1e-5)

    e = model.embedder
    y = F.relu(gn(e[1], F.conv2d(x, e[0].weight, stride=2, padding=3)))  # 64x64
    y = F.max_pool2d(F.pad(y, (0, 1, 0, 1), value=-math.inf), 3, 2)  # 32x32: (0, 1)
    for i, stage in enumerate(model.encoder.stages):
        stride = 1 if i == 0 else 2
        pad1 = (1, 1, 1, 1) if stride == 1 else (0, 1, 0, 1)
        out = F.relu(
            gn(stage.norm1, F.conv2d(F.pad(y, pad1), stage.conv1.conv.weight, stride=stride))
        )
        out = gn(stage.norm2, F.conv2d(F.pad(out, (1, 1, 1, 1)), stage.conv2.conv.weight))
        identity = y
        if stage.shortcut is not None:
            identity = gn(
                stage.shortcut[1], F.conv2d(y, stage.shortcut[0].conv.weight, stride=stride)
            )
        y = F.relu(out + identity)
    return y


def randomised(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    return model


def test_the_network_is_hil_serls_resnet10_for_a_128_pixel_frame():
    model = randomised(ResNet10(SMALL)).eval()
    x = torch.rand(2, 3, 128, 128)
    with torch.no_grad():
        out = model(x).last_hidden_state
        expected = reference_forward(model, x)
    assert out.shape == (2, 64, 4, 4)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    full = ResNet10()
    assert sum(p.numel() for p in full.parameters()) == 4_905_792  # the published count


def hub_folder(
    tmp_path: Path, *, weights: str | None = "model.safetensors", settings=SMALL
) -> Path:
    """A folder as the Hub repo holds it: config.json naming its own code, the code, weights."""
    folder = tmp_path / "resnet10"
    folder.mkdir()
    data = {
        "model_type": "resnet10",
        "architectures": ["ResNet10"],
        "auto_map": {
            "AutoConfig": "configuration_resnet.ResNet10Config",
            "AutoModel": "modeling_resnet.ResNet10",
        },
        "embedding_size": settings.embedding_size,
        "hidden_sizes": list(settings.hidden_sizes),
        "hidden_act": "relu",
        "pooler": "avg",
    }
    (folder / "config.json").write_text(json.dumps(data))
    (folder / "modeling_resnet.py").write_text(MODELING)
    (folder / "configuration_resnet.py").write_text(MODELING)
    if weights == "model.safetensors":
        model = randomised(ResNet10(settings), seed=3)
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, folder / weights)
    elif weights is not None:
        (folder / weights).write_bytes(b"not read")
    return folder


def test_a_hub_folder_loads_its_weights_and_never_runs_its_code(tmp_path):
    folder = hub_folder(tmp_path)
    model = load_resnet10(str(folder), weights=True)
    expected = randomised(ResNet10(SMALL), seed=3)
    for name, value in expected.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], value)
    assert not (folder / MARKER).exists()


def test_a_pickled_checkpoint_is_refused_and_a_wrong_one_named(tmp_path):
    folder = hub_folder(tmp_path, weights="pytorch_model.bin")
    with pytest.raises(ConfigError, match=r"has no model\.safetensors") as refused:
        load_resnet10(str(folder), weights=True)
    assert "safetensors weights only" in (refused.value.hint or "")
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "resnet10", "embedding_size": 8}))
    save_file({"embedder.0.weight": torch.zeros(8, 3, 7, 7)}, other / "model.safetensors")
    with pytest.raises(ConfigError, match=r"missing embedder\.1\.group_norm\.weight"):
        load_resnet10(str(other), weights=True)


def actor_config(encoder: str) -> GaussianActorConfig:
    return GaussianActorConfig(
        input_features={
            "observation.images.front": typed_feature("VISUAL", (3, 128, 128)),
            "observation.state": typed_feature("STATE", (3,)),
        },
        output_features={"action": typed_feature("ACTION", (2,))},
        vision_encoder_name=encoder,
        latent_dim=8,
        actor_network_kwargs={"hidden_dims": [16]},  # type: ignore[arg-type]
    )


def stats() -> dict[str, dict[str, np.ndarray]]:
    return {
        "observation.images.front": {"mean": np.zeros((3, 1, 1)), "std": np.ones((3, 1, 1))},
        "observation.state": {"min": -np.ones(3), "max": np.ones(3)},
        "action": {"min": -np.ones(2), "max": np.ones(2)},
    }


@pytest.mark.slow
def test_the_gaussian_actor_encodes_with_it_under_lerobots_names_and_round_trips(
    tmp_path, monkeypatch
):
    folder = hub_folder(tmp_path)
    policy = create_policy(actor_config(str(folder)), stats())
    keys = set(policy.model.state_dict())
    assert "encoder_critic.image_encoder.image_enc_layers.embedder.0.weight" in keys
    assert (
        "encoder_critic.image_encoder.image_enc_layers.encoder.stages.3.shortcut.0.conv.weight"
        in keys
    )
    encoder = policy.model.encoder_critic.image_encoder.image_enc_layers
    torch.testing.assert_close(
        encoder.embedder[0].weight, randomised(ResNet10(SMALL), seed=3).embedder[0].weight
    )
    assert not any(p.requires_grad for p in encoder.parameters())  # frozen, as LeRobot's
    saved = policy.save(tmp_path / "model")
    # The checkpoint holds the encoder: it loads with the encoder's folder gone.
    (folder / "model.safetensors").unlink()
    loaded = load_policy_folder(saved)
    frame = np.random.default_rng(0).random((3, 128, 128), dtype=np.float32)
    observation = {"observation.images.front": frame, "observation.state": np.zeros(3, np.float32)}
    torch.manual_seed(1)
    first = policy.select_action(observation)
    torch.manual_seed(1)
    np.testing.assert_allclose(loaded.select_action(observation), first, atol=1e-6)
    assert not (folder / MARKER).exists()


@pytest.mark.slow
def test_a_checkpoint_naming_lerobots_resnet10_loads_without_the_hub(tmp_path, monkeypatch):
    """A LeRobot SAC config names `lerobot/resnet10`; its checkpoint holds the weights, so no
    Hub is needed to load it (here: none reachable)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    folder = hub_folder(tmp_path, settings=ResNet10Settings())  # its architecture: the default
    saved = create_policy(actor_config(str(folder)), stats()).save(tmp_path / "model")
    data = json.loads((saved / "config.json").read_text())
    data["vision_encoder_name"] = "lerobot/resnet10"
    (saved / "config.json").write_text(json.dumps(data))
    loaded = load_policy_folder(saved)
    encoder = loaded.model.encoder_critic.image_encoder.image_enc_layers
    torch.testing.assert_close(
        encoder.encoder.stages[3].conv2.conv.weight,
        randomised(ResNet10(), seed=3).encoder.stages[3].conv2.conv.weight,
    )


def test_the_reward_classifier_reads_frames_through_it(tmp_path):
    pytest.importorskip("transformers")
    from rlctl.adapters.policies.reward_classifier import RewardClassifier
    from rlctl.domain.policies.registry import policy_config_class

    folder = hub_folder(tmp_path)
    config = policy_config_class("reward_classifier")(
        model_name=str(folder), num_cameras=1, hidden_dim=16, latent_dim=8
    ).with_features({"observation.images.front": typed_feature("VISUAL", (3, 128, 128))}, {})
    model = RewardClassifier(config).eval()
    assert "encoder.embedder.0.weight" in model.state_dict()
    assert "encoders.observation_images_front.0.encoder.stages.0.conv1.conv.weight" in (
        model.state_dict()
    )
    logits, probabilities = model.predict([torch.rand(2, 3, 128, 128)])
    assert logits.shape == (2,) and torch.all((probabilities >= 0) & (probabilities <= 1))
    assert not (folder / MARKER).exists()
