"""π0.5 at its real size (PaliGemma 2B + a 300M expert, about 3.6 B parameters with both unused
lm_heads, random weights, float32 ~14 GB, CPU), rlctl side by side with LeRobot 0.6.1.

One checkpoint is written first (by rlctl, random weights, LeRobot's format); then each tool, in
its own fresh process (alternating, `--repeat` times), loads it and predicts:

- load: from the call that loads the checkpoint (rlctl's `load_policy_folder`, LeRobot's
  `PI05Policy.from_pretrained` + both processor pipelines) to a policy ready to act;
- first chunk: the first `predict_chunk` (pre-processing, the model, post-processing) on one
  observation (a 224x224 camera, a 14-dim state, a task), then `--chunks` more: per-chunk
  latency, median;
- to first action: from the child's start (imports included) to the first chunk's end;
- peak resident memory of the process.

PaliGemma's tokenizer (`google/paligemma-3b-pt-224`) is read from `--tokenizer DIR` in both
tools (a Hub copy, or any Gemma-style tokenizer folder); without it a tiny stand-in is written
(token ids differ, timings do not). `--size tiny` runs the same at toy sizes, to check the script;
`--size medium` (Gemma widths 512 and 256, 4 layers, a 224x224 camera, about 1 GB) takes a few
seconds per tool, enough arithmetic for the model rather than Python to dominate.

Both tools read compiled bytecode, as installed packages do: the children write theirs into a
scratch cache (`PYTHONPYCACHEPREFIX`, even under `PYTHONDONTWRITEBYTECODE`), filled by one
untimed warm-up run of each tool on a tiny checkpoint, so no tool's load pays for compiling its
imports.

Usage (real size needs ~16 GB free per process; the tools run one after the other):
    python benchmarks/pi05_real_size.py --lerobot-python /path/to/lerobot/venv/bin/python \
        [--size real --repeat 2 --chunks 3 --steps 10 --threads N --tokenizer DIR]
"""

from __future__ import annotations

import argparse
import functools
import json
import runpy
import sys
import tempfile
import time
from pathlib import Path

