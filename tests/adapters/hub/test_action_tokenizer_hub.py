"""A FAST tokenizer on the (fake, loopback) Hub: `rlctl train-tokenizer --push_to_hub=true`
uploads the folder through rlctl's Hub adapter, and π0-FAST's `action_tokenizer_name=user/name`
fetches it back through the same adapter into the Hub cache (then offline from the cache)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("tokenizers", reason="the FAST tokenizer needs the smolvla extra")

from rlctl.adapters.policies.vla.fast import FASTTokenizer, load_action_tokenizer
from rlctl.domain.errors import RlctlError
from rlctl.entrypoints.cli.main import cli

pytestmark = pytest.mark.timeout(120)

REPO = "alice/fast_sim_video"


@pytest.mark.slow
def test_a_pushed_tokenizer_loads_by_repo_id_then_offline(
    fake_hub, hub_env: Path, fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "fast"
    result = CliRunner().invoke(
        cli,
        [
            "train-tokenizer",
            f"--dataset.root={fixtures_dir / 'sim_video'}",
            "--action_horizon=4",
            "--encoded_dims=0:6",
            "--vocab_size=300",
            f"--output_dir={out}",
            "--push_to_hub=true",
            f"--hub_repo_id={REPO}",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    commit = json.loads(result.output[result.output.index("{") :])["hub_commit"]
    remote = fake_hub.repo("model", REPO).commits[commit]
    assert {"processor_config.json", "bpe_tokenizer/tokenizer.json", "metadata.json"} <= set(remote)

    local = FASTTokenizer.load(out)
    chunks = np.cumsum(np.random.default_rng(1).normal(size=(5, 4, 6)) * 0.2, axis=1)
    pulled = load_action_tokenizer(REPO)
    assert pulled.encode(chunks) == local.encode(chunks)
    assert (pulled.min_token, pulled.scale, pulled.time_horizon) == (local.min_token, 10.0, 4)
    assert (hub_env / "hub" / "models--alice--fast_sim_video" / "snapshots" / commit).is_dir()

    # Offline, the cached copy serves.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    requests = len(fake_hub.requests)
    assert load_action_tokenizer(REPO).encode(chunks) == local.encode(chunks)
    assert len(fake_hub.requests) == requests


def test_a_repo_that_is_not_there_is_named(fake_hub, hub_env: Path) -> None:
    with pytest.raises(RlctlError) as raised:
        load_action_tokenizer("alice/no_such_tokenizer")
    assert "alice/no_such_tokenizer" in f"{raised.value.message} {raised.value.where}"
