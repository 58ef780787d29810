"""Sharded training's bad input and its pieces in one process: the launcher check, the hsdp
mesh, SLURM's variables, DCP state round trips (and a different model refused by name), and
the shard-by-shard safetensors writer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file
from torch import nn

from rlctl.adapters.policies.errors import CheckpointMismatch
from rlctl.adapters.training import distributed
from rlctl.adapters.training.distributed import World, start_world
from rlctl.adapters.training.sharded_checkpoint import export_weights, load_sharded, save_sharded
from rlctl.domain.errors import ConfigError
from rlctl.domain.train_settings import DistributedSettings, TrainSettings
from rlctl.entrypoints.cli.main import cli

LAUNCH_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "SLURM_PROCID", "MASTER_ADDR")


@pytest.fixture
def no_launcher(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in LAUNCH_VARIABLES:
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


@pytest.mark.parametrize("strategy", ["fsdp", "hsdp"])
def test_a_sharded_strategy_without_a_launcher_says_how_to_launch(no_launcher, strategy):
    with pytest.raises(ConfigError) as err:
        start_world("cpu", DistributedSettings(strategy=strategy))
    assert "not started by a launcher" in err.value.message
    assert "torchrun --nproc-per-node" in (err.value.hint or "")


def test_the_cli_refuses_fsdp_without_torchrun_in_one_line(no_launcher, tmp_path):
    result = CliRunner().invoke(
        cli,
        ["train", "--policy.type=mlp", f"--dataset.root={tmp_path}", f"--output_dir={tmp_path}/o",
         "--distributed.strategy=fsdp"],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "--distributed.strategy=fsdp shards the model" in result.output
    assert "torchrun" in result.output


def test_hsdp_refuses_a_world_its_shard_groups_cannot_divide():
    with pytest.raises(ConfigError, match="which 6 processes cannot be divided into"):
        distributed._mesh(DistributedSettings(strategy="hsdp", shard_size=4), 6, {}, "cpu")
    with pytest.raises(ConfigError, match="groups of 4 processes"):  # a node's processes
        distributed._mesh(DistributedSettings(strategy="hsdp"), 6, {"LOCAL_WORLD_SIZE": "4"}, "cpu")


def test_settings_check_the_numbers():
    with pytest.raises(ConfigError, match="hsdp only"):
        DistributedSettings(strategy="fsdp", shard_size=2)
    with pytest.raises(ConfigError, match="at least 1"):
        DistributedSettings(strategy="hsdp", shard_size=0)
    with pytest.raises(ConfigError, match="grad_accum_steps"):
        TrainSettings(grad_accum_steps=0)


def test_srun_without_torchrun_reads_slurms_variables(no_launcher):
    no_launcher.setenv("SLURM_PROCID", "3")
    no_launcher.setenv("SLURM_NTASKS", "8")
    no_launcher.setenv("SLURM_LOCALID", "1")
    no_launcher.setenv("SLURM_NTASKS_PER_NODE", "4(x2)")
    assert "RANK" not in distributed._launch_environment()  # no MASTER_ADDR: not a launch
    no_launcher.setenv("MASTER_ADDR", "node-1")
    env = distributed._launch_environment()
    assert (env["WORLD_SIZE"], env["RANK"], env["LOCAL_RANK"]) == ("8", "3", "1")
    assert (env["LOCAL_WORLD_SIZE"], env["MASTER_PORT"]) == ("4", "29500")


def mlp(hidden: int) -> nn.Module:
    torch.manual_seed(hidden)
    return nn.Sequential(nn.Linear(3, hidden), nn.ReLU(), nn.Linear(hidden, 2))


def trained(hidden: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    model = mlp(hidden)
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.ones(4, 3)).sum().backward()
    optimiser.step()
    return model, optimiser


def test_dcp_state_round_trips_in_one_process(tmp_path):
    model, optimiser = trained(8)
    save_sharded(tmp_path / "distributed", model, optimiser)
    fresh = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
    fresh_optimiser = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    load_sharded(tmp_path / "distributed", fresh, fresh_optimiser)
    for a, b in zip(model.parameters(), fresh.parameters()):
        torch.testing.assert_close(a, b)
    first = next(iter(fresh.parameters()))
    saved_first = next(iter(model.parameters()))
    torch.testing.assert_close(
        fresh_optimiser.state[first]["exp_avg"], optimiser.state[saved_first]["exp_avg"]
    )


class WithAnIdleLayer(nn.Module):
    """As π0's last PaliGemma layer: parameters whose output nothing reads never get a gradient,
    so AdamW keeps no state for them."""

    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Linear(3, 3)
        self.idle = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


def test_parameters_that_never_had_a_gradient_resume_without_state(tmp_path):
    torch.manual_seed(0)
    model = WithAnIdleLayer()
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(2):
        optimiser.zero_grad()
        model(torch.randn(4, 3)).sum().backward()
        optimiser.step()
    save_sharded(tmp_path / "distributed", model, optimiser)

    fresh = WithAnIdleLayer()
    fresh_optimiser = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    load_sharded(tmp_path / "distributed", fresh, fresh_optimiser)
    saved, resumed = optimiser.state_dict()["state"], fresh_optimiser.state_dict()["state"]
    assert sorted(resumed) == sorted(saved) == [0, 1]  # the idle layer's two: none, as saved
    for index, entries in saved.items():
        for key, value in entries.items():
            torch.testing.assert_close(resumed[index][key], value)
    torch.testing.assert_close(fresh.idle.weight, model.idle.weight)


def test_a_sharded_checkpoint_of_another_model_is_refused_by_name(tmp_path):
    model, optimiser = trained(8)
    save_sharded(tmp_path / "distributed", model, optimiser)
    other, other_optimiser = trained(16)
    with pytest.raises(CheckpointMismatch) as err:
        load_sharded(tmp_path / "distributed", other, other_optimiser)
    assert "0.weight (model [16, 3], checkpoint [8, 3])" in err.value.message
    assert "config.json unchanged" in (err.value.hint or "")


def test_the_shard_writer_writes_the_file_safetensors_writes(tmp_path: Path):
    model = nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.Linear(5, 2, bias=False))
    model[2].to(torch.bfloat16)
    export_weights(tmp_path / "model.safetensors", model, World())
    written = load_file(str(tmp_path / "model.safetensors"))
    assert written.keys() == model.state_dict().keys()
    for key, value in model.state_dict().items():
        assert written[key].dtype == value.dtype
        torch.testing.assert_close(written[key], value)