import real_size

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests" / "adapters" / "policies"
PALIGEMMA_TOKENIZER = "google/paligemma-3b-pt-224"
STATE, ACTION, CAMERA = 14, 14, "observation.images.base"
TASK = "pick up the cube and place it in the box"
TINY: dict[str, object] = {
    "paligemma_variant": "custom:width=32,depth=2,mlp_dim=64,num_heads=8,num_kv_heads=1,"
    "head_dim=8,vocab_size=320,vision_width=32,vision_depth=1,vision_mlp_dim=64,vision_heads=2,"
    "patch_size=14",
    "action_expert_variant": "custom:width=16,depth=2,mlp_dim=32,num_heads=8,num_kv_heads=1,"
    "head_dim=8,vocab_size=320",
    "image_resolution": [28, 28],
}
# Seconds per run and about 1 GB: enough arithmetic that the model, not Python, dominates.
MEDIUM: dict[str, object] = {
    "paligemma_variant": "custom:width=512,depth=4,mlp_dim=2048,num_heads=8,num_kv_heads=1,"
    "head_dim=64,vocab_size=320,vision_width=256,vision_depth=4,vision_mlp_dim=1024,"
    "vision_heads=4,patch_size=14",
    "action_expert_variant": "custom:width=256,depth=4,mlp_dim=1024,num_heads=8,num_kv_heads=1,"
    "head_dim=64,vocab_size=320",
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


def make_checkpoint(out: Path, size: str, steps: int, tokenizer: Path) -> None:
    import numpy as np
    import torch

    from rlctl.adapters.policies.loaded_policy import create_policy
    from rlctl.adapters.policies.vla import tokenizer as tokenizer_module
    from rlctl.domain.features import typed_feature
    from rlctl.domain.policies.pi05 import PI05Config

    use_local_tokenizer(tokenizer_module, tokenizer)
    extra = SIZES[size]
    resolution = int(extra.get("image_resolution", [224])[0])  # type: ignore[index]
    config = PI05Config(
        input_features={
            "observation.state": typed_feature("STATE", (STATE,)),
            CAMERA: typed_feature("VISUAL", (3, resolution, resolution)),
        },
        output_features={"action": typed_feature("ACTION", (ACTION,))},
        num_inference_steps=steps,
        device="cpu",
        **extra,  # type: ignore[arg-type]
    )
    stats = {
        key: {
            "mean": np.zeros(dim),
            "std": np.ones(dim),
            "q01": -np.ones(dim),
            "q99": np.ones(dim),
            "min": -np.ones(dim),
            "max": np.ones(dim),
        }
        for key, dim in (("observation.state", STATE), ("action", ACTION))
    }
    torch.manual_seed(0)
    policy = create_policy(config, stats)
    policy.save(out)


def use_local_tokenizer(module: object, folder: Path) -> None:
    load = module.load_tokenizer  # type: ignore[attr-defined]

    def local(name: str) -> object:
        return load(str(folder) if name == PALIGEMMA_TOKENIZER else name)

    module.load_tokenizer = local  # type: ignore[attr-defined]


# --- one tool, in its own process ----------------------------------------------------------------


def run_rlctl(folder: Path, tokenizer: Path, chunks: int, resolution: int) -> dict[str, float]:
    start = time.perf_counter()
    import torch  # noqa: F401  (timed with the imports, as LeRobot's)

    from rlctl.adapters.policies.loaded_policy import load_policy_folder
    from rlctl.adapters.policies.vla import tokenizer as tokenizer_module

    use_local_tokenizer(tokenizer_module, tokenizer)
    imported = time.perf_counter()
    policy = load_policy_folder(folder, device="cpu")
    loaded = time.perf_counter()
    obs = observation(resolution)
    first, latencies = real_size.chunk_times(lambda: policy.predict_chunk(obs), chunks)
    return real_size.figures(start, loaded, first, latencies, imported=imported)


def run_lerobot(folder: Path, tokenizer: Path, chunks: int, resolution: int) -> dict[str, float]:
    start = time.perf_counter()
    import torch

    sys.path.insert(0, str(TESTS))  # the harness imports its shared part, lerobot_common
    harness = runpy.run_path(str(TESTS / "lerobot_pi0.py"))
    harness["patch_lerobot"](str(tokenizer))  # custom sizes (tiny) and the local tokenizer
    imported = time.perf_counter()
    policy, pre, post = harness["load"](str(folder))
    loaded = time.perf_counter()
    obs = observation(resolution)
    batch = {k: torch.from_numpy(v) for k, v in obs.items() if k != "task"}  # type: ignore[arg-type]
    batch["task"] = obs["task"]  # type: ignore[assignment]
    first, latencies = real_size.chunk_times(
        lambda: post(policy.predict_action_chunk(pre(dict(batch)))), chunks
    )
    # rlctl never reads the unused lm_heads: compare to_first_action_s (see real_size.figures).
    return real_size.figures(start, loaded, first, latencies, imported=imported)


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
    return real_size.run_child(__file__, tool, python, argv, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lerobot-python", help="LeRobot 0.6.1's Python (omit: rlctl only)")
    parser.add_argument("--size", choices=tuple(SIZES), default="real")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10, help="num_inference_steps")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--tokenizer", type=Path, help="PaliGemma tokenizer folder")
    parser.add_argument("--folder", type=Path, help="an existing π0.5 checkpoint to time")
    parser.add_argument("--child", choices=("rlctl", "lerobot"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        real_size.child_threads(args.threads)
        run = run_rlctl if args.child == "rlctl" else run_lerobot
        resolution = SIZES[args.size].get("image_resolution", [224])[0]  # type: ignore[index]
        print(json.dumps(run(args.folder, args.tokenizer, args.chunks, int(resolution))))
        return

    with tempfile.TemporaryDirectory(prefix="pi05_bench_") as scratch:
        args.pycache = Path(scratch) / "pycache"
        tokenizer = args.tokenizer
        if tokenizer is None:
            write = runpy.run_path(str(TESTS / "tiny_paligemma_tokenizer.py"))
            tokenizer = write["write_tiny_paligemma_tokenizer"](Path(scratch) / "tokenizer")
        args.tokenizer = tokenizer  # the children's
        folder = args.folder
        if folder is None:
            folder = Path(scratch) / "pi05"
            tick = time.perf_counter()
            make_checkpoint(folder, args.size, args.steps, tokenizer)
            print(json.dumps({"checkpoint": str(folder), "made_s": time.perf_counter() - tick}))
        warm = folder if args.size == "tiny" else Path(scratch) / "pi05_tiny"
        if not warm.exists():
            make_checkpoint(warm, "tiny", args.steps, tokenizer)
        folders = {"tiny": warm, args.size: folder}
        results = real_size.compare(args, functools.partial(child, args, folders))
        real_size.print_best(f"π0.5 ({args.size} size, CPU), best of {args.repeat}:", results)


if __name__ == "__main__":
    main()
