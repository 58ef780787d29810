"""Run with LeRobot 0.6.1's Python (RLCTL_LEROBOT_PYTHON); prints one JSON line.

    python lerobot_groot.py make OUT TINY_DIR SPEC_JSON INPUTS_NPZ
        gives the tiny base model (TINY_DIR/base, see tiny_groot.py) random weights if it has
        none, builds LeRobot's GR00T N1.7 on it, randomises every weight (seeded), saves it with
        its pre/post processors in LeRobot's format to OUT, and predicts a chunk
    python lerobot_groot.py predict CHECKPOINT TINY_DIR INPUTS_NPZ
        loads a checkpoint (LeRobot's or rlctl's) and predicts a chunk
    python lerobot_groot.py raw OUT TINY_DIR SPEC_JSON INPUTS_NPZ
        writes a raw NVIDIA-layout checkpoint to OUT: LeRobot's GR00TN17 on TINY_DIR/base's
        config with random weights (seeded), saved by its own `save_pretrained`, beside
        SPEC_JSON's "side_files" (processor_config.json, statistics.json, ...); then builds
        LeRobot's GR00T from `base_model_path=OUT` with SPEC_JSON's "config" and its
        processors (no dataset statistics: the checkpoint's) and predicts a chunk

LeRobot names the backbone's processor `nvidia/Cosmos-Reason2-2B`; this harness (never rlctl)
reads it from TINY_DIR/backbone. The initial noise is INPUTS_NPZ's `noise`: LeRobot draws it
inside the model, so the harness hands it over in place of `torch.randn`.

SPEC_JSON: {"cameras": {key: [3, H, W]}, "state_dim", "action_dim", "config": {GrootConfig
fields}, "seed", "rtc": optional {"leftover": [[...]], "delay", "execution_horizon"}}.
INPUTS_NPZ: `observation.state`, each camera in [0, 1], `noise`, `task`. The chunk printed is
the post-processed (unnormalised) one.
"""

import json
import sys
from pathlib import Path

import lerobot_common
import numpy as np
import torch
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.policies.groot import groot_n1_7, processor_groot
from lerobot.policies.groot.configuration_groot import GrootConfig
from lerobot.policies.groot.modeling_groot import GrootPolicy
from lerobot.policies.rtc.configuration_rtc import RTCConfig

COSMOS = "nvidia/Cosmos-Reason2-2B"
# Small enough weights that the actions stay inside [-1, 1]: the unnormaliser clips them.
SCALE = 0.05


def patch_lerobot(tiny_dir):
    backbone = str(Path(tiny_dir) / "backbone")
    original = processor_groot._build_n1_7_processor

    def build(model_name=COSMOS):
        return original(backbone if model_name == COSMOS else model_name)

    processor_groot._build_n1_7_processor = build


def with_noise(noise, call):
    """Run `call()` with `torch.randn` giving `noise` for the sampler's draw."""
    original = torch.randn

    def randn(*args, **kwargs):
        size = kwargs.get("size", args[0] if args else None)
        if size is not None and tuple(size) == tuple(noise.shape):
            return noise.to(dtype=kwargs.get("dtype") or noise.dtype, device=kwargs.get("device"))
        return original(*args, **kwargs)

    torch.randn = randn
    try:
        return call()
    finally:
        torch.randn = original


def ensure_base_weights(tiny_dir, seed):
    base = Path(tiny_dir) / "base"
    if (base / "model.safetensors").exists():
        return
    torch.manual_seed(seed)
    config = groot_n1_7.GR00TN17Config.from_pretrained(base)
    model = groot_n1_7.GR00TN17(config, load_backbone_weights=False)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn_like(param) * SCALE)
    model.save_pretrained(base)


def predict(policy, pre, post, inputs_path, rtc=None):
    data = np.load(inputs_path)
    batch = {k: torch.from_numpy(data[k]) for k in data.files if k not in ("task", "noise")}
    batch["task"] = [str(t) for t in data["task"]]
    noise = torch.from_numpy(data["noise"])
    processed = pre(batch)
    kwargs = {}
    if rtc is not None:
        policy.config.rtc_config = RTCConfig(
            enabled=True, execution_horizon=rtc["execution_horizon"]
        )
        kwargs = {
            "prev_chunk_left_over": torch.tensor(rtc["leftover"], dtype=torch.float32),
            "inference_delay": rtc["delay"],
        }
    chunk = with_noise(noise, lambda: policy.predict_action_chunk(processed, **kwargs))
    return chunk, post(chunk)


