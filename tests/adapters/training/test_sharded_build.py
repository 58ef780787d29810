"""A sharded run's ranks after the first build the model with its parameters on the meta device
(`empty_model`): no storage for them, ties kept, buffers and plain tensors built as usual; a type
that computes with its parameters while built is refused (None: built whole), and the
registration hook is gone afterwards. On two gloo ranks, test_sharded.py and
tests/adapters/policies/test_wrap_units.py train such ranks to the single process's weights."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from rlctl.adapters.policies.base import build_policy
from rlctl.adapters.training import sharding
from rlctl.adapters.training.distributed import World
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import ACTConfig

CONFIG: Any = types.SimpleNamespace(type_name="probe")


class Tied(nn.Module):
    def __init__(self, config: object, load_backbone_weights: bool = True) -> None:
        super().__init__()
        assert not load_backbone_weights  # nothing read for a rank that gets rank 0's weights
        self.embed = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight
        self.norm = nn.BatchNorm1d(4)  # persistent buffers
        self.register_buffer("table", torch.arange(3.0), persistent=False)
        self.steps = torch.linspace(0, 1, 5)  # a plain tensor, as a noise scheduler's


class DryRun(nn.Module):
    def __init__(self, config: object, load_backbone_weights: bool = True) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))
        self.out = (self.scale * torch.zeros(4)).shape  # an input on the CPU


@pytest.mark.slow  # the first build on the meta device loads torch's meta kernels (~12 s)
def test_parameters_on_meta_ties_kept_buffers_and_plain_tensors_real(monkeypatch) -> None:
    monkeypatch.setattr(sharding, "policy_class", lambda config: Tied)
    model = sharding.empty_model(CONFIG)
    assert model is not None
    assert all(p.is_meta for p in model.parameters())
    assert model.head.weight is model.embed.weight
    assert not any(b.is_meta for b in model.buffers())
    torch.testing.assert_close(model.table, torch.arange(3.0))
    torch.testing.assert_close(model.steps, torch.linspace(0, 1, 5))
    assert nn.Module.register_parameter is sharding.nn.Module.register_parameter
    assert nn.Linear(2, 2).weight.device.type == "cpu"  # the hook is gone


def test_a_type_computing_with_its_weights_while_built_is_built_whole(monkeypatch) -> None:
    monkeypatch.setattr(sharding, "policy_class", lambda config: DryRun)
    warnings = []
    monkeypatch.setattr(sharding.log, "warning", lambda event, **kw: warnings.append(kw))
    assert sharding.empty_model(CONFIG) is None
    assert warnings and warnings[0]["policy"] == "probe"
    assert nn.Linear(2, 2).weight.device.type == "cpu"


@pytest.mark.parametrize(
    "rank,mesh,meta", [(0, "mesh", False), (1, "mesh", True), (1, None, False)]
)
def test_only_sharded_ranks_after_the_first_build_on_meta(rank, mesh, meta) -> None:
    assert sharding.builds_on_meta(World(rank=rank, size=2, mesh=mesh)) is meta


@pytest.mark.slow
def test_act_builds_on_meta_with_the_real_models_names_and_shapes() -> None:
    config = ACTConfig(
        input_features={
            "observation.state": typed_feature("STATE", (6,)),
            "observation.images.top": typed_feature("VISUAL", (3, 32, 32)),
        },
        output_features={"action": typed_feature("ACTION", (6,))},
        chunk_size=4, n_action_steps=4, dim_model=32, n_heads=2, dim_feedforward=64,
        n_encoder_layers=2, n_decoder_layers=1, latent_dim=8, n_vae_encoder_layers=1,
        pretrained_backbone_weights=None,
    )  # fmt: skip
    empty, real = sharding.empty_model(config), build_policy(config)
    assert empty is not None
    assert all(p.is_meta for p in empty.parameters())
    left, right = empty.state_dict(), real.state_dict()
    assert left.keys() == right.keys()
    assert all((left[k].shape, left[k].dtype) == (right[k].shape, right[k].dtype) for k in left)


@pytest.mark.parametrize(
    "rank,mesh,weights,meta",
    [
        (0, "mesh", sharding.WeightSource(file=Path("model.safetensors")), True),
        (0, "mesh", sharding.WeightSource(restored=True), True),
        (1, "mesh", sharding.WeightSource(restored=True), True),
        (0, None, sharding.WeightSource(file=Path("model.safetensors")), False),
    ],
)
def test_every_sharded_rank_builds_on_meta_when_the_weights_are_read(
    rank, mesh, weights, meta
) -> None:
    assert sharding.builds_on_meta(World(rank=rank, size=2, mesh=mesh), weights) is meta


class Probe(nn.Module):
    """A policy-shaped model: tied embedding and head, an uneven row count, buffers."""

    def __init__(self, config: object = None, load_backbone_weights: bool = False) -> None:
        super().__init__()
        self.config = CONFIG
        self.embed = nn.Embedding(10, 4)
        self.body = nn.Linear(4, 7)  # 7 rows: shards of 2, 2, 2, 1 on four ranks
        self.head = nn.Linear(7, 10, bias=False)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.embed.weight
        self.norm = nn.BatchNorm1d(4)  # persistent buffers, in the file
        self.register_buffer("table", torch.arange(3.0), persistent=False)

    def fsdp_units(self) -> list[nn.Module]:
        return [self.body]

    def enable_activation_checkpointing(self) -> None:  # pragma: no cover - not asked
        raise AssertionError


@pytest.fixture
def fake_world(request):
    """Rank `request.param[0]` of a world of `[1]` processes, on a mesh of shape `[2]`, in this
    one process (torch's fake process group: collectives do nothing)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    rank, size, shape = request.param
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=size)
    try:
        names = ("replicate", "shard") if len(shape) == 2 else ("shard",)
        mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
        yield World(rank=rank, size=size, mesh=mesh)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # torch.distributed's imports and the meta kernels (~10 s)
