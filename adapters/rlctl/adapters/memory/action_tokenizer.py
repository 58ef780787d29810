"""An action tokenizer without a BPE: one id per scaled, rounded action value (a dry run of
`rlctl train-tokenizer`, and the fake of the `ActionTokenizerFitter` port)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


class RoundingTokenizer:
    def __init__(self, scale: float, low: int) -> None:
        self.scale = scale
        self.low = low

    def encode(self, chunks: np.ndarray) -> list[list[int]]:
        values = np.around(np.asarray(chunks) * self.scale) - self.low
        return [[int(v) for v in chunk.flatten()] for chunk in values]

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        config = {"scale": self.scale, "min_token": self.low}
        (folder / "processor_config.json").write_text(json.dumps(config))
        return folder


class RoundingTokenizerFitter:
    def fit(self, chunks: np.ndarray, *, scale: float, vocab_size: int) -> RoundingTokenizer:
        return RoundingTokenizer(scale, int(np.around(np.asarray(chunks) * scale).min()))
