"""Fitting an action tokenizer (FAST: a DCT, then a byte-pair encoding) on action chunks."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np


class FittedActionTokenizer(Protocol):
    def encode(self, chunks: np.ndarray) -> list[list[int]]:
        """(N, H, D) chunks -> the ids of each (their number varies)."""
        ...

    def save(self, folder: Path) -> Path:
        """Write the tokenizer's folder (what a policy loads it from)."""
        ...


class ActionTokenizerFitter(Protocol):
    def fit(self, chunks: np.ndarray, *, scale: float, vocab_size: int) -> FittedActionTokenizer:
        """A tokenizer fitted on (N, H, D) normalised chunks."""
        ...
