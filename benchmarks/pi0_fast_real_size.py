"""π0-FAST at its real size (PaliGemma 2B alone, about 2.9 B parameters, random weights, float32
~12 GB, CPU), rlctl side by side with LeRobot 0.6.1: decoding speed and chunk latency.

One checkpoint is written first (by rlctl, random weights, LeRobot's format; a FAST tokenizer
fitted on smooth random chunks beside it); then each tool, in its own fresh process (alternating,
`--repeat` times), loads it and predicts:

- load: from the call that loads the checkpoint (rlctl's `load_policy_folder`, LeRobot's
  `PI0FastPolicy.from_pretrained` + both processor pipelines) to a policy ready to act;
- prefill: the images, the prompt and <bos> through the PaliGemma, the first token picked
  (decoding with max_decoding_steps=1), median of `--chunks`;
- decode tokens/s: the `--tokens` - 1 tokens after the first, each over the cached keys and
  values (greedy; random weights rarely write "|", so every step runs), median;
- chunk: a whole `predict_chunk` (pre-processing, prefill, decoding, detokenising,
  post-processing) on one observation (a 224x224 camera, a 14-dim state, a task), median;
- to first action: from the child's start (imports included) to the first chunk's end;
- peak resident memory of the process.

PaliGemma's tokenizer is read from `--tokenizer DIR` in both tools (a Hub copy of
`google/paligemma-3b-pt-224`, or any Gemma-style folder); without it a tiny stand-in with
reserved ids for the action tokens is written (PaliGemma's 257,152 ids at real size; token
ids differ, timings do not). `--size tiny`
runs the same at toy sizes, to check the script; `--size medium` (Gemma width 512, 4 layers, a
224x224 camera, about 0.6 GB) is enough arithmetic for the model rather than Python to dominate.

Both tools read compiled bytecode, as installed packages do: the children write theirs into a
scratch cache (`PYTHONPYCACHEPREFIX`), filled by one untimed warm-up run of each tool on a tiny
checkpoint.

Usage (real size needs ~13 GB free per process; the tools run one after the other):
    python benchmarks/pi0_fast_real_size.py --lerobot-python /path/to/lerobot/venv/bin/python \
        [--size real --repeat 2 --chunks 3 --tokens 64 --threads N --tokenizer DIR]
"""

from __future__ import annotations

import argparse
import functools
import json
import runpy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import real_size

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests" / "adapters" / "policies"
STATE, ACTION, HORIZON, CAMERA = 14, 14, 50, "observation.images.base"
TASK = "pick up the cube and place it in the box"
# The stand-in tokenizer: 320 text ids then 704 reserved ones, where the action tokens go.
RESERVED = 704
PALIGEMMA_VOCAB = 257_152
TINY: dict[str, object] = {
    "paligemma_variant": "custom:width=32,depth=2,mlp_dim=64,num_heads=8,num_kv_heads=1,"
    "head_dim=8,vocab_size=1024,vision_width=32,vision_depth=1,vision_mlp_dim=64,vision_heads=2,"
    "patch_size=14",
    "image_resolution": [28, 28],
}
MEDIUM: dict[str, object] = {
    "paligemma_variant": "custom:width=512,depth=4,mlp_dim=2048,num_heads=8,num_kv_heads=1,"
    "head_dim=64,vocab_size=1024,vision_width=256,vision_depth=4,vision_mlp_dim=1024,"
    "vision_heads=4,patch_size=14",
    "image_resolution": [224, 224],
}
SIZES: dict[str, dict[str, object]] = {"tiny": TINY, "medium": MEDIUM, "real": {}}


def observation(size: int) -> dict[str, object]:
    import numpy as np

    rng = np.random.default_rng(0)
    return {
        "observation.state": rng.uniform(-1, 1, size=(1, STATE)).astype(np.float32),
        CAMERA: rng.uniform(size=(1, 3, size, size)).astype(np.float32),
        "task": [TASK],
    }


# --- the checkpoint ------------------------------------------------------------------------------


