"""Statistics: the merge law, agreement with numpy, LeRobot's stats.json and aggregation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlctl.domain import statistics
from rlctl.domain.errors import FeatureMismatch, InvalidInput
from rlctl.domain.quantile_sketch import QuantileSketch
from rlctl.domain.statistics import (
    DEFAULT_QUANTILES,
    FeatureStats,
    RunningStats,
    aggregate_stats,
    compute_stats,
    downsample_for_stats,
    quantile_key,
    stats_from_json,
    stats_sample_indices,
    stats_to_json,
)

QUANTILE_KEYS = [quantile_key(q) for q in DEFAULT_QUANTILES]

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
# Small exact limits and few bins push most examples into histogram mode, where the bound bites.
sketch_options = st.fixed_dictionaries(
    {"exact_limit": st.integers(0, 40), "bins": st.sampled_from([2, 3, 8, 64, 4096])}
)


@st.composite
def samples(draw, max_rows=120, dims=None):
    rows = draw(st.integers(1, max_rows))
    dims = dims or draw(st.integers(1, 3))
    return draw(hnp.arrays(np.float64, (rows, dims), elements=finite))


@st.composite
def batch_lists(draw, max_batches=5, max_rows=40):
    """Several batches of the same feature width."""
    dims = draw(st.integers(1, 3))
    return draw(st.lists(samples(max_rows, dims), min_size=1, max_size=max_batches))


def stats_of(data, **options):
    stats = RunningStats(**options)
    stats.update(data)
    return stats


def assert_moments_close(got: FeatureStats, data: np.ndarray, axis=0):
    scale = max(float(np.abs(data).max()), 1.0)
    assert got.count == data.shape[0]
    np.testing.assert_array_equal(got.min, data.min(axis=axis))
    np.testing.assert_array_equal(got.max, data.max(axis=axis))
    np.testing.assert_allclose(got.mean, data.mean(axis=axis), rtol=1e-9, atol=1e-12 * scale)
    np.testing.assert_allclose(got.std, data.std(axis=axis), rtol=1e-7, atol=1e-9 * scale)


def assert_quantiles_within_bound(stats: RunningStats, data: np.ndarray, axis=0):
    result = stats.result()
    bound = stats.quantile_error_bound()
    scale = max(float(np.abs(data).max()), 1.0)
    for level, key in zip(DEFAULT_QUANTILES, QUANTILE_KEYS):
        error = np.abs(
            result.quantiles[key] - np.quantile(data, level, axis=axis).reshape(bound.shape)
        )
        # The bound itself, plus float rounding of the final interpolation.
        assert (error <= bound + 1e-12 * scale).all(), (key, error, bound)


@given(samples(), st.data(), sketch_options)
def test_merge_equals_statistics_over_the_union(data, draw, options):
    split = draw.draw(st.integers(0, data.shape[0]))
    left, right = data[:split], data[split:]
    merged = stats_of(left, **options).merge(stats_of(right, **options))
    union = stats_of(data, **options)
    got, want = merged.result(), union.result()
    assert got.count == want.count
    np.testing.assert_array_equal(got.min, want.min)
    np.testing.assert_array_equal(got.max, want.max)
    scale = max(float(np.abs(data).max()), 1.0)
    np.testing.assert_allclose(got.mean, want.mean, rtol=1e-9, atol=1e-12 * scale)
    np.testing.assert_allclose(got.std, want.std, rtol=1e-7, atol=1e-9 * scale)
    # The sketch is a function of the values alone: merging gives the very same quantiles.
    for key in QUANTILE_KEYS:
        np.testing.assert_array_equal(got.quantiles[key], want.quantiles[key])
    np.testing.assert_array_equal(merged.quantile_error_bound(), union.quantile_error_bound())
    assert_quantiles_within_bound(merged, data)


@given(batch_lists(), sketch_options)
def test_streamed_batches_agree_with_numpy_on_all_rows(batches, options):
    stats = RunningStats(**options)
    for batch in batches:
        stats.update(batch)
    data = np.concatenate(batches)
    assert_moments_close(stats.result(), data)
    assert_quantiles_within_bound(stats, data)


def test_large_batches_are_summarised_in_slices_with_the_same_result(monkeypatch):
    data = np.random.default_rng(1).normal(size=(500, 3)) * [1.0, 1e3, 1e-3]
    whole = stats_of(data, exact_limit=100)
    monkeypatch.setattr(statistics, "_SLICE_VALUES", 7)
    sliced = stats_of(data, exact_limit=100)
    assert_moments_close(sliced.result(), data)
    for key in QUANTILE_KEYS:
        np.testing.assert_array_equal(sliced.result().quantiles[key], whole.result().quantiles[key])


@given(samples(), sketch_options, st.permutations(range(3)))
def test_merge_order_does_not_matter(data, options, order):
    parts = np.array_split(data, 3)
    sketches = [stats_of(p, **options) for p in parts if len(p)]
    if len(sketches) < 3:
        return
    merged = sketches[order[0]].merge(sketches[order[1]]).merge(sketches[order[2]])
    reference = sketches[0].merge(sketches[1].merge(sketches[2]))
    for key in QUANTILE_KEYS:
        np.testing.assert_array_equal(
            merged.result().quantiles[key], reference.result().quantiles[key]
        )


@given(samples(), st.sampled_from([2, 5, 16, 4096]))
def test_the_documented_bound_holds_for_the_bin_width(data, bins):
    sketch = QuantileSketch(data.shape[1], bins=bins, exact_limit=0)
    sketch.add(data.T)
    span = data.max(axis=0) - data.min(axis=0)
    magnitude = np.maximum(np.abs(data.min(axis=0)), np.abs(data.max(axis=0)))
    documented = np.maximum(2 * span / (bins - 1), 2.0**-49 * magnitude)
    assert (sketch.error_bound() <= documented).all()


def test_exact_until_the_limit_then_a_histogram():
    data = np.random.default_rng(0).normal(size=(50, 2))
    exact = stats_of(data, exact_limit=50)
    np.testing.assert_array_equal(exact.quantile_error_bound(), 0.0)
    np.testing.assert_array_equal(exact.result().quantiles["q10"], np.quantile(data, 0.1, axis=0))
    assert (stats_of(data, exact_limit=49).quantile_error_bound() > 0).all()


def test_vectors_and_scalars_get_lerobot_shapes():
    assert compute_stats(np.arange(10.0)).shape == (1,)
    assert compute_stats(np.ones((10, 1))).shape == (1,)
    got = compute_stats(np.arange(12.0).reshape(4, 3))
    assert got.shape == (3,)
    np.testing.assert_array_equal(got.mean, [4.5, 5.5, 6.5])


@given(
    hnp.arrays(
        np.uint8,
        st.tuples(st.integers(1, 4), st.sampled_from([1, 3]), st.integers(1, 6), st.integers(1, 6)),
    ),
    sketch_options,
)
def test_images_reduce_per_channel_into_unit_range(frames, options):
    channels_first = RunningStats.per_channel(1, divide_by=255, **options)
    channels_first.update(frames)
    channels_last = RunningStats.per_channel(-1, divide_by=255, **options)
    channels_last.update(frames.transpose(0, 2, 3, 1))
    got = channels_first.result()
    channels = frames.shape[1]
    assert got.shape == (channels, 1, 1)
    assert got.count == frames.shape[0]
    scaled = frames / 255.0
    np.testing.assert_allclose(got.mean, scaled.mean(axis=(0, 2, 3), keepdims=True)[0], atol=1e-12)
    np.testing.assert_allclose(got.std, scaled.std(axis=(0, 2, 3), keepdims=True)[0], atol=1e-9)
    np.testing.assert_array_equal(got.min, scaled.min(axis=(0, 2, 3), keepdims=True)[0])
    pixels = scaled.transpose(0, 2, 3, 1).reshape(-1, channels)
    assert_quantiles_within_bound(channels_first, pixels)
    other = channels_last.result()
    for key in ("mean", "std", "min", "max"):
        np.testing.assert_allclose(getattr(other, key), getattr(got, key), atol=1e-12)


@given(
    hnp.arrays(np.uint8, st.tuples(st.integers(1, 30), st.integers(1, 3))),
    sketch_options,
    st.sampled_from([1.0, 255.0]),
)
def test_counting_uint8_values_gives_what_converting_them_gives(data, options, divide_by):
    counted = RunningStats(divide_by=divide_by, **options)
    counted.update(data)
    converted = RunningStats(divide_by=divide_by, **options)
    converted.update(data.astype(np.float64))
    got, want = counted.result(), converted.result()
    for key in ("min", "max"):
        np.testing.assert_array_equal(getattr(got, key), getattr(want, key))
    np.testing.assert_allclose(got.mean, want.mean, rtol=1e-12)
    np.testing.assert_allclose(got.std, want.std, rtol=1e-9, atol=1e-12)
    for key in QUANTILE_KEYS:
        np.testing.assert_array_equal(got.quantiles[key], want.quantiles[key])
    # Booleans count too.
    flags = compute_stats(data > 100, **options)
    np.testing.assert_allclose(flags.mean, (data > 100).mean(axis=0))


def lerobot_sample_indices(data_len: int) -> list[int]:
    """LeRobot 0.6.1 `sample_indices` with `estimate_num_samples`' defaults."""
    min_num_samples = min(100, data_len)
    num_samples = max(min_num_samples, min(int(data_len**0.75), 10_000))
    return np.round(np.linspace(0, data_len - 1, num_samples)).astype(int).tolist()


