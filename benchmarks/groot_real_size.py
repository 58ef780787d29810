"""GR00T N1.7 at its real size (Cosmos-Reason2-2B cut after 16 layers + the 32-layer DiT head,
about 3 B parameters, random weights, float32 ~12 GB, CPU), rlctl side by side with LeRobot 0.6.1.

The base model folder (tests/adapters/policies/tiny_groot.py --real-size: N1.7's and
Cosmos-Reason2-2B's sizes; only the tokenizer is a small stand-in, so token ids differ from
NVIDIA's and timings do not) is written first; rlctl builds the policy on it (random weights),
saves the checkpoint in LeRobot's format and, as the base model's weights, the same tensors
(LeRobot always loads its base model before a checkpoint). Then each tool, in its own fresh
process (one after the other, `--repeat` times), loads the checkpoint and:

- import + load: from the child's start (imports included) to a policy ready to act (rlctl's
  `load_policy_folder`; LeRobot's `GrootPolicy.from_pretrained` + both processor pipelines);
- first chunk, then `--chunks` more (median): pre-processing, the model, post-processing, on
  one observation (two 256x256 cameras, a 7-dim state, a task);
- to first action: from the child's start to the first chunk's end;
- `--train-steps` training steps on a batch of `--batch` (the same observation and a chunk of
  actions): forward, backward and a plain SGD step (AdamW's two moments for the ~1.5 B
  trainable parameters would add about 12 GB, more than a 24 GB machine has beside the model);
  the first apart (`first_train_step_s`: it also pays what a tool deferred from its load, such
  as weights mapped from the file and copied once the optimizer writes them), then the median
  of the others (`train_step_s`, what every further step of a training run costs);
- peak resident memory of the process.

Both tools run GR00T's defaults (bfloat16 autocast over float32 weights) unless `--fp32`. Both
read compiled bytecode, as installed packages do: the children write theirs into a scratch cache
(`PYTHONPYCACHEPREFIX`), filled by one untimed warm-up run of each tool at tiny size.

Usage (real size needs ~16 GB free per process and ~25 GB of disk; the tools run one after the
other):
    python benchmarks/groot_real_size.py --lerobot-python /path/to/lerobot/venv/bin/python \
        [--size real|tiny --repeat 1 --chunks 2 --batch 1 --train-steps 3 --threads N --fp32]
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
STATE, ACTION, SIZE = 7, 7, 256
CAMERAS = ("observation.images.image", "observation.images.image2")
TASK = "pick up the cube and place it in the box"


def observation(rows: int = 1) -> dict[str, object]:
    import numpy as np

    rng = np.random.default_rng(0)
    obs: dict[str, object] = {
        "observation.state": rng.uniform(-1, 1, size=(rows, STATE)).astype(np.float32),
        "task": [TASK] * rows,
    }
    for key in CAMERAS:
        obs[key] = rng.uniform(size=(rows, 3, SIZE, SIZE)).astype(np.float32)
    return obs


# --- the checkpoint ------------------------------------------------------------------------------


def make_checkpoint(out: Path, tiny: Path, fp32: bool) -> None:
    import numpy as np
    import torch
    from safetensors.torch import save_file

    from rlctl.adapters.policies.loaded_policy import create_policy
    from rlctl.domain.features import typed_feature
    from rlctl.domain.policies.groot import GrootConfig

    base = json.loads((tiny / "base" / "config.json").read_text())
    dims = {key: int(base.get(key, 132)) for key in ("max_state_dim", "max_action_dim")}
    config = GrootConfig(
        input_features={
            "observation.state": typed_feature("STATE", (STATE,)),
            **{key: typed_feature("VISUAL", (3, SIZE, SIZE)) for key in CAMERAS},
        },
        output_features={"action": typed_feature("ACTION", (ACTION,))},
        base_model_path=str(tiny / "base"),
        chunk_size=int(base.get("action_horizon", 40)),
        n_action_steps=int(base.get("action_horizon", 40)),
        use_bf16=not fp32,
        device="cpu",
        **dims,
    )
    stats = {
        key: {"min": -np.ones(dim), "max": np.ones(dim), "mean": np.zeros(dim), "std": np.ones(dim)}
        for key, dim in (("observation.state", STATE), ("action", ACTION))
    }
    torch.manual_seed(0)
    policy = create_policy(config, stats)
    policy.save(out)
    prefix = "_groot_model."
    state = {
        key[len(prefix) :]: value.detach().contiguous()
        for key, value in policy.model.state_dict().items()
    }
    save_file(state, str(tiny / "base" / "model.safetensors"), metadata={"format": "pt"})


# --- one tool, in its own process ----------------------------------------------------------------


def run_rlctl(folder: Path, tiny: Path, chunks: int, batch: int, steps: int) -> dict[str, float]:
    start = time.perf_counter()
    import torch

    from rlctl.adapters.policies.loaded_policy import load_policy_folder

    policy = load_policy_folder(folder, device="cpu")
    loaded = time.perf_counter()
    obs = observation()
    first, latencies = real_size.chunk_times(lambda: policy.predict_chunk(obs), chunks)
    model = policy.model.train()
    rows = observation(batch)
    actions = torch.rand(batch, model.config.chunk_size, ACTION) * 2 - 1
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-4)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss, _ = model(policy._preprocess({**rows, "action": actions}))
        loss.backward()
        optimizer.step()

    trained = real_size.train_figures(step, steps)
    return real_size.figures(start, loaded, first, latencies, **trained)


def run_lerobot(folder: Path, tiny: Path, chunks: int, batch: int, steps: int) -> dict[str, float]:
    start = time.perf_counter()
    import torch

    sys.path.insert(0, str(TESTS))  # the harness imports its shared part, lerobot_common
    harness = runpy.run_path(str(TESTS / "lerobot_groot.py"))
    harness["patch_lerobot"](str(tiny))  # Cosmos-Reason2's processor name -> the local folder
    policy, pre, post = harness["load"](str(folder))
    loaded = time.perf_counter()

    def batch_of(obs: dict[str, object]) -> dict[str, object]:
        out = {k: torch.from_numpy(v) for k, v in obs.items() if k != "task"}  # type: ignore[arg-type]
        out["task"] = obs["task"]
        return out

    one = batch_of(observation())
    first, latencies = real_size.chunk_times(
        lambda: post(policy.predict_action_chunk(pre(dict(one)))), chunks
    )
    policy.train()
    rows = batch_of(observation(batch))
    rows["action"] = torch.rand(batch, policy.config.chunk_size, ACTION) * 2 - 1
    optimizer = torch.optim.SGD([p for p in policy.parameters() if p.requires_grad], lr=1e-4)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss, _ = policy.forward(pre(dict(rows)))
        loss.backward()
        optimizer.step()

    trained = real_size.train_figures(step, steps)
    return real_size.figures(start, loaded, first, latencies, **trained)


# --- the orchestration ---------------------------------------------------------------------------


def child(
    args: argparse.Namespace,
    folders: dict[str, tuple[Path, Path]],
    tool: str,
    python: str,
    size: str,
    chunks: int,
) -> dict[str, float]:
    """One run of `tool` on the checkpoint of `size`, in a fresh process (real_size.compare)."""
    folder, tiny = folders[size]
    argv = ["--folder", str(folder), "--tiny", str(tiny), "--batch", str(args.batch)]
    argv += ["--chunks", str(chunks), "--train-steps", str(args.train_steps)]
    return real_size.run_child(__file__, tool, python, argv, args, hub_offline=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lerobot-python", help="LeRobot 0.6.1's Python (omit: rlctl only)")
    parser.add_argument("--size", choices=("real", "tiny"), default="real")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--chunks", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1, help="rows of the training step")
    parser.add_argument(
        "--train-steps", type=int, default=3, help="training steps: the first, then the median"
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--fp32", action="store_true", help="float32 arithmetic (use_bf16=false)")
    parser.add_argument("--scratch", type=Path, help="where the checkpoints go (default: /tmp)")
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tiny", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=("rlctl", "lerobot"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        real_size.child_threads(args.threads)
        run = run_rlctl if args.child == "rlctl" else run_lerobot
        print(json.dumps(run(args.folder, args.tiny, args.chunks, args.batch, args.train_steps)))
        return

    write = runpy.run_path(str(TESTS / "tiny_groot.py"))["write_tiny_groot"]
    with tempfile.TemporaryDirectory(prefix="groot_bench_", dir=args.scratch) as scratch:
        root = Path(scratch)
        args.pycache = root / "pycache"
        folders = {}
        for size in {"tiny", args.size}:
            tiny = write(root / f"{size}_base", real_size=size == "real")
            folder = root / f"groot_{size}"
            tick = time.perf_counter()
            make_checkpoint(folder, tiny, args.fp32)
            print(json.dumps({"checkpoint": str(folder), "made_s": time.perf_counter() - tick}))
            folders[size] = (folder, tiny)
        results = real_size.compare(args, functools.partial(child, args, folders))
        real_size.print_best(
            f"GR00T N1.7 ({args.size} size, CPU), best of {args.repeat}:",
            results,
            (*real_size.TIMES, "first_train_step_s", "train_step_s", "peak_rss_mb"),
        )


if __name__ == "__main__":
    main()
