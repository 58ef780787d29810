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
