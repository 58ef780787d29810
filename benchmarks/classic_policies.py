"""VQ-BeT and TD-MPC at LeRobot 0.6.1's default sizes on the CPU (random weights, float32), rlctl
beside LeRobot, each tool and policy in its own fresh process.

- VQ-BeT: PushT's shapes (a 96x96 camera cropped to 84x84, a 2-D state and action), every
  setting at LeRobot's default (ResNet-18 without downloaded weights, a GPT of 8 layers of 512);
  the training step is of the second phase (the GPT's; the first, the VQ-VAE's, is tiny).
- TD-MPC: FOWM's xArm shapes (an 84x84 camera, a 4-D state and action), LeRobot's defaults
  (latent 50, MLPs of 512, 5 Qs); inference plans with MPPI (6 iterations of 512 + 51 samples
  over a horizon of 5).

Per process: the median of `--steps` training steps (forward, backward, Adam step, on a random
normalised batch of `--batch`, after one warm-up step) and of `--chunks` predictions for one
observation (after one warm-up). The model is called directly, without processors, in both.

The host is shared: figures are noisy; compare the two tools' lines from the same run.

    python benchmarks/classic_policies.py --lerobot-python LEROBOT_VENV/bin/python \
        [--batch 8 --steps 5 --chunks 5 --threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SHAPES = {
    "vqbet": {"image": (3, 96, 96), "state": 2, "action": 2},
    "tdmpc": {"image": (3, 84, 84), "state": 4, "action": 4},
}
CAMERA = "observation.image"


def host_line() -> str:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        lscpu = ""
    fields = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition(":") for line in lscpu.splitlines())
    )
    flags = sorted(f for f in fields.get("Flags", "").split() if f.startswith("avx"))
    return f"{fields.get('Model name', '?')}; {os.cpu_count()} cores; {' '.join(flags) or 'no AVX'}"


def batches(policy: str, config: Any, batch: int) -> tuple[dict, dict]:
    """(training batch, one observation), normalised, as both tools' models take them."""
    import torch

    shape = SHAPES[policy]
    torch.manual_seed(0)
    if policy == "vqbet":
        steps = config.n_obs_steps
        train = {
            "observation.state": torch.rand(batch, steps, shape["state"]) * 2 - 1,
            CAMERA: torch.rand(batch, steps, *shape["image"]),
            "action": torch.rand(batch, len(config.action_delta_indices), shape["action"]) * 2 - 1,
        }
        one = {k: v[:1] for k, v in train.items() if k != "action"}
        return train, one
    horizon = config.horizon
    pad = torch.zeros(batch, horizon + 1, dtype=torch.bool)
    train = {
        "observation.state": torch.rand(batch, horizon + 1, shape["state"]),
        CAMERA: torch.rand(batch, horizon + 1, *shape["image"]),
        "action": torch.rand(batch, horizon, shape["action"]) * 2 - 1,
        "next.reward": torch.rand(batch, horizon),
        "observation.state_is_pad": pad,
        "action_is_pad": pad[:, 1:],
        "next.reward_is_pad": pad[:, 1:],
        "index": torch.arange(batch),
    }
    one = {"observation.state": train["observation.state"][:1, 0], CAMERA: train[CAMERA][:1, 0]}
    return train, one


def build_rlctl(policy: str) -> tuple[Any, Any, Any, Any]:
    import torch

    from rlctl.adapters.policies.base import build_policy
    from rlctl.domain.features import typed_feature

    shape = SHAPES[policy]
    features = {
        "input_features": {
            "observation.state": typed_feature("STATE", (shape["state"],)),
            CAMERA: typed_feature("VISUAL", shape["image"]),
        },
        "output_features": {"action": typed_feature("ACTION", (shape["action"],))},
    }
    if policy == "vqbet":
        from rlctl.domain.policies.vqbet import VQBeTConfig

        config: Any = VQBeTConfig(pretrained_backbone_weights=None, **features)
    else:
        from rlctl.domain.policies.tdmpc import TDMPCConfig

        config = TDMPCConfig(**features)
    model = build_policy(config)
    if policy == "vqbet":
        model.vqbet.action_head.vqvae_model.discretized.fill_(True)
        model.vqbet.action_head.vqvae_model.vq_layer.freeze_codebook.fill_(True)
    optimizer = torch.optim.Adam(model.parameter_groups(), lr=1e-4)

    def predict(one: dict) -> object:
        model.reset()
        return model.predict_chunk(one)

    return config, model, optimizer, predict


