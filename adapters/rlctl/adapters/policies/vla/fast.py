"""FAST (Pertsch et al. 2025): action chunks as a few discrete tokens, by DCT then BPE.

    chunk (H, D) ─► DCT-II over time (orthonormal) ─► times scale, rounded ─► minus min_token
        ─► one character per coefficient (time-major: t0d0 t0d1 … t1d0 …) ─► byte-level BPE ─► ids

The BPE is `tokenizers`' byte-level BPE trained with every coefficient value seen as its initial
alphabet (`fit`), exactly as the tokenizer LeRobot 0.6.1 loads (`lerobot/fast-action-tokenizer`,
physical-intelligence's `UniversalActionProcessor`) builds it, so the same chunks give the same
ids. Decoding reads the ids back into characters, coefficients and, by the inverse DCT, actions;
a sequence of the wrong length is padded or cut to (H, D) (LeRobot's relaxed decoding), and one
that cannot be read decodes as zeros, with a warning.

On disk a tokenizer is the folder transformers 5 writes for LeRobot's processor:

    processor_config.json            scale, vocab_size, min_token, time_horizon, action_dim,
                                     auto_map
    bpe_tokenizer/tokenizer.json     the BPE (tokenizers' format)
    bpe_tokenizer/tokenizer_config.json
    processing_action_tokenizer.py   the processor class LeRobot's AutoProcessor imports
                                     (`fast_processor_code.py`, rlctl's own; rlctl never runs it)

A folder with `tokenizer.json` at its top (the layout physical-intelligence/fast was published in)
loads too. `load_action_tokenizer` takes a folder or a Hub repo id (fetched through rlctl's Hub
adapter into the Hub cache).
"""

from __future__ import annotations

import importlib
import json
import math
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from rlctl.domain.errors import ConfigError, InvalidInput

log = structlog.get_logger(__name__)

PROCESSOR_CONFIG = "processor_config.json"
BPE_FOLDER = "bpe_tokenizer"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
REMOTE_CODE = "processing_action_tokenizer.py"
PROCESSOR_CLASS = "UniversalActionProcessor"
AUTO_MAP = {"AutoProcessor": f"processing_action_tokenizer.{PROCESSOR_CLASS}"}
# What transformers 5.5 writes beside the BPE (LeRobot's environment), so LeRobot reads it back.
BPE_TOKENIZER_CONFIG = {
    "auto_map": AUTO_MAP,
    "backend": "tokenizers",
    "clean_up_tokenization_spaces": False,
    "model_max_length": 1000000000000000019884624838656,
    "processor_class": PROCESSOR_CLASS,
    "tokenizer_class": "TokenizersBackend",
}
# The largest code point a character can carry.
MAX_CODE_POINT = 0x10FFFF


def _library(module: str, name: str) -> Any:
    """`module`, imported when first needed; both come with the smolvla extra."""
    try:
        return importlib.import_module(module)
    except ImportError as err:  # pragma: no cover - installed with the smolvla extra
        raise ConfigError(
            f"the FAST action tokenizer needs {name}",
            hint="install rlctl-adapters[smolvla]",
        ) from err


def _scipy_fft() -> Any:
    return _library("scipy.fft", "scipy")


def _tokenizers() -> Any:
    return _library("tokenizers", "the tokenizers library")


def dct_coefficients(chunk: np.ndarray, axis: int) -> np.ndarray:
    """The orthonormal DCT-II along `axis` (time), in the chunk's own precision (scipy's)."""
    out: np.ndarray = _scipy_fft().dct(chunk, axis=axis, norm="ortho")
    return out


def inverse_dct(coefficients: np.ndarray) -> np.ndarray:
    out: np.ndarray = _scipy_fft().idct(coefficients, axis=0, norm="ortho")
    return out


def _symbols(values: np.ndarray) -> str:
    """Non-negative integer coefficients as one character each."""
    if values.size and int(values.max()) > MAX_CODE_POINT:
        raise InvalidInput(
            f"an action chunk's DCT coefficient ({int(values.max())}) is beyond what the FAST "
            "tokenizer can write",
            where="action",
            hint="normalise the actions before tokenising them (the policy's normaliser does), "
            "or fit the tokenizer with a smaller scale",
        )
    return "".join(map(chr, values.astype(int)))


