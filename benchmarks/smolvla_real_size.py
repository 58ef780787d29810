"""SmolVLA at its real size (SmolVLM2-500M class, random weights, CPU): rlctl beside LeRobot.

    uv run python benchmarks/smolvla_real_size.py \
        [--lerobot-python /tmp/lerobot-anchor/bin/python] [--bench-dir ../shared/bench] \
        [--work /tmp/smolvla_real_size] [--rounds 1] [--train-steps 3] [--skip-train]

Both tools read the same files: a SmolVLM folder that `make_tiny_smolvlm.py OUT --real-size`
writes (text 960-d x 32 layers, vision 768-d x 12 layers at 512 px, random weights; SmolVLA uses
16 of the text layers) and one LeRobot checkpoint built on it by `lerobot_smolvla_bench.py make`
(about 450 M parameters, two 480x640 cameras, 6-dof state and action, LeRobot's defaults:
chunk 50, 10 flow steps, 512 px padding). Each measurement is a fresh process, run one after the
other, never both at once:

    load_s                   reading the checkpoint until the policy is ready
    load_to_first_action_s   from the process's first line to the first action
                             (LeRobot: from_pretrained + processors + select_action)
    chunk_latency_s          three further whole-chunk predictions (pre-processing included)
    peak_rss_gb              the process's peak resident memory
    process_wall_s           the whole process, imports and the three chunks included
    train_step_s             one training step at batch 2 (forward, backward, AdamW with
                             LeRobot's preset and gradient clipping), after one warm-up step;
                             the best of `--train-steps`

Goals (issue 16): load to first action >= 2x faster than LeRobot, chunk latency >= 1.2x faster,
peak memory not above LeRobot's, the training step not slower. These machines are noisy: run it
on a quiet one and quote the ratios, which the last line prints.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from real_size import child_env, host_line

DEFAULT_LEROBOT = "/tmp/lerobot-anchor/bin/python"
DEFAULT_BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "bench"

# The observation both tools see: the batch of lerobot_smolvla_bench.py.
OBSERVATION = """
import torch
torch.manual_seed(0)
batch = {"observation.state": torch.randn(1, 6),
         "observation.images.top": torch.rand(1, 3, 480, 640),
         "observation.images.wrist": torch.rand(1, 3, 480, 640),
         "task": ["pick up the cube"]}
"""

# LeRobot's script starts its clock after importing its SmolVLA modules (transformers' SmolVLM
# included); rlctl's imports the same library modules first, so both clocks time the same work.
RLCTL_TIME = (
    """
import resource, sys, json, time
import transformers.models.smolvlm.modeling_smolvlm
from rlctl.adapters.policies.loaded_policy import load_policy_folder
t0 = time.perf_counter()
policy = load_policy_folder(sys.argv[1], device="cpu")
t1 = time.perf_counter()
"""
    + OBSERVATION
    + """
action = policy.select_action(batch)
t2 = time.perf_counter()
lat = []
for _ in range(3):
    s = time.perf_counter()
    policy.predict_chunk(batch)
    lat.append(time.perf_counter() - s)
