"""Run with LeRobot 0.6.1's Python (RLCTL_LEROBOT_PYTHON); prints one JSON line.

    python lerobot_pi0.py make OUT TOKENIZER_DIR SPEC_JSON INPUTS_NPZ
        builds a π0 or π0.5 (spec "type": "pi0" | "pi05") at tiny sizes, randomises its weights
        (seeded), saves it with its pre/post processors in LeRobot's format to OUT, and predicts
        a chunk
    python lerobot_pi0.py predict CHECKPOINT TOKENIZER_DIR INPUTS_NPZ
        loads a checkpoint (LeRobot's or rlctl's) and predicts a chunk

LeRobot only knows the gemma_300m and gemma_2b sizes and a SigLIP-so400m vision tower; this
harness (never rlctl) patches its builders to read rlctl's custom variants
(`custom:width=32,depth=2,...`, see rlctl.domain.policies.pi0), and maps the PaliGemma tokenizer's
Hub name to the local TOKENIZER_DIR (the files keep the Hub name, as LeRobot writes them).

SPEC_JSON: {"type", "cameras": {key: [3, H, W]}, "state_dim", "action_dim", "config": {config
fields}, "seed"}. INPUTS_NPZ holds the raw inputs (`observation.state`, each camera in [0, 1],
`noise`) and `task` (strings). The chunk printed is the post-processed (unnormalised) one.
"""

import json
import sys
from pathlib import Path

import lerobot_common
import numpy as np
import torch
import transformers
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.policies import pi_gemma
from lerobot.policies.pi0 import configuration_pi0, modeling_pi0, processor_pi0
from lerobot.policies.pi05 import configuration_pi05, modeling_pi05, processor_pi05
from lerobot.processor import tokenizer_processor

PALIGEMMA_TOKENIZER = "google/paligemma-3b-pt-224"
GEMMA_KEYS = ("width", "depth", "mlp_dim", "num_heads", "num_kv_heads", "head_dim")
# The sizes of the variant being built, read by the patched PaliGemma and expert classes.
CURRENT = {}


def parse_custom(variant):
    fields = dict(item.split("=") for item in variant.split(":", 1)[1].split(","))
    return {key.strip(): int(value) for key, value in fields.items()}


def patch_lerobot(tokenizer_dir):
    original_get = modeling_pi0.get_gemma_config

    def get_gemma_config(variant):
        if not variant.startswith("custom:"):
            return original_get(variant)
        sizes = parse_custom(variant)
        config = modeling_pi0.GemmaConfig(**{k: sizes[k] for k in GEMMA_KEYS})
        # The VLM's variant is read first, then the expert's.
        CURRENT["vlm" if "vlm" not in CURRENT else "expert"] = sizes
        return config

    modeling_pi0.get_gemma_config = get_gemma_config
    modeling_pi05.get_gemma_config = get_gemma_config

    def tiny_paligemma(config):
        sizes = CURRENT.get("vlm", {})
        vision = config.vision_config
        for ours, theirs in (
            ("vision_width", "hidden_size"),
            ("vision_depth", "num_hidden_layers"),
            ("vision_mlp_dim", "intermediate_size"),
            ("vision_heads", "num_attention_heads"),
            ("patch_size", "patch_size"),
        ):
            if ours in sizes:
                setattr(vision, theirs, sizes[ours])
        vision.projection_dim = config.text_config.hidden_size
        if "vocab_size" in sizes:
            config.text_config.vocab_size = sizes["vocab_size"]
            config._vocab_size = sizes["vocab_size"]
            config.image_token_index = sizes["vocab_size"]
        return pi_gemma.PaliGemmaForConditionalGenerationWithPiGemma(config=config)

    def tiny_expert(config):
        sizes = CURRENT.get("expert", {})
        if "vocab_size" in sizes:
            config.vocab_size = sizes["vocab_size"]
        return pi_gemma.PiGemmaForCausalLM(config=config)

    for module in (modeling_pi0, modeling_pi05):
        module.PaliGemmaForConditionalGenerationWithPiGemma = tiny_paligemma
        module.PiGemmaForCausalLM = tiny_expert

    for config_class in (configuration_pi0.PI0Config, configuration_pi05.PI05Config):
        original_post_init = config_class.__post_init__

        def post_init(self, original_post_init=original_post_init):
            # LeRobot accepts only its two names; validate with them, keep the custom ones.
            kept = (self.paligemma_variant, self.action_expert_variant)
            if self.paligemma_variant.startswith("custom:"):
                self.paligemma_variant = "gemma_2b"
            if self.action_expert_variant.startswith("custom:"):
                self.action_expert_variant = "gemma_300m"
            original_post_init(self)
            self.paligemma_variant, self.action_expert_variant = kept

        config_class.__post_init__ = post_init

    original_tokenizer = transformers.AutoTokenizer.from_pretrained

    def from_pretrained(name, *args, **kwargs):
        if name == PALIGEMMA_TOKENIZER:
            name = tokenizer_dir
        return original_tokenizer(name, *args, **kwargs)

    tokenizer_processor.AutoTokenizer.from_pretrained = from_pretrained


