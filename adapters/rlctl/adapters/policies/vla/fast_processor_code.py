"""The FAST processor class as LeRobot loads it: copied into every tokenizer folder rlctl saves,
as `processing_action_tokenizer.py`, so that LeRobot 0.6.1's
`AutoProcessor.from_pretrained(folder, trust_remote_code=True)` reads rlctl's tokenizers.

rlctl itself never imports this file (`fast.FASTTokenizer` reads the same folder without running
code); it is written against LeRobot's environment (transformers 5, scipy, tokenizers) and
follows the interface LeRobot calls: `processor(chunks)` -> ids per chunk, `.decode(ids)`,
`.fit(chunks, scale=, vocab_size=, time_horizon=, action_dim=)`, `.bpe_tokenizer`, `.min_token`,
`.scale`, with the arithmetic of `fast.FASTTokenizer`.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np
from scipy.fft import dct, idct
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast
from transformers.processing_utils import ProcessorMixin


def _as_text(values: np.ndarray) -> str:
    return "".join(chr(int(v)) for v in values)


class UniversalActionProcessor(ProcessorMixin):  # type: ignore[misc]
    """DCT over time, scaled and rounded coefficients as characters, byte-level BPE over them."""

    attributes: ClassVar[list[str]] = ["bpe_tokenizer"]
    bpe_tokenizer_class: str = "AutoTokenizer"

    def __init__(
        self,
        bpe_tokenizer: Any,
        scale: float = 10,
        vocab_size: int = 1024,
        min_token: int = 0,
        *,
        action_dim: int | None = None,
        time_horizon: int | None = None,
    ) -> None:
        self.scale = scale
        self.vocab_size = vocab_size
        self.min_token = min_token
        self.action_dim = action_dim
        self.time_horizon = time_horizon
        super().__init__(bpe_tokenizer)

    def __call__(self, action_chunk: Any) -> list[list[int]]:
        chunks = np.asarray(action_chunk)
        if chunks.ndim == 2:
            chunks = chunks[None]
        if chunks.ndim != 3:
            raise ValueError(f"expected (batch, horizon, dim) chunks, got shape {chunks.shape}")
        self.time_horizon = self.time_horizon or chunks.shape[1]
        self.action_dim = self.action_dim or chunks.shape[2]
        coefficients = np.around(dct(chunks, axis=1, norm="ortho") * self.scale)
        ids = []
        for chunk in coefficients:
            text = _as_text(np.maximum(chunk.flatten() - self.min_token, 0))
            ids.append(self.bpe_tokenizer(text)["input_ids"])  # type: ignore[attr-defined]
        return ids

    def decode(
        self,
        tokens: list[list[int]],
        *,
        time_horizon: int | None = None,
        action_dim: int | None = None,
    ) -> np.ndarray:
        horizon = time_horizon or self.time_horizon
        dim = action_dim or self.action_dim
        if horizon is None or dim is None:
            raise ValueError("give time_horizon and action_dim (or encode a chunk first)")
        chunks = []
        for ids in tokens:
            try:
                text = self.bpe_tokenizer.decode(ids)  # type: ignore[attr-defined]
                coefficients = np.array([ord(c) for c in text]) + self.min_token
                coefficients = coefficients.reshape(horizon, dim)
            except Exception as error:
                logging.warning("action tokens that do not decode (%s): zeros", error)
                coefficients = np.zeros((horizon, dim))
            chunks.append(idct(coefficients / self.scale, axis=0, norm="ortho"))
        return np.stack(chunks)

    @classmethod
    def fit(
        cls,
        action_data: list[np.ndarray],
        scale: float = 10,
        vocab_size: int = 1024,
        *,
        time_horizon: int | None = None,
        action_dim: int | None = None,
    ) -> UniversalActionProcessor:
        flat = [dct(np.asarray(a), axis=0, norm="ortho").flatten() for a in action_data]
        rounded = np.around(np.concatenate(flat) * scale)
        low, high = int(rounded.min()), int(rounded.max())
        if high - low > vocab_size:
            raise ValueError(f"vocab_size {vocab_size} < the coefficients' range {high - low}")
        bpe = Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        bpe.post_processor = processors.ByteLevel(trim_offsets=False)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=2,
            show_progress=False,
            special_tokens=[],
            initial_alphabet=[chr(i) for i in range(high - low + 1)],
            max_token_length=10000,
        )
        texts = (_as_text(np.around(values * scale) - low) for values in flat)
        bpe.train_from_iterator(texts, trainer=trainer)
        return cls(
            PreTrainedTokenizerFast(tokenizer_object=bpe, clean_up_tokenization_spaces=False),
            scale=scale,
            vocab_size=vocab_size,
            min_token=low,
            time_horizon=time_horizon,
            action_dim=action_dim,
        )
