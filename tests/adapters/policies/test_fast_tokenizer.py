"""The FAST action tokenizer: fitted on chunks, it encodes them into few ids and decodes them back
within its rounding; saved, it is the folder LeRobot's processor reads; bad folders and bad
chunks get one clear error. (Its ids equal LeRobot's: test_pi0_fast_lerobot_interop.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tokenizers", reason="FAST needs the smolvla extra")

from rlctl.adapters.policies.vla.fast import FASTTokenizer, load_action_tokenizer
from rlctl.domain.errors import ConfigError, InvalidInput


def smooth_chunks(count: int, horizon: int = 10, dim: int = 3, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(count, horizon, dim)) * 0.2, axis=1)


@pytest.fixture(scope="module")
def fitted() -> FASTTokenizer:
    return FASTTokenizer.fit(list(smooth_chunks(300)), scale=10.0, vocab_size=400)


def test_chunks_come_back_within_the_rounding_in_fewer_tokens(fitted: FASTTokenizer) -> None:
    chunks = smooth_chunks(20)
    ids = fitted.encode(chunks)
    assert len(ids) == 20
    assert np.mean([len(i) for i in ids]) < chunks.shape[1] * chunks.shape[2]
    back = np.stack([fitted.decode(i, 10, 3) for i in ids])
    # Each coefficient is off by at most half a step (0.05); the orthonormal inverse DCT keeps
    # the error's norm.
    assert np.linalg.norm(back - chunks, axis=(1, 2)).max() <= 0.05 * np.sqrt(30) + 1e-9


def test_a_saved_tokenizer_is_lerobots_folder_and_loads_back(
    fitted: FASTTokenizer, tmp_path: Path
) -> None:
    folder = fitted.save(tmp_path / "fast")
    config = json.loads((folder / "processor_config.json").read_text())
    assert config["auto_map"] == {
        "AutoProcessor": "processing_action_tokenizer.UniversalActionProcessor"
    }
    assert config["min_token"] == fitted.min_token and config["vocab_size"] == 400
    assert (folder / "bpe_tokenizer" / "tokenizer.json").is_file()
    assert (
        "class UniversalActionProcessor" in (folder / "processing_action_tokenizer.py").read_text()
    )
    loaded = load_action_tokenizer(str(folder))
    chunks = smooth_chunks(5, seed=9)
    assert loaded.encode(chunks) == fitted.encode(chunks)


def test_the_older_flat_layout_loads_and_no_python_in_the_folder_runs(
    fitted: FASTTokenizer, tmp_path: Path
) -> None:
    folder = fitted.save(tmp_path / "fast")
    (folder / "bpe_tokenizer" / "tokenizer.json").rename(folder / "tokenizer.json")
    (folder / "processing_action_tokenizer.py").write_text("raise SystemExit('ran')\n")
    chunks = smooth_chunks(3, seed=2)
    assert FASTTokenizer.load(folder).encode(chunks) == fitted.encode(chunks)


def test_sequences_of_the_wrong_length_or_unknown_ids_still_decode(
    fitted: FASTTokenizer,
) -> None:
    ids = fitted.encode(smooth_chunks(1))[0]
    assert fitted.decode(ids[:2], 10, 3).shape == (10, 3)
    assert fitted.decode(ids + ids, 10, 3).shape == (10, 3)
    # Negative ids (a text token mapped back) do not decode: a chunk of zeros, as LeRobot's.
    assert not fitted.decode([-5, *ids], 10, 3).any()


def test_a_vocabulary_too_small_for_the_coefficients_is_refused() -> None:
    with pytest.raises(ConfigError, match="vocab_size 20 is smaller") as caught:
        FASTTokenizer.fit(list(smooth_chunks(50) * 10), scale=10.0, vocab_size=20)
    assert "raise vocab_size" in (caught.value.hint or "")


def test_chunks_with_nan_or_none_at_all_are_refused(fitted: FASTTokenizer) -> None:
    broken = smooth_chunks(4)
    broken[1, 2, 0] = np.nan
    with pytest.raises(InvalidInput, match="NaN"):
        FASTTokenizer.fit(list(broken))
    with pytest.raises(InvalidInput, match="NaN"):
        fitted.encode(broken)
    with pytest.raises(InvalidInput, match="no action chunk"):
        FASTTokenizer.fit([])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (None, "processor_config.json is missing"),
        ({"scale": -1}, "scale=-1"),
        ({"min_token": "low"}, "min_token='low'"),
        ({"vocab_size": 1.5}, "vocab_size=1.5"),
    ],
)
def test_a_broken_folder_is_named(
    fitted: FASTTokenizer, tmp_path: Path, change: dict | None, message: str
) -> None:
    folder = fitted.save(tmp_path / "fast")
    config_file = folder / "processor_config.json"
    if change is None:
        config_file.unlink()
    else:
        config_file.write_text(json.dumps({**json.loads(config_file.read_text()), **change}))
    with pytest.raises(ConfigError, match=message):
        load_action_tokenizer(str(folder))


def test_a_name_that_is_neither_a_folder_nor_a_repo_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="neither a folder nor a Hub repo id") as caught:
        load_action_tokenizer(str(tmp_path / "missing" / "deeper" / "fast"))
    assert "rlctl train-tokenizer" in (caught.value.hint or "")
