"""Sharded training (FSDP2, HSDP) on the CPU with gloo, launched as torchrun launches it.

The same global batch gives the same losses on 1, 2 and 4 processes under fsdp, hsdp and ddp,
with and without gradient accumulation; a checkpoint written by N ranks resumes on fewer (and
in one plain process) to the same next loss; the exported pretrained_model holds the same
weights as the one-process run's and loads in rlctl. Each rank holds about 1/N of the
parameters. A tiny π0 (its joint-attention layer pairs as wrap units) gives the single
process's losses with and without activation checkpointing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlctl.adapters.policies.loaded_policy import load_policy_folder

HERE = Path(__file__).parent
WORKER = HERE / "sharded_worker.py"


def launch(spec: dict, processes: int, worker: Path = WORKER) -> tuple[list[dict], str]:
    """Run the worker on `processes` ranks (1: a plain process, no launcher)."""
    argument = json.dumps(spec)
    if processes == 1:
        command = [sys.executable, str(worker), argument]
    else:
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={processes}", str(worker), argument,
        ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    out = Path(spec["out"])
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(processes)]
    return ranks, done.stdout + done.stderr


def close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= 1e-5 * max(1.0, abs(y)) for x, y in zip(a, b))


def same_weights(a: Path, b: Path) -> None:
    left, right = load_file(str(a)), load_file(str(b))
    assert left.keys() == right.keys()
    for key in left:
        torch.testing.assert_close(left[key], right[key], rtol=1e-5, atol=1e-6, msg=key)


def resume_from(run: Path, step: str, into: Path) -> Path:
    """A copy of `run` whose last checkpoint is `step`."""
    shutil.copytree(run / "checkpoints" / step, into / "checkpoints" / step)
    (into / "checkpoints" / "last").symlink_to(step)
    return into


@pytest.mark.slow
def test_fsdp_on_two_ranks_is_one_process_with_accumulation_and_resumes_in_one(
    fixtures_dir, tmp_path
):
    dataset = str(fixtures_dir / "sim_video")
    one, _ = launch({"dataset": dataset, "out": str(tmp_path / "one"), "steps": 3,
                     "batch_size": 8, "save_freq": 2}, 1)  # fmt: skip
    # 2 ranks x 2 micro-batches x 2 samples: the same 8 samples per step.
    spec = {"dataset": dataset, "out": str(tmp_path / "fsdp"), "steps": 3, "batch_size": 2,
            "accum": 2, "strategy": "fsdp", "save_freq": 2}  # fmt: skip
    (rank0, rank1), log = launch(spec, 2)

    assert close(rank0["losses"], one[0]["losses"]), (rank0["losses"], one[0]["losses"])
    assert rank1["losses"] == []  # only rank 0 logs
    assert rank0["held"] + rank1["held"] == rank0["total"]
    assert abs(rank0["held"] - rank0["total"] / 2) <= 64  # about half each
    assert rank0["optimizer_held"] == 2 * rank0["held"]  # and half the optimiser state
    assert rank0["optimizer_held"] + rank1["optimizer_held"] == 2 * rank0["total"]
    assert "declares no FSDP wrap units" in log  # the MLP is one unit, and says so
    # Rank 1 built no weights of its own: its shards were filled from rank 0's.
    assert "built on the meta device" in log and "rank=1" in log

    checkpoint = tmp_path / "fsdp" / "checkpoints" / "000003"
    state = checkpoint / "training_state"
    assert sorted(p.name for p in (state / "distributed").iterdir()) == [
        ".metadata", "__0_0.distcp", "__1_0.distcp",
    ]  # fmt: skip
    step = json.loads((state / "training_step.json").read_text())
    assert (step["strategy"], step["num_processes"], step["grad_accum_steps"]) == ("fsdp", 2, 2)
    # pretrained_model, written shard by shard, is the one-process run's, and loads.
    same_weights(
        checkpoint / "pretrained_model" / "model.safetensors",
        tmp_path / "one" / "checkpoints" / "000003" / "pretrained_model" / "model.safetensors",
    )
    assert load_policy_folder(checkpoint / "pretrained_model").config.type_name == "mlp"

    # fsdp on 2 ranks -> one plain process: step 3 as the uninterrupted runs trained it.
    again = resume_from(tmp_path / "fsdp", "000002", tmp_path / "resumed")
    (resumed,), _ = launch({"dataset": dataset, "out": str(again), "steps": 3, "batch_size": 8,
                            "resume": str(again)}, 1)  # fmt: skip
    assert (resumed["start"], resumed["done"]) == (2, 3)
    assert close(resumed["losses"], one[0]["losses"][2:])


@pytest.mark.slow
@pytest.mark.ranks
def test_ddp_on_two_ranks_is_one_process_and_a_ddp_checkpoint_resumes_sharded(
    fixtures_dir, tmp_path
):
    dataset = str(fixtures_dir / "sim_video")
    one, _ = launch({"dataset": dataset, "out": str(tmp_path / "one"), "steps": 3,
                     "batch_size": 8}, 1)  # fmt: skip
    ranks, _ = launch({"dataset": dataset, "out": str(tmp_path / "ddp"), "steps": 3,
                       "batch_size": 2, "accum": 2, "save_freq": 2}, 2)  # fmt: skip
    assert close(ranks[0]["losses"], one[0]["losses"])
    assert ranks[0]["held"] == ranks[0]["total"]  # every rank holds the whole model

    # An unsharded checkpoint (optimiser files keyed by index) resumes under fsdp.
    again = resume_from(tmp_path / "ddp", "000002", tmp_path / "resumed")
    resumed = {"dataset": dataset, "out": str(again), "steps": 3, "batch_size": 4,
               "strategy": "fsdp", "resume": str(again)}  # fmt: skip
    (rank0, rank1), _ = launch(resumed, 2)
    assert close(rank0["losses"], one[0]["losses"][2:])
    # Its pretrained_model weights read shard by shard: each rank its own rows only.
    assert rank0["built_on_meta"] and rank1["built_on_meta"]
    assert (rank0["rows_read"], rank1["rows_read"]) == ([4 * rank0["held"]], [4 * rank1["held"]])


@pytest.mark.slow
@pytest.mark.ranks
def test_four_ranks_fsdp_and_hsdp_and_resume_on_two(fixtures_dir, tmp_path):
    dataset = str(fixtures_dir / "sim_video")
    one, _ = launch({"dataset": dataset, "out": str(tmp_path / "one"), "steps": 3,
                     "batch_size": 8}, 1)  # fmt: skip
    four, _ = launch({"dataset": dataset, "out": str(tmp_path / "fsdp4"), "steps": 3,
                      "batch_size": 2, "strategy": "fsdp", "save_freq": 2}, 4)  # fmt: skip
    assert close(four[0]["losses"], one[0]["losses"])
    assert sum(r["held"] for r in four) == four[0]["total"]
    assert max(r["held"] for r in four) <= four[0]["total"] / 4 + 64

    hsdp, log = launch({"dataset": dataset, "out": str(tmp_path / "hsdp"), "steps": 3,
                        "batch_size": 2, "strategy": "hsdp", "shard_size": 2}, 4)  # fmt: skip
    assert close(hsdp[0]["losses"], one[0]["losses"])
    assert "mesh=[2, 2]" in log
    assert sum(r["held"] for r in hsdp) == 2 * hsdp[0]["total"]  # two replicas of two shards
    # Exported by the first replica group's two shards, by the four shards: one process's weights.
    expected = tmp_path / "one/checkpoints/000003/pretrained_model/model.safetensors"
    for run in ("hsdp", "fsdp4"):
        exported = tmp_path / run / "checkpoints" / "000003" / "pretrained_model"
        same_weights(exported / "model.safetensors", expected)

    # 4 ranks -> 2 ranks: each rank reads its shards of the checkpoint, and no rank the
    # pretrained_model weights (every rank, the first too, builds on the meta device).
    again = resume_from(tmp_path / "fsdp4", "000002", tmp_path / "resumed")
    resumed = {"dataset": dataset, "out": str(again), "steps": 3, "batch_size": 4,
               "strategy": "fsdp", "resume": str(again)}  # fmt: skip
    (rank0, rank1), _ = launch(resumed, 2)
    assert (rank0["start"], rank0["done"]) == (2, 3)
    assert close(rank0["losses"], one[0]["losses"][2:])
    assert rank0["built_on_meta"] and rank1["built_on_meta"]
    assert rank0["rows_read"] == rank1["rows_read"] == []

    # 4 ranks -> one plain process.
    again = resume_from(tmp_path / "fsdp4", "000002", tmp_path / "resumed_in_one")
    (alone,), _ = launch({"dataset": dataset, "out": str(again), "steps": 3, "batch_size": 8,
                          "resume": str(again)}, 1)  # fmt: skip
    assert (alone["start"], alone["done"]) == (2, 3)
    assert close(alone["losses"], one[0]["losses"][2:])


@pytest.mark.slow
@pytest.mark.ranks
def test_fine_tuning_on_two_ranks_reads_half_the_weights_each_and_is_one_process(
    fixtures_dir, tmp_path
):
    dataset = str(fixtures_dir / "sim_video")
    launch({"dataset": dataset, "out": str(tmp_path / "base"), "steps": 2, "batch_size": 8}, 1)
    pretrained = str(tmp_path / "base" / "checkpoints" / "000002" / "pretrained_model")
    tuned = {"dataset": dataset, "steps": 2, "pretrained": pretrained}
    (one,), _ = launch({**tuned, "out": str(tmp_path / "one"), "batch_size": 8}, 1)
    (rank0, rank1), _ = launch(
        {**tuned, "out": str(tmp_path / "fsdp"), "batch_size": 4, "strategy": "fsdp"}, 2
    )
    assert close(rank0["losses"], one["losses"]), (rank0["losses"], one["losses"])
    # No rank built, or read, the whole model: each its own rows (float32), half each.
    assert rank0["built_on_meta"] and rank1["built_on_meta"]
    assert (rank0["rows_read"], rank1["rows_read"]) == ([4 * rank0["held"]], [4 * rank1["held"]])
    assert rank0["held"] + rank1["held"] == rank0["total"]
    assert max(rank0["held"], rank1["held"]) <= rank0["total"] / 2 + 64
    same_weights(
        tmp_path / "fsdp/checkpoints/000002/pretrained_model/model.safetensors",
        tmp_path / "one/checkpoints/000002/pretrained_model/model.safetensors",
    )


@pytest.mark.slow
@pytest.mark.ranks
def test_pi0_fine_tuned_on_two_ranks_from_a_file_computes_the_one_process_loss_and_acts(
    fixtures_dir, tmp_path
):
    """π0's layer pairs sharded, every rank built on the meta device and reading its rows of the
    file: before any step, a fixed batch and noise give the one-process model's loss on every
    rank (its computed buffers rebuilt right); the exported model loads and acts. (The steps'
    losses differ from one process's: each rank draws its own noise and times.)"""
    import runpy

    import numpy as np

    writer = runpy.run_path(str(HERE.parent / "policies" / "tiny_paligemma_tokenizer.py"))
    tokenizer = str(writer["write_tiny_paligemma_tokenizer"](tmp_path / "tokenizer"))
    common = {"dataset": str(fixtures_dir / "sim_video"), "policy": "pi0", "tokenizer": tokenizer}
    launch({**common, "out": str(tmp_path / "base"), "steps": 2, "batch_size": 4}, 1)
    tuned = {**common, "steps": 2,
             "pretrained": str(tmp_path / "base/checkpoints/000002/pretrained_model")}  # fmt: skip
    (one,), _ = launch({**tuned, "out": str(tmp_path / "one"), "batch_size": 4}, 1)
    (rank0, rank1), _ = launch(
        {**tuned, "out": str(tmp_path / "fsdp"), "batch_size": 2, "strategy": "fsdp"}, 2
    )
    assert one["probe"] is not None
    assert close([rank0["probe"], rank1["probe"]], [one["probe"]] * 2), (rank0, rank1, one)
    assert rank0["built_on_meta"] and rank1["built_on_meta"]
    assert rank0["rows_read"] and rank1["rows_read"]
    assert rank0["held"] + rank1["held"] == rank0["total"]
    assert all(np.isfinite(rank0["losses"]))

    from rlctl.adapters.policies.vla import tokenizer as tokenizers

    load = tokenizers.load_tokenizer
    tokenizers.load_tokenizer = lambda name, **o: load(  # type: ignore[assignment]
        tokenizer if name == tokenizers.PALIGEMMA_TOKENIZER else name, **o
    )
    try:
        exported = load_policy_folder(
            tmp_path / "fsdp/checkpoints/000002/pretrained_model", device="cpu"
        )
    finally:
        tokenizers.load_tokenizer = load  # type: ignore[assignment]
    observation = {
        "observation.state": np.zeros((1, 6), np.float32),
        "observation.images.front": np.full((1, 3, 48, 64), 0.5, np.float32),
        "task": "push the t to the target",
    }
    chunk = np.asarray(exported.predict_chunk(observation).actions)
    assert chunk.shape == (1, 4, 6) and np.isfinite(chunk).all()