def make_checkpoint(out: Path, size: str, tokens: int, tokenizer: Path) -> None:
    import numpy as np
    import torch

    from rlctl.adapters.policies.loaded_policy import create_policy
    from rlctl.adapters.policies.vla.fast import FASTTokenizer
    from rlctl.domain.features import typed_feature
    from rlctl.domain.policies.pi0_fast import PI0FastConfig

    rng = np.random.default_rng(0)
    chunks = np.cumsum(rng.normal(size=(300, HORIZON, ACTION)) * 0.05, axis=1)
    fast = FASTTokenizer.fit(list(chunks), scale=10.0, vocab_size=512)
    fast_folder = fast.save(out.parent / f"{out.name}_fast_tokenizer")
    extra = SIZES[size]
    resolution = int(extra.get("image_resolution", [224])[0])  # type: ignore[index]
    config = PI0FastConfig(
        input_features={
            "observation.state": typed_feature("STATE", (STATE,)),
            CAMERA: typed_feature("VISUAL", (3, resolution, resolution)),
        },
        output_features={"action": typed_feature("ACTION", (ACTION,))},
        chunk_size=HORIZON,
        n_action_steps=HORIZON,
        max_decoding_steps=tokens,
        text_tokenizer_name=str(tokenizer),
        action_tokenizer_name=str(fast_folder),
        # Random weights write no "Action:": decode whatever comes (zeros).
        validate_action_token_prefix=False,
        device="cpu",
        **extra,  # type: ignore[arg-type]
    )
    stats = {
        key: {"mean": np.zeros(dim), "std": np.ones(dim)}
        for key, dim in (("observation.state", STATE), ("action", ACTION))
    }
    torch.manual_seed(0)
    create_policy(config, stats).save(out)


# --- one tool, in its own process ----------------------------------------------------------------


def run_rlctl(folder: Path, tokenizer: Path, chunks: int, resolution: int) -> dict[str, float]:
    start = time.perf_counter()
    import attrs
    import torch

    from rlctl.adapters.policies.loaded_policy import load_policy_folder

    policy = load_policy_folder(folder, device="cpu")
    loaded = time.perf_counter()
    obs = observation(resolution)
    model = policy.model  # PI0FastPolicy
    with torch.inference_mode():
        policy.predict_chunk(obs)
        first = time.perf_counter()
        steps = model.config.max_decoding_steps
        batch = policy._preprocess(obs)  # the model's own input, as LeRobot's

        def decode(count: int) -> float:
            model.model.config = attrs.evolve(model.config, max_decoding_steps=count)
            tick = time.perf_counter()
            model.generate(batch)
            return time.perf_counter() - tick

        prefill, decoding = [], []
        for _ in range(chunks):
            prefill.append(decode(1))
            decoding.append(decode(steps))
        model.model.config = attrs.evolve(model.config, max_decoding_steps=steps)
        latencies = real_size.seconds_each(lambda: policy.predict_chunk(obs), chunks)
    return report(start, loaded, first, prefill, decoding, latencies, steps)


def run_lerobot(folder: Path, tokenizer: Path, chunks: int, resolution: int) -> dict[str, float]:
    start = time.perf_counter()
    import torch

    sys.path.insert(0, str(TESTS))  # the harness imports its shared part, lerobot_common
    harness = runpy.run_path(str(TESTS / "lerobot_pi0_fast.py"))
    harness["patch_lerobot"](str(tokenizer))  # custom sizes (tiny, medium)
    policy, pre, post = harness["load"](str(folder))
    loaded = time.perf_counter()
    obs = observation(resolution)
    batch = {k: torch.from_numpy(v) for k, v in obs.items() if k != "task"}  # type: ignore[arg-type]
    batch["task"] = obs["task"]  # type: ignore[assignment]
    with torch.inference_mode():
        post(policy.predict_action_chunk(pre(dict(batch))))
        first = time.perf_counter()
        steps = policy.config.max_decoding_steps
        processed = pre(dict(batch))
        images, image_masks = policy._preprocess_images(processed)
        tokens = processed["observation.language.tokens"]
        masks = processed["observation.language.attention_mask"]

        def decode(count: int) -> float:
            tick = time.perf_counter()
            policy.model.sample_actions_fast_kv_cache(
                images, image_masks, tokens, masks, max_decoding_steps=count, temperature=0.0
            )
            return time.perf_counter() - tick

        prefill, decoding = [], []
        for _ in range(chunks):
            prefill.append(decode(1))
            decoding.append(decode(steps))
        latencies = real_size.seconds_each(
            lambda: post(policy.predict_action_chunk(pre(dict(batch)))), chunks
        )
    return report(start, loaded, first, prefill, decoding, latencies, steps)