class FASTTokenizer:
    """A fitted FAST tokenizer: `encode` chunks into ids, `decode` ids into a chunk."""

    def __init__(
        self,
        bpe: Any,
        *,
        scale: float = 10.0,
        vocab_size: int = 1024,
        min_token: int = 0,
        time_horizon: int | None = None,
        action_dim: int | None = None,
    ) -> None:
        self.bpe = bpe  # a tokenizers.Tokenizer
        self.scale = scale
        self.vocab_size = vocab_size
        self.min_token = min_token
        self.time_horizon = time_horizon
        self.action_dim = action_dim

    # -- fitting -------------------------------------------------------------------------------

    @classmethod
    def fit(
        cls,
        chunks: Sequence[np.ndarray] | np.ndarray,
        *,
        scale: float = 10.0,
        vocab_size: int = 1024,
        time_horizon: int | None = None,
        action_dim: int | None = None,
    ) -> FASTTokenizer:
        """Train the BPE on `chunks` (each (H, D), normalised as the policy will see them)."""
        if len(chunks) == 0:
            raise InvalidInput(
                "no action chunk to fit the FAST tokenizer on",
                where="dataset",
                hint="give a dataset whose episodes are at least action_horizon frames long",
            )
        if not (math.isfinite(scale) and scale > 0):
            raise ConfigError(f"scale must be a positive number, got {scale}", where="scale")
        coefficients = [dct_coefficients(np.asarray(c), axis=0).flatten() for c in chunks]
        everything = np.around(np.concatenate(coefficients) * scale)
        if not np.all(np.isfinite(everything)):
            raise InvalidInput(
                "the action chunks hold NaN or infinite values",
                where="action",
                hint="check the dataset's actions (and its statistics: a zero std or range)",
            )
        max_token, min_token = int(everything.max()), int(everything.min())
        span = max_token - min_token
        if span > vocab_size:
            raise ConfigError(
                f"vocab_size {vocab_size} is smaller than the {span} values the scaled DCT "
                "coefficients take",
                where="vocab_size",
                hint=f"raise vocab_size above {span + 100}, or lower scale",
            )
        if span + 100 > vocab_size:
            log.warning(
                "the coefficients' alphabet is almost as large as the vocabulary",
                alphabet=span,
                vocab_size=vocab_size,
                hint="consider a larger vocab_size",
            )

        def symbols() -> Iterator[str]:
            for values in coefficients:
                yield _symbols(np.around(values * scale) - min_token)

        bpe = _new_byte_level_bpe()
        trainer = _tokenizers().trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=2,
            show_progress=False,
            special_tokens=[],
            initial_alphabet=[chr(i) for i in range(span + 1)],
            max_token_length=10000,
        )
        bpe.train_from_iterator(symbols(), trainer=trainer)
        return cls(
            bpe,
            scale=scale,
            vocab_size=vocab_size,
            min_token=min_token,
            time_horizon=time_horizon,
            action_dim=action_dim,
        )

    # -- encoding and decoding -------------------------------------------------------------------

    def encode(self, chunks: np.ndarray) -> list[list[int]]:
        """(H, D) or (B, H, D) chunks -> one list of ids per chunk (lengths vary)."""
        array = np.asarray(chunks)
        if array.ndim == 2:
            array = array[None]
        if array.ndim != 3:
            raise InvalidInput(
                f"the FAST tokenizer encodes (horizon, dim) chunks, got shape {array.shape}",
                where="action",
            )
        if not np.all(np.isfinite(array)):
            raise InvalidInput("an action chunk holds NaN or infinite values", where="action")
        coefficients = np.around(dct_coefficients(array, axis=1) * self.scale)
        return [
            self.bpe.encode(_symbols(np.maximum(c.flatten() - self.min_token, 0))).ids
            for c in coefficients
        ]

    def decode(self, ids: Sequence[int], time_horizon: int, action_dim: int) -> np.ndarray:
        """The (time_horizon, action_dim) chunk `ids` stand for: LeRobot's relaxed decoding
        (coefficients padded with zeros or cut to the chunk's size); ids that do not decode
        give a chunk of zeros, with a warning."""
        size = time_horizon * action_dim
        try:
            text = self.bpe.decode([int(i) for i in ids], skip_special_tokens=False)
            coefficients = np.array([ord(c) for c in text]) + self.min_token
            if len(coefficients) > size:
                coefficients = coefficients[:size]
            elif len(coefficients) < size:
                coefficients = np.pad(coefficients, (0, size - len(coefficients)))
            coefficients = coefficients.reshape(time_horizon, action_dim)
        except Exception as error:  # LeRobot's fallback: whatever fails, a chunk of zeros
            log.warning("action tokens that do not decode: a chunk of zeros", error=str(error))
            coefficients = np.zeros((time_horizon, action_dim))
        return inverse_dct(coefficients / self.scale)

    # -- files ---------------------------------------------------------------------------------

    def processor_config(self) -> dict[str, Any]:
        return {
            "action_dim": self.action_dim,
            "auto_map": AUTO_MAP,
            "min_token": self.min_token,
            "processor_class": PROCESSOR_CLASS,
            "scale": self.scale,
            "time_horizon": self.time_horizon,
            "vocab_size": self.vocab_size,
        }

    def save(self, folder: str | Path) -> Path:
        """Write the folder LeRobot's `AutoProcessor.from_pretrained(..., trust_remote_code=True)`
        and `load_action_tokenizer` read."""
        out = Path(folder)
        (out / BPE_FOLDER).mkdir(parents=True, exist_ok=True)
        _write_json(out / PROCESSOR_CONFIG, self.processor_config())
        self.bpe.save(str(out / BPE_FOLDER / TOKENIZER_FILE))
        _write_json(out / BPE_FOLDER / TOKENIZER_CONFIG, BPE_TOKENIZER_CONFIG)
        shutil.copyfile(Path(__file__).with_name("fast_processor_code.py"), out / REMOTE_CODE)
        return out

    @classmethod
    def load(cls, folder: str | Path) -> FASTTokenizer:
        """A saved tokenizer folder (never runs the Python file it may hold)."""
        root = Path(folder)
        where = str(root)
        config = _read_json(root / PROCESSOR_CONFIG, where)
        bpe_file = next(
            (p for p in (root / BPE_FOLDER / TOKENIZER_FILE, root / TOKENIZER_FILE) if p.is_file()),
            None,
        )
        if bpe_file is None:
            raise ConfigError(
                f"the FAST tokenizer folder has no {BPE_FOLDER}/{TOKENIZER_FILE}",
                where=where,
                hint="give a folder written by `rlctl train-tokenizer` or LeRobot's "
                "lerobot-train-tokenizer",
            )
        try:
            bpe = _tokenizers().Tokenizer.from_file(str(bpe_file))
        except Exception as error:
            raise ConfigError(
                f"cannot read the FAST tokenizer's BPE: {error}", where=str(bpe_file)
            ) from error
        return cls(
            bpe,
            scale=_number(config, "scale", where, float, positive=True),
            vocab_size=_number(config, "vocab_size", where, int, positive=True, default=1024),
            min_token=_number(config, "min_token", where, int, default=0),
            time_horizon=_optional_int(config, "time_horizon", where),
            action_dim=_optional_int(config, "action_dim", where),
        )


