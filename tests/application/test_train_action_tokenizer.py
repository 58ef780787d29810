"""`TrainActionTokenizer` through the container, on in-memory datasets and a rounding tokenizer:
the chunks it fits on are LeRobot's (`lerobot-train-tokenizer`: sliding windows per episode,
relative to the chunk's first state, sampled per episode with the episode's seed, encoded
dimensions kept, normalised), the folder it writes, the Hub push, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import numpy as np
import pytest
from dependency_injector import providers

from rlctl.adapters.memory.action_tokenizer import RoundingTokenizerFitter
from rlctl.adapters.memory.dataset_store import InMemoryDatasetStore
from rlctl.adapters.memory.dataset_tools import InMemoryStatsAccess
from rlctl.adapters.memory.hub import InMemoryHub
from rlctl.application.use_cases.train_action_tokenizer import TokenizerTrainingConfig
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.features import features_from_info
from rlctl.entrypoints.container import build_container
from rlctl.entrypoints.settings import AppSettings, DatasetSettings

LOCATION = "mem://cubes"
DIM = 4
LENGTHS = (12, 3, 9)  # the second episode is shorter than the horizon: no chunk
STATS = {
    "mean": [0.5, -1.0, 2.0, 0.0],
    "std": [2.0, 0.5, 1.0, 4.0],
    "q01": [-3.0, -2.0, 0.0, -1.0],
    "q99": [3.0, 0.0, 4.0, 1.0],
}


class RecordingFitter(RoundingTokenizerFitter):
    def __init__(self) -> None:
        self.chunks: np.ndarray | None = None

    def fit(self, chunks, *, scale, vocab_size):  # type: ignore[no-untyped-def]
        self.chunks = np.asarray(chunks)
        return super().fit(chunks, scale=scale, vocab_size=vocab_size)


def episodes_data(seed: int = 0) -> dict[int, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return {
        index: {
            "action": rng.normal(size=(n, DIM)).astype(np.float32),
            "observation.state": rng.normal(size=(n, DIM)).astype(np.float32),
        }
        for index, n in enumerate(LENGTHS)
    }


def meta(stats: dict | None = STATS) -> DatasetMeta:
    episodes, start = [], 0
    for index, n in enumerate(LENGTHS):
        episodes.append(EpisodeRecord(index, n, ("stack",), start, start + n))
        start += n
    vector = {"dtype": "float32", "shape": [DIM], "names": None}
    return DatasetMeta(
        codebase_version="v3.0",
        fps=10,
        features=features_from_info({"action": vector, "observation.state": vector}),
        total_episodes=len(episodes),
        total_frames=start,
        tasks=("stack",),
        episodes=tuple(episodes),
        stats={"action": stats} if stats is not None else None,
    )


class Setup:
    def __init__(self, tmp_path: Path, stats: dict | None = STATS) -> None:
        self.data = episodes_data()
        store = InMemoryDatasetStore()
        store.add(LOCATION, meta(stats))
        self.fitter = RecordingFitter()
        self.hub = InMemoryHub(tmp_path / "hub")
        container = build_container(AppSettings(dataset=DatasetSettings(store="memory")))
        container.meta_reader.override(providers.Object(store))
        container.dataset_stats_access.override(
            providers.Object(InMemoryStatsAccess({LOCATION: self.data}))
        )
        container.action_tokenizer_fitter.override(providers.Object(self.fitter))
        container.hub.override(providers.Object(self.hub))
        self.use_case = container.train_action_tokenizer()
        self.out = tmp_path / "tokenizer"

    def run(self, **settings):  # type: ignore[no-untyped-def]
        config = TokenizerTrainingConfig(root=LOCATION, output_dir=str(self.out), **settings)
        return self.use_case(config, LOCATION)


def lerobot_chunks(data, horizon, relative_dims, fraction, dims):  # type: ignore[no-untyped-def]
    """LeRobot's `process_episode` then the encoded dimensions, written out plainly."""
    collected = []
    for episode, columns in data.items():
        actions, states = columns["action"], columns["observation.state"]
        if len(actions) < horizon:
            continue
        chunks = []
        for i in range(len(actions) - horizon + 1):
            chunk = actions[i : i + horizon].copy()
            for t in range(horizon):
                for d in relative_dims:
                    chunk[t, d] = actions[i + t, d] - states[i, d]
            chunks.append(chunk)
        chunks = np.array(chunks)
        if fraction < 1.0:
            count = max(1, int(len(chunks) * fraction))
            rng = np.random.RandomState(hash(episode) % (2**31))
            chunks = chunks[rng.choice(len(chunks), size=count, replace=False)]
        collected.append(chunks)
    return np.concatenate(collected)[:, :, dims]


