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

import lerobot_common as common
import numpy as np
import torch
from lerobot.rewards.classifier.configuration_classifier import RewardClassifierConfig
from lerobot.rewards.classifier.modeling_classifier import Classifier
from lerobot.rewards.classifier.processor_classifier import make_classifier_processor


def predict(model, inputs_path):
    batch = common.read_tensors(inputs_path)
    model.eval()
    with torch.no_grad():
        images = [
            batch[k] for k in model.config.input_features if k.startswith("observation.image")
        ]
        probabilities = model.predict(images).probabilities
        rewards = model.predict_reward(batch, threshold=0.5)
    return {"probabilities": probabilities.tolist(), "rewards": rewards.tolist()}


def make(out, encoder, spec_json, inputs_path):
    spec = json.loads(spec_json)
    config = RewardClassifierConfig(
        input_features=common.input_features(spec["cameras"]),
        model_name=encoder,
        device="cpu",
        **spec["config"],
    )
    torch.manual_seed(spec["seed"])
    model = Classifier(config)
    common.randomise(model, 0.2, skip=["encoder."])
    stats = common.mean_std_stats(np.random.default_rng(spec["seed"]), spec["cameras"])
    pre, post = make_classifier_processor(config, dataset_stats=stats)
    common.save(out, model, pre, post)
    return predict(model, inputs_path)


if __name__ == "__main__":
    common.main(
        {
            "make": make,
            "predict": lambda folder, inputs_path: predict(
                Classifier.from_pretrained(folder), inputs_path
            ),
        },
        deterministic=False,
    )
