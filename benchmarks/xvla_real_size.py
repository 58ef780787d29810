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
- `--train-steps` training steps: forward, backward and the optimiser's step (each tool's own
  X-VLA AdamW groups) on a batch of `--batch` pre-processed frames (`--batch 0`: none; at real
  size a step needs about 4x the weights' memory: weights, gradients, AdamW's two moments); the
  first apart (`first_train_step_s`: it also makes AdamW's state and pays what a tool deferred
  from its load), then the median of the others (`train_step_s`);
- peak resident memory of the process;
- `chunk_cpu_s`: the CPU seconds (all threads) of the median further chunk: on a loaded shared
  host the wall-clock latency follows the load, the CPU time much less;
- `load_cpu_s` and `to_first_action_cpu_s`: the process's CPU seconds (interpreter start
  included) once the policy is loaded, and at the first chunk's end.

BART's tokenizer (`facebook/bart-large`) is read from `--tokenizer DIR` in both tools (a Hub
copy, or any BART-style tokenizer folder); without it a tiny stand-in is written (token ids
differ, timings barely). `--size tiny` runs the same at toy sizes, to check the script.

Both tools read compiled bytecode, as installed packages do: the children write theirs into a
scratch cache (`PYTHONPYCACHEPREFIX`), filled by one untimed warm-up run of each tool on a tiny
checkpoint, so no tool's load pays for compiling its imports.

Usage (real size needs ~16 GB free per process for the training step; the tools run one after
the other):
    python benchmarks/xvla_real_size.py --lerobot-python /path/to/lerobot/venv/bin/python \
        [--size real --repeat 2 --chunks 3 --steps 10 --batch 2 --train-steps 3 --threads N
         --tokenizer DIR]
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
from typing import Any

import real_size

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


def cpu_timed(predict: Any, seconds: list[float]) -> Any:
    """`predict`, appending the CPU seconds of each call (the process's, all threads) to
    `seconds`."""

    def call() -> Any:
        tick = time.process_time()
        out = predict()
        seconds.append(time.process_time() - tick)
        return out

    return call


def cpu_figure(seconds: list[float]) -> float:
    """The median CPU seconds of the further chunks (the first is the warm one's)."""
    import statistics

    return statistics.median(seconds[1:]) if len(seconds) > 1 else float("nan")


def run_rlctl(folder: Path, chunks: int, image: int, rows: int, steps: int) -> dict[str, float]:
    start = time.perf_counter()
    import torch  # noqa: F401  (timed with the imports, as LeRobot's)

    from rlctl.adapters.policies.loaded_policy import load_policy_folder
    from rlctl.adapters.training.optim import build_optimizer

    imported = time.perf_counter()
    policy = load_policy_folder(folder, device="cpu")
    loaded = time.perf_counter()
    load_cpu = time.process_time()
    obs = observation(image)
    cpu: list[float] = []
    first, latencies = real_size.chunk_times(
        cpu_timed(lambda: policy.predict_chunk(obs), cpu), chunks
    )
    trained: dict[str, float] = {}
    if rows:
        model = policy.model.train()
        optimizer = build_optimizer(model.config.optimizer_preset(), model.parameter_groups())
        batch = policy._preprocess(training_batch(image, rows, model.config.chunk_size))
        trained = train_steps(lambda: model(batch)[0], optimizer, steps)
    return real_size.figures(
        start,
        loaded,
        first,
        latencies,
        imported=imported,
        chunk_cpu_s=cpu_figure(cpu),
        load_cpu_s=load_cpu,
        to_first_action_cpu_s=load_cpu + cpu[0],
        **trained,
    )


def train_steps(loss_of_batch: Any, optimizer: Any, steps: int) -> dict[str, float]:
    """`steps` training steps (forward, backward, either tool's optimizer step), timed."""

    def step() -> None:
        loss = loss_of_batch()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return real_size.train_figures(step, steps)


def run_lerobot(folder: Path, chunks: int, image: int, rows: int, steps: int) -> dict[str, float]:
    start = time.perf_counter()
    import torch

    sys.path.insert(0, str(TESTS))  # the harness imports lerobot_common beside it
    harness = runpy.run_path(str(TESTS / "lerobot_xvla.py"))
    imported = time.perf_counter()
    policy, pre, post = harness["load"](str(folder))
    loaded = time.perf_counter()
    load_cpu = time.process_time()
    obs = observation(image)
    batch = {k: torch.from_numpy(v) for k, v in obs.items() if k != "task"}
    batch["task"] = obs["task"]
    cpu: list[float] = []
    first, latencies = real_size.chunk_times(
        cpu_timed(lambda: post(policy.predict_action_chunk(pre(dict(batch)))), cpu), chunks
    )
    trained: dict[str, float] = {}
    if rows:
        policy.train()
        optimizer = policy.config.get_optimizer_preset().build(dict(policy.named_parameters()))
        train = pre(training_batch(image, rows, policy.config.chunk_size))
        trained = train_steps(lambda: policy.forward(train)[0], optimizer, steps)
    return real_size.figures(
        start,
        loaded,
        first,
        latencies,
        imported=imported,
        chunk_cpu_s=cpu_figure(cpu),
        load_cpu_s=load_cpu,
        to_first_action_cpu_s=load_cpu + cpu[0],
        **trained,
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
    argv = ["--folder", str(folders[size]), "--chunks", str(chunks)]
    argv += ["--size", size, "--batch", str(args.batch), "--train-steps", str(args.train_steps)]
    return real_size.run_child(__file__, tool, python, argv, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lerobot-python", help="LeRobot 0.6.1's Python (omit: rlctl only)")
    parser.add_argument("--size", choices=("tiny", "real"), default="real")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10, help="num_denoising_steps")
    parser.add_argument("--batch", type=int, default=2, help="training frames (0: none)")
    parser.add_argument(
        "--train-steps", type=int, default=3, help="training steps: the first, then the median"
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--tokenizer", type=Path, help="a BART tokenizer folder")
    parser.add_argument("--folder", type=Path, help="an existing X-VLA checkpoint to time")
    parser.add_argument("--child", choices=("rlctl", "lerobot"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        real_size.child_threads(args.threads)
        run = run_rlctl if args.child == "rlctl" else run_lerobot
        image = int(sizes(args.size)["image"])
        print(json.dumps(run(args.folder, args.chunks, image, args.batch, args.train_steps)))
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
        warm = folder if args.size == "tiny" else Path(scratch) / "xvla_tiny"
        if not warm.exists():
            make_checkpoint(warm, "tiny", args.steps, tokenizer)
        folders = {"tiny": warm, args.size: folder}
        results = real_size.compare(args, functools.partial(child, args, folders))
        real_size.print_best(
            f"X-VLA ({args.size} size, CPU), best of {args.repeat}:",
            results,
            (
                *real_size.TIMES,
                "chunk_cpu_s",
                "load_cpu_s",
                "to_first_action_cpu_s",
                "first_train_step_s",
                "train_step_s",
                "peak_rss_mb",
            ),
        )


if __name__ == "__main__":
    main()
