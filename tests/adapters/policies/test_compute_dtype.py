"""`compute_dtype`: a bfloat16 VLA computes in float32 where the device emulates bfloat16.

The detection is mocked both ways (this CPU's own answer decides nothing here); the upcast model
gives the float32 model's chunks (the same file read as float32) and the bfloat16 ones up to
bfloat16 rounding; `keep` keeps bfloat16; saved checkpoints keep the file's dtypes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers", reason="π0 needs the smolvla extra")

from safetensors.torch import load_file
from structlog.testing import capture_logs

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.policies.vla import compute_dtype
from rlctl.domain.errors import ConfigError

from .test_pi0 import noise, raw_batch, stats, tiny_config


@pytest.fixture
def emulated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU without bfloat16 arithmetic (an AVX2 laptop)."""
    monkeypatch.setattr(compute_dtype, "native_bfloat16", lambda device: False)
    compute_dtype._reported.clear()


@pytest.fixture
def native(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU with AMX or AVX512_BF16."""
    monkeypatch.setattr(compute_dtype, "native_bfloat16", lambda device: True)
    compute_dtype._reported.clear()


@pytest.fixture
def bfloat16_checkpoint(tiny_paligemma_tokenizer: Path, tmp_path: Path) -> Path:
    """A tiny π0 with `dtype=bfloat16` (its Gemmas in bfloat16, the vision tower, projector and
    norms in float32, as LeRobot keeps them), saved."""
    torch.manual_seed(0)
    policy = create_policy(tiny_config("pi0", dtype="bfloat16", compute_dtype="keep"), stats())
    with torch.no_grad():  # nothing zero-initialised may hide a difference
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    return policy.save(tmp_path / "pretrained_model")


def dtypes(model: torch.nn.Module) -> set[torch.dtype]:
    return {p.dtype for p in model.parameters()}


def chunk(policy) -> torch.Tensor:  # type: ignore[no-untyped-def]
    return policy.predict_chunk(raw_batch(), noise=noise()).actions


def test_detection_reads_the_cpus_bfloat16_instructions(monkeypatch: pytest.MonkeyPatch) -> None:
    def cpu(machine: str, flags: set[str], mkldnn: bool = True) -> bool:
        monkeypatch.setattr(compute_dtype.platform, "machine", lambda: machine)
        monkeypatch.setattr(compute_dtype, "cpu_flags", lambda: frozenset(flags))
        monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: mkldnn)
        compute_dtype.cpu_bfloat16_native.cache_clear()
        return compute_dtype.native_bfloat16("cpu")

    try:
        assert not cpu("x86_64", {"avx", "avx2", "fma"})  # the AMD EPYC of issue #26
        assert not cpu("x86_64", {"avx2", "avx512f", "avx512bw"})  # AVX-512 without BF16
        assert cpu("x86_64", {"avx2", "avx512f", "avx512_bf16"})
        assert cpu("x86_64", {"avx2", "amx_tile", "amx_bf16"})
        assert not cpu("x86_64", {"avx512_bf16"}, mkldnn=False)  # no oneDNN: emulated
        assert cpu("aarch64", {"fp", "asimd", "bf16"})
        assert not cpu("arm64", {"fp", "asimd"})
        assert not cpu("riscv64", set())
    finally:
        compute_dtype.cpu_bfloat16_native.cache_clear()
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation: False)
    assert not compute_dtype.native_bfloat16("cuda")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation: True)
    assert compute_dtype.native_bfloat16("cuda:0")
    assert compute_dtype.native_bfloat16("mps")  # left as it is


def test_cpu_flags_are_read_from_proc_cpuinfo(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx avx2 amx_bf16\n\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    monkeypatch.setattr(compute_dtype, "CPUINFO", cpuinfo)
    assert {"avx2", "amx_bf16"} <= compute_dtype.cpu_flags()
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n")
    assert "bf16" in compute_dtype.cpu_flags()


@pytest.mark.slow
def test_the_upcast_model_gives_the_float32_models_chunks_and_bfloat16s_up_to_rounding(
    bfloat16_checkpoint: Path, tmp_path: Path, emulated: None
) -> None:
    with capture_logs() as logs:
        upcast = load_policy_folder(bfloat16_checkpoint)  # auto, bfloat16 emulated
    assert dtypes(upcast.model) == {torch.float32}
    kept = load_policy_folder(bfloat16_checkpoint, compute_dtype="keep")
    assert torch.bfloat16 in dtypes(kept.model)
    # The float32 reference: the same file, its config saying float32 (weights cast at load).
    reference_folder = tmp_path / "float32"
    shutil.copytree(bfloat16_checkpoint, reference_folder)
    config_file = reference_folder / "config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "dtype": "float32"}))
    reference = load_policy_folder(reference_folder, compute_dtype="keep")
    assert dtypes(reference.model) == {torch.float32}

    ours, theirs, bfloat16 = chunk(upcast), chunk(reference), chunk(kept)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    scale = float(bfloat16.abs().max())
    assert float((ours - bfloat16).abs().max()) <= 0.05 * scale  # bfloat16's rounding
    assert not torch.equal(ours, bfloat16)  # the kept model did compute in bfloat16
    said = [e for e in logs if "upcast" in e["event"]]
    assert len(said) == 1 and "compute_dtype=keep" in said[0]["hint"]
    assert "no native bfloat16" in said[0]["reason"]
    load_policy_folder(bfloat16_checkpoint)  # said once
    with capture_logs() as again:
        load_policy_folder(bfloat16_checkpoint)
    assert not [e for e in again if "upcast" in e["event"]]


def test_the_setting_is_honoured(bfloat16_checkpoint: Path, native: None) -> None:
    assert torch.bfloat16 in dtypes(load_policy_folder(bfloat16_checkpoint).model)  # auto
    assert torch.bfloat16 in dtypes(
        load_policy_folder(bfloat16_checkpoint, compute_dtype="keep").model
    )
    forced = load_policy_folder(bfloat16_checkpoint, compute_dtype="float32")
    assert dtypes(forced.model) == {torch.float32}
    with pytest.raises(ConfigError, match="compute_dtype"):
        load_policy_folder(bfloat16_checkpoint, compute_dtype="float16")


def test_auto_keeps_bfloat16_when_float32_would_not_fit(
    bfloat16_checkpoint: Path, emulated: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compute_dtype, "_free_memory", lambda: 1000)
    with capture_logs() as logs:
        policy = load_policy_folder(bfloat16_checkpoint)
    assert torch.bfloat16 in dtypes(policy.model)
    assert any("more memory than is free" in e["event"] for e in logs)
    forced = load_policy_folder(bfloat16_checkpoint, compute_dtype="float32")
    assert dtypes(forced.model) == {torch.float32}


def test_saved_checkpoints_keep_their_dtypes(
    bfloat16_checkpoint: Path, tmp_path: Path, emulated: None
) -> None:
    upcast = load_policy_folder(bfloat16_checkpoint)
    assert dtypes(upcast.model) == {torch.float32}
    saved = upcast.save(tmp_path / "again")
    before = load_file(str(bfloat16_checkpoint / "model.safetensors"))
    after = load_file(str(saved / "model.safetensors"))
    assert {k: v.dtype for k, v in after.items()} == {k: v.dtype for k, v in before.items()}
    assert torch.bfloat16 in {v.dtype for v in after.values()}
    for key, value in before.items():
        assert torch.equal(after[key], value), key  # upcast and back: bit for bit
    assert "compute_dtype" not in json.loads((saved / "config.json").read_text())


@pytest.mark.slow
def test_a_new_bfloat16_model_trains_in_float32_and_saves_bfloat16(
    tiny_paligemma_tokenizer: Path, tmp_path: Path, emulated: None
) -> None:
    """Training builds its policy with `create_policy` (the config's compute_dtype): a
    step updates float32 weights, the checkpoint holds bfloat16 ones."""
    torch.manual_seed(0)
    policy = create_policy(tiny_config("pi0", dtype="bfloat16"), stats())
    model = policy.model.train()
    assert dtypes(model) == {torch.float32}
    batch = policy._preprocess({**raw_batch(), "action": torch.randn(2, 4, 3)})
    batch["action"] = torch.randn(2, 4, 3)
    batch["action_is_pad"] = torch.zeros(2, 4, dtype=torch.bool)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    loss, _ = model(batch)
    loss.backward()
    optimizer.step()
    saved = load_file(str(policy.save(tmp_path / "trained") / "model.safetensors"))
    expert = [k for k in saved if "gemma_expert" in k and k.endswith("q_proj.weight")]
    assert expert and all(saved[k].dtype == torch.bfloat16 for k in expert)
    live = dict(model.named_parameters())
    assert torch.equal(saved[expert[0]], live[expert[0]].detach().to(torch.bfloat16))
    kept = create_policy(tiny_config("pi0", dtype="bfloat16", compute_dtype="keep"), stats())
    assert torch.bfloat16 in dtypes(kept.model)
