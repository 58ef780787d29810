"""Run with LeRobot 0.6.1's Python (RLCTL_LEROBOT_PYTHON); prints one JSON line.

    python lerobot_multi_task_dit.py make OUT CLIP_DIR SPEC_JSON INPUTS_NPZ
        builds a multi-task DiT on the tiny CLIP folder CLIP_DIR (every weight randomised,
        seeded), saves it with its pre/post processors in LeRobot's format to OUT, and predicts
        a chunk
    python lerobot_multi_task_dit.py predict CHECKPOINT INPUTS_NPZ SEED
        loads a checkpoint (LeRobot's or rlctl's) and predicts a chunk

SPEC_JSON: {"cameras": {key: [3, H, W]}, "state_dim", "action_dim", "config": {config fields},
"seed"}. INPUTS_NPZ holds the raw inputs (`observation.state` and each camera as
`(batch, n_obs_steps, ...)` histories, cameras in [0, 1]) and `task` (strings). The sampler's
noise (the first draw, and DDPM's at each step) comes from torch's generator seeded with SEED
right before sampling, as rlctl's test seeds it. The chunk printed is the post-processed one.
"""

import json
import sys

import numpy as np
import torch
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.policies.multi_task_dit.configuration_multi_task_dit import MultiTaskDiTConfig
from lerobot.policies.multi_task_dit.modeling_multi_task_dit import MultiTaskDiTPolicy
from lerobot.policies.multi_task_dit.processor_multi_task_dit import (
    make_multi_task_dit_pre_post_processors,
)
from lerobot.processor import PolicyProcessorPipeline
from lerobot.processor.converters import (
    batch_to_transition,
    policy_action_to_transition,
    transition_to_batch,
    transition_to_policy_action,
)


def predict(policy, pre, post, inputs_path, seed):
    data = np.load(inputs_path)
    batch = {k: torch.from_numpy(data[k]) for k in data.files if k != "task"}
    batch["task"] = [str(t) for t in data["task"]]
    processed = policy._prepare_batch(pre(batch))
    torch.manual_seed(int(seed))
    with torch.no_grad():
        chunk = policy._generate_actions(processed)
    return post(chunk)


def stats_for(spec):
    rng = np.random.default_rng(spec["seed"])

    def tensor(values):
        return torch.tensor(values, dtype=torch.float32)

    stats = {}
    for key, dim in (("observation.state", spec["state_dim"]), ("action", spec["action_dim"])):
        low = rng.uniform(-2, 0, size=dim)
        stats[key] = {"min": tensor(low), "max": tensor(low + rng.uniform(0.5, 3, size=dim))}
    for key in spec["cameras"]:
        stats[key] = {
            "mean": tensor(rng.uniform(0.3, 0.6, size=(3, 1, 1))),
            "std": tensor(rng.uniform(0.1, 0.3, size=(3, 1, 1))),
        }
    return stats


def make(out, clip_dir, spec_text, inputs_path):
    spec = json.loads(spec_text)
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (spec["state_dim"],))}
    for key, shape in spec["cameras"].items():
        inputs[key] = PolicyFeature(FeatureType.VISUAL, tuple(shape))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action_dim"],))}
    # JSON gives lists; LeRobot's config saves its (height, width) pairs only as tuples.
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in spec["config"].items()}
    config = MultiTaskDiTConfig(
        vision_encoder_name=clip_dir,
        text_encoder_name=clip_dir,
        input_features=inputs,
        output_features=outputs,
        device="cpu",
        **fields,
    )
    torch.manual_seed(spec["seed"])
    policy = MultiTaskDiTPolicy(config)
    # Randomise every weight (AdaLN-Zero's zeros included), so that nothing hides a mismatch.
    with torch.no_grad():
        for param in policy.parameters():
            param.copy_(torch.randn_like(param) * spec.get("scale", 0.1))
    pre, post = make_multi_task_dit_pre_post_processors(config, stats_for(spec))
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    policy.eval()
    return predict(policy, pre, post, inputs_path, spec["seed"])


def load(folder):
    policy = MultiTaskDiTPolicy.from_pretrained(folder)
    policy.eval()
    pre = PolicyProcessorPipeline.from_pretrained(
        folder,
        config_filename="policy_preprocessor.json",
        to_transition=batch_to_transition,
        to_output=transition_to_batch,
    )
    post = PolicyProcessorPipeline.from_pretrained(
        folder,
        config_filename="policy_postprocessor.json",
        to_transition=policy_action_to_transition,
        to_output=transition_to_policy_action,
    )
    return policy, pre, post


def main():
    torch.use_deterministic_algorithms(True)
    mode = sys.argv[1]
    if mode == "make":
        chunk = make(*sys.argv[2:6])
    elif mode == "predict":
        chunk = predict(*load(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps({"chunk": chunk.detach().cpu().double().tolist()}))


if __name__ == "__main__":
    main()