def report(
    start: float,
    loaded: float,
    first: float,
    prefill: list[float],
    decoding: list[float],
    latencies: list[float],
    steps: int,
) -> dict[str, float]:
    """The shared figures and the decoding's: prefill (the first token) and the tokens per
    second after it."""
    nan = float("nan")
    prefill_s = statistics.median(prefill) if prefill else nan
    decode_s = statistics.median(decoding) if decoding else nan
    return real_size.figures(
        start,
        loaded,
        first,
        latencies,
        prefill_s=prefill_s,
        decode_tokens_per_s=(steps - 1) / (decode_s - prefill_s) if steps > 1 else nan,
    )


# --- the orchestration ---------------------------------------------------------------------------


def child(
    args: argparse.Namespace,
    folders: dict[str, Path],
    tool: str,
    python: str,
    size: str,
    chunks: int,
) -> dict[str, float]:
    """One run of `tool` on the checkpoint of `size`, in a fresh process (real_size.compare)."""
    argv = ["--folder", str(folders[size]), "--tokenizer", str(args.tokenizer)]
    argv += ["--chunks", str(chunks), "--size", size]
    return real_size.run_child(__file__, tool, python, argv, args, hub_offline=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lerobot-python", help="LeRobot 0.6.1's Python (omit: rlctl only)")
    parser.add_argument("--size", choices=tuple(SIZES), default="real")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64, help="max_decoding_steps")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--tokenizer", type=Path, help="PaliGemma tokenizer folder")
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=("rlctl", "lerobot"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        real_size.child_threads(args.threads)
        run = run_rlctl if args.child == "rlctl" else run_lerobot
        resolution = SIZES[args.size].get("image_resolution", [224])[0]  # type: ignore[index]
        print(json.dumps(run(args.folder, args.tokenizer, args.chunks, int(resolution))))
        return

    with tempfile.TemporaryDirectory(prefix="pi0_fast_bench_") as scratch:
        args.pycache = Path(scratch) / "pycache"
        tokenizer = args.tokenizer
        if tokenizer is None:
            write = runpy.run_path(str(TESTS / "tiny_paligemma_tokenizer.py"))
            tokenizer = write["write_tiny_paligemma_tokenizer"](
                Path(scratch) / "tokenizer",
                RESERVED,
                # Real size: every id the model can generate names a token (LeRobot's
                # detokenising looks each one up).
                vocab_size=PALIGEMMA_VOCAB if args.size == "real" else None,
            )
        args.tokenizer = tokenizer  # the children's
        folder = Path(scratch) / "pi0_fast"
        tick = time.perf_counter()
        make_checkpoint(folder, args.size, args.tokens, tokenizer)
        print(json.dumps({"checkpoint": str(folder), "made_s": time.perf_counter() - tick}))
        warm = folder if args.size == "tiny" else Path(scratch) / "pi0_fast_tiny"
        if not warm.exists():
            make_checkpoint(warm, "tiny", 4, tokenizer)
        folders = {"tiny": warm, args.size: folder}
        results = real_size.compare(args, functools.partial(child, args, folders))
        real_size.print_best(
            f"π0-FAST ({args.size} size, CPU, {args.tokens} tokens), best of {args.repeat}:",
            results,
            (*real_size.TIMES[:3], "prefill_s", "chunk_median_s", "peak_rss_mb"),
            highest=("decode_tokens_per_s",),
            width=20,
        )


if __name__ == "__main__":
    main()
