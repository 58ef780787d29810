"""Sharded training on the CPU (gloo): per-rank memory of π0 under DDP and FSDP on 1, 2 and 4
ranks, and a DCP checkpoint's save and resume against a gathered (full state dict) one.

    uv run python benchmarks/sharded_training.py                      # both tables
    uv run python benchmarks/sharded_training.py --sizes tiny small --ranks 1 2
    uv run python benchmarks/sharded_training.py --checkpoint-only --checkpoint-size medium
    uv run python benchmarks/sharded_training.py --build-only --build-size medium --build-ranks 2
    uv run python benchmarks/sharded_training.py --load-only --build-size medium --load-ranks 1 2 4

Each configuration runs in fresh processes (`torch.distributed.run --standalone`; one rank: a
plain process). A rank builds the model (seed 0), shards it (FSDP2 with π0's wrap units: the
SigLIP layers and each PaliGemma layer paired with the expert's) or wraps it in DDP, then trains
`--steps` AdamW steps on one random batch of 2. Reported per rank:

- `held MB`: the bytes of parameters, gradients and AdamW moments the rank holds (float32);
- `peak MB`: the process's peak resident memory during the training steps (VmHWM, reset after
  the model is built and sharded: what the steps need, not the start-up's full model);
- `rss MB`: resident memory after the steps; `base MB`: before the model was built (torch and
  transformers imported, the process group up), which `peak` and `rss` include.

Checkpoint table (FSDP, 2 ranks): `dcp` is `save_sharded` (every rank writes its shards,
torch.distributed.checkpoint) and `load_sharded`; `gathered` is the full state dict
(`get_model_state_dict`/`get_optimizer_state_dict` with full_state_dict and cpu_offload) saved by
rank 0 with torch.save, and read back by rank 0 and broadcast (`set_*_state_dict` with
broadcast_from_rank0). Best of `--repeat` rounds, with rank 0's peak memory during the save.

Build table (FSDP): each rank's peak resident memory while building and sharding the model
(VmHWM over the rank's base) and its RSS once sharded, with every rank building the whole model,
against training's way: rank 0 builds it whole, the others on the meta device, holding storage
for their shards only (`empty_model`, `shard_model`). The memory table builds as training does.

Load table (FSDP; `--load-only`): each rank's peak resident memory (VmHWM over its base) while
building the model, sharding it and filling it from disk, on 1, 2 and 4 ranks, for the two
places its weights come from: a pretrained_model folder (fine-tuning, or resuming an unsharded
checkpoint) and a sharded DCP checkpoint with its AdamW state (resuming). `rank 0 reads` is how
runs loaded before: rank 0 read the whole model (`read_model`) and broadcast it into the others'
shards, then (resuming) the checkpoint's shards were loaded over it; `own rows` is training's
way now: every rank builds on the meta device and reads only its rows of model.safetensors
(`read_own_rows`), or only its shards of the DCP checkpoint (`load_sharded`).

π0's sizes here are custom sizes (`custom:` variants: the Gemma layers and the SigLIP tower) with
a 4096-token vocabulary, so the layers, not the embeddings, make up the model; 56x56 images.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from real_size import host_line, peak_rss_mb

SIZES = {
    # name: (PaliGemma with its SigLIP tower, expert)
    "tiny": ("width=64,depth=2,mlp_dim=128,num_heads=4,num_kv_heads=1,head_dim=16,"
             "vision_width=32,vision_depth=2,vision_mlp_dim=64,vision_heads=2,patch_size=14",
             "width=32,depth=2,mlp_dim=64,num_heads=4,num_kv_heads=1,head_dim=16"),
    "small": ("width=256,depth=6,mlp_dim=1024,num_heads=8,num_kv_heads=1,head_dim=32,"
              "vision_width=192,vision_depth=6,vision_mlp_dim=768,vision_heads=4,patch_size=14",
              "width=128,depth=6,mlp_dim=512,num_heads=8,num_kv_heads=1,head_dim=32"),
    "medium": ("width=768,depth=8,mlp_dim=3072,num_heads=8,num_kv_heads=1,head_dim=96,"
               "vision_width=384,vision_depth=8,vision_mlp_dim=1536,vision_heads=6,"
               "patch_size=14",
               "width=384,depth=8,mlp_dim=1536,num_heads=8,num_kv_heads=1,head_dim=96"),
}  # fmt: skip
VOCAB = 4096


def config(size: str) -> Any:
    from rlctl.domain.features import typed_feature
    from rlctl.domain.policies.pi0 import PI0Config

    vlm, expert = SIZES[size]
    return PI0Config(
        input_features={
            "observation.state": typed_feature("STATE", (6,)),
            "observation.images.top": typed_feature("VISUAL", (3, 56, 56)),
        },
        output_features={"action": typed_feature("ACTION", (6,))},
        paligemma_variant=f"custom:{vlm},vocab_size={VOCAB}",
        action_expert_variant=f"custom:{expert},vocab_size={VOCAB}",
        chunk_size=10,
        n_action_steps=10,
        max_state_dim=8,
        max_action_dim=8,
        image_resolution=(56, 56),
        tokenizer_max_length=16,
        freeze_vision_encoder=False,
        train_expert_only=False,
    )


def batch(model: Any) -> dict[str, Any]:
    import torch

    generator = torch.Generator().manual_seed(1)
    rows, cfg = 2, model.config
    return {
        "observation.state": torch.randn(rows, 6, generator=generator),
        "observation.images.top": torch.rand(rows, 3, 56, 56, generator=generator),
        "observation.language.tokens": torch.randint(0, VOCAB, (rows, 16), generator=generator),
        "observation.language.attention_mask": torch.ones(rows, 16, dtype=torch.bool),
        "action": torch.randn(rows, cfg.chunk_size, 6, generator=generator),
    }


def rss_mb() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return peak_rss_mb()


def reset_hwm() -> None:
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM back to the current RSS


# -- a rank -------------------------------------------------------------------------------------


def child(spec: dict[str, Any]) -> None:
    if spec.get("load"):
        load_child(spec)
        return
    import torch
    import torch.distributed as dist

    from rlctl.adapters.policies.base import build_policy
    from rlctl.adapters.training.distributed import start_world
    from rlctl.adapters.training.precision import Precision
    from rlctl.adapters.training.sharding import builds_on_meta, empty_model, local, shard_model
    from rlctl.domain.train_settings import DistributedSettings

    torch.set_num_threads(1)
    strategy = spec["strategy"]
    launched = "WORLD_SIZE" in os.environ
    settings = DistributedSettings(strategy=strategy if launched else "ddp")
    world = start_world("cpu", settings)
    base = rss_mb()
    reset_hwm()
    torch.manual_seed(0)
    policy = config(spec["size"])
    # As training builds it (`--meta`): whole on rank 0, on the meta device on the others.
    on_meta = spec.get("meta", False) and builds_on_meta(world)
    model = empty_model(policy) if on_meta else None
    model = (build_policy(policy) if model is None else model).train()
    total = sum(p.numel() for p in model.parameters())
    trained: Any = model
    if launched and strategy == "fsdp":
        shard_model(model, world, settings, Precision())
        gc.collect()
    elif launched:
        from torch.nn.parallel import DistributedDataParallel

        trained = DistributedDataParallel(model, find_unused_parameters=True)  # as training
    build_peak = hwm_mb()  # building (and sharding) the model
    built = rss_mb()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    inputs = batch(model)
    reset_hwm()
    start = time.perf_counter()
    for _ in range(spec["steps"]):
        loss, _ = trained(inputs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    step_s = (time.perf_counter() - start) / spec["steps"]
    peak = hwm_mb()
    moments = [v for per in optimizer.state.values() for k, v in per.items() if k != "step"]
    held = sum(local(p).numel() * 2 for p in model.parameters())  # parameter and gradient
    held += sum(local(v).numel() for v in moments)
    figures: dict[str, Any] = {
        "rank": world.rank,
        "parameters": total,
        "base_mb": base,
        "build_peak_mb": build_peak,
        "built_mb": built,
        "held_mb": held * 4 / 2**20,
        "peak_mb": peak,
        "rss_mb": rss_mb(),
        "step_s": step_s,
    }
    if spec.get("checkpoint"):
        figures.update(checkpoint_times(model, optimizer, world, spec))
    everything: list[Any] = [figures]
    if world.distributed:
        everything = [None] * world.size
        dist.all_gather_object(everything, figures)
    if world.is_main:
        print(json.dumps({"spec": spec, "ranks": everything}), flush=True)
    world.close()


def checkpoint_times(model: Any, optimizer: Any, world: Any, spec: dict[str, Any]) -> dict:
    import torch
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    from rlctl.adapters.training.sharded_checkpoint import load_sharded, save_sharded

    folder = Path(spec["folder"])
    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    loading = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    # π0's last PaliGemma layer feeds nothing the loss reads (its o_proj and MLP get no
    # gradient): AdamW keeps no state for them, so, as `load_sharded`, not strict.
    optimizer_loading = StateDictOptions(
        full_state_dict=True, broadcast_from_rank0=True, strict=False
    )
    best: dict[str, float] = {}

    def timed(name: str, work: Any) -> None:
        dist.barrier()
        reset_hwm()
        start = time.perf_counter()
        work()
        dist.barrier()
        seconds = time.perf_counter() - start
        best[f"{name}_s"] = min(best.get(f"{name}_s", float("inf")), seconds)
        best[f"{name}_peak_mb"] = max(best.get(f"{name}_peak_mb", 0.0), hwm_mb())

    def gathered_save() -> None:
        state = {
            "model": get_model_state_dict(model, options=full),
            "optimizer": get_optimizer_state_dict(model, optimizer, options=full),
        }
        if world.is_main:
            # A new file: the last round's load may still map the old one (mmap).
            (folder / "gathered.pt").unlink(missing_ok=True)
            torch.save(state, folder / "gathered.pt")

    def gathered_load() -> None:
        state: dict[str, Any] = {"model": {}, "optimizer": {}}
        if world.is_main:
            state = torch.load(folder / "gathered.pt", weights_only=False, mmap=True)
        set_model_state_dict(model, state["model"], options=loading)
        set_optimizer_state_dict(model, optimizer, state["optimizer"], options=optimizer_loading)

    for _ in range(spec["repeat"]):
        timed("dcp_save", lambda: save_sharded(folder / "dcp", model, optimizer))
        timed("gathered_save", gathered_save)
        dist.barrier()
        timed("dcp_load", lambda: load_sharded(folder / "dcp", model, optimizer))
        timed("gathered_load", gathered_load)
    return best


def load_child(spec: dict[str, Any]) -> None:
    """One rank of the load table: build, shard and fill π0 from `spec["folder"]` (its
    pretrained_model, or with `resume` its DCP checkpoint too), the old way or the new one;
    `prepare` writes that DCP checkpoint (sharded, with AdamW's state) first."""
    import torch
    import torch.distributed as dist

    from rlctl.adapters.policies.base import build_policy
    from rlctl.adapters.policies.checkpoint import read_model
    from rlctl.adapters.training.distributed import start_world
    from rlctl.adapters.training.precision import Precision
    from rlctl.adapters.training.sharded_checkpoint import load_sharded, save_sharded
    from rlctl.adapters.training.sharding import (
        FIRST_RANK,
        WeightSource,
        builds_on_meta,
        empty_model,
        shard_model,
    )
    from rlctl.domain.train_settings import DistributedSettings

    torch.set_num_threads(1)
    launched = "WORLD_SIZE" in os.environ
    settings = DistributedSettings(strategy="fsdp" if launched else "ddp")
    world = start_world("cpu", settings)
    folder = Path(spec["folder"])
    pretrained = folder / "pretrained_model"
    dcp_folder = folder / "distributed"
    policy = config(spec["size"])
    base = rss_mb()
    reset_hwm()
    start = time.perf_counter()
    if spec.get("prepare"):
        model = build_policy(policy) if world.is_main else empty_model(policy)
        assert model is not None
        shard_model(model, world, settings, Precision())
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        save_sharded(dcp_folder, model, optimizer)
        if world.is_main:
            print(json.dumps({"spec": spec, "ranks": []}), flush=True)
        world.close()
        return
    if spec["own_rows"]:
        source = (
            WeightSource(restored=True)
            if spec["resume"]
            else WeightSource(file=pretrained / "model.safetensors")
        )
    else:
        source = FIRST_RANK
    if world.is_main and source.first_rank:
        model = read_model(pretrained, policy)  # the whole model, on rank 0
    else:
        model = (
            empty_model(policy, computed_buffers=True) if builds_on_meta(world, source) else None
        )
        model = read_model(pretrained, policy) if model is None else model
    model.train()
    if world.mesh is not None:
        shard_model(model, world, settings, Precision(), source)
    if spec["resume"]:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        load_sharded(dcp_folder, model, optimizer)
    gc.collect()
    figures = {
        "rank": world.rank,
        "parameters": sum(p.numel() for p in model.parameters()),
        "base_mb": base,
        "peak_mb": hwm_mb(),
        "rss_mb": rss_mb(),
        "seconds": time.perf_counter() - start,
    }
    everything: list[Any] = [figures]
    if world.distributed:
        everything = [None] * world.size
        dist.all_gather_object(everything, figures)
    if world.is_main:
        print(json.dumps({"spec": spec, "ranks": everything}), flush=True)
    world.close()


def load_table(size: str, ranks: list[int]) -> None:
    """Per-rank peak memory while building, sharding and loading π0 from disk, the old way
    (rank 0 reads the whole model) against every rank reading its own rows or shards."""
    import torch
    from safetensors.torch import save_file

    from rlctl.adapters.policies.base import build_policy
    from rlctl.adapters.policies.checkpoint import untied_state, write_config

    with tempfile.TemporaryDirectory() as folder:
        pretrained = Path(folder) / "pretrained_model"
        pretrained.mkdir()
        torch.manual_seed(0)
        model = build_policy(config(size))
        write_config(model.config, pretrained)
        state = {k: v.detach().contiguous() for k, v in untied_state(model).items()}
        save_file(state, str(pretrained / "model.safetensors"), metadata={"format": "pt"})
        weights = sum(p.numel() for p in model.parameters()) * 4 / 2**20
        del model, state
        gc.collect()
        launch({"load": True, "prepare": True, "size": size, "folder": folder}, 2)
        print(f"\nloading π0 {size} ({weights:.0f} MB of float32 weights; resume adds AdamW's "
              f"two moments) under fsdp: per-rank peak RSS above the rank's base, MB "
              f"(max over ranks; sum over ranks), and seconds")  # fmt: skip
        print(f"{'from':18} {'ranks':>5} {'rank 0 reads':>24} {'own rows':>24}")
        for resume in (False, True):
            for count in ranks:
                cells = []
                for own_rows in (False, True):
                    spec = {"load": True, "size": size, "folder": folder, "resume": resume,
                            "own_rows": own_rows}  # fmt: skip
                    result = launch(spec, count)["ranks"]
                    over = [r["peak_mb"] - r["base_mb"] for r in result]
                    seconds = max(r["seconds"] for r in result)
                    cells.append(f"{max(over):6.0f} ({sum(over):6.0f}) {seconds:5.1f} s")
                source = "DCP checkpoint" if resume else "pretrained_model"
                print(f"{source:18} {count:5d} {cells[0]:>24} {cells[1]:>24}", flush=True)


# -- the parent ---------------------------------------------------------------------------------


def launch(spec: dict[str, Any], ranks: int) -> dict[str, Any]:
    script = str(Path(__file__).resolve())
    argument = json.dumps(spec)
    command = [sys.executable, script, "--child", argument]
    if ranks > 1:
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={ranks}", script, "--child", argument,
        ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{command[-1]} failed:\n{done.stderr[-3000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith("{")][-1]
    result: dict[str, Any] = json.loads(line)
    return result


def memory_table(sizes: list[str], ranks: list[int], steps: int) -> None:
    print(f"\nper-rank memory, π0 AdamW, batch 2, {steps} steps (MB; max over ranks)")
    print(f"{'size':8} {'params':>9} {'strategy':8} {'ranks':>5} {'held':>8} {'peak':>8} "
          f"{'rss':>8} {'base':>6} {'s/step':>7}")  # fmt: skip
    for size in sizes:
        for count in ranks:
            for strategy in ("ddp", "fsdp") if count > 1 else ("one",):
                spec = {"size": size, "strategy": strategy, "steps": steps, "meta": True}
                result = launch(spec, count)["ranks"]
                keys = ("held_mb", "peak_mb", "rss_mb", "base_mb")
                worst = {k: max(r[k] for r in result) for k in keys}
                print(
                    f"{size:8} {result[0]['parameters'] / 1e6:8.1f}M {strategy:8} {count:5d} "
                    f"{worst['held_mb']:8.0f} {worst['peak_mb']:8.0f} {worst['rss_mb']:8.0f} "
                    f"{worst['base_mb']:6.0f} "
                    f"{max(r['step_s'] for r in result):7.2f}",
                    flush=True,
                )


def build_table(size: str, ranks: int) -> None:
    """Each rank's peak resident memory while building and sharding the model: every rank
    building it whole, against rank 0 alone (the others on the meta device, as training)."""
    for meta in (False, True):
        spec = {"size": size, "strategy": "fsdp", "steps": 1, "meta": meta}
        result = sorted(launch(spec, ranks)["ranks"], key=lambda r: r["rank"])
        if not meta:
            weights = result[0]["parameters"] * 4 / 2**20
            print(f"\nbuilding and sharding π0 {size} ({weights:.0f} MB of float32 weights), "
                  f"fsdp on {ranks} ranks: per-rank peak RSS (MB, above the rank's base) "
                  f"while building / RSS once sharded")  # fmt: skip
        label = "rank 0 whole, others on meta" if meta else "every rank whole"
        cells = "  ".join(
            f"r{r['rank']} {r['build_peak_mb'] - r['base_mb']:6.0f} / "
            f"{r['built_mb'] - r['base_mb']:5.0f}"
            for r in result
        )
        total = sum(r["build_peak_mb"] - r["base_mb"] for r in result)
        print(f"{label:30} {cells}   sum of peaks {total:6.0f}", flush=True)


def checkpoint_table(size: str, ranks: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        spec = {"size": size, "strategy": "fsdp", "steps": 1, "checkpoint": True,
                "folder": folder, "repeat": repeat}  # fmt: skip
        result = launch(spec, ranks)["ranks"]
    first = result[0]
    print(f"\ncheckpoint of π0 {size} ({first['parameters'] / 1e6:.1f}M parameters + AdamW), "
          f"fsdp on {ranks} ranks, best of {repeat} (rank 0's peak MB during it)")  # fmt: skip
    for what in ("save", "load"):
        dcp, gathered = first[f"dcp_{what}_s"], first[f"gathered_{what}_s"]
        print(
            f"{what:5} dcp {dcp:6.2f} s ({first[f'dcp_{what}_peak_mb']:.0f} MB)   "
            f"gathered {gathered:6.2f} s ({first[f'gathered_{what}_peak_mb']:.0f} MB)   "
            f"gathered/dcp {gathered / dcp:.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--ranks", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--checkpoint-size", default="medium", choices=list(SIZES))
    parser.add_argument("--checkpoint-ranks", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--checkpoint-only", action="store_true")
    parser.add_argument("--memory-only", action="store_true")
    parser.add_argument(
        "--build-only", action="store_true", help="only the build table (peak RSS before sharding)"
    )
    parser.add_argument("--build-size", default="medium", choices=list(SIZES))
    parser.add_argument(
        "--load-only", action="store_true", help="only the load table (fine-tune and resume)"
    )
    parser.add_argument("--load-ranks", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--build-ranks", type=int, default=2)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    print(host_line())
    print(f"load average at start: {os.getloadavg()}")
    if args.build_only:
        build_table(args.build_size, args.build_ranks)
    elif args.load_only:
        load_table(args.build_size, args.load_ranks)
    else:
        if not args.checkpoint_only:
            memory_table(args.sizes, args.ranks, args.steps)
        if not args.memory_only:
            checkpoint_table(args.checkpoint_size, args.checkpoint_ranks, args.repeat)
        if not (args.checkpoint_only or args.memory_only):
            build_table(args.build_size, args.build_ranks)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