@given(st.integers(1, 50_000))
def test_image_frames_are_sampled_as_lerobot_samples_them(length):
    assert stats_sample_indices(length) == lerobot_sample_indices(length)


def test_large_frames_are_thinned_as_lerobot_thins_them():
    small = np.zeros((3, 96, 128))
    assert downsample_for_stats(small) is small
    assert downsample_for_stats(np.zeros((3, 480, 640))).shape == (3, 120, 160)
    assert downsample_for_stats(np.zeros((3, 720, 300))).shape == (3, 180, 75)
    assert stats_sample_indices(0) == []


@given(batch_lists(max_batches=4, max_rows=30))
def test_aggregate_stats_follows_lerobot(parts):
    per_episode = [{"action": compute_stats(p)} for p in parts]
    got = aggregate_stats(per_episode)["action"]
    assert_moments_close(got, np.concatenate(parts))
    counts = np.array([len(p) for p in parts], dtype=np.float64)
    for key in QUANTILE_KEYS:
        quantiles = np.stack([e["action"].quantiles[key] for e in per_episode])
        weighted = (quantiles * counts[:, None]).sum(axis=0) / counts.sum()
        np.testing.assert_allclose(got.quantiles[key], weighted, rtol=1e-12, atol=1e-9)


def test_aggregate_stats_takes_the_union_of_keys():
    a = {"x": compute_stats(np.arange(4.0)), "y": compute_stats(np.ones((2, 2)))}
    b = {"x": compute_stats(np.arange(4.0, 8.0))}
    got = aggregate_stats([a, b])
    assert list(got) == ["x", "y"]
    assert got["x"].count == 8
    assert got["y"].count == 2
    assert aggregate_stats([]) == {}


