"""Run with LeRobot 0.6.1's Python (RLCTL_LEROBOT_PYTHON); prints one JSON line.

    python lerobot_smolvla.py make OUT VLM_DIR SPEC_JSON INPUTS_NPZ
        builds a SmolVLA on the tiny SmolVLM folder VLM_DIR (weights randomised, seeded), saves it
        with its pre/post processors in LeRobot's format to OUT, and predicts a chunk
    python lerobot_smolvla.py predict CHECKPOINT INPUTS_NPZ
        loads a checkpoint (LeRobot's or rlctl's) and predicts a chunk

SPEC_JSON: {"cameras": {"observation.images.top": [3, H, W], ...}, "state_dim": S,
"action_dim": A, "config": {SmolVLAConfig fields}, "seed": N}. INPUTS_NPZ holds the raw inputs
(`observation.state`, each camera in [0, 1], `noise`) and `task` (an array of strings). The chunk
printed is the post-processed (unnormalised) one.
"""

import json
import sys

import lerobot_common
import numpy as np
import torch
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy
from lerobot.policies.smolvla.processor_smolvla import make_smolvla_pre_post_processors


def predict(policy, pre, post, inputs_path):
    data = np.load(inputs_path)
    batch = {k: torch.from_numpy(data[k]) for k in data.files if k not in ("task", "noise")}
    batch["task"] = [str(t) for t in data["task"]]
    noise = torch.from_numpy(data["noise"])
    processed = pre(batch)
    chunk = policy.predict_action_chunk(processed, noise=noise)
    return post(chunk)


def make(out, vlm_dir, spec_text, inputs_path):
    spec = json.loads(spec_text)
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (spec["state_dim"],))}
    for key, shape in spec["cameras"].items():
        inputs[key] = PolicyFeature(FeatureType.VISUAL, tuple(shape))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action_dim"],))}
    config = SmolVLAConfig(
        vlm_model_name=vlm_dir,
        input_features=inputs,
        output_features=outputs,
        device="cpu",
        **{"load_vlm_weights": False, **spec["config"]},
    )
    torch.manual_seed(spec["seed"])
    policy = SmolVLAPolicy(config)
    # The VLM is built in float32 from its config; randomise every weight so that nothing
    # (zero-initialised projections, unit norms) hides a mismatch.
    with torch.no_grad():
        for _name, param in policy.named_parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    rng = np.random.default_rng(spec["seed"])
    stats = {
        "observation.state": {
            "mean": torch.tensor(rng.normal(size=spec["state_dim"]), dtype=torch.float32),
            "std": torch.tensor(rng.uniform(0.5, 2, size=spec["state_dim"]), dtype=torch.float32),
        },
        "action": {
            "mean": torch.tensor(rng.normal(size=spec["action_dim"]), dtype=torch.float32),
            "std": torch.tensor(rng.uniform(0.5, 2, size=spec["action_dim"]), dtype=torch.float32),
        },
    }
    pre, post = make_smolvla_pre_post_processors(config, stats)
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    policy.eval()
    return predict(policy, pre, post, inputs_path)


def load(folder):
    return lerobot_common.load(SmolVLAPolicy, folder)


def main():
    torch.use_deterministic_algorithms(True)
    mode = sys.argv[1]
    if mode == "make":
        chunk = make(*sys.argv[2:6])
    elif mode == "predict":
        chunk = predict(*load(sys.argv[2]), sys.argv[3])
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps({"chunk": chunk.detach().cpu().double().tolist()}))


if __name__ == "__main__":
    main()
