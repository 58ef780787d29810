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
import json
import os
import resource
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


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
    import torch

    from rlctl.adapters.policies.loaded_policy import load_policy_folder
    from rlctl.adapters.policies.vla import tokenizer as tokenizer_module

    use_local_tokenizer(tokenizer_module, tokenizer)
    imported = time.perf_counter()
    policy = load_policy_folder(folder, device="cpu")
    loaded = time.perf_counter()
    obs = observation(resolution)
    with torch.inference_mode():
        policy.predict_chunk(obs)
        first = time.perf_counter()
        latencies = []
        for _ in range(chunks):
            tick = time.perf_counter()
            policy.predict_chunk(obs)
            latencies.append(time.perf_counter() - tick)
    return report(start, imported, loaded, first, latencies)


def run_lerobot(folder: Path, tokenizer: Path, chunks: int, resolution: int) -> dict[str, float]:
    start = time.perf_counter()
    import torch

    harness = runpy.run_path(str(TESTS / "lerobot_pi0.py"))
    harness["patch_lerobot"](str(tokenizer))  # custom sizes (tiny) and the local tokenizer
    imported = time.perf_counter()
    policy, pre, post = harness["load"](str(folder))
    loaded = time.perf_counter()
    obs = observation(resolution)
    batch = {k: torch.from_numpy(v) for k, v in obs.items() if k != "task"}  # type: ignore[arg-type]
    batch["task"] = obs["task"]  # type: ignore[assignment]
    with torch.inference_mode():
        post(policy.predict_action_chunk(pre(dict(batch))))
        first = time.perf_counter()
        latencies = []
        for _ in range(chunks):
            tick = time.perf_counter()
            post(policy.predict_action_chunk(pre(dict(batch))))
            latencies.append(time.perf_counter() - tick)
    return report(start, imported, loaded, first, latencies)


def report(
    start: float, imported: float, loaded: float, first: float, latencies: list[float]
) -> dict[str, float]:
    return {
        "import_s": imported - start,
        "load_s": loaded - imported,
        # rlctl imports torch and transformers lazily inside the load; compare this one.
        "import_and_load_s": loaded - start,
        "first_chunk_s": first - loaded,
        # rlctl maps the weights and reads them as the first chunk touches them (the unused
        # lm_heads never); LeRobot reads them all while loading: compare this one.
        "to_first_action_s": first - start,
        "chunk_median_s": statistics.median(latencies) if latencies else float("nan"),
        "peak_rss_mb": peak_rss_mb(),
    }


# --- the orchestration ---------------------------------------------------------------------------


def child(
    tool: str,
    python: str,
    args: argparse.Namespace,
    folder: Path,
    tokenizer: Path,
    *,
    size: str | None = None,
    chunks: int | None = None,
) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(args.pycache)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    command = [python, str(Path(__file__).resolve()), "--child", tool, "--folder", str(folder)]
    command += ["--tokenizer", str(tokenizer)]
    command += ["--chunks", str(args.chunks if chunks is None else chunks)]
    command += ["--size", size or args.size]
    if args.threads:
        command += ["--threads", str(args.threads)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode:
        raise SystemExit(f"{tool} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


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
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
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
        folder = args.folder
        if folder is None:
            folder = Path(scratch) / "pi05"
            tick = time.perf_counter()
            make_checkpoint(folder, args.size, args.steps, tokenizer)
            print(json.dumps({"checkpoint": str(folder), "made_s": time.perf_counter() - tick}))
        tools = {"rlctl": sys.executable}
        if args.lerobot_python:
            tools["lerobot"] = args.lerobot_python
        warm = folder if args.size == "tiny" else Path(scratch) / "pi05_tiny"
        if not warm.exists():
            make_checkpoint(warm, "tiny", args.steps, tokenizer)
        for tool, python in tools.items():  # untimed: compiles each tool's imports
            child(tool, python, args, warm, tokenizer, size="tiny", chunks=0)
        results: dict[str, list[dict]] = {tool: [] for tool in tools}
        for _ in range(args.repeat):
            for tool, python in tools.items():
                figures = child(tool, python, args, folder, tokenizer)
                results[tool].append(figures)
                print(json.dumps({"tool": tool, "size": args.size, **figures}))
        print(f"\nπ0.5 ({args.size} size, CPU), best of {args.repeat}:")
        print(f"{'':18}" + "".join(f"{tool:>12}" for tool in tools))
        keys = ("import_and_load_s", "first_chunk_s", "to_first_action_s", "chunk_median_s")
        for key in (*keys, "peak_rss_mb"):
            best = [min(r[key] for r in results[tool]) for tool in tools]
            print(f"{key:18}" + "".join(f"{value:12.3f}" for value in best))


if __name__ == "__main__":
    main()