def test_aggregate_stats_rejects_different_shapes_and_missing_counts():
    with pytest.raises(FeatureMismatch, match=r"stats\.x"):
        aggregate_stats([{"x": compute_stats(np.ones((2, 2)))}, {"x": compute_stats(np.ones(3))}])
    no_count = FeatureStats(min=[0], max=[1], mean=[0.5], std=[0.5])
    with pytest.raises(InvalidInput, match="count"):
        aggregate_stats([{"x": no_count}])


@given(samples(max_rows=20), st.dictionaries(st.sampled_from(["note", "histogram"]), st.integers()))
def test_stats_json_round_trip_is_lossless(data, extra):
    stats = compute_stats(data)
    stats = FeatureStats(
        min=stats.min,
        max=stats.max,
        mean=stats.mean,
        std=stats.std,
        count=stats.count,
        quantiles=stats.quantiles,
        extra=extra,
    )
    written = json.loads(json.dumps(stats_to_json({"action": stats})))
    assert written["action"]["count"] == [data.shape[0]]
    assert list(written["action"])[:5] == ["min", "max", "mean", "std", "count"]
    again = stats_from_json(written)
    assert stats_to_json(again) == written
    assert again["action"].extra == extra
    np.testing.assert_array_equal(again["action"].mean, stats.mean)


