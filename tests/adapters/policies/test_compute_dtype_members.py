"""The members whose arithmetic follows their config's dtype rather than their weights' honour
`compute_dtype` too: X-VLA with `dtype=bfloat16` (its inputs and noise take float32 once
upcast) and GR00T (bfloat16 autocast over float32 weights, dropped once upcast). The detection
is mocked: this CPU's own answer decides nothing here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="X-VLA and GR00T need transformers")

from rlctl.adapters.policies.loaded_policy import create_policy
from rlctl.adapters.policies.vla import compute_dtype

from . import test_groot as groot
from . import test_xvla as xvla


@pytest.fixture(autouse=True)
def emulated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compute_dtype, "native_bfloat16", lambda device: False)


@pytest.mark.slow
def test_a_bfloat16_xvla_computes_in_float32_once_upcast(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    tokenizer = xvla.TINY["write_tiny_bart_tokenizer"](tmp_path_factory.mktemp("bart") / "tok")
    torch.manual_seed(0)
    kept = create_policy(xvla.tiny_config(tokenizer, dtype="bfloat16", compute_dtype="keep"))
    assert kept.model.dtype == torch.bfloat16
    noise = torch.randn(2, 4, 20)
    bfloat16 = kept.predict_chunk(xvla.observation(), noise=noise).actions

    kept.model.compute_in_float32()
    assert kept.model.dtype == torch.float32  # inputs and noise follow
    assert {p.dtype for p in kept.model.parameters()} == {torch.float32}
    upcast = kept.predict_chunk(xvla.observation(), noise=noise).actions
    assert upcast.dtype == torch.float32 and torch.isfinite(upcast).all()
    assert float((upcast - bfloat16.float()).abs().max()) <= 0.05 * float(upcast.abs().max())

    auto = create_policy(xvla.tiny_config(tokenizer, dtype="bfloat16"))
    assert auto.model.dtype == torch.float32


@pytest.mark.slow
def test_groot_drops_its_bfloat16_autocast_once_upcast(tiny_groot_dir: Path) -> None:
    torch.manual_seed(0)
    kept = create_policy(
        groot.tiny_config(tiny_groot_dir, use_bf16=True, compute_dtype="keep"), groot.stats()
    )
    model = kept.model
    assert model.computes_in_bfloat16()  # float32 weights, bfloat16 autocast
    assert isinstance(model._autocast(), torch.autocast)
    noise = np.random.default_rng(1).normal(size=(2, groot.HORIZON, 16)).astype(np.float32)
    bfloat16 = kept.predict_chunk(groot.observation(), noise=noise).actions

    model.compute_in_float32()
    assert not model.computes_in_bfloat16()
    assert not isinstance(model._autocast(), torch.autocast)
    upcast = kept.predict_chunk(groot.observation(), noise=noise).actions
    assert not torch.equal(upcast, bfloat16)
    assert float((upcast - bfloat16).abs().max()) <= 0.05 * float(bfloat16.abs().max())

    auto = create_policy(groot.tiny_config(tiny_groot_dir, use_bf16=True), groot.stats())
    assert not auto.model.computes_in_bfloat16()
    plain = create_policy(groot.tiny_config(tiny_groot_dir, use_bf16=False), groot.stats())
    assert not plain.model.computes_in_bfloat16() and not plain.model.float32_compute