class FASTFitter:
    """The `ActionTokenizerFitter` port: `FASTTokenizer.fit` over (N, H, D) chunks."""

    def fit(self, chunks: np.ndarray, *, scale: float, vocab_size: int) -> FASTTokenizer:
        array = np.asarray(chunks)
        return FASTTokenizer.fit(
            list(array),
            scale=scale,
            vocab_size=vocab_size,
            time_horizon=int(array.shape[1]),
            action_dim=int(array.shape[2]),
        )


def _new_byte_level_bpe() -> Any:
    """An empty byte-level BPE, set up as `tokenizers.ByteLevelBPETokenizer()` sets it up."""
    tk = _tokenizers()
    bpe = tk.Tokenizer(tk.models.BPE())
    bpe.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tk.decoders.ByteLevel()
    bpe.post_processor = tk.processors.ByteLevel(trim_offsets=False)
    return bpe


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _read_json(path: Path, where: str) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(
            f"not a FAST tokenizer folder: {path.name} is missing",
            where=where,
            hint="give a folder written by `rlctl train-tokenizer` (or LeRobot's), or a Hub repo "
            "id holding one",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"cannot read {path.name}: {error}", where=str(path)) from error
    if not isinstance(data, dict):
        raise ConfigError(f"{path.name} must hold a JSON object", where=str(path))
    return data


def _number(
    config: dict[str, Any],
    key: str,
    where: str,
    kind: type[int] | type[float],
    *,
    positive: bool = False,
    default: float | None = None,
) -> Any:
    value: Any = config.get(key, default)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and kind is int:
        ok = float(value).is_integer()
    if ok:
        ok = math.isfinite(value) and (value > 0 if positive else True)
    if not ok:
        raise ConfigError(
            f"{PROCESSOR_CONFIG} has {key}={value!r}; expected "
            f"{'a positive ' if positive else 'an '}{kind.__name__}",
            where=f"{where}/{PROCESSOR_CONFIG}",
        )
    return kind(value)


def _optional_int(config: dict[str, Any], key: str, where: str) -> int | None:
    if config.get(key) is None:
        return None
    value: int = _number(config, key, where, int, positive=True)
    return value


def load_action_tokenizer(name: str, *, revision: str | None = None) -> FASTTokenizer:
    """A FAST tokenizer from a folder, or from a Hub repo id (fetched into the Hub cache)."""
    path = Path(name).expanduser()
    if path.is_dir():
        return FASTTokenizer.load(path)
    from rlctl.application.ports.hub import is_repo_id

    if not is_repo_id(name):
        raise ConfigError(
            f"the FAST tokenizer {name!r} is neither a folder nor a Hub repo id",
            where="policy.action_tokenizer_name",
            hint="fit one with `rlctl train-tokenizer --dataset.root=DIR --output_dir=OUT` and "
            "give OUT, or a Hub repo id (user/name)",
        )
    from rlctl.adapters.hub.huggingface import HuggingFaceHub
    from rlctl.application.ports.hub import RepoRef

    snapshot = HuggingFaceHub().download(RepoRef(name, "model", revision))
    return FASTTokenizer.load(snapshot.root)
