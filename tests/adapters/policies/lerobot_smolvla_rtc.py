"""Run with LeRobot 0.6.1's Python (RLCTL_LEROBOT_PYTHON); prints one JSON line: a SmolVLA
chunk generated with real-time chunking (RTC) following a previous chunk's leftover.

    python lerobot_smolvla_rtc.py make OUT VLM_DIR SPEC_JSON INPUTS_NPZ
        builds a SmolVLA with `rtc_config` on the tiny SmolVLM folder VLM_DIR (weights
        randomised, seeded), saves it with its processors to OUT, and predicts a guided chunk
    python lerobot_smolvla_rtc.py predict CHECKPOINT INPUTS_NPZ
        loads a checkpoint (LeRobot's or rlctl's) and predicts a guided chunk

INPUTS_NPZ holds the raw inputs (`observation.state`, each camera in [0, 1], `noise`, `task`),
the raw leftover `leftover` (batch, steps, action_dim) and `delay`. The leftover reaches the
model as LeRobot's RTC engine hands it over: in the policy's normalised action space (the
pre-processor's normaliser applied to it). The chunk printed is the post-processed one.
"""

import json
import sys

import lerobot_common
import numpy as np
import torch
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.configs.types import RTCAttentionSchedule
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy
from lerobot.policies.smolvla.processor_smolvla import make_smolvla_pre_post_processors


def predict(policy, pre, post, inputs_path):
    data = np.load(inputs_path)
    skip = ("task", "noise", "leftover", "delay")
    batch = {k: torch.from_numpy(data[k]) for k in data.files if k not in skip}
    batch["task"] = [str(t) for t in data["task"]]
    batch["action"] = torch.from_numpy(data["leftover"])
    processed = pre(batch)
    leftover = processed.pop("action")
    chunk = policy.predict_action_chunk(
        processed,
        noise=torch.from_numpy(data["noise"]),
        inference_delay=int(data["delay"]),
        prev_chunk_left_over=leftover,
    )
    return post(chunk)


def make(out, vlm_dir, spec_text, inputs_path):
    spec = json.loads(spec_text)
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (spec["state_dim"],))}
    for key, shape in spec["cameras"].items():
        inputs[key] = PolicyFeature(FeatureType.VISUAL, tuple(shape))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action_dim"],))}
    fields = dict(spec["config"])
    rtc = dict(fields.pop("rtc_config"))
    rtc["prefix_attention_schedule"] = RTCAttentionSchedule(rtc["prefix_attention_schedule"])
    config = SmolVLAConfig(
        vlm_model_name=vlm_dir,
        input_features=inputs,
        output_features=outputs,
        device="cpu",
        rtc_config=RTCConfig(**rtc),
        **{"load_vlm_weights": False, **fields},
    )
    torch.manual_seed(spec["seed"])
    policy = SmolVLAPolicy(config)
    with torch.no_grad():
        for param in policy.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    rng = np.random.default_rng(spec["seed"])
    stats = {
        key: {
            "mean": torch.tensor(rng.normal(size=dim), dtype=torch.float32),
            "std": torch.tensor(rng.uniform(0.5, 2, size=dim), dtype=torch.float32),
        }
        for key, dim in (("observation.state", spec["state_dim"]), ("action", spec["action_dim"]))
    }
    pre, post = make_smolvla_pre_post_processors(config, stats)
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    policy.eval()
    return predict(policy, pre, post, inputs_path)


def load(folder):
    policy, pre, post = lerobot_common.load(SmolVLAPolicy, folder)
    if policy.config.rtc_config is None or not policy.config.rtc_config.enabled:
        raise SystemExit("the checkpoint's config.json has no enabled rtc_config")
    return policy, pre, post


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
