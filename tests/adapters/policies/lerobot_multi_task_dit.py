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

import lerobot_common as common
import numpy as np
import torch
from lerobot.policies.multi_task_dit.configuration_multi_task_dit import MultiTaskDiTConfig
from lerobot.policies.multi_task_dit.modeling_multi_task_dit import MultiTaskDiTPolicy
from lerobot.policies.multi_task_dit.processor_multi_task_dit import (
    make_multi_task_dit_pre_post_processors,
)


def predict(policy, pre, post, inputs_path, seed):
    batch = common.read_tensors(inputs_path, skip={"task"})
    batch["task"] = [str(t) for t in np.load(inputs_path)["task"]]
    processed = policy._prepare_batch(pre(batch))
    torch.manual_seed(int(seed))
    with torch.no_grad():
        chunk = policy._generate_actions(processed)
    return post(chunk)


def stats_for(spec):
    rng = np.random.default_rng(spec["seed"])
    dims = [("observation.state", spec["state_dim"]), ("action", spec["action_dim"])]
    return {**common.min_max_stats(rng, dims), **common.mean_std_stats(rng, spec["cameras"])}


def make(out, clip_dir, spec_text, inputs_path):
    spec = json.loads(spec_text)
    config = MultiTaskDiTConfig(
        vision_encoder_name=clip_dir,
        text_encoder_name=clip_dir,
        input_features=common.input_features(
            {"observation.state": [spec["state_dim"]], **spec["cameras"]}
        ),
        output_features=common.action_features(spec["action_dim"]),
        device="cpu",
        **common.config_fields(spec["config"]),
    )
    torch.manual_seed(spec["seed"])
    policy = MultiTaskDiTPolicy(config)
    # Randomise every weight (AdaLN-Zero's zeros included), so that nothing hides a mismatch.
    common.randomise(policy, spec.get("scale", 0.1))
    pre, post = make_multi_task_dit_pre_post_processors(config, stats_for(spec))
    common.save(out, policy, pre, post)
    policy.eval()
    return predict(policy, pre, post, inputs_path, spec["seed"])


if __name__ == "__main__":
    common.main(common.chunk_commands("chunk", MultiTaskDiTPolicy, make, predict))
