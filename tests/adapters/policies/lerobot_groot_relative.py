"""Run with LeRobot 0.6.1's Python (RLCTL_LEROBOT_PYTHON); prints one JSON line. GR00T N1.7 with
relative actions (`use_relative_actions=True`), LeRobot's side.

    python lerobot_groot_relative.py stats DATASET_ROOT EXCLUDE_JSON
        the per-step relative action statistics LeRobot computes for a GR00T training run on a
        local dataset (`_make_relative_action_training_stats_from_dataset_meta`)
    python lerobot_groot_relative.py make OUT TINY_DIR SPEC_JSON INPUTS_NPZ BATCH_NPZ
        gives the tiny base model random weights if it has none, builds LeRobot's GR00T with
        relative actions on it (the processors from SPEC's statistics and action names, as a
        training run builds them), randomises every weight, saves it to OUT, predicts a chunk
        for INPUTS and packs the training batch BATCH
    python lerobot_groot_relative.py predict CHECKPOINT TINY_DIR INPUTS_NPZ BATCH_NPZ
        loads a checkpoint (LeRobot's or rlctl's) as LeRobot does (the decode step linked to the
        pack step), predicts a chunk for INPUTS and packs BATCH

SPEC_JSON: lerobot_groot.py's, plus "action_names", "exclude", "stats" ({"observation.state",
"action": absolute, "relative_action": per step}: lists), "fps". INPUTS_NPZ:
lerobot_groot.py's. BATCH_NPZ: the same observation keys and `action`, a training chunk for the
pack step.
"""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import lerobot_common
import lerobot_groot
import numpy as np
import torch
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.datasets.dataset_metadata import LeRobotDatasetMetadata
from lerobot.policies.groot import processor_groot
from lerobot.policies.groot.configuration_groot import GrootConfig
from lerobot.policies.groot.modeling_groot import GrootPolicy


def stats(root, exclude_text):
    meta = LeRobotDatasetMetadata("local/relative", root=root)
    config = SimpleNamespace(relative_exclude_joints=json.loads(exclude_text))
    computed = processor_groot._make_relative_action_training_stats_from_dataset_meta(config, meta)
    return {name: np.asarray(value).tolist() for name, value in computed["action"].items()}


def tensors(per_key):
    return {
        key: {name: torch.tensor(value) for name, value in values.items()}
        for key, values in per_key.items()
    }


def packed(pre, inputs_path):
    data = np.load(inputs_path)
    batch = {k: torch.from_numpy(data[k]) for k in data.files if k not in ("task", "noise")}
    batch["task"] = [str(t) for t in data["task"]]
    out = pre(batch)
    return out["action"], out["action_mask"]


def make(out, tiny_dir, spec_text):
    spec = json.loads(spec_text)
    lerobot_groot.ensure_base_weights(tiny_dir, spec["seed"] + 100)
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (spec["state_dim"],))}
    for key, shape in spec["cameras"].items():
        inputs[key] = PolicyFeature(FeatureType.VISUAL, tuple(shape))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action_dim"],))}
    config = GrootConfig(
        input_features=inputs,
        output_features=outputs,
        device="cpu",
        base_model_path=str(Path(tiny_dir) / "base"),
        use_relative_actions=True,
        relative_exclude_joints=spec["exclude"],
        **spec["config"],
    )
    torch.manual_seed(spec["seed"])
    policy = GrootPolicy(config)
    with torch.no_grad():
        for param in policy.parameters():
            param.copy_(torch.randn_like(param) * lerobot_groot.SCALE)
    features = {"action": {"dtype": "float32", "names": spec["action_names"]}}
    for key in spec["cameras"]:
        features[key] = {"dtype": "video"}
    absolute = {k: spec["stats"][k] for k in ("observation.state", "action")}
    meta = SimpleNamespace(
        features=features,
        stats=tensors(absolute),
        repo_id="local/relative",
        root=out,
        fps=spec["fps"],
    )
    dataset_stats = tensors(
        {
            "observation.state": absolute["observation.state"],
            "action": spec["stats"]["relative_action"],
        }
    )
    pre, post = processor_groot.make_groot_pre_post_processors(config, dataset_stats, meta)
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    processor_groot._set_groot_preprocessor_training(pre, training=False)
    policy.eval()
    return policy, pre, post


def load(folder):
    policy = GrootPolicy.from_pretrained(folder)
    policy.eval()
    pre, post = processor_groot.make_groot_pre_post_processors_from_pretrained(
        policy.config, folder
    )
    return policy, pre, post


def report(policy, pre, post, inputs_path, batch_path):
    raw, chunk = lerobot_groot.predict(policy, pre, post, inputs_path)
    action, mask = packed(pre, batch_path)
    return {
        "raw": lerobot_common.as_list(raw),
        "chunk": lerobot_common.as_list(chunk),
        "packed": lerobot_common.as_list(action),
        "mask": lerobot_common.as_list(mask),
    }


def main():
    mode = sys.argv[1]
    if mode == "stats":
        result = {"stats": stats(*sys.argv[2:4])}
    elif mode == "make":
        out, tiny_dir, spec_text, inputs_path, batch_path = sys.argv[2:7]
        lerobot_groot.patch_lerobot(tiny_dir)
        result = report(*make(out, tiny_dir, spec_text), inputs_path, batch_path)
    elif mode == "predict":
        folder, tiny_dir, inputs_path, batch_path = sys.argv[2:6]
        lerobot_groot.patch_lerobot(tiny_dir)
        result = report(*load(folder), inputs_path, batch_path)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
