"""The tiny SmolVLM folder SmolVLA tests build on (see tiny_smolvlm.py), made once per session."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

TINY_SMOLVLM_SCRIPT = Path(__file__).with_name("tiny_smolvlm.py")


@pytest.fixture(scope="session")
def tiny_smolvlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers", reason="SmolVLA needs the smolvla extra")
    write = runpy.run_path(str(TINY_SMOLVLM_SCRIPT))["write_tiny_smolvlm"]
    folder: Path = write(tmp_path_factory.mktemp("smolvlm") / "vlm")
    return folder


TINY_PALIGEMMA_TOKENIZER_SCRIPT = Path(__file__).with_name("tiny_paligemma_tokenizer.py")


@pytest.fixture(scope="session")
def tiny_paligemma_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers", reason="π0 needs the smolvla extra")
    write = runpy.run_path(str(TINY_PALIGEMMA_TOKENIZER_SCRIPT))["write_tiny_paligemma_tokenizer"]
    folder: Path = write(tmp_path_factory.mktemp("paligemma") / "tokenizer")
    return folder


@pytest.fixture
def tiny_paligemma_tokenizer(
    tiny_paligemma_tokenizer_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """PaliGemma's tokenizer name (what π0's processors write) read from the tiny local folder,
    as if it were in the Hub cache."""
    from rlctl.adapters.policies.vla import tokenizer

    load = tokenizer.load_tokenizer

    def local(name: str, **options: object) -> object:
        return load(
            str(tiny_paligemma_tokenizer_dir) if name == tokenizer.PALIGEMMA_TOKENIZER else name,
            **options,
        )

    monkeypatch.setattr(tokenizer, "load_tokenizer", local)
    return tiny_paligemma_tokenizer_dir


@pytest.fixture(scope="session")
def tiny_fast_text_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny PaliGemma tokenizer with 704 reserved ids after its 320 (1024 in all), where
    π0-FAST writes its action tokens."""
    pytest.importorskip("transformers", reason="π0-FAST needs the smolvla extra")
    write = runpy.run_path(str(TINY_PALIGEMMA_TOKENIZER_SCRIPT))["write_tiny_paligemma_tokenizer"]
    folder: Path = write(tmp_path_factory.mktemp("paligemma_fast") / "tokenizer", 704)
    return folder


@pytest.fixture
def tiny_fast_text_tokenizer(
    tiny_fast_text_tokenizer_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """PaliGemma's tokenizer name read from `tiny_fast_text_tokenizer_dir`."""
    from rlctl.adapters.policies.vla import tokenizer

    load = tokenizer.load_tokenizer

    def local(name: str, **options: object) -> object:
        folder = tiny_fast_text_tokenizer_dir
        return load(str(folder) if name == tokenizer.PALIGEMMA_TOKENIZER else name, **options)

    monkeypatch.setattr(tokenizer, "load_tokenizer", local)
    return tiny_fast_text_tokenizer_dir


@pytest.fixture(scope="session")
def tiny_fast_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A FAST tokenizer fitted on smooth random chunks of 4 steps of 3 actions (normalised)."""
    pytest.importorskip("tokenizers", reason="π0-FAST needs the smolvla extra")
    import numpy as np

    from rlctl.adapters.policies.vla.fast import FASTTokenizer

    rng = np.random.default_rng(0)
    chunks = np.cumsum(rng.normal(size=(300, 4, 3)) * 0.3, axis=1)
    folder = tmp_path_factory.mktemp("fast") / "tokenizer"
    FASTTokenizer.fit(list(chunks), scale=10.0, vocab_size=300).save(folder)
    return folder


TINY_CLIP_SCRIPT = Path(__file__).with_name("tiny_clip.py")


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny CLIP folder (config, weights, tokenizer; see tiny_clip.py), made once per session."""
    pytest.importorskip("transformers", reason="the multi-task DiT needs the smolvla extra")
    write = runpy.run_path(str(TINY_CLIP_SCRIPT))["write_tiny_clip"]
    folder: Path = write(tmp_path_factory.mktemp("mtdit") / "tiny-clip")
    return folder


TINY_XVLA_SCRIPT = Path(__file__).with_name("tiny_xvla.py")


@pytest.fixture(scope="session")
def tiny_bart_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BART-style tokenizer folder (X-VLA's `tokenizer_name`), made once per session."""
    pytest.importorskip("transformers", reason="X-VLA needs transformers")
    write = runpy.run_path(str(TINY_XVLA_SCRIPT))["write_tiny_bart_tokenizer"]
    folder: Path = write(tmp_path_factory.mktemp("bart") / "tokenizer")
    return folder


TINY_GROOT_SCRIPT = Path(__file__).with_name("tiny_groot.py")


@pytest.fixture(scope="session")
def tiny_groot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GR00T N1.7 base model (config, no weights) and its Qwen3-VL backbone folder."""
    pytest.importorskip("transformers", reason="GR00T needs the smolvla extra")
    write = runpy.run_path(str(TINY_GROOT_SCRIPT))["write_tiny_groot"]
    folder: Path = write(tmp_path_factory.mktemp("groot") / "tiny")
    return folder


@pytest.fixture
def tiny_groot(tiny_groot_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny GR00T folder, with Cosmos-Reason2's Hub name (what LeRobot's GR00T processors
    write) read from its backbone folder, as if from the Hub cache."""
    from rlctl.adapters.policies.vla import groot_processors

    load = groot_processors.load_vlm_processor
    backbone = str(tiny_groot_dir / "backbone")

    def local(name: str) -> object:
        return load(backbone if name == "nvidia/Cosmos-Reason2-2B" else name)

    monkeypatch.setattr(groot_processors, "load_vlm_processor", local)
    return tiny_groot_dir