def policy_class(policy_type):
    return modeling_pi0.PI0Policy if policy_type == "pi0" else modeling_pi05.PI05Policy


def predict(policy, pre, post, inputs_path):
    data = np.load(inputs_path)
    batch = {k: torch.from_numpy(data[k]) for k in data.files if k not in ("task", "noise")}
    batch["task"] = [str(t) for t in data["task"]]
    noise = torch.from_numpy(data["noise"])
    processed = pre(batch)
    chunk = policy.predict_action_chunk(processed, noise=noise)
    return post(chunk)


def make(out, spec_text, inputs_path):
    spec = json.loads(spec_text)
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (spec["state_dim"],))}
    for key, shape in spec["cameras"].items():
        inputs[key] = PolicyFeature(FeatureType.VISUAL, tuple(shape))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action_dim"],))}
    config_class = (
        configuration_pi0.PI0Config if spec["type"] == "pi0" else configuration_pi05.PI05Config
    )
    config = config_class(
        input_features=inputs, output_features=outputs, device="cpu", **spec["config"]
    )
    torch.manual_seed(spec["seed"])
    policy = policy_class(spec["type"])(config)
    # Randomise every weight so that nothing (zero-initialised norms and modulations) hides a
    # mismatch.
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
            "q01": torch.tensor(low, dtype=torch.float32),
            "q99": torch.tensor(high, dtype=torch.float32),
            "min": torch.tensor(low - 0.5, dtype=torch.float32),
            "max": torch.tensor(high + 0.5, dtype=torch.float32),
        }
    make_processors = (
        processor_pi0.make_pi0_pre_post_processors
        if spec["type"] == "pi0"
        else processor_pi05.make_pi05_pre_post_processors
    )
    pre, post = make_processors(config, stats)
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    policy.eval()
    return predict(policy, pre, post, inputs_path)


def load(folder):
    policy_type = json.loads(Path(folder, "config.json").read_text())["type"]
    return lerobot_common.load(policy_class(policy_type), folder)


def main():
    torch.use_deterministic_algorithms(True)
    mode = sys.argv[1]
    if mode == "make":
        out, tokenizer_dir, spec_text, inputs_path = sys.argv[2:6]
        patch_lerobot(tokenizer_dir)
        chunk = make(out, spec_text, inputs_path)
    elif mode == "predict":
        folder, tokenizer_dir, inputs_path = sys.argv[2:5]
        patch_lerobot(tokenizer_dir)
        chunk = predict(*load(folder), inputs_path)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps({"chunk": chunk.detach().cpu().double().tolist()}))


if __name__ == "__main__":
    main()
