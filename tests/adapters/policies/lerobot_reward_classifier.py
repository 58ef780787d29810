"""Run with LeRobot 0.6.1's Python (RLCTL_LEROBOT_PYTHON); prints one JSON line.

    python lerobot_reward_classifier.py make OUT ENCODER_DIR SPEC_JSON INPUTS_NPZ
        builds LeRobot's reward classifier on the tiny encoder folder ENCODER_DIR (its own
        weights randomised, seeded), saves it to OUT with the pre-processor LeRobot's training
        saves (`classifier_preprocessor`, mean-std statistics of the cameras), and predicts
    python lerobot_reward_classifier.py predict CHECKPOINT INPUTS_NPZ
        loads a checkpoint (LeRobot's or rlctl's) with `Classifier.from_pretrained` and predicts

SPEC_JSON: {"cameras": {key: [3, H, W]}, "config": {config fields}, "seed"}. INPUTS_NPZ holds
each camera as (batch, 3, H, W) in [0, 1], fed to the model as they are. Printed: the
probabilities, and `predict_reward`'s rewards at 0.5.
"""

import json
import sys

import numpy as np
import torch
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.rewards.classifier.configuration_classifier import RewardClassifierConfig
from lerobot.rewards.classifier.modeling_classifier import Classifier
from lerobot.rewards.classifier.processor_classifier import make_classifier_processor


def predict(model, inputs_path):
    data = np.load(inputs_path)
    batch = {k: torch.from_numpy(data[k]) for k in data.files}
    model.eval()
    with torch.no_grad():
        images = [
            batch[k] for k in model.config.input_features if k.startswith("observation.image")
        ]
        probabilities = model.predict(images).probabilities
        rewards = model.predict_reward(batch, threshold=0.5)
    return {"probabilities": probabilities.tolist(), "rewards": rewards.tolist()}


def main():
    command = sys.argv[1]
    if command == "make":
        out, encoder, spec_json, inputs_path = sys.argv[2:6]
        spec = json.loads(spec_json)
        features = {
            k: PolicyFeature(type=FeatureType.VISUAL, shape=tuple(s))
            for k, s in spec["cameras"].items()
        }
        config = RewardClassifierConfig(
            input_features=features, model_name=encoder, device="cpu", **spec["config"]
        )
        torch.manual_seed(spec["seed"])
        model = Classifier(config)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if not name.startswith("encoder."):
                    param.copy_(torch.randn_like(param) * 0.2)
        model.save_pretrained(out)
        rng = np.random.default_rng(spec["seed"])
        stats = {
            k: {
                "mean": torch.tensor(rng.uniform(0.3, 0.6, size=(3, 1, 1)), dtype=torch.float32),
                "std": torch.tensor(rng.uniform(0.1, 0.3, size=(3, 1, 1)), dtype=torch.float32),
            }
            for k in spec["cameras"]
        }
        pre, post = make_classifier_processor(config, dataset_stats=stats)
        pre.save_pretrained(out)
        post.save_pretrained(out)
        print(json.dumps(predict(model, inputs_path)))
    elif command == "predict":
        checkpoint, inputs_path = sys.argv[2:4]
        print(json.dumps(predict(Classifier.from_pretrained(checkpoint), inputs_path)))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