def test_fits_on_lerobots_chunks_relative_sampled_and_normalised(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    result = setup.run(
        action_horizon=4,
        encoded_dims="0:2,3:4",
        relative_dims="0,1",
        use_relative_transform=True,
        sample_fraction=0.5,
        normalization_mode="MEAN_STD",
    )
    dims = [0, 1, 3]
    expected = lerobot_chunks(setup.data, 4, [0, 1], 0.5, dims)
    mean, std = np.array(STATS["mean"])[dims], np.array(STATS["std"])[dims]
    assert setup.fitter.chunks is not None
    np.testing.assert_allclose(setup.fitter.chunks, (expected - mean) / std, rtol=1e-6)
    # Episodes 0 (9 windows, 4 kept) and 2 (6 windows, 3 kept).
    assert result.chunks == len(expected) == 7
    written = json.loads((setup.out / "metadata.json").read_text())
    assert written["encoded_dim_ranges"] == [[0, 2], [3, 4]]
    assert written["total_encoded_dims"] == 3 and written["relative_dim_list"] == [0, 1]
    assert written["normalization_mode"] == "MEAN_STD" and written["num_training_chunks"] == 7
    assert written["compression_stats"]["mean_token_length"] == 12.0  # one id per value
    assert (setup.out / "processor_config.json").is_file()


def test_quantiles_clip_and_max_episodes_keeps_the_first(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    setup.run(action_horizon=3, encoded_dims="0:4", sample_fraction=1.0, max_episodes=1)
    low, high = np.array(STATS["q01"]), np.array(STATS["q99"])
    raw = lerobot_chunks({0: setup.data[0]}, 3, [], 1.0, [0, 1, 2, 3])
    expected = 2 * (np.clip(raw, low, high) - low) / (high - low) - 1
    assert setup.fitter.chunks is not None
    np.testing.assert_allclose(setup.fitter.chunks, expected, rtol=1e-6, atol=1e-7)
    assert setup.fitter.chunks.min() >= -1 and setup.fitter.chunks.max() <= 1


def test_pushes_the_folder_to_the_hub(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    result = setup.run(
        action_horizon=3, encoded_dims="0:4", push_to_hub=True, hub_repo_id="alice/fast_cubes"
    )
    repo = setup.hub.repos[("model", "alice/fast_cubes")]
    files = repo.commits[result.hub_commit]
    assert {"processor_config.json", "metadata.json", "README.md"} <= set(files)
    assert b"--policy.action_tokenizer_name=alice/fast_cubes" in files["README.md"]


@pytest.mark.parametrize(
    ("settings", "error", "where"),
    [
        ({"encoded_dims": "0:6"}, ConfigError, "encoded_dims"),
        ({"encoded_dims": "0-4"}, ConfigError, "encoded_dims"),
        ({"encoded_dims": "0:4", "relative_dims": "0,9"}, ConfigError, "relative_dims"),
        ({"encoded_dims": "0:4", "relative_dims": "-1"}, ConfigError, "relative_dims"),
        ({"encoded_dims": "0:4", "action_horizon": 40}, InvalidInput, LOCATION),
        ({"encoded_dims": "0:4", "normalization_mode": "ZSCORE"}, ConfigError, "normalization"),
        ({"encoded_dims": "0:4", "sample_fraction": 0.0}, ConfigError, "sample_fraction"),
        ({"encoded_dims": "0:4", "push_to_hub": True, "hub_repo_id": "no"}, Exception, "hub"),
    ],
)
def test_bad_settings_are_named(tmp_path: Path, settings, error, where) -> None:  # type: ignore[no-untyped-def]
    setup = Setup(tmp_path)
    with pytest.raises(error) as raised:
        setup.run(**settings)
    assert where in (getattr(raised.value, "where", "") or "")
    assert not setup.out.exists()


def test_relative_actions_need_the_state_they_are_relative_to(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    relative = {"encoded_dims": "0:4", "relative_dims": "0,1", "use_relative_transform": True}
    with pytest.raises(ConfigError, match=r"no 'observation\.stat'") as raised:
        setup.run(**relative, state_key="observation.stat")
    assert raised.value.where == "state_key" and "observation.state" in (raised.value.hint or "")
    # A state narrower than the dimensions made relative to it.
    store = InMemoryDatasetStore()
    narrow = meta()
    features = dict(narrow.features)
    features["observation.state"] = attrs.evolve(features["observation.state"], shape=(1,))
    store.add(LOCATION, attrs.evolve(narrow, features=features))
    setup.use_case._meta_reader = store
    with pytest.raises(ConfigError, match="which has 1 dimension") as raised:
        setup.run(**relative)
    assert raised.value.where == "relative_dims"
    assert not setup.out.exists() and setup.fitter.chunks is None


def test_missing_statistics_are_refused_unless_identity(tmp_path: Path) -> None:
    setup = Setup(tmp_path, stats=None)
    with pytest.raises(InvalidInput, match="no action statistics") as raised:
        setup.run(action_horizon=3, encoded_dims="0:4")
    assert "recompute-stats" in raised.value.hint
    setup.run(action_horizon=3, encoded_dims="0:4", normalization_mode="IDENTITY")
    assert setup.fitter.chunks is not None
    assert np.abs(setup.fitter.chunks).max() > 1  # raw actions


def test_an_output_folder_holding_other_files_is_left_alone(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    setup.out.mkdir()
    (setup.out / "model.safetensors").write_bytes(b"weights")
    with pytest.raises(InvalidInput, match="not a tokenizer's"):
        setup.run(action_horizon=3, encoded_dims="0:4")
    assert (setup.out / "model.safetensors").read_bytes() == b"weights"
    # An earlier tokenizer's folder is replaced.
    (setup.out / "model.safetensors").unlink()
    setup.run(action_horizon=3, encoded_dims="0:4")
    first = (setup.out / "metadata.json").read_text()
    setup.run(action_horizon=4, encoded_dims="0:4")
    assert (setup.out / "metadata.json").read_text() != first