def build_lerobot(policy: str) -> tuple[Any, Any, Any, Any]:
    import torch
    from lerobot.configs import FeatureType, PolicyFeature

    shape = SHAPES[policy]
    features = {
        "input_features": {
            "observation.state": PolicyFeature(FeatureType.STATE, (shape["state"],)),
            CAMERA: PolicyFeature(FeatureType.VISUAL, shape["image"]),
        },
        "output_features": {"action": PolicyFeature(FeatureType.ACTION, (shape["action"],))},
        "device": "cpu",
    }
    if policy == "vqbet":
        from lerobot.policies.vqbet.configuration_vqbet import VQBeTConfig
        from lerobot.policies.vqbet.modeling_vqbet import VQBeTPolicy

        config: Any = VQBeTConfig(pretrained_backbone_weights=None, **features)
        model: Any = VQBeTPolicy(config)
        model.vqbet.action_head.vqvae_model.discretized.fill_(True)
        model.vqbet.action_head.vqvae_model.vq_layer.freeze_codebook.fill_(True)
        optimizer = torch.optim.Adam(model.get_optim_params(), lr=1e-4)

        def predict(one: dict) -> object:
            batch = dict(one)
            batch["observation.images"] = torch.stack([batch[CAMERA]], dim=-4)
            return model.vqbet(batch, rollout=True)

        return config, model, optimizer, predict

    from lerobot.policies.tdmpc.configuration_tdmpc import TDMPCConfig
    from lerobot.policies.tdmpc.modeling_tdmpc import TDMPCPolicy

    config = TDMPCConfig(**features)
    model = TDMPCPolicy(config)
    optimizer = torch.optim.Adam(model.get_optim_params(), lr=1e-4)

    def predict(one: dict) -> object:
        model.reset()
        z = model.model.encode(one)
        return model.plan(z)

    return config, model, optimizer, predict


def run_child(tool: str, policy: str, args: argparse.Namespace) -> dict[str, float]:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    build = build_rlctl if tool == "rlctl" else build_lerobot
    config, model, optimizer, predict = build(policy)
    built = time.perf_counter()
    train, one = batches(policy, config, args.batch)

    def step() -> None:
        model.train()
        optimizer.zero_grad(set_to_none=True)
        loss, _ = model.forward(dict(train))
        loss.backward()
        optimizer.step()
        if tool == "lerobot" and policy == "tdmpc":
            model.update()
        elif tool == "rlctl":
            model.after_optimizer_step()

    step_times = []
    for i in range(args.steps + 1):
        tick = time.perf_counter()
        step()
        if i:
            step_times.append(time.perf_counter() - tick)
    model.eval()
    chunk_times = []
    with torch.no_grad():
        for i in range(args.chunks + 1):
            tick = time.perf_counter()
            predict(one)
            if i:
                chunk_times.append(time.perf_counter() - tick)
    parameters = sum(p.numel() for p in model.parameters())
    return {
        "import_and_build_s": built - start,
        "train_step_median_s": statistics.median(step_times),
        "predict_median_s": statistics.median(chunk_times),
        "parameters_m": parameters / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lerobot-python", help="LeRobot 0.6.1's Python (omit: rlctl only)")
    parser.add_argument("--policies", default="vqbet,tdmpc")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--child", nargs=2, metavar=("TOOL", "POLICY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(*args.child, args)))
        return

    print(json.dumps({"host": host_line(), "batch": args.batch, "threads": args.threads}))
    tools = {"rlctl": sys.executable}
    if args.lerobot_python:
        tools["lerobot"] = args.lerobot_python
    for policy in args.policies.split(","):
        for tool, python in tools.items():
            command = [python, str(Path(__file__).resolve()), "--child", tool, policy]
            command += ["--batch", str(args.batch), "--steps", str(args.steps)]
            command += ["--chunks", str(args.chunks), "--threads", str(args.threads)]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode:
                raise SystemExit(f"{tool} {policy} failed:\n{result.stderr[-3000:]}")
            figures = json.loads(result.stdout.strip().splitlines()[-1])
            print(json.dumps({"policy": policy, "tool": tool, **figures}), flush=True)


if __name__ == "__main__":
    main()