@pytest.mark.parametrize(
    "fake_world,rows,dtype",
    [
        ((2, 4, (4,)), (4, 6), torch.float32),  # read in place (pread)
        ((3, 4, (4,)), (6, 7), torch.bfloat16),  # cast: through get_slice
        ((3, 4, (2, 2)), (4, 7), torch.float32),
    ],
    indirect=["fake_world"],
    ids=["fsdp-rank2of4", "fsdp-last-short-shard", "hsdp-rank3of2x2"],
)
def test_a_rank_reads_only_its_rows_of_the_weights_file(
    fake_world, rows, dtype, tmp_path, monkeypatch
):
    from safetensors.torch import save_file

    from rlctl.adapters.policies.checkpoint import untied_state
    from rlctl.adapters.training.precision import Precision
    from rlctl.domain.train_settings import DistributedSettings

    torch.manual_seed(0)
    saved = Probe()
    saved.norm.running_mean.uniform_()
    state = {k: v.to(dtype) for k, v in untied_state(saved).items()}
    path = tmp_path / "model.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    events: list[dict] = []
    monkeypatch.setattr(sharding.log, "info", lambda event, **kw: events.append(kw))
    monkeypatch.setattr(sharding, "policy_class", lambda config: Probe)
    in_place = []
    rows_in_place = sharding._rows_in_place
    monkeypatch.setattr(
        sharding, "_rows_in_place", lambda *a: in_place.append(rows_in_place(*a)) or in_place[-1]
    )

    model = sharding.empty_model(CONFIG)
    assert model is not None and all(p.is_meta for p in model.parameters())
    weights = sharding.WeightSource(file=path)
    sharding.shard_model(
        model, fake_world, DistributedSettings(strategy="fsdp"), Precision(), weights
    )

    first, last = rows
    body = sharding.local(model.body.weight)
    torch.testing.assert_close(body, state["body.weight"][first:last].float())
    torch.testing.assert_close(
        sharding.local(model.body.bias), state["body.bias"][first:last].float()
    )
    assert model.out.weight is model.embed.weight  # still tied, read once
    torch.testing.assert_close(model.norm.running_mean, state["norm.running_mean"].float())
    torch.testing.assert_close(model.table, torch.arange(3.0))  # as built, not to_empty's garbage
    (read,) = [e for e in events if "bytes" in e]
    size = torch.empty(0, dtype=dtype).element_size()
    held = sum(sharding.local(t).numel() * size for t in untied_state(model).values())
    assert read["bytes"] == held  # this rank's rows of every tensor, and nothing else
    assert read["bytes"] < read["of"] / 2
    assert all(in_place) if dtype == torch.float32 else not any(in_place)


@pytest.mark.slow
@pytest.mark.parametrize("fake_world", [(1, 2, (2,))], indirect=True)
def test_shards_left_for_the_checkpoint_hold_zeros_and_the_built_buffers(fake_world, monkeypatch):
    from rlctl.adapters.training.precision import Precision
    from rlctl.domain.train_settings import DistributedSettings

    monkeypatch.setattr(sharding, "policy_class", lambda config: Probe)
    model = sharding.empty_model(CONFIG)
    assert model is not None
    restored = sharding.WeightSource(restored=True)
    sharding.shard_model(
        model, fake_world, DistributedSettings(strategy="fsdp"), Precision(), restored
    )
    assert not any(sharding.local(p).is_meta for p in model.parameters())
    assert all(not sharding.local(p).any() for p in model.parameters())
    torch.testing.assert_close(model.table, torch.arange(3.0))
    torch.testing.assert_close(model.norm.running_var, torch.ones(4))


def test_a_weights_file_that_does_not_fit_is_refused_from_its_header(tmp_path, monkeypatch):
    from safetensors.torch import save_file

    from rlctl.adapters.policies.checkpoint import check_weights_file
    from rlctl.adapters.policies.errors import CheckpointMismatch

    path = tmp_path / "model.safetensors"
    save_file({"body.weight": torch.zeros(3, 4), "extra": torch.zeros(1)}, str(path))
    with torch.device("meta"):
        model = nn.Sequential()
        model.body = nn.Linear(4, 7)
    with pytest.raises(CheckpointMismatch) as caught:
        check_weights_file(model, path)
    message = caught.value.message
    assert "body.weight (model [7, 4], file [3, 4])" in message
    assert "missing from the file: body.bias" in message and "unexpected" in message
    assert caught.value.where == str(path)


@pytest.mark.slow
@pytest.mark.parametrize("fake_world", [(0, 1, (1,)), (1, 2, (2,))], indirect=True)
def test_sharding_over_one_process_says_it_shards_nothing(fake_world, monkeypatch):
    from rlctl.adapters.training.precision import Precision
    from rlctl.domain.train_settings import DistributedSettings

    said: list[str] = []
    monkeypatch.setattr(sharding.log, "warning", lambda event, **kw: said.append(event))
    monkeypatch.setattr(sharding, "policy_class", lambda config: Probe)
    model = sharding.empty_model(CONFIG)
    assert model is not None
    # Shards left for a checkpoint to fill: no weights cross the fake process group.
    sharding.shard_model(
        model, fake_world, DistributedSettings(strategy="fsdp"), Precision(),
        sharding.WeightSource(restored=True),
    )  # fmt: skip
    alone = [event for event in said if "shards nothing" in event]
    assert len(alone) == (1 if fake_world.size == 1 else 0), said
