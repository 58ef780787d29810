"""Reward classifier checkpoints both ways with LeRobot 0.6.1 (run when RLCTL_LEROBOT_PYTHON names
a Python with LeRobot and transformers): a classifier LeRobot saves gives in rlctl the
probabilities LeRobot gives for the same frames, its saved pre-processor included, and one rlctl
saves gives in LeRobot (`Classifier.from_pretrained`) what it gives in rlctl. Both build on one
tiny Hugging Face ResNet folder, which each tool reads offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers", reason="the reward classifier's encoder needs transformers")

from rlctl.adapters.policies.checkpoint import read_config, read_model  # noqa: E402
from rlctl.adapters.policies.success_detector import ClassifierSuccessDetector  # noqa: E402
from tests.adapters.policies import interop_support as interop  # noqa: E402

HERE = Path(__file__).parent
LEROBOT_SCRIPT = HERE / "lerobot_reward_classifier.py"
TOLERANCE = 1e-5
SIZES = {"hidden_dim": 16, "latent_dim": 8, "image_embedding_pooling_dim": 3}

SPECS: dict[str, dict[str, Any]] = {
    "two cameras, two classes": {
        "cameras": {
            "observation.images.front": [3, 32, 32],
            "observation.images.wrist": [3, 32, 32],
        },
        "config": {"num_cameras": 2},
    },
    "one camera, three classes": {
        "cameras": {"observation.image": [3, 32, 32]},
        "config": {"num_cameras": 1, "num_classes": 3},
    },
}


def save_tiny_resnet(folder: Path) -> Path:
    from transformers import ResNetConfig, ResNetModel

    torch.manual_seed(0)
    config = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic")
    ResNetModel(config).save_pretrained(folder)
    return folder


def write_inputs(path: Path, spec: dict[str, Any]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    inputs = {k: rng.uniform(size=(3, *s)).astype(np.float32) for k, s in spec["cameras"].items()}
    np.savez(path, **inputs)
    return inputs


def rlctl_probabilities(model, inputs: dict[str, np.ndarray]) -> np.ndarray:
    model.eval()
    with torch.no_grad():
        images = [torch.from_numpy(inputs[k]) for k in model.input_image_keys]
        return model.predict(images)[1].numpy()


@pytest.mark.lerobot
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_checkpoints_give_the_same_probabilities_in_both_tools(name, lerobot, tmp_path):
    spec = {**SPECS[name], "seed": 7}
    spec["config"] = {**SIZES, **spec["config"]}
    encoder = save_tiny_resnet(tmp_path / "encoder")
    inputs_path = tmp_path / "inputs.npz"
    inputs = write_inputs(inputs_path, spec)

    # LeRobot's checkpoint, in rlctl.
    theirs = tmp_path / "lerobot_model"
    made = lerobot(LEROBOT_SCRIPT, "make", theirs, encoder, json.dumps(spec), inputs_path)
    config = read_config(theirs)
    assert config.type_name == "reward_classifier"
    model = read_model(theirs, config)
    expected = np.array(made["probabilities"])
    ours = rlctl_probabilities(model, inputs)
    assert ours.shape == expected.shape and np.ptp(expected) > 1e-3
    interop.assert_close(f"{name}: LeRobot checkpoint in rlctl", ours, expected, TOLERANCE)

    if config.num_classes == 2:
        # The detector reads LeRobot's saved pre-processor (mean-std of the cameras) too.
        detector = ClassifierSuccessDetector.load(theirs)
        pre = detector.preprocessor
        # LeRobot normalises the input features, then the (empty) output ones.
        assert [s.name for s in pre] == [*["normalizer_processor"] * 2, "device_processor"]
        frame = {k: v[0] for k, v in inputs.items()}
        normalised = pre.process_batch({k: torch.from_numpy(v[None]) for k, v in frame.items()})
        direct = model.success_probability({k: torch.as_tensor(v) for k, v in normalised.items()})
        assert detector.success_probability(frame) == pytest.approx(float(direct[0]), abs=1e-6)

    # rlctl's checkpoint (its own random weights), in LeRobot.
    policy = interop.random_policy(config, None, 0.2, skip=("encoder.",))
    folder = policy.save(tmp_path / "rlctl_model")
    interop.assert_same_layout(folder, theirs, pipelines=())  # config keys (no processors)
    ours = rlctl_probabilities(policy.model, inputs)
    predicted = lerobot(LEROBOT_SCRIPT, "predict", folder, inputs_path)["probabilities"]
    interop.assert_close(f"{name}: rlctl checkpoint in LeRobot", ours, predicted, TOLERANCE)
