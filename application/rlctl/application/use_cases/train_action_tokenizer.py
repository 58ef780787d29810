"""TrainActionTokenizer: fit a FAST action tokenizer on a dataset's action chunks (LeRobot 0.6.1's
`lerobot-train-tokenizer`, setting for setting).

Per episode (the first `max_episodes`), every chunk of `action_horizon` consecutive actions; with
`use_relative_transform`, the `relative_dims` of each action minus the state at the chunk's first
frame; a `sample_fraction` of each episode's chunks (seeded by the episode index, as LeRobot
samples them); the `encoded_dims` kept; normalised with the dataset's action statistics
(`normalization_mode`); then the tokenizer is fitted (`ActionTokenizerFitter`), its compression
measured on at most 1,000 chunks, and saved with `metadata.json` into `output_dir` (pushed to the
Hub when asked). π0-FAST reads it with `--policy.action_tokenizer_name=<output_dir or repo id>`.

Unlike LeRobot, missing statistics for the chosen normalisation are an error, not a silent fit
on raw actions: the policy normalises the actions it tokenises, so a tokenizer fitted on raw
values would not fit them. An `output_dir` holding anything but an earlier tokenizer is refused.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import structlog

from rlctl.application.hub_cards import front_matter
from rlctl.application.ports.action_tokenizer import ActionTokenizerFitter, FittedActionTokenizer
from rlctl.application.ports.dataset import DatasetMetaReader
from rlctl.application.ports.dataset_tools import DatasetStatsAccess
from rlctl.application.ports.hub import Hub, PushRequest, RepoRef, check_repo_id, is_repo_id
from rlctl.domain.errors import ConfigError, InvalidInput

log = structlog.get_logger(__name__)

ACTION = "action"
STATE = "observation.state"
NORMALIZATION_MODES = ("MEAN_STD", "MIN_MAX", "QUANTILES", "QUANTILE10", "IDENTITY")
METADATA_FILE = "metadata.json"
# What a tokenizer folder holds: an output_dir holding only these may be written over.
TOKENIZER_FILES = frozenset(
    {"processor_config.json", "bpe_tokenizer", "processing_action_tokenizer.py", METADATA_FILE}
)
STATS_SAMPLE = 1000
EPS = 1e-8


@attrs.frozen(kw_only=True)
class TokenizerTrainingConfig:
    """LeRobot's `TokenizerTrainingConfig`, setting for setting (`repo_id`: the dataset's id,
    `root`: its folder; the command line also takes them as --dataset.repo_id / --dataset.root)."""

    repo_id: str | None = None
    root: str | None = None
    action_horizon: int = 10
    max_episodes: int | None = None
    sample_fraction: float = 0.1
    encoded_dims: str = "0:6,7:23"
    relative_dims: str | None = None
    use_relative_transform: bool = False
    state_key: str = STATE
    normalization_mode: str = "QUANTILES"
    vocab_size: int = 1024
    scale: float = 10.0
    output_dir: str | None = None
    push_to_hub: bool = False
    hub_repo_id: str | None = None
    hub_private: bool = False

    def check(self) -> None:
        if not (self.root or self.repo_id):
            raise ConfigError(
                "no dataset to fit the tokenizer on",
                where="dataset",
                hint="give --dataset.root=DIR (or --dataset.repo_id=USER/NAME)",
            )
        if self.action_horizon < 1:
            raise ConfigError("must be at least 1", where="action_horizon")
        if self.max_episodes is not None and self.max_episodes < 1:
            raise ConfigError(
                "must be at least 1 (or left out: every episode)", where="max_episodes"
            )
        if not 0 < self.sample_fraction <= 1:
            raise ConfigError(
                f"must be in (0, 1], got {self.sample_fraction}", where="sample_fraction"
            )
        if self.normalization_mode.upper() not in NORMALIZATION_MODES:
            raise ConfigError(
                f"unknown normalization_mode {self.normalization_mode!r}",
                where="normalization_mode",
                hint=f"one of {', '.join(NORMALIZATION_MODES)}",
            )
        if self.vocab_size < 2 or not self.scale > 0:
            raise ConfigError(
                f"vocab_size must be at least 2 and scale positive, got {self.vocab_size} and "
                f"{self.scale}",
                where="vocab_size" if self.vocab_size < 2 else "scale",
            )


@attrs.frozen
class TrainedTokenizer:
    output_dir: Path
    chunks: int
    metadata: dict[str, Any]
    hub_commit: str | None = None


def parse_ranges(text: str) -> list[tuple[int, int]]:
    """ "0:6,7:23" -> [(0, 6), (7, 23)]."""
    ranges = []
    for part in text.split(","):
        start, sep, end = part.strip().partition(":")
        if not sep or not start.strip().isdigit() or not end.strip().isdigit():
            raise ConfigError(
                f"cannot read {part.strip()!r} in encoded_dims {text!r}",
                where="encoded_dims",
                hint='write ranges of action dimensions as START:END, comma separated: "0:6,7:23"',
            )
        first, last = int(start), int(end)
        if last <= first:
            raise ConfigError(f"the range {part.strip()!r} is empty", where="encoded_dims")
        ranges.append((first, last))
    return ranges


def parse_dims(text: str | None) -> list[int] | None:
    if text is None or not text.strip():
        return None
    try:
        dims = [int(d.strip()) for d in text.split(",")]
    except ValueError as error:
        raise ConfigError(
            f"cannot read relative_dims {text!r}",
            where="relative_dims",
            hint='write action dimensions comma separated: "0,1,2"',
        ) from error
    negative = [d for d in dims if d < 0]
    if negative:
        raise ConfigError(
            f"action dimensions count from 0: {negative[0]} in relative_dims {text!r} is negative",
            where="relative_dims",
            hint='write action dimensions comma separated: "0,1,2"',
        )
    return dims


def episode_chunks(
    actions: np.ndarray,
    states: np.ndarray,
    horizon: int,
    relative_dims: list[int] | None,
    use_relative: bool,
) -> np.ndarray:
    """Every chunk of `horizon` actions (N, H, D); relative dims minus the chunk's first state."""
    starts = len(actions) - horizon + 1
    chunks = np.stack([actions[i : i + horizon] for i in range(starts)])
    if use_relative and relative_dims:
        chunks = chunks.copy()
        for dim in relative_dims:
            chunks[:, :, dim] = chunks[:, :, dim] - states[:starts, None, dim]
    return chunks