def make(out, tiny_dir, spec_text, inputs_path):
    spec = json.loads(spec_text)
    ensure_base_weights(tiny_dir, spec["seed"] + 100)
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (spec["state_dim"],))}
    for key, shape in spec["cameras"].items():
        inputs[key] = PolicyFeature(FeatureType.VISUAL, tuple(shape))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action_dim"],))}
    config = GrootConfig(
        input_features=inputs,
        output_features=outputs,
        device="cpu",
        base_model_path=str(Path(tiny_dir) / "base"),
        **spec["config"],
    )
    torch.manual_seed(spec["seed"])
    policy = GrootPolicy(config)
    with torch.no_grad():
        for param in policy.parameters():
            param.copy_(torch.randn_like(param) * SCALE)
    rng = np.random.default_rng(spec["seed"])
    stats = {}
    for key, dim in (("observation.state", spec["state_dim"]), ("action", spec["action_dim"])):
        low = rng.normal(size=dim) - 2
        stats[key] = {
            "min": torch.tensor(low, dtype=torch.float32),
            "max": torch.tensor(low + rng.uniform(1, 4, size=dim), dtype=torch.float32),
            "mean": torch.tensor(rng.normal(size=dim), dtype=torch.float32),
            "std": torch.tensor(rng.uniform(0.5, 2, size=dim), dtype=torch.float32),
        }
    pre, post = processor_groot.make_groot_pre_post_processors(config, stats)
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    policy.eval()
    return predict(policy, pre, post, inputs_path, spec.get("rtc"))


def make_raw(out, tiny_dir, spec_text, inputs_path):
    spec = json.loads(spec_text)
    out = Path(out)
    torch.manual_seed(spec["seed"])
    config = groot_n1_7.GR00TN17Config.from_pretrained(Path(tiny_dir) / "base")
    model = groot_n1_7.GR00TN17(config, load_backbone_weights=False)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn_like(param) * SCALE)
    model.save_pretrained(out)
    for name, content in spec["side_files"].items():
        (out / name).write_text(json.dumps(content))
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (spec["state_dim"],))}
    for key, shape in spec["cameras"].items():
        inputs[key] = PolicyFeature(FeatureType.VISUAL, tuple(shape))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action_dim"],))}
    policy_config = GrootConfig(
        input_features=inputs,
        output_features=outputs,
        device="cpu",
        base_model_path=str(out),
        **spec["config"],
    )
    policy = GrootPolicy(policy_config)
    policy.eval()
    pre, post = processor_groot.make_groot_pre_post_processors(policy_config, None)
    return predict(policy, pre, post, inputs_path)


def load(folder):
    return lerobot_common.load(GrootPolicy, folder)


def main():
    mode = sys.argv[1]
    if mode == "make":
        out, tiny_dir, spec_text, inputs_path = sys.argv[2:6]
        patch_lerobot(tiny_dir)
        chunk = make(out, tiny_dir, spec_text, inputs_path)
    elif mode == "raw":
        out, tiny_dir, spec_text, inputs_path = sys.argv[2:6]
        patch_lerobot(tiny_dir)
        chunk = make_raw(out, tiny_dir, spec_text, inputs_path)
    elif mode == "predict":
        folder, tiny_dir, inputs_path = sys.argv[2:5]
        rtc = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
        patch_lerobot(tiny_dir)
        chunk = predict(*load(folder), inputs_path, rtc)
    else:
        raise SystemExit(f"unknown mode {mode}")
    raw, chunk = chunk
    print(
        json.dumps(
            {
                "raw": raw.detach().cpu().double().tolist(),
                "chunk": chunk.detach().cpu().double().tolist(),
            }
        )
    )


if __name__ == "__main__":
    main()