def test_from_json_explains_what_is_wrong():
    with pytest.raises(InvalidInput, match="lack mean") as caught:
        stats_from_json({"action": {"min": [0], "max": [1], "std": [1]}})
    assert caught.value.where == "stats.action"
    with pytest.raises(InvalidInput, match="one number"):
        FeatureStats.from_json({"min": [0], "max": [1], "mean": [0], "std": [1], "count": [1, 2]})
    with pytest.raises(InvalidInput, match="numeric"):
        FeatureStats.from_json({"min": ["a"], "max": [1], "mean": [0], "std": [1]})
    with pytest.raises(InvalidInput, match="different shapes"):
        FeatureStats(min=[0, 1], max=[1], mean=[0], std=[1])


def test_running_stats_refuses_bad_input():
    stats = RunningStats()
    with pytest.raises(InvalidInput, match="no samples"):
        stats.result()
    with pytest.raises(InvalidInput, match="NaN"):
        stats.update(np.array([[1.0, np.nan]]))
    stats.update(np.ones((2, 3)))
    with pytest.raises(FeatureMismatch):
        stats.update(np.ones((2, 4)))
    with pytest.raises(FeatureMismatch):
        stats.merge(stats_of(np.ones((2, 4))))
    with pytest.raises(InvalidInput, match="set up differently"):
        stats.merge(RunningStats(exact_limit=3))
    with pytest.raises(InvalidInput, match="channel axis"):
        RunningStats.per_channel(3).update(np.ones((2, 3)))


def test_numeric_features_of_rank_2_and_more_reduce_to_their_last_axis():
    # LeRobot's RunningQuantileStats flattens (N, *shape) to (-1, shape[-1]); count stays N.
    data = np.arange(5 * 4 * 2 * 3, dtype=np.float64).reshape(5, 4, 2, 3) ** 1.5
    stats = RunningStats.for_numeric(3)
    stats.update(data[:2])
    stats.update(data[2:])
    result = stats.result()
    flat = data.reshape(-1, 3)
    assert result.shape == (3,) and result.count == 5
    np.testing.assert_allclose(result.mean, flat.mean(0))
    np.testing.assert_allclose(result.std, flat.std(0))
    np.testing.assert_array_equal(result.min, flat.min(0))
    np.testing.assert_allclose(result.quantiles["q50"], np.quantile(flat, 0.5, axis=0))
    # Vectors keep their per-entry statistics; the option cannot mix with a channel axis.
    assert RunningStats.for_numeric(1)._settings() == RunningStats()._settings()
    with pytest.raises(InvalidInput, match="exclude"):
        RunningStats(last_axis=True, channel_axis=1)


def test_merging_with_an_empty_side_copies_the_other():
    data = np.arange(6.0).reshape(3, 2)
    full = stats_of(data)
    for merged in (full.merge(RunningStats()), RunningStats().merge(full)):
        assert_moments_close(merged.result(), data)
    merged.update(data)
    assert full.count == 3  # merge returned a copy


def test_stats_json_of_lerobot_fixtures_round_trips(fixtures_dir):
    for name in ("sim_images", "sim_video"):
        raw = json.loads((fixtures_dir / name / "meta" / "stats.json").read_text())
        parsed = stats_from_json(raw)
        assert parsed["observation.images.front"].shape == (3, 1, 1)
        assert stats_to_json(parsed) == raw


def test_aggregating_lerobot_episode_stats_gives_its_stats_json(fixtures_dir):
    parquet = pytest.importorskip("pyarrow.parquet")
    for name in ("sim_images", "sim_video"):
        meta = fixtures_dir / name / "meta"
        rows = parquet.read_table(next((meta / "episodes").rglob("*.parquet"))).to_pylist()
        per_episode = []
        for row in rows:
            by_feature: dict[str, dict] = {}
            for column, value in row.items():
                if column.startswith("stats/"):
                    _, feature, stat = column.split("/")
                    by_feature.setdefault(feature, {})[stat] = value
            per_episode.append(stats_from_json(by_feature))
        want = stats_from_json(json.loads((meta / "stats.json").read_text()))
        got = aggregate_stats(per_episode)
        assert set(got) == set(want)
        for feature, stats in want.items():
            assert got[feature].count == stats.count
            # Per-episode stats are stored as float32 in the parquet file.
            for key in ("min", "max", "mean", "std"):
                np.testing.assert_allclose(
                    getattr(got[feature], key), getattr(stats, key), rtol=1e-5, atol=1e-6
                )
            for key in QUANTILE_KEYS:
                np.testing.assert_allclose(
                    got[feature].quantiles[key], stats.quantiles[key], rtol=1e-5, atol=1e-6
                )
