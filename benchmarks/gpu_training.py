"""Training on one CUDA GPU, and SmolVLA's real-size step on the host's own CPU.

    python benchmarks/gpu_training.py [--pi0-sizes medium real] [--smolvla-vlm DIR]
        [--smolvla-cpu] [--steps 3]

π0 (rlctl's build, random weights; `real` is LeRobot's default Gemma 2B + 300M expert at 224 px)
trains a few steps on the GPU: plain (`ddp` in one process), and FSDP2 through NCCL in a
one-process world (`fsdp`: what `torchrun --nproc-per-node=1 -m rlctl train
--distributed.strategy=fsdp` does), in float32 (TF32 matmuls, as lerobot-train) or bf16 mixed
precision (`--use_amp=true`: bf16 compute, fp32 master weights and reduction), with and without
activation checkpointing. Each line is one fresh process: the mean step (forward, backward,
AdamW) after a warm-up step, and the GPU's peak allocated memory.

SmolVLA at its real size (a SmolVLM folder from `make_tiny_smolvlm.py OUT --real-size`, random
weights, two 480x640 cameras, chunk 50) trains at batch 8 on the GPU (float32 / bf16 autocast),
and with `--smolvla-cpu` at batch 2 on this host's CPU (float32 / bf16 autocast), the figure
issue #30 asks about: where a 4.6 s CPU step came from.

The models are built on the meta device and given random normal weights on the GPU (building
3.5 B parameters on the CPU first would take longer than the steps): the figures are the steps'.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from real_size import host_line
from sharded_training import SIZES, VOCAB

REAL = ("gemma_2b", "gemma_300m")


def pi0_config(size: str) -> Any:
    from rlctl.domain.features import typed_feature
    from rlctl.domain.policies.pi0 import PI0Config

    if size == "real":
        vlm, expert, resolution = *REAL, (224, 224)
    else:
        vlm = f"custom:{SIZES[size][0]},vocab_size={VOCAB}"
        expert = f"custom:{SIZES[size][1]},vocab_size={VOCAB}"
        resolution = (56, 56)
    return PI0Config(
        input_features={
            "observation.state": typed_feature("STATE", (6,)),
            "observation.images.top": typed_feature("VISUAL", (3, *resolution)),
        },
        output_features={"action": typed_feature("ACTION", (6,))},
        paligemma_variant=vlm,
        action_expert_variant=expert,
        chunk_size=50,
        n_action_steps=50,
        image_resolution=resolution,
        tokenizer_max_length=48,
        freeze_vision_encoder=False,
        train_expert_only=False,
    )


def random_weights(model: Any, device: Any) -> None:
    """Meta parameters given storage on `device`, drawn there; buffers moved as they are."""
    import torch

    made: dict[int, torch.nn.Parameter] = {}
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is None or not param.is_meta:
                continue
            if id(param) not in made:  # tied weights stay tied
                data = torch.empty(param.shape, dtype=param.dtype, device=device)
                data.normal_(0.0, 0.02)
                made[id(param)] = torch.nn.Parameter(data, requires_grad=param.requires_grad)
            module._parameters[name] = made[id(param)]
    model.to(device)


def synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def peak_gb(device: Any) -> float | None:
    import torch

    if device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


def pi0_child(spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    from rlctl.adapters.training.distributed import start_world
    from rlctl.adapters.training.precision import Precision
    from rlctl.adapters.training.sharding import empty_model, shard_model
    from rlctl.domain.train_settings import DistributedSettings

    strategy, amp = spec["strategy"], spec["amp"]
    settings = DistributedSettings(
        strategy=strategy, activation_checkpointing=spec["checkpointing"]
    )
    world = start_world(spec.get("device", "cuda"), settings)
    config = pi0_config(spec["size"])
    model = empty_model(config, computed_buffers=True)
    assert model is not None, "π0 builds on the meta device"
    random_weights(model, world.device)
    model.train()
    precision = Precision(True, torch.bfloat16) if amp else Precision()
    if strategy == "fsdp":
        shard_model(model, world, settings, precision)
    elif spec["checkpointing"]:
        model.enable_activation_checkpointing()
    parameters = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    rows, size = spec["batch"], config.image_resolution[0]
    generator = torch.Generator(device=world.device).manual_seed(1)
    batch = {
        "observation.state": torch.randn(rows, 6, device=world.device, generator=generator),
        "observation.images.top": torch.rand(
            rows, 3, size, size, device=world.device, generator=generator
        ),
        "observation.language.tokens": torch.randint(
            0, 1000, (rows, 48), device=world.device, generator=generator
        ),
        "observation.language.attention_mask": torch.ones(
            rows, 48, dtype=torch.bool, device=world.device
        ),
        "action": torch.randn(rows, 50, 6, device=world.device, generator=generator),
    }
    # As training: autocast in both; FSDP's mixed precision also gathers bf16 parameters.
    autocast = amp
    device = world.device
    times = []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for _ in range(spec["steps"] + 1):
        synchronize(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            loss, _ = model(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize(device)
        times.append(time.perf_counter() - start)
    world.close()
    return {
        "parameters_m": round(parameters / 1e6, 1),
        "step_s": round(sum(times[1:]) / len(times[1:]), 4),
        "first_step_s": round(times[0], 3),
        "peak_gpu_gb": peak_gb(device),
        "loss": round(float(loss), 4),
    }


def smolvla_child(spec: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    import torch

    from rlctl.adapters.policies.loaded_policy import create_policy
    from rlctl.domain.features import typed_feature
    from rlctl.domain.policies.smolvla import SmolVLAConfig

    device = torch.device(spec["device"])
    config = SmolVLAConfig(
        input_features={
            "observation.state": typed_feature("STATE", (6,)),
            "observation.images.top": typed_feature("VISUAL", (3, 480, 640)),
            "observation.images.wrist": typed_feature("VISUAL", (3, 480, 640)),
        },
        output_features={"action": typed_feature("ACTION", (6,))},
        vlm_model_name=spec["vlm"],
        load_vlm_weights=False,
        device=spec["device"],
    )
    zeros = {"mean": np.zeros(6), "std": np.ones(6)}
    stats = {"observation.state": zeros, "action": zeros}
    torch.manual_seed(0)
    loaded = create_policy(config, stats, device=spec["device"])
    model = loaded.model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    rows = spec["batch"]
    batch = {
        "observation.state": torch.randn(rows, 6),
        "observation.images.top": torch.rand(rows, 3, 480, 640),
        "observation.images.wrist": torch.rand(rows, 3, 480, 640),
        "action": torch.randn(rows, 50, 6),
        "action_is_pad": torch.zeros(rows, 50, dtype=torch.bool),
        "task": ["pick up the cube"] * rows,
    }
    times = []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for _ in range(spec["steps"] + 1):
        synchronize(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=spec["amp"]):
            loss, _ = model(loaded.preprocessor.process_batch(dict(batch)))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize(device)
        times.append(time.perf_counter() - start)
    out = {
        "trainable_m": round(sum(p.numel() for p in params) / 1e6, 1),
        "step_s": round(min(times[1:]), 3),
        "first_step_s": round(times[0], 2),
        "loss": round(float(loss), 4),
        "threads": torch.get_num_threads(),
    }
    out["peak_gpu_gb"] = peak_gb(device)
    return out


def launch(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    env = {**os.environ}
    if spec.get("strategy") == "fsdp":  # what torchrun --nproc-per-node=1 sets
        env.update(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT="29631")  # fmt: skip
    command = [sys.executable, __file__, "--child", json.dumps(spec)]
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        print("\n".join(lines[-25:]), file=sys.stderr, flush=True)  # the traceback's end
        return {"error": (lines[-1] if lines else f"exit {done.returncode}")[:300]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child")
    parser.add_argument("--pi0-sizes", nargs="*", default=["medium", "real"])
    parser.add_argument("--only", help="one π0 run: STRATEGY,AMP,CHECKPOINTING (e.g. fsdp,1,1)")
    parser.add_argument("--smolvla-vlm")
    parser.add_argument("--smolvla-cpu", action="store_true")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--device", default="cuda", help="cpu: try the π0 runs without a GPU")
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        result = (pi0_child if spec["model"] == "pi0" else smolvla_child)(spec)
        print(json.dumps(result), flush=True)
        return
    import torch

    print(host_line(), flush=True)
    if torch.cuda.is_available():
        print(f"gpu: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for size in args.pi0_sizes:
        batch = 8 if size == "real" else 16
        runs = [("ddp", False, False), ("ddp", True, False), ("fsdp", True, False),
                ("fsdp", True, True)]  # fmt: skip
        if size != "real":
            runs.insert(1, ("fsdp", False, False))
        if args.only:
            strategy, amp, checkpointing = args.only.split(",")
            runs = [(strategy, amp == "1", checkpointing == "1")]
        for strategy, amp, checkpointing in runs:
            spec = {"model": "pi0", "size": size, "strategy": strategy, "amp": amp,
                    "checkpointing": checkpointing, "steps": args.steps, "batch": batch,
                    "device": args.device}  # fmt: skip
            result = launch(spec, args.timeout)
            print(json.dumps({**spec, **result}), flush=True)
    if args.smolvla_vlm:
        runs = [("cuda", False, 8), ("cuda", True, 8)] if args.device == "cuda" else []
        if args.smolvla_cpu:
            runs += [("cpu", False, 2), ("cpu", True, 2)]
        for device, amp, batch in runs:
            spec = {"model": "smolvla", "vlm": args.smolvla_vlm, "device": device, "amp": amp,
                    "batch": batch, "steps": 2 if device == "cpu" else args.steps}  # fmt: skip
            result = launch(spec, args.timeout)
            print(json.dumps({**spec, **result}), flush=True)


if __name__ == "__main__":
    main()