def _check_state(state_key: str, relative: Sequence[int], features: Mapping[str, Any]) -> None:
    """Relative actions are taken from the state: it must be there, and as wide as the
    dimensions made relative."""
    if state_key not in features:
        vectors = [
            key
            for key, spec in features.items()
            if key.startswith("observation.") and len(spec.shape) == 1
        ]
        raise ConfigError(
            f"the dataset has no {state_key!r} to make actions relative to",
            where="state_key",
            hint=f"name one of its features: {', '.join(vectors) or 'none'} (or drop "
            "--use_relative_transform)",
        )
    width = int(np.prod(features[state_key].shape))
    beyond = [d for d in relative if d >= width]
    if beyond:
        raise ConfigError(
            f"action dimension {beyond[0]} is made relative to {state_key}, which has "
            f"{width} dimension(s)",
            where="relative_dims",
            hint=f"name dimensions 0 to {width - 1} of the state" if width else None,
        )


def sample_chunks(chunks: np.ndarray, fraction: float, episode: int) -> np.ndarray:
    """LeRobot's sampling: max(1, int(n * fraction)) chunks, seeded by the episode index."""
    if fraction >= 1.0:
        return chunks
    count = max(1, int(len(chunks) * fraction))
    rng = np.random.RandomState(hash(episode) % (2**31))
    return chunks[rng.choice(len(chunks), size=count, replace=False)]


def normalize(data: np.ndarray, stats: Mapping[str, np.ndarray], mode: str) -> np.ndarray:
    """LeRobot's `apply_normalization` of the train-tokenizer script."""
    if mode == "IDENTITY":
        return data
    needed = {
        "MEAN_STD": ("mean", "std"),
        "MIN_MAX": ("min", "max"),
        "QUANTILES": ("q01", "q99"),
        "QUANTILE10": ("q10", "q90"),
    }[mode]
    missing = [name for name in needed if name not in stats]
    if missing:
        raise InvalidInput(
            f"{mode} normalisation needs the action statistics {', '.join(needed)}; the "
            f"dataset's stats.json lacks {', '.join(missing)}",
            where="meta/stats.json",
            hint="run `rlctl dataset recompute-stats ROOT`, or choose --normalization_mode to "
            "match the statistics the policy normalises its actions with",
        )
    low, high = stats[needed[0]], stats[needed[1]]
    if mode == "MEAN_STD":
        out: np.ndarray = (data - low) / np.maximum(high, EPS)
        return out
    if mode in ("QUANTILES", "QUANTILE10"):
        data = np.clip(data, low, high)
    scaled: np.ndarray = 2.0 * (data - low) / np.maximum(high - low, EPS) - 1.0
    return scaled


