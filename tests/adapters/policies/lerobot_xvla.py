"""Run with LeRobot 0.6.1's Python (RLCTL_LEROBOT_PYTHON); prints one JSON line.

    python lerobot_xvla.py make OUT SPEC_JSON INPUTS_NPZ
        builds an X-VLA at tiny sizes (the spec's Florence-2 config and local tokenizer),
        randomises its weights (seeded), saves it with its pre/post processors in LeRobot's
        format to OUT, and predicts a chunk
    python lerobot_xvla.py predict CHECKPOINT INPUTS_NPZ
        loads a checkpoint (LeRobot's or rlctl's) and predicts a chunk
    python lerobot_xvla.py libero INPUTS_NPZ
        runs LeRobot's X-VLA LIBERO env processors (`make_env_pre_post_processors` with an
        XVLAConfig) on raw LIBERO observations and actions; prints their outputs

SPEC_JSON: {"cameras": {key: [3, H, W]}, "state_dim", "action_dim", "config": {config fields},
"seed"}. INPUTS_NPZ holds the raw inputs (`observation.state`, each camera in [0, 1], `noise`,
`task`). X-VLA draws its initial noise inside `generate_actions`; this harness hands it the
file's `noise` instead (the only `torch.randn` of that shape while predicting). The chunk printed
is the post-processed one.
"""

import json
import sys

import lerobot_common
import numpy as np
import torch
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.policies.xvla import configuration_xvla, modeling_xvla, processor_xvla


def predict(policy, pre, post, inputs_path):
    data = np.load(inputs_path)
    batch = {k: torch.from_numpy(data[k]) for k in data.files if k not in ("task", "noise")}
    batch["task"] = [str(t) for t in data["task"]]
    noise = torch.from_numpy(data["noise"])
    processed = pre(batch)
    original = torch.randn

    def fixed_randn(*size, **kwargs):
        if tuple(size) == tuple(noise.shape):
            return noise.to(kwargs.get("dtype") or torch.float32)
        return original(*size, **kwargs)

    torch.randn = fixed_randn
    try:
        chunk = policy.predict_action_chunk(processed)
    finally:
        torch.randn = original
    return post(chunk)


def make(out, spec_text, inputs_path):
    spec = json.loads(spec_text)
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (spec["state_dim"],))}
    for key, shape in spec["cameras"].items():
        inputs[key] = PolicyFeature(FeatureType.VISUAL, tuple(shape))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action_dim"],))}
    fields = dict(spec["config"])
    if fields.get("resize_imgs_with_padding") is not None:
        fields["resize_imgs_with_padding"] = tuple(fields["resize_imgs_with_padding"])
    config = configuration_xvla.XVLAConfig(
        input_features=inputs, output_features=outputs, device="cpu", **fields
    )
    torch.manual_seed(spec["seed"])
    policy = modeling_xvla.XVLAPolicy(config)
    with torch.no_grad():
        for _name, param in policy.named_parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    rng = np.random.default_rng(spec["seed"])
    stats = {}
    for key, dim in (("observation.state", spec["state_dim"]), ("action", spec["action_dim"])):
        low = rng.normal(size=dim) - 2
        high = low + rng.uniform(1, 4, size=dim)
        stats[key] = {
            "mean": torch.tensor(rng.normal(size=dim), dtype=torch.float32),
            "std": torch.tensor(rng.uniform(0.5, 2, size=dim), dtype=torch.float32),
            "min": torch.tensor(low, dtype=torch.float32),
            "max": torch.tensor(high, dtype=torch.float32),
        }
    pre, post = processor_xvla.make_xvla_pre_post_processors(config, stats)
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    policy.eval()
    return predict(policy, pre, post, inputs_path)


def load(folder):
    return lerobot_common.load(modeling_xvla.XVLAPolicy, folder)


def libero(inputs_path):
    """LeRobot's eval path on LIBERO: `preprocess_observation` of the raw (nested) observation,
    then the env pre-processor; the env post-processor on the actions."""
    from lerobot.envs.configs import LiberoEnv
    from lerobot.envs.factory import make_env_pre_post_processors
    from lerobot.envs.utils import preprocess_observation

    data = np.load(inputs_path)
    raw = {
        "pixels": {"image": data["pixels/image"], "image2": data["pixels/image2"]},
        "robot_state": {
            "eef": {"pos": data["eef/pos"], "quat": data["eef/quat"], "mat": data["eef/mat"]},
            "gripper": {"qpos": data["gripper/qpos"], "qvel": data["gripper/qvel"]},
            "joints": {"pos": data["joints/pos"], "vel": data["joints/vel"]},
        },
    }
    pre, post = make_env_pre_post_processors(LiberoEnv(), configuration_xvla.XVLAConfig())
    observation = pre(preprocess_observation(raw))
    actions = post({"action": torch.from_numpy(data["action"])})["action"]
    out = {k: v.double().tolist() for k, v in observation.items() if isinstance(v, torch.Tensor)}
    out["action"] = actions.double().tolist()
    return out


def main():
    torch.use_deterministic_algorithms(True)
    mode = sys.argv[1]
    if mode == "make":
        out, spec_text, inputs_path = sys.argv[2:5]
        chunk = make(out, spec_text, inputs_path)
    elif mode == "predict":
        folder, inputs_path = sys.argv[2:4]
        chunk = predict(*load(folder), inputs_path)
    elif mode == "libero":
        print(json.dumps(libero(sys.argv[2])))
        return
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps({"chunk": chunk.detach().cpu().double().tolist()}))


if __name__ == "__main__":
    main()
