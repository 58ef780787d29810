"""Two processes on the CPU (gloo), launched as torchrun launches them: one model, two shards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from rlctl.adapters.policies.loaded_policy import load_policy_folder

WORKER = Path(__file__).with_name("ddp_worker.py")


def launch(dataset: Path, out: Path, steps: int, resume: str | None = None) -> list[dict]:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        str(WORKER), str(dataset), str(out), str(steps), *([resume] if resume else []),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.slow
def test_two_processes_train_one_model_and_resume(fixtures_dir, tmp_path):
    out = tmp_path / "run"
    rank0, rank1 = launch(fixtures_dir / "sim_video", out, steps=4)

    assert rank0["weights"] == rank1["weights"]  # gradients were averaged
    assert rank0["stats"] == rank1["stats"]  # rank 0's statistics, broadcast
    assert rank0["checkpoint"].endswith("checkpoints/000004") and rank1["checkpoint"] is None
    assert len(rank0["records"]) == 4 and rank1["records"] == []  # only rank 0 logs
    checkpoint = Path(rank0["checkpoint"])
    step = json.loads((checkpoint / "training_state/training_step.json").read_text())
    assert step["num_processes"] == 2 and step["step"] == 4
    rng = load_file(str(checkpoint / "training_state/rng_state.safetensors"))
    assert "torch_rng_state.rank1" in rng
    assert load_policy_folder(checkpoint).config.type_name == "mlp"

    for rank in (out / "rank0.json", out / "rank1.json"):
        rank.unlink()
    rank0, rank1 = launch(fixtures_dir / "sim_video", out, steps=6, resume=str(out))
    assert (rank0["start"], rank0["done"]) == (4, 6) and (rank1["start"], rank1["done"]) == (4, 6)
    assert rank0["weights"] == rank1["weights"]