print(json.dumps({"load_s": round(t1 - t0, 2), "load_to_first_action_s": round(t2 - t0, 2),
      "chunk_latency_s": [round(x, 2) for x in lat],
      "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)}))
"""
)

# One training step at batch 2, as each tool's training loop takes it: the pre-processor's
# batch, the model's loss, backward, gradient clipping, AdamW with the policy's preset.
TRAIN_BATCH = """
import torch
torch.manual_seed(0)
batch = {"observation.state": torch.randn(2, 6),
         "observation.images.top": torch.rand(2, 3, 480, 640),
         "observation.images.wrist": torch.rand(2, 3, 480, 640),
         "action": torch.randn(2, 50, 6),
         "action_is_pad": torch.zeros(2, 50, dtype=torch.bool),
         "task": ["pick up the cube", "put the bowl on the plate"]}
"""

LEROBOT_TRAIN = (
    """
import time, sys, json, resource
import torch
from lerobot.configs.policies import PreTrainedConfig
from lerobot.policies.factory import make_pre_post_processors
from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy
cfg = PreTrainedConfig.from_pretrained(sys.argv[1]); cfg.device = "cpu"
policy = SmolVLAPolicy.from_pretrained(sys.argv[1], config=cfg)
pre, _ = make_pre_post_processors(cfg, pretrained_path=sys.argv[1])
policy.train()
opt_cfg = cfg.get_optimizer_preset()
params = [p for p in policy.parameters() if p.requires_grad]
optimizer = opt_cfg.build(params)
"""
    + TRAIN_BATCH
    + """
times = []
for step in range(int(sys.argv[2]) + 1):
    s = time.perf_counter()
    loss, _ = policy.forward(pre(dict(batch)))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, opt_cfg.grad_clip_norm)
    optimizer.step()
    optimizer.zero_grad()
    times.append(time.perf_counter() - s)
print(json.dumps({"train_step_s": [round(x, 2) for x in times[1:]],
      "trainable_params_m": round(sum(p.numel() for p in params) / 1e6, 1),
      "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)}))
"""
)

RLCTL_TRAIN = (
    """
import time, sys, json, resource
import torch
from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.adapters.training.optim import build_optimizer, fused_supported
from rlctl.domain.train_presets import resolve_optimization
from rlctl.domain.train_settings import TrainSettings
loaded = load_policy_folder(sys.argv[1], device="cpu")
model = loaded.model
model.train()
spec, _ = resolve_optimization(TrainSettings(policy=model.config))
params = [p for p in model.parameters() if p.requires_grad]
optimizer = build_optimizer(spec, [{"params": params}],
                            fused=fused_supported(torch.device("cpu")))
"""
    + TRAIN_BATCH
    + """
times = []
for step in range(int(sys.argv[2]) + 1):
    s = time.perf_counter()
    loss, _ = model(loaded.preprocessor.process_batch(dict(batch)))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, spec.grad_clip_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    times.append(time.perf_counter() - s)
print(json.dumps({"train_step_s": [round(x, 2) for x in times[1:]],
      "trainable_params_m": round(sum(p.numel() for p in params) / 1e6, 1),
      "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)}))
"""
)


def run(command: list[str], *, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command[:3])} failed:\n{result.stderr[-4000:]}")
    return result.stdout


def timed(command: list[str], *, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The process's result line, with its whole wall time (imports included)."""
    start = time.perf_counter()
    record = last_record(run(command, env=env))
    return {**record, "process_wall_s": round(time.perf_counter() - start, 2)}


def last_record(stdout: str) -> dict[str, Any]:
    """The last line that is a dict: JSON from rlctl, a Python repr from LeRobot's script."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return dict(json.loads(line))
            except json.JSONDecodeError:
                return dict(ast.literal_eval(line))
    sys.exit(f"no result line in:\n{stdout[-2000:]}")


def prepare(args: argparse.Namespace) -> tuple[Path, Path]:
    vlm, checkpoint = args.work / "vlm", args.work / "checkpoint"
    if not (vlm / "config.json").is_file():
        run(
            [
                args.lerobot_python,
                str(args.bench_dir / "make_tiny_smolvlm.py"),
                str(vlm),
                "--real-size",
            ]
        )
    if not (checkpoint / "model.safetensors").is_file():
        bench = str(args.bench_dir / "lerobot_smolvla_bench.py")
        print(run([args.lerobot_python, bench, str(vlm), str(checkpoint), "make"]).strip())
    return vlm, checkpoint


def rlctl_env(work: Path) -> dict[str, str]:
    """Both tools run with the machine's defaults (torch's own thread count) and import from
    compiled bytecode, as an installed package does: LeRobot's venv holds its .pyc files; a
    venv that may not write them (PYTHONDONTWRITEBYTECODE) gets them in a cache of its own
    here (PYTHONPYCACHEPREFIX), filled by one warm-up import before anything is timed."""
    return child_env(work / "pycache")


def warm_bytecode(env: dict[str, str]) -> None:
    run(
        [
            sys.executable,
            "-c",
            "import transformers.models.smolvlm.modeling_smolvlm,"
            " rlctl.adapters.policies.vla.smolvla, rlctl.adapters.policies.loaded_policy,"
            " rlctl.adapters.training.optim",
        ],
        env=env,
    )


def measure(args: argparse.Namespace, vlm: Path, checkpoint: Path) -> dict[str, list[dict]]:
    results: dict[str, list[dict]] = {
        "lerobot": [],
        "rlctl": [],
        "lerobot_train": [],
        "rlctl_train": [],
    }
    bench = str(args.bench_dir / "lerobot_smolvla_bench.py")
    env = rlctl_env(args.work)
    warm_bytecode(env)
    for round_ in range(args.rounds):
        lerobot = timed([args.lerobot_python, bench, str(vlm), str(checkpoint), "time"])
        print(json.dumps({"tool": "lerobot", "round": round_, **lerobot}), flush=True)
        results["lerobot"].append(lerobot)
        ours = timed([sys.executable, "-c", RLCTL_TIME, str(checkpoint)], env=env)
        print(json.dumps({"tool": "rlctl", "round": round_, **ours}), flush=True)
        results["rlctl"].append(ours)
        if args.skip_train:
            continue
        steps = str(args.train_steps)
        lerobot = timed([args.lerobot_python, "-c", LEROBOT_TRAIN, str(checkpoint), steps])
        print(json.dumps({"tool": "lerobot", "round": round_, **lerobot}), flush=True)
        results["lerobot_train"].append(lerobot)
        ours = timed([sys.executable, "-c", RLCTL_TRAIN, str(checkpoint), steps], env=env)
        print(json.dumps({"tool": "rlctl", "round": round_, **ours}), flush=True)
        results["rlctl_train"].append(ours)
    return results


def ratios(results: dict[str, list[dict]]) -> dict[str, float]:
    """LeRobot's figure over rlctl's (above 1: rlctl faster or lighter), best against best."""

    def best(tool: str, key: str) -> float:
        values = [r[key] for r in results[tool]]
        flat = [min(v) if isinstance(v, list) else v for v in values]
        return min(flat)

    out = {
        "first_action_speedup": best("lerobot", "load_to_first_action_s")
        / best("rlctl", "load_to_first_action_s"),
        "load_speedup": best("lerobot", "load_s") / best("rlctl", "load_s"),
        "chunk_speedup": best("lerobot", "chunk_latency_s") / best("rlctl", "chunk_latency_s"),
        "peak_memory_ratio": best("rlctl", "peak_rss_gb") / best("lerobot", "peak_rss_gb"),
        "process_wall_speedup": best("lerobot", "process_wall_s") / best("rlctl", "process_wall_s"),
        "median_chunk_s": statistics.median(
            x for r in results["rlctl"] for x in r["chunk_latency_s"]
        ),
    }
    if results["rlctl_train"]:
        out["train_step_speedup"] = best("lerobot_train", "train_step_s") / best(
            "rlctl_train", "train_step_s"
        )
        out["train_peak_memory_ratio"] = best("rlctl_train", "peak_rss_gb") / best(
            "lerobot_train", "peak_rss_gb"
        )
    return {key: round(value, 3) for key, value in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=textwrap.dedent(__doc__ or "").splitlines()[0])
    parser.add_argument("--lerobot-python", default=DEFAULT_LEROBOT)
    parser.add_argument("--bench-dir", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--work", type=Path, default=Path("/tmp/smolvla_real_size"))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--train-steps", type=int, default=2)
    parser.add_argument("--skip-train", action="store_true")
    args = parser.parse_args()
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    vlm, checkpoint = prepare(args)
    results = measure(args, vlm, checkpoint)
    print(host_line())
    print(json.dumps({"ratios": ratios(results)}))


if __name__ == "__main__":
    main()
