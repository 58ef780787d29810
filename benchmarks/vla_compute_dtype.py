"""A bfloat16 SmolVLA at real size on this CPU: rlctl upcast to float32 (`compute_dtype` auto),
rlctl in bfloat16 (`keep`, LeRobot's arithmetic) and LeRobot 0.6.1, each in a fresh process.

    flock /tmp/heavy.lock uv run python benchmarks/vla_compute_dtype.py \
        [--lerobot-python /tmp/lerobot-anchor/bin/python] [--repeat 1] [--chunks 1] [--cameras 2] \
        [--vlm-layers 16]

The checkpoint is a SmolVLA on a pretrained VLM (`load_vlm_weights=true`), the way SmolVLA is
fine-tuned and shipped: its SmolVLM (SmolVLM2-500M sizes, random weights, the folder
`make_tiny_smolvlm.py --real-size` writes plus bfloat16 weights written here) and the expert run
in bfloat16 in both tools; two 480x640 cameras (`--cameras 1`: one), 6-dof state and action,
LeRobot's defaults (16 VLM layers, or `--vlm-layers`; chunk 50, 10 flow steps, 512 px padding),
about 450 M parameters. Each child loads it, predicts a first chunk, then `--chunks` more
(`real_size.chunk_times`); the table shows the best of `--repeat` rounds, the runs alternating,
with the host line, and each child's share of bfloat16 parameters (1.0: it computed in bfloat16).
On a CPU with AMX or AVX512_BF16 `auto` keeps bfloat16 and the first two columns are the same run
twice.

Needs ~6 GB free per child (they run one after the other); `--work` keeps the VLM folder and the
checkpoint between runs (2 GB).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import real_size

HERE = Path(__file__).resolve().parent
DEFAULT_LEROBOT = "/tmp/lerobot-anchor/bin/python"
DEFAULT_BENCH = HERE.parents[1] / "shared" / "bench"
CAMERAS = ("observation.images.top", "observation.images.wrist")
STATE = ACTION = 6
TASK = "pick up the cube"
# rlctl's two settings and LeRobot, in the order each round runs them.
RUNS = {
    "rlctl auto": ("rlctl", "auto"),
    "rlctl keep": ("rlctl", "keep"),
    "lerobot": ("lerobot", ""),
}


def observation(cameras: int) -> dict[str, object]:
    import torch

    generator = torch.Generator().manual_seed(0)
    batch: dict[str, object] = {"observation.state": torch.randn(1, STATE, generator=generator)}
    for key in CAMERAS[:cameras]:
        batch[key] = torch.rand(1, 3, 480, 640, generator=generator)
    batch["task"] = [TASK]
    return batch


def bfloat16_share(model: object) -> float:
    import torch

    params = list(model.parameters())  # type: ignore[attr-defined]
    total = sum(p.numel() for p in params)
    return sum(p.numel() for p in params if p.dtype == torch.bfloat16) / total


# --- the files -----------------------------------------------------------------------------------


def prepare_vlm(vlm: Path, args: argparse.Namespace) -> None:
    """The real-size SmolVLM folder with random bfloat16 weights (what `load_vlm_weights`
    reads in both tools)."""
    if not (vlm / "config.json").is_file():
        maker = args.bench_dir / "make_tiny_smolvlm.py"
        subprocess.run(
            [args.lerobot_python, str(maker), str(vlm), "--real-size"], check=True, timeout=600
        )
    if (vlm / "model.safetensors").is_file():
        return
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.AutoConfig.from_pretrained(str(vlm))
    model = transformers.AutoModelForImageTextToText.from_config(config, dtype=torch.bfloat16)
    with torch.no_grad():  # Hugging Face's init leaves some at zero
        for param in model.parameters():
            param.normal_(0.0, 0.02)
    model.save_pretrained(str(vlm))


def make_checkpoint(folder: Path, vlm: Path, cameras: int, vlm_layers: int) -> None:
    import numpy as np
    import torch

    from rlctl.adapters.policies.loaded_policy import create_policy
    from rlctl.domain.features import typed_feature
    from rlctl.domain.policies.smolvla import SmolVLAConfig

    features = {"observation.state": typed_feature("STATE", (STATE,))}
    features.update({key: typed_feature("VISUAL", (3, 480, 640)) for key in CAMERAS[:cameras]})
    config = SmolVLAConfig(
        input_features=features,
        output_features={"action": typed_feature("ACTION", (ACTION,))},
        vlm_model_name=str(vlm),
        load_vlm_weights=True,
        num_vlm_layers=vlm_layers,
        device="cpu",
        compute_dtype="keep",
    )
    stats = {
        key: {"mean": np.zeros(dim), "std": np.ones(dim)}
        for key, dim in (("observation.state", STATE), ("action", ACTION))
    }
    torch.manual_seed(0)
    create_policy(config, stats).save(folder)


# --- one tool, in its own process ----------------------------------------------------------------


def run_rlctl(folder: Path, chunks: int, cameras: int, compute_dtype: str) -> dict[str, float]:
    start = time.perf_counter()
    import torch  # noqa: F401  (timed with the imports, as LeRobot's)

    from rlctl.adapters.policies.loaded_policy import load_policy_folder

    imported = time.perf_counter()
    policy = load_policy_folder(folder, device="cpu", compute_dtype=compute_dtype)
    loaded = time.perf_counter()
    batch = observation(cameras)
    first, latencies = real_size.chunk_times(lambda: policy.predict_chunk(batch), chunks)
    return real_size.figures(
        start, loaded, first, latencies, imported=imported, bf16_share=bfloat16_share(policy.model)
    )


def run_lerobot(folder: Path, chunks: int, cameras: int) -> dict[str, float]:
    start = time.perf_counter()
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import make_pre_post_processors
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    imported = time.perf_counter()
    config = PreTrainedConfig.from_pretrained(str(folder))
    config.device = "cpu"
    policy = SmolVLAPolicy.from_pretrained(str(folder), config=config).eval()
    pre, post = make_pre_post_processors(config, pretrained_path=str(folder))
    loaded = time.perf_counter()
    batch = observation(cameras)
    first, latencies = real_size.chunk_times(
        lambda: post(policy.predict_action_chunk(pre(dict(batch)))), chunks
    )
    return real_size.figures(
        start, loaded, first, latencies, imported=imported, bf16_share=bfloat16_share(policy)
    )


# --- the orchestration ---------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lerobot-python", help="LeRobot 0.6.1's Python (omit: rlctl only)")
    parser.add_argument("--bench-dir", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--work", type=Path, default=Path("/tmp/vla_compute_dtype"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--chunks", type=int, default=1, help="chunks after the first")
    parser.add_argument("--cameras", type=int, choices=(1, 2), default=2, help="480x640 cameras")
    parser.add_argument("--vlm-layers", type=int, default=16, help="SmolVLA's num_vlm_layers")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--child", choices=("rlctl", "lerobot"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--compute-dtype", default="auto", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        real_size.child_threads(args.threads)
        if args.child == "rlctl":
            figures = run_rlctl(args.folder, args.chunks, args.cameras, args.compute_dtype)
        else:
            figures = run_lerobot(args.folder, args.chunks, args.cameras)
        print(json.dumps(figures))
        return

    args.work.mkdir(parents=True, exist_ok=True)
    vlm = args.work / "vlm"
    folder = args.work / f"checkpoint_{args.cameras}cam_{args.vlm_layers}layers"
    prepare_vlm(vlm, args)
    if not (folder / "model.safetensors").is_file():
        make_checkpoint(folder, vlm, args.cameras, args.vlm_layers)
    pythons = real_size.tools(args.lerobot_python)
    runs = {name: run for name, run in RUNS.items() if run[0] in pythons}
    with tempfile.TemporaryDirectory(prefix="vla_compute_dtype_") as scratch:
        args.pycache = Path(scratch) / "pycache"
        results: dict[str, list[real_size.Figures]] = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, (tool, setting) in runs.items():
                argv = ["--folder", str(folder), "--chunks", str(args.chunks)]
                argv += ["--cameras", str(args.cameras)]
                argv += ["--compute-dtype", setting] if setting else []
                figures = real_size.run_child(__file__, tool, pythons[tool], argv, args)
                results[name].append(figures)
                print(json.dumps({"run": name, **figures}), flush=True)
    real_size.print_best(
        f"bfloat16 SmolVLA (real widths, {args.vlm_layers} VLM layers, {args.cameras} camera(s), "
        f"CPU), best of {args.repeat}:",
        results,
        (*real_size.TIMES, "peak_rss_mb"),
        highest=("bf16_share",),
    )
    print(subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())


if __name__ == "__main__":
    main()