def compression_stats(tokenizer: FittedActionTokenizer, chunks: np.ndarray) -> dict[str, float]:
    size = min(STATS_SAMPLE, len(chunks))
    picked = chunks[np.random.RandomState(42).choice(len(chunks), size=size, replace=False)]
    lengths = np.array([len(tokenizer.encode(chunk[None])[0]) for chunk in picked])
    mean = float(np.mean(lengths))
    return {
        "compression_ratio": float(chunks.shape[1] * chunks.shape[2] / mean),
        "mean_token_length": mean,
        "p99_token_length": float(np.percentile(lengths, 99)),
        "min_token_length": float(np.min(lengths)),
        "max_token_length": float(np.max(lengths)),
    }


class TrainActionTokenizer:
    def __init__(
        self,
        meta_reader: DatasetMetaReader,
        stats_access: DatasetStatsAccess,
        fitter: ActionTokenizerFitter,
        hub: Hub | None = None,
    ) -> None:
        self._meta_reader = meta_reader
        self._access = stats_access
        self._fitter = fitter
        self._hub = hub

    def __call__(self, config: TokenizerTrainingConfig, location: str) -> TrainedTokenizer:
        """Fit on the dataset at `location` (its local root, resolved by the caller)."""
        config.check()
        mode = config.normalization_mode.upper()
        ranges = parse_ranges(config.encoded_dims)
        relative = parse_dims(config.relative_dims)
        if config.push_to_hub and config.hub_repo_id is not None:
            check_repo_id(config.hub_repo_id, where="hub_repo_id")
        output = self._output_dir(config)
        meta = self._meta_reader.read_meta(location)
        if ACTION not in meta.features:
            raise InvalidInput("the dataset has no 'action' feature", where=location)
        action_dim = int(np.prod(meta.features[ACTION].shape))
        dims = [d for start, end in ranges for d in range(start, end)]
        wrong = [d for d in [*dims, *(relative or [])] if d >= action_dim]
        if wrong:
            raise ConfigError(
                f"action dimension {wrong[0]} is beyond the dataset's {action_dim} action "
                "dimensions",
                where="relative_dims" if wrong[0] not in dims else "encoded_dims",
                hint=f'name dimensions 0 to {action_dim - 1}, e.g. --encoded_dims="0:{action_dim}"',
            )
        if config.use_relative_transform and relative:
            _check_state(config.state_key, relative, meta.features)
        chunks = self._chunks(config, location, meta, relative)
        encoded = np.concatenate([chunks[:, :, start:end] for start, end in ranges], axis=-1)
        encoded = self._normalized(encoded, meta.stats, dims, mode, location)
        log.info(
            "fitting the FAST tokenizer",
            chunks=len(encoded),
            shape=list(encoded.shape[1:]),
            vocab_size=config.vocab_size,
            scale=config.scale,
        )
        tokenizer = self._fitter.fit(encoded, scale=config.scale, vocab_size=config.vocab_size)
        stats = compression_stats(tokenizer, encoded)
        metadata = {
            "repo_id": config.repo_id or Path(location).name,
            "vocab_size": config.vocab_size,
            "scale": config.scale,
            "encoded_dims": config.encoded_dims,
            "encoded_dim_ranges": [list(r) for r in ranges],
            "total_encoded_dims": len(dims),
            "relative_dims": config.relative_dims,
            "relative_dim_list": relative,
            "use_relative_transform": config.use_relative_transform,
            "state_key": config.state_key,
            "normalization_mode": mode,
            "action_horizon": config.action_horizon,
            "num_training_chunks": len(encoded),
            "compression_stats": stats,
        }
        self._save(tokenizer, metadata, output)
        commit = self._push(config, output) if config.push_to_hub else None
        return TrainedTokenizer(output, len(encoded), metadata, commit)

    def _output_dir(self, config: TokenizerTrainingConfig) -> Path:
        name = config.repo_id or Path(config.root or "dataset").name
        output = Path(config.output_dir or f"fast_tokenizer_{name.replace('/', '_')}")
        output = output.expanduser()
        if output.exists():
            if not output.is_dir():
                raise InvalidInput("the output is a file", where=str(output))
            foreign = sorted(p.name for p in output.iterdir() if p.name not in TOKENIZER_FILES)
            if foreign:
                raise InvalidInput(
                    "the output folder holds files that are not a tokenizer's "
                    f"({', '.join(foreign[:5])})",
                    where=str(output),
                    hint="give an empty or new --output_dir (an earlier tokenizer's folder is "
                    "replaced)",
                )
        return output

    def _chunks(
        self,
        config: TokenizerTrainingConfig,
        location: str,
        meta: Any,
        relative: list[int] | None,
    ) -> np.ndarray:
        episodes = sorted(episode.index for episode in meta.episodes)
        if config.max_episodes is not None:
            episodes = episodes[: config.max_episodes]
        wanted = set(episodes)
        keys = [ACTION] + ([config.state_key] if config.state_key in meta.features else [])
        collected = []
        for episode, columns in self._access.numeric_columns(location, keys):
            if episode not in wanted:
                continue
            # LeRobot reads frames as float32 tensors.
            values = columns[ACTION]
            actions = np.asarray(values, dtype=np.float32).reshape(len(values), -1)
            if len(actions) < config.action_horizon:
                continue
            state = columns.get(config.state_key)
            states = (
                np.zeros_like(actions)
                if state is None
                else np.asarray(state, dtype=np.float32).reshape(len(state), -1)
            )
            chunks = episode_chunks(
                actions, states, config.action_horizon, relative, config.use_relative_transform
            )
            collected.append(sample_chunks(chunks, config.sample_fraction, episode))
        if not collected:
            raise InvalidInput(
                f"no episode has {config.action_horizon} frames, so no action chunk fits",
                where=location,
                hint="lower --action_horizon (or give more episodes)",
            )
        return np.concatenate(collected, axis=0)

    def _normalized(
        self,
        chunks: np.ndarray,
        stats: Mapping[str, Mapping[str, Any]] | None,
        dims: Sequence[int],
        mode: str,
        location: str,
    ) -> np.ndarray:
        if mode == "IDENTITY":
            return chunks
        action_stats = (stats or {}).get(ACTION)
        if not action_stats:
            raise InvalidInput(
                "the dataset has no action statistics to normalise the chunks with",
                where=f"{location}/meta/stats.json",
                hint="run `rlctl dataset recompute-stats ROOT`, or --normalization_mode=IDENTITY",
            )
        index = np.array(dims)
        picked = {}
        for name, values in action_stats.items():
            array = np.asarray(values, dtype=np.float64).reshape(-1)
            if len(array) > index.max():
                picked[name] = array[index]
        return normalize(chunks, picked, mode)

    def _save(self, tokenizer: FittedActionTokenizer, metadata: dict[str, Any], out: Path) -> None:
        staging = out.with_name(f".{out.name}.rlctl-tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        try:
            tokenizer.save(staging)
            (staging / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
            if out.exists():
                shutil.rmtree(out)
            staging.rename(out)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def _push(self, config: TokenizerTrainingConfig, folder: Path) -> str | None:
        if self._hub is None:
            raise ConfigError("pushing to the Hub needs a Hub adapter", where="push_to_hub")
        repo_id = config.hub_repo_id or folder.name
        check_repo_id(repo_id, where="hub_repo_id")
        dataset = config.repo_id if config.repo_id and is_repo_id(config.repo_id) else None
        header = front_matter(
            {
                "library_name": "lerobot",
                "tags": ["robotics", "fast", "action-tokenizer", "rlctl"],
                "datasets": [dataset] if dataset else None,
            }
        )
        card = header + (
            f"\n# FAST action tokenizer\n\nFitted on `{config.repo_id or folder.name}` "
            "by `rlctl train-tokenizer` (LeRobot's `lerobot-train-tokenizer` format); load it "
            f"with `--policy.action_tokenizer_name={repo_id}`.\n"
        )
        result = self._hub.push(
            PushRequest(
                repo=RepoRef(repo_id, "model"),
                folder=folder,
                card=card,
                commit_message=f"Upload FAST tokenizer trained on {config.repo_id or folder.name}",
                private=config.hub_private,
            )
        )
        return result.commit
