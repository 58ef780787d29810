"""X-VLA at its real size (Florence-2-large's DaViT and BART-large encoder, a 24-layer 1024-wide
soft-prompted transformer: about 0.9 B parameters, random weights, float32 ~3.5 GB, CPU), rlctl
side by side with LeRobot 0.6.1.

One checkpoint is written first (by rlctl, random weights, LeRobot's format); then each tool, in
its own fresh process (alternating, `--repeat` times), loads it and predicts:

- import and load: from the child's start (imports included) to a policy ready to act (rlctl's
  `load_policy_folder`, LeRobot's `XVLAPolicy.from_pretrained` + both processor pipelines);
- first chunk: the first chunk (pre-processing, the model, post-processing) on one observation
  (two 224x224 cameras, an 8-dim state, a task), then `--chunks` more: per-chunk latency, median;
- to first action: from the child's start to the first chunk's end;
- one training step: forward, backward and the optimiser's step (each tool's own X-VLA AdamW
  groups) on a batch of `--batch` pre-processed frames (`--batch 0`: none; at real size the
  step needs about 4x the weights' memory: weights, gradients, AdamW's two moments);
- peak resident memory of the process.

BART's tokenizer (`facebook/bart-large`) is read from `--tokenizer DIR` in both tools (a Hub
copy, or any BART-style tokenizer folder); without it a tiny stand-in is written (token ids
differ, timings barely). `--size tiny` runs the same at toy sizes, to check the script.

Both tools read compiled bytecode, as installed packages do: the children write theirs into a
scratch cache (`PYTHONPYCACHEPREFIX`), filled by one untimed warm-up run of each tool on a tiny
checkpoint, so no tool's load pays for compiling its imports.

Usage (real size needs ~16 GB free per process for the training step; the tools run one after
the other):
    python benchmarks/xvla_real_size.py --lerobot-python /path/to/lerobot/venv/bin/python \
        [--size real --repeat 2 --chunks 3 --steps 10 --batch 2 --threads N --tokenizer DIR]
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
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests" / "adapters" / "policies"
STATE, ACTION = 8, 7
CAMERAS = ("observation.images.image", "observation.images.image2")
TASK = "pick up the cube and place it in the box"
# Florence-2-large, as X-VLA-0.9B's config.json holds it (transformers' native fields).
FLORENCE_LARGE: dict[str, Any] = {
    "vision_config": {
        "embed_dim": [256, 512, 1024, 2048],
        "depths": [1, 1, 9, 1],
        "num_heads": [8, 16, 32, 64],
        "num_groups": [8, 16, 32, 64],
        "patch_size": [7, 3, 3, 3],
        "patch_stride": [4, 2, 2, 2],
        "patch_padding": [3, 1, 1, 1],
        "patch_prenorm": [False, True, True, True],
        "window_size": 12,
        "projection_dim": 1024,
        "max_position_embeddings": 50,
        "max_temporal_embeddings": 100,
    },
    "text_config": {
        "model_type": "bart",
        "vocab_size": 51289,
        "d_model": 1024,
        "encoder_layers": 12,
        "decoder_layers": 12,
        "encoder_attention_heads": 16,
        "decoder_attention_heads": 16,
        "encoder_ffn_dim": 4096,
        "decoder_ffn_dim": 4096,
        "max_position_embeddings": 1024,
    },
}


def tiny_sizes() -> dict[str, Any]:
    florence = runpy.run_path(str(TESTS / "tiny_xvla.py"))["tiny_florence"]()
    return {
        "florence_config": florence,
        "hidden_size": 32,
        "depth": 2,
        "num_heads": 4,
        "len_soft_prompts": 4,
        "max_len_seq": 128,
        "tokenizer_max_length": 16,
        "chunk_size": 8,
        "n_action_steps": 8,
        "image": 32,
    }


def sizes(size: str) -> dict[str, Any]:
    if size == "tiny":
        return tiny_sizes()
    return {"florence_config": FLORENCE_LARGE, "image": 224}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def observation(size: int, rows: int = 1) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    out: dict[str, Any] = {
        "observation.state": rng.uniform(-1, 1, size=(rows, STATE)).astype(np.float32),
        "task": [TASK] * rows,
    }
    for camera in CAMERAS:
        out[camera] = rng.uniform(size=(rows, 3, size, size)).astype(np.float32)
    return out


# --- the checkpoint ------------------------------------------------------------------------------


def make_checkpoint(out: Path, size: str, steps: int, tokenizer: Path) -> None:
    import numpy as np
    import torch

    from rlctl.adapters.policies.loaded_policy import create_policy
    from rlctl.domain.features import typed_feature
    from rlctl.domain.policies.xvla import XVLAConfig

    extra = dict(sizes(size))
    image = int(extra.pop("image"))
    config = XVLAConfig(
        input_features={
            "observation.state": typed_feature("STATE", (STATE,)),
            **{camera: typed_feature("VISUAL", (3, image, image)) for camera in CAMERAS},
        },
        output_features={"action": typed_feature("ACTION", (ACTION,))},
        tokenizer_name=str(tokenizer),
        action_mode="auto",
        num_denoising_steps=steps,
        device="cpu",
        **extra,
    )
    stats = {
        key: {"mean": np.zeros(dim), "std": np.ones(dim)}
        for key, dim in (("observation.state", STATE), ("action", ACTION))
    }
    torch.manual_seed(0)
    create_policy(config, stats).save(out)


# --- one tool, in its own process ----------------------------------------------------------------


def training_batch(image: int, rows: int, chunk: int) -> dict[str, Any]:
    import torch

    batch: dict[str, Any] = {
        k: torch.from_numpy(v) for k, v in observation(image, rows).items() if k != "task"
    }
    batch["task"] = [TASK] * rows
    batch["action"] = torch.rand(rows, chunk, ACTION)
    return batch


def run_rlctl(folder: Path, chunks: int, image: int, rows: int) -> dict[str, float]:
    start = time.perf_counter()
    import torch

    from rlctl.adapters.policies.loaded_policy import load_policy_folder
    from rlctl.adapters.training.optim import build_optimizer

    imported = time.perf_counter()
    policy = load_policy_folder(folder, device="cpu")
    loaded = time.perf_counter()
    obs = observation(image)
    with torch.inference_mode():
        policy.predict_chunk(obs)
        first = time.perf_counter()
        latencies = []
        for _ in range(chunks):
            tick = time.perf_counter()
            policy.predict_chunk(obs)
            latencies.append(time.perf_counter() - tick)
    if not rows:
        return report(start, imported, loaded, first, latencies, float("nan"))
    model = policy.model.train()
    optimizer = build_optimizer(model.config.optimizer_preset(), model.parameter_groups())
    batch = policy._preprocess(training_batch(image, rows, model.config.chunk_size))
    tick = time.perf_counter()
    loss, _ = model(batch)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    step = time.perf_counter() - tick
    return report(start, imported, loaded, first, latencies, step)


def run_lerobot(folder: Path, chunks: int, image: int, rows: int) -> dict[str, float]:
    start = time.perf_counter()
    import torch

    harness = runpy.run_path(str(TESTS / "lerobot_xvla.py"))
    imported = time.perf_counter()
    policy, pre, post = harness["load"](str(folder))
    loaded = time.perf_counter()
    obs = observation(image)
    batch = {k: torch.from_numpy(v) for k, v in obs.items() if k != "task"}
    batch["task"] = obs["task"]
    with torch.inference_mode():
        post(policy.predict_action_chunk(pre(dict(batch))))
        first = time.perf_counter()
        latencies = []
        for _ in range(chunks):
            tick = time.perf_counter()
            post(policy.predict_action_chunk(pre(dict(batch))))
            latencies.append(time.perf_counter() - tick)
    if not rows:
        return report(start, imported, loaded, first, latencies, float("nan"))
    policy.train()
    optimizer = policy.config.get_optimizer_preset().build(dict(policy.named_parameters()))
    train = pre(training_batch(image, rows, policy.config.chunk_size))
    tick = time.perf_counter()
    loss, _ = policy.forward(train)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    step = time.perf_counter() - tick
    return report(start, imported, loaded, first, latencies, step)


def report(
    start: float,
    imported: float,
    loaded: float,
    first: float,
    latencies: list[float],
    step: float,
) -> dict[str, float]:
    return {
        "import_s": imported - start,
        "load_s": loaded - imported,
        "import_and_load_s": loaded - start,
        "first_chunk_s": first - loaded,
        "to_first_action_s": first - start,
        "chunk_median_s": statistics.median(latencies) if latencies else float("nan"),
        "train_step_s": step,
        "peak_rss_mb": peak_rss_mb(),
    }


# --- the orchestration ---------------------------------------------------------------------------


def child(
    tool: str,
    python: str,
    args: argparse.Namespace,
    folder: Path,
    *,
    size: str | None = None,
    chunks: int | None = None,
) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(args.pycache)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    command = [python, str(Path(__file__).resolve()), "--child", tool, "--folder", str(folder)]
    command += ["--chunks", str(args.chunks if chunks is None else chunks)]
    command += ["--size", size or args.size, "--batch", str(args.batch)]
    if args.threads:
        command += ["--threads", str(args.threads)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode:
        raise SystemExit(f"{tool} failed:\n{result.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lerobot-python", help="LeRobot 0.6.1's Python (omit: rlctl only)")
    parser.add_argument("--size", choices=("tiny", "real"), default="real")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10, help="num_denoising_steps")
    parser.add_argument("--batch", type=int, default=2, help="training frames (0: none)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--tokenizer", type=Path, help="a BART tokenizer folder")
    parser.add_argument("--folder", type=Path, help="an existing X-VLA checkpoint to time")
    parser.add_argument("--child", choices=("rlctl", "lerobot"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        run = run_rlctl if args.child == "rlctl" else run_lerobot
        image = int(sizes(args.size)["image"])
        print(json.dumps(run(args.folder, args.chunks, image, args.batch)))
        return

    with tempfile.TemporaryDirectory(prefix="xvla_bench_") as scratch:
        args.pycache = Path(scratch) / "pycache"
        tokenizer = args.tokenizer
        if tokenizer is None:
            write = runpy.run_path(str(TESTS / "tiny_xvla.py"))["write_tiny_bart_tokenizer"]
            tokenizer = write(Path(scratch) / "tokenizer")
        folder = args.folder
        if folder is None:
            folder = Path(scratch) / "xvla"
            tick = time.perf_counter()
            make_checkpoint(folder, args.size, args.steps, tokenizer)
            print(json.dumps({"checkpoint": str(folder), "made_s": time.perf_counter() - tick}))
        tools = {"rlctl": sys.executable}
        if args.lerobot_python:
            tools["lerobot"] = args.lerobot_python
        warm = folder if args.size == "tiny" else Path(scratch) / "xvla_tiny"
        if not warm.exists():
            make_checkpoint(warm, "tiny", args.steps, tokenizer)
        for tool, python in tools.items():  # untimed: compiles each tool's imports
            child(tool, python, args, warm, size="tiny", chunks=0)
        results: dict[str, list[dict[str, float]]] = {tool: [] for tool in tools}
        for _ in range(args.repeat):
            for tool, python in tools.items():
                figures = child(tool, python, args, folder)
                results[tool].append(figures)
                print(json.dumps({"tool": tool, "size": args.size, **figures}))
        print(f"\nX-VLA ({args.size} size, CPU), best of {args.repeat}:")
        print(f"{'':18}" + "".join(f"{tool:>12}" for tool in tools))
        keys = ("import_and_load_s", "first_chunk_s", "to_first_action_s", "chunk_median_s")
        for key in (*keys, "train_step_s", "peak_rss_mb"):
            best = [min(r[key] for r in results[tool]) for tool in tools]
            print(f"{key:18}" + "".join(f"{value:12.3f}" for value in best))


if __name__ == "__main__":
    main()
