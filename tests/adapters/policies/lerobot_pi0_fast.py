"""Run with LeRobot 0.6.1's Python (RLCTL_LEROBOT_PYTHON); prints one JSON line.

    python lerobot_pi0_fast.py make OUT TOKENIZER_DIR SPEC_JSON INPUTS_NPZ
        builds a π0-FAST at tiny sizes, randomises its weights (seeded), saves it with its
        pre/post processors in LeRobot's format to OUT, and predicts a chunk
    python lerobot_pi0_fast.py predict CHECKPOINT TOKENIZER_DIR INPUTS_NPZ [TOKENS_JSON]
        loads a checkpoint (LeRobot's or rlctl's) and predicts a chunk; with an `action` in the
        inputs, also the training loss on them; with TOKENS_JSON, also the normalised chunks
        LeRobot's policy reads from those token ids
    python lerobot_pi0_fast.py tokens TOKENIZER_DIR CHUNKS_NPY
        the FAST ids LeRobot's processor (AutoProcessor, trust_remote_code) gives each chunk
    python lerobot_pi0_fast.py fit TOKENIZER_DIR CHUNKS_NPY VOCAB_SIZE OUT
        fits a tokenizer with that folder's processor code, as lerobot-train-tokenizer does
        (scale 10), and saves it to OUT
    python lerobot_pi0_fast.py train-tokenizer TOKENIZER_DIR SETTINGS_JSON
        runs LeRobot's `lerobot-train-tokenizer` (its `train_tokenizer`) with these settings,
        the processor code read from TOKENIZER_DIR instead of the Hub's
        `lerobot/fast-action-tokenizer`

LeRobot builds π0-FAST only at gemma_2b's size with a 224-pixel SigLIP-so400m; this harness (never
rlctl) patches its builders to read rlctl's custom variants (`custom:width=32,depth=2,...`), and
maps the PaliGemma tokenizer's Hub name to the local TOKENIZER_DIR. The FAST tokenizer is the
folder the spec's `action_tokenizer_name` names, loaded by LeRobot's own code.

The printed result: {"chunk": post-processed chunk, "tokens": the generated token ids}.
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
from lerobot.policies.pi0_fast import configuration_pi0_fast, modeling_pi0_fast, processor_pi0_fast
from lerobot.processor import tokenizer_processor

PALIGEMMA_TOKENIZER = "google/paligemma-3b-pt-224"
GEMMA_KEYS = ("width", "depth", "mlp_dim", "num_heads", "num_kv_heads", "head_dim")
CURRENT = {}


def parse_custom(variant):
    fields = dict(item.split("=") for item in variant.split(":", 1)[1].split(","))
    return {key.strip(): int(value) for key, value in fields.items()}


def patch_lerobot(tokenizer_dir):
    original_get = modeling_pi0_fast.get_gemma_config

    def get_gemma_config(variant):
        if not variant.startswith("custom:"):
            return original_get(variant)
        sizes = parse_custom(variant)
        CURRENT["vlm"] = sizes
        return modeling_pi0_fast.GemmaConfig(**{k: sizes[k] for k in GEMMA_KEYS})

    modeling_pi0_fast.get_gemma_config = get_gemma_config

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
        vision.image_size = CURRENT["image_size"]
        if "vocab_size" in sizes:
            config.text_config.vocab_size = sizes["vocab_size"]
            config._vocab_size = sizes["vocab_size"]
            config.image_token_index = sizes["vocab_size"]
        return pi_gemma.PaliGemmaForConditionalGenerationWithPiGemma(config=config)

    modeling_pi0_fast.PaliGemmaForConditionalGenerationWithPiGemma = tiny_paligemma

    config_class = configuration_pi0_fast.PI0FastConfig
    original_post_init = config_class.__post_init__

    def post_init(self):
        kept = self.paligemma_variant
        if kept.startswith("custom:"):
            self.paligemma_variant = "gemma_2b"
        original_post_init(self)
        self.paligemma_variant = kept
        CURRENT["image_size"] = self.image_resolution[0]

    config_class.__post_init__ = post_init

    original_tokenizer = transformers.AutoTokenizer.from_pretrained

    def from_pretrained(name, *args, **kwargs):
        if name == PALIGEMMA_TOKENIZER:
            name = tokenizer_dir
        return original_tokenizer(name, *args, **kwargs)

    tokenizer_processor.AutoTokenizer.from_pretrained = from_pretrained
    modeling_pi0_fast.AutoTokenizer.from_pretrained = from_pretrained


def raw_batch(inputs_path, with_action=False):
    data = np.load(inputs_path)
    skip = {"task", "noise"} | (set() if with_action else {"action"})
    batch = {k: torch.from_numpy(data[k]) for k in data.files if k not in skip}
    batch["task"] = [str(t) for t in data["task"]]
    return batch


def predict(policy, pre, post, inputs_path):
    processed = pre(raw_batch(inputs_path))
    images, img_masks = policy._preprocess_images(processed)
    tokens_in = processed["observation.language.tokens"]
    masks = processed["observation.language.attention_mask"]
    sample = (
        policy.model.sample_actions_fast_kv_cache
        if policy.config.use_kv_cache
        else policy.model.sample_actions_fast
    )
    tokens = sample(
        images,
        img_masks,
        tokens_in,
        masks,
        max_decoding_steps=policy.config.max_decoding_steps,
        temperature=policy.config.temperature,
    )
    chunk = policy.predict_action_chunk(processed)
    return post(chunk), tokens


def loss(policy, pre, inputs_path):
    processed = pre(raw_batch(inputs_path, with_action=True))
    policy.train()
    value, _ = policy.forward(processed)
    return float(value)


def make(out, spec_text, inputs_path):
    spec = json.loads(spec_text)
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (spec["state_dim"],))}
    for key, shape in spec["cameras"].items():
        inputs[key] = PolicyFeature(FeatureType.VISUAL, tuple(shape))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (spec["action_dim"],))}
    config = configuration_pi0_fast.PI0FastConfig(
        input_features=inputs, output_features=outputs, device="cpu", **spec["config"]
    )
    torch.manual_seed(spec["seed"])
    policy = modeling_pi0_fast.PI0FastPolicy(config)
    with torch.no_grad():
        for _name, param in policy.named_parameters():
            param.copy_(torch.randn_like(param) * spec.get("weight_scale", 0.2))
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
    pre, post = processor_pi0_fast.make_pi0_fast_pre_post_processors(config, stats)
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    policy.eval()
    return predict(policy, pre, post, inputs_path)


def load(folder):
    return lerobot_common.load(modeling_pi0_fast.PI0FastPolicy, folder)


def fast_tokens(tokenizer_dir, chunks_path):
    processor = transformers.AutoProcessor.from_pretrained(tokenizer_dir, trust_remote_code=True)
    chunks = np.load(chunks_path)
    return [list(map(int, processor(chunk[None])[0])) for chunk in chunks]


def main():
    torch.use_deterministic_algorithms(True)
    mode = sys.argv[1]
    if mode == "tokens":
        print(json.dumps({"tokens": fast_tokens(sys.argv[2], sys.argv[3])}))
        return
    if mode == "fit":
        base = transformers.AutoProcessor.from_pretrained(sys.argv[2], trust_remote_code=True)
        chunks = np.load(sys.argv[3])
        fitted = base.fit(
            list(chunks),
            scale=10.0,
            vocab_size=int(sys.argv[4]),
            time_horizon=chunks.shape[1],
            action_dim=chunks.shape[2],
        )
        fitted.save_pretrained(sys.argv[5])
        print(json.dumps({"saved": sys.argv[5]}))
        return
    if mode == "train-tokenizer":
        from lerobot.scripts import lerobot_train_tokenizer as script

        reference = sys.argv[2]
        original = script.AutoProcessor.from_pretrained

        def from_pretrained(name, *args, **kwargs):
            return original(
                reference if name == "lerobot/fast-action-tokenizer" else name, *args, **kwargs
            )

        script.AutoProcessor.from_pretrained = from_pretrained
        settings = json.loads(sys.argv[3])
        script.train_tokenizer(script.TokenizerTrainingConfig(**settings))
        print(json.dumps({"saved": settings["output_dir"]}))
        return
    if mode == "make":
        out, tokenizer_dir, spec_text, inputs_path = sys.argv[2:6]
        patch_lerobot(tokenizer_dir)
        chunk, tokens = make(out, spec_text, inputs_path)
    elif mode == "predict":
        folder, tokenizer_dir, inputs_path = sys.argv[2:5]
        patch_lerobot(tokenizer_dir)
        policy, pre, post = load(folder)
        chunk, tokens = predict(policy, pre, post, inputs_path)
        extra = {}
        if len(sys.argv) > 5:
            ids = torch.tensor(json.loads(Path(sys.argv[5]).read_text()), dtype=torch.long)
            decoded = policy.detokenize_actions(
                ids,
                action_horizon=policy.config.n_action_steps,
                action_dim=policy.config.output_features["action"].shape[0],
            )
            extra["detokenized"] = decoded.double().tolist()
        if "action" in np.load(inputs_path).files:
            extra["loss"] = loss(policy, pre, inputs_path)
        found = {"chunk": chunk.detach().cpu().double().tolist(), "tokens": tokens.tolist()}
        print(json.dumps({**found, **extra}))
        return
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps({"chunk": chunk.detach().cpu().double().tolist(), "tokens": tokens.tolist()}))


if __name__ == "__main__":
    main()
