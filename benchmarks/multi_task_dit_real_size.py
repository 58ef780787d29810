"""The multi-task DiT at its real size (LeRobot's defaults: CLIP ViT-B/16's vision and text towers,
about 150 M parameters, and a 6-layer DiT of width 512; random weights, float32, CPU), rlctl side
by side with LeRobot 0.6.1.

A CLIP folder with ViT-B/16's config and random weights is written first (its tokenizer is the
tests' small CLIP-style one: token ids differ from openai's, timings do not), then one
checkpoint (by rlctl, random weights, LeRobot's format) on it; then each tool, in its own fresh
process (alternating, `--repeat` times), loads it and predicts:

- load: from the call that loads the checkpoint (rlctl's `load_policy_folder`, LeRobot's
  `MultiTaskDiTPolicy.from_pretrained` + both processor pipelines) to a policy ready to act;
- first chunk: the first chunk (pre-processing, the model, post-processing) on one observation
  history (`n_obs_steps` = 2 steps of two 224x224 cameras and an 8-dim state, a task), then
  `--chunks` more: per-chunk latency, median;
- to first action: from the child's start (imports included) to the first chunk's end;
- peak resident memory of the process.

`--objective diffusion` (the default: DDPM, `--steps` denoising steps, LeRobot's default 100) or
`flow_matching` (`--steps` Euler steps). `--size tiny` runs the same at toy sizes, to check the
script.

Both tools read compiled bytecode, as installed packages do: the children write theirs into a
scratch cache (`PYTHONPYCACHEPREFIX`, even under `PYTHONDONTWRITEBYTECODE`), filled by one
untimed warm-up run of each tool on a tiny checkpoint, so no tool's load pays for compiling its
imports.

On a shared, loaded machine give both tools `--threads 1`: with more threads than free cores,
torch's thread pool waits on itself and a tiny model's chunk takes seconds instead of
milliseconds (in either tool), which measures the machine, not the tool.

Usage (real size needs about 2 GB per process; the tools run one after the other):
    python benchmarks/multi_task_dit_real_size.py --lerobot-python LEROBOT_VENV/bin/python \
        [--size real --repeat 2 --chunks 3 --steps 100 --objective diffusion --threads N]
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
STATE, ACTION, STEPS = 8, 7, 2
CAMERAS = ("observation.images.image", "observation.images.wrist_image")
TASK = "put the bowl on the plate"
# CLIP ViT-B/16 (openai/clip-vit-base-patch16): its towers' sizes.
REAL_CLIP: dict[str, dict[str, object]] = {
    "text": {
        "hidden_size": 512,
        "intermediate_size": 2048,
        "num_hidden_layers": 12,
        "num_attention_heads": 8,
        "vocab_size": 49408,
    },
    "vision": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "image_size": 224,
        "patch_size": 16,
    },
}
TINY_DIT: dict[str, object] = {
    "hidden_dim": 32,
    "num_layers": 2,
    "num_heads": 4,
    "timestep_embed_dim": 16,
    "horizon": 8,
    "n_action_steps": 4,
    "tokenizer_max_length": 16,
}


def image_size(size: str) -> int:
    return 224 if size == "real" else 32


def observation(size: str) -> dict[str, object]:
    import numpy as np

    rng = np.random.default_rng(0)
    side = image_size(size)
    obs: dict[str, object] = {
        "observation.state": rng.uniform(-1, 1, size=(1, STEPS, STATE)).astype(np.float32),
        "task": [TASK],
    }
    for key in CAMERAS:
        obs[key] = rng.uniform(size=(1, STEPS, 3, side, side)).astype(np.float32)
    return obs


# --- the checkpoint ------------------------------------------------------------------------------


def make_clip(out: Path, size: str) -> Path:
    write = runpy.run_path(str(TESTS / "tiny_clip.py"))["write_tiny_clip"]
    if size == "real":
        return Path(write(out, **REAL_CLIP))
    return Path(write(out))


def make_checkpoint(out: Path, clip: Path, size: str, objective: str, steps: int) -> None:
    import numpy as np
    import torch

    from rlctl.adapters.policies.loaded_policy import create_policy
    from rlctl.domain.features import typed_feature
    from rlctl.domain.policies.multi_task_dit import MultiTaskDiTConfig

    side = image_size(size)
    extra = {} if size == "real" else dict(TINY_DIT)
    steps_field = "num_inference_steps" if objective == "diffusion" else "num_integration_steps"
    if objective == "diffusion" and steps > 100:  # more steps than LeRobot's 100 trained
        extra["num_train_timesteps"] = steps
    config = MultiTaskDiTConfig(
        input_features={
            "observation.state": typed_feature("STATE", (STATE,)),
            **{key: typed_feature("VISUAL", (3, side, side)) for key in CAMERAS},
        },
        output_features={"action": typed_feature("ACTION", (ACTION,))},
        vision_encoder_name=str(clip),
        text_encoder_name=str(clip),
        objective=objective,
        device="cpu",
        **{steps_field: steps},
        **extra,  # type: ignore[arg-type]
    )
    stats: dict[str, dict[str, np.ndarray]] = {
        key: {"min": -np.ones(dim), "max": np.ones(dim)}
        for key, dim in (("observation.state", STATE), ("action", ACTION))
    }
    for key in CAMERAS:
        stats[key] = {"mean": np.full((3, 1, 1), 0.45), "std": np.full((3, 1, 1), 0.25)}
    torch.manual_seed(0)
    create_policy(config, stats).save(out)


# --- one tool, in its own process ----------------------------------------------------------------


def run_rlctl(folder: Path, chunks: int, size: str) -> dict[str, float]:
    start = time.perf_counter()
    import torch  # noqa: F401  (timed with the imports, as LeRobot's)

    from rlctl.adapters.policies.loaded_policy import load_policy_folder

    imported = time.perf_counter()
    policy = load_policy_folder(folder, device="cpu")
    loaded = time.perf_counter()
    obs = observation(size)
    first, latencies = real_size.chunk_times(lambda: policy.predict_chunk(obs), chunks)
    return real_size.figures(start, loaded, first, latencies, imported=imported)


def run_lerobot(folder: Path, chunks: int, size: str) -> dict[str, float]:
    start = time.perf_counter()
    import torch

    sys.path.insert(0, str(TESTS))  # the harness imports its shared part, lerobot_common
    harness = runpy.run_path(str(TESTS / "lerobot_multi_task_dit.py"))
    imported = time.perf_counter()
    policy, pre, post = harness["common"].load(harness["MultiTaskDiTPolicy"], str(folder))
    loaded = time.perf_counter()
    obs = observation(size)
    batch = {k: torch.from_numpy(v) for k, v in obs.items() if k != "task"}  # type: ignore[arg-type]
    batch["task"] = obs["task"]  # type: ignore[assignment]

    def predict() -> object:
        # LeRobot's chunk from a history, as its select_action makes it once its queues are full.
        return post(policy._generate_actions(policy._prepare_batch(pre(dict(batch)))))

    first, latencies = real_size.chunk_times(predict, chunks)
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
    argv = ["--folder", str(folders[size]), "--chunks", str(chunks), "--size", size]
    return real_size.run_child(__file__, tool, python, argv, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lerobot-python", help="LeRobot 0.6.1's Python (omit: rlctl only)")
    parser.add_argument("--size", choices=("tiny", "real"), default="real")
    parser.add_argument("--objective", choices=("diffusion", "flow_matching"), default="diffusion")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100, help="denoising or integration steps")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--folder", type=Path, help="an existing multi-task DiT checkpoint")
    parser.add_argument("--child", choices=("rlctl", "lerobot"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        real_size.child_threads(args.threads)
        run = run_rlctl if args.child == "rlctl" else run_lerobot
        print(json.dumps(run(args.folder, args.chunks, args.size)))
        return

    with tempfile.TemporaryDirectory(prefix="mtdit_bench_") as scratch:
        args.pycache = Path(scratch) / "pycache"
        folder = args.folder
        if folder is None:
            # The folder's name must contain "clip", as LeRobot's config insists.
            clip = make_clip(Path(scratch) / f"clip-{args.size}", args.size)
            folder = Path(scratch) / "multi_task_dit"
            tick = time.perf_counter()
            make_checkpoint(folder, clip, args.size, args.objective, args.steps)
            print(json.dumps({"checkpoint": str(folder), "made_s": time.perf_counter() - tick}))
        warm = folder if args.size == "tiny" else Path(scratch) / "multi_task_dit_tiny"
        if not warm.exists():
            tiny_clip = make_clip(Path(scratch) / "clip-tiny", "tiny")
            make_checkpoint(warm, tiny_clip, "tiny", args.objective, 4)
        folders = {"tiny": warm, args.size: folder}
        results = real_size.compare(args, functools.partial(child, args, folders))
        real_size.print_best(
            f"multi-task DiT ({args.size} size, {args.objective}, {args.steps} steps, CPU), "
            f"best of {args.repeat}:",
            results,
        )


if __name__ == "__main__":
    main()
