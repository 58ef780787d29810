"""Run by LeRobot's Python (RLCTL_LEROBOT_PYTHON), never imported by rlctl's tests.

Loads a policy folder with LeRobot 0.6.1 and prints, as JSON, the largest difference between its
predicted chunks and the reference chunks of a fixture's `.reference.npz`.

    python lerobot_predict.py FOLDER REFERENCE.npz
"""

import json
import sys

import numpy as np
import torch
from lerobot.configs.policies import PreTrainedConfig
from lerobot.policies.factory import get_policy_class, make_pre_post_processors


def main(folder: str, reference: str) -> None:
    config = PreTrainedConfig.from_pretrained(folder)
    config.device = "cpu"
    policy = get_policy_class(config.type).from_pretrained(folder, config=config)
    policy.eval()
    pre, post = make_pre_post_processors(config, pretrained_path=folder)
    arrays = np.load(reference)
    frames = sorted({int(key.split("/")[0]) for key in arrays.files})
    worst = 0.0
    for j in frames:
        prefix = f"{j}/input/"
        batch = {
            key[len(prefix) :]: torch.from_numpy(arrays[key])
            for key in arrays.files
            if key.startswith(prefix)
        }
        policy.reset()
        kwargs = {}
        if f"{j}/noise" in arrays.files:
            kwargs["noise"] = torch.from_numpy(arrays[f"{j}/noise"])
        with torch.no_grad():
            chunk = post(policy.predict_action_chunk(pre(batch), **kwargs))
        expected = arrays[f"{j}/output/action_chunk"]
        worst = max(worst, float(np.abs(chunk.numpy() - expected).max()))
    print(json.dumps({"frames": len(frames), "max_abs_error": worst}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
