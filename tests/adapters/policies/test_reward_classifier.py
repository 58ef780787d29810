"""The reward classifier: LeRobot's model on a tiny offline encoder, trained with `rlctl train` on
labelled frames, and served as a `SuccessDetector`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402

from rlctl.domain.errors import ConfigError, InvalidInput  # noqa: E402
from rlctl.domain.features import typed_feature  # noqa: E402
from rlctl.domain.policies.config import lerobot_config_data  # noqa: E402
from rlctl.domain.policies.registry import policy_config_class  # noqa: E402

FRONT = "observation.images.front"
SIZE = 32  # a 32x32 frame through the tiny ResNet below gives the 4x4 map the head expects
TINY = {"hidden_dim": 16, "latent_dim": 8, "image_embedding_pooling_dim": 2, "dropout_rate": 0.0}


def save_tiny_resnet(folder: Path) -> Path:
    from transformers import ResNetConfig, ResNetModel

    torch.manual_seed(0)
    config = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic")
    ResNetModel(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> Path:
    return save_tiny_resnet(tmp_path_factory.mktemp("tiny_resnet"))


def classifier_config(encoder: Path, **fields):
    config = policy_config_class("reward_classifier")(
        model_name=str(encoder), **{"num_cameras": 1, **TINY, **fields}
    )
    image = typed_feature("VISUAL", (3, SIZE, SIZE), FRONT)
    state = typed_feature("STATE", (2,), "observation.state")
    return config.with_features({FRONT: image, "observation.state": state}, {})


def frames(n: int, bright: bool, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = 0.8 if bright else 0.2
    return np.clip(base + 0.05 * rng.standard_normal((n, 3, SIZE, SIZE)), 0, 1).astype(np.float32)


def test_the_config_is_lerobots_and_reads_only_the_cameras(tmp_path):
    encoder = tmp_path  # the config never opens it
    config = classifier_config(encoder)
    assert list(config.input_features) == [FRONT] and config.output_features == {}
    data = lerobot_config_data(config)
    assert data["type"] == "reward_classifier" and data["normalization_mapping"] == {
        "VISUAL": "MEAN_STD"
    }
    # Only LeRobot's reward-model fields: LeRobot refuses unknown keys in a config.json.
    assert "n_obs_steps" not in data and "use_amp" not in data
    preset = config.optimizer_preset()
    assert (preset.type, preset.lr, preset.weight_decay, preset.grad_clip_norm) == (
        "adamw",
        1e-4,
        0.01,
        1.0,
    )
    with pytest.raises(ConfigError) as caught:
        classifier_config(encoder, num_cameras=2)
    assert caught.value.where == "policy.num_cameras"
    with pytest.raises(ConfigError, match="camera frames"):
        policy_config_class("reward_classifier")().with_features(
            {"observation.state": typed_feature("STATE", (2,), "observation.state")}, {}
        )


def test_an_encoder_that_cannot_be_found_is_named(tmp_path):
    from rlctl.adapters.policies.base import build_policy

    with pytest.raises(ConfigError) as caught:
        build_policy(classifier_config(tmp_path / "nowhere"))
    assert caught.value.where == "policy.model_name" and "local folder" in caught.value.hint


@pytest.mark.slow
def test_it_learns_bright_from_dark_with_the_encoder_frozen(encoder):
    from rlctl.adapters.policies.base import build_policy

    model = build_policy(classifier_config(encoder))
    frozen = {k: v.clone() for k, v in model.encoder.state_dict().items() if v.is_floating_point()}
    trained = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trained and not any(n.startswith("encoder.") for n in trained)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    images = torch.from_numpy(np.concatenate([frames(8, True), frames(8, False, seed=1)]))
    labels = torch.tensor([1.0] * 8 + [0.0] * 8).unsqueeze(-1)  # (B, 1), as a dataset gives it
    model.train()
    first = None
    for _ in range(25):
        loss, metrics = model({FRONT: images, "next.reward": labels})
        first = first if first is not None else loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < first
    model.eval()
    with torch.no_grad():
        _, metrics = model({FRONT: images, "next.reward": labels})
    assert metrics["accuracy"] == 100.0 and metrics["total"] == 16
    probabilities = model.success_probability({FRONT: torch.from_numpy(frames(4, True, seed=5))})
    assert (probabilities > 0.5).all()
    assert model.predict_reward({FRONT: torch.from_numpy(frames(4, False, seed=6))}).sum() == 0
    for key, value in model.encoder.state_dict().items():
        if key in frozen and "running" not in key:
            assert torch.equal(value, frozen[key]), key
    with pytest.raises(ConfigError, match=r"next\.reward"):
        model({FRONT: images})


def write_labelled_frames(root: Path) -> Path:
    from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions

    features = {
        "observation.state": {"dtype": "float32", "shape": [2], "names": ["a", "b"]},
        "action": {"dtype": "float32", "shape": [2], "names": ["a", "b"]},
        FRONT: {
            "dtype": "image",
            "shape": [SIZE, SIZE, 3],
            "names": ["height", "width", "channels"],
        },
        "next.reward": {"dtype": "float32", "shape": [1], "names": None},
    }
    options = WriterOptions(encode_in_subprocess=False, durable=False)
    with LeRobotV3Writer(options=options).create(root, fps=10, features=features) as session:
        for episode in range(2):
            for t in range(10):
                success = t >= 5  # the second half of each episode shows the task done
                image = frames(1, success, seed=10 * episode + t)[0]
                session.add_frame(
                    {
                        "observation.state": np.zeros(2, np.float32),
                        "action": np.zeros(2, np.float32),
                        FRONT: (np.moveaxis(image, 0, -1) * 255).astype(np.uint8),
                        "next.reward": np.array([float(success)], np.float32),
                        "task": "pick",
                    }
                )
            session.save_episode()
    return root


@pytest.mark.slow
def test_rlctl_train_then_the_checkpoint_tells_success(encoder, tmp_path):
    from rlctl.adapters.policies.success_detector import ClassifierSuccessDetector
    from rlctl.entrypoints.cli.main import cli

    dataset = write_labelled_frames(tmp_path / "frames")
    out = tmp_path / "run"
    args = [
        "train",
        f"--dataset.root={dataset}",
        "--policy.type=reward_classifier",
        f"--policy.model_name={encoder}",
        "--policy.num_cameras=1",
        *[f"--policy.{k}={v}" for k, v in TINY.items()],
        "--policy.learning_rate=0.01",
        "--steps=50",
        "--batch_size=10",
        "--num_workers=0",
        "--save_freq=50",
        f"--output_dir={out}",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    folder = out / "checkpoints" / "last" / "pretrained_model"
    saved = json.loads((folder / "config.json").read_text())
    assert saved["type"] == "reward_classifier" and list(saved["input_features"]) == [FRONT]
    detector = ClassifierSuccessDetector.load(folder)

    # Frames as a robot gives them: (height, width, 3) uint8; other keys are ignored.
    def robot_frame(bright: bool, seed: int) -> np.ndarray:
        return (np.moveaxis(frames(1, bright, seed=seed)[0], 0, -1) * 255).astype(np.uint8)

    done = [detector.is_success({FRONT: robot_frame(True, s), "x": 1}) for s in range(90, 96)]
    not_done = [detector.is_success({FRONT: robot_frame(False, s)}) for s in range(90, 96)]
    assert sum(done) >= 4 and sum(not_done) == 0, (done, not_done)
    assert 0.0 <= detector.success_probability({FRONT: frames(1, True)[0]}) <= 1.0
    with pytest.raises(InvalidInput, match=FRONT):
        detector.success_probability({"observation.images.wrist": robot_frame(True, 0)})
