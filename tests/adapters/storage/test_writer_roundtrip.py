"""Random episodes go through the writer and come back from the files as they went in."""

from __future__ import annotations

import importlib.util
import itertools
import json
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.domain.video import VideoEncoding


def load_support():
    path = Path(__file__).with_name("writer_support.py")
    spec = importlib.util.spec_from_file_location("writer_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = load_support()
TASKS = ("pick the cube", "place the cube", "push", "ünïcödé task")
# Numeric features of rank 2 and 3 (LeRobot's Array2D / Array3D), or none.
GRIDS = st.one_of(
    st.none(),
    st.lists(st.integers(1, 4), min_size=2, max_size=3).map(tuple),
)


@st.composite
def plans(draw, video: bool | None = None):
    episodes = draw(
        st.lists(
            st.lists(st.sampled_from(TASKS), min_size=1, max_size=6).map(tuple),
            min_size=1,
            max_size=3,
        )
    )
    return support.DatasetPlan(
        fps=draw(st.sampled_from([5, 10, 30])),
        state_dim=draw(st.integers(1, 4)),
        episodes=tuple(episodes),
        reward=draw(st.booleans()),
        image=draw(st.booleans()),
        video=draw(st.booleans()) if video is None else video,
        seed=draw(st.integers(0, 2**16)),
        grid=draw(GRIDS),
        grid_dtype=draw(st.sampled_from(["float32", "float64", "int16", "uint8"])),
    )


@settings(max_examples=12, deadline=None)
@given(plan=plans())
def test_random_episodes_read_back_equal(plan) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ds"
        support.write(root, plan)
        support.check_dataset(root, plan)
        meta = LeRobotMetaReader().read_meta(root)
        assert meta.total_frames == sum(plan.lengths)


@pytest.mark.slow
def test_files_rotate_past_the_size_limits_and_chunks_past_chunks_size(tmp_path: Path) -> None:
    # Noise compresses badly: 100 frames of a 64x64 noise image are over 1 MB of PNG, so each
    # episode fills a data file; two files fill a chunk folder (chunks_size=2).
    # AV1 keeps about 3 kB of a 64x64 noise frame: a 128x128 camera passes 1 MB in 100 frames.
    h, w = 64, 64
    features = {
        "observation.state": {"dtype": "float32", "shape": [2], "names": None},
        "observation.images.wrist": {"dtype": "image", "shape": [h, w, 3], "names": None},
        "observation.images.front": {"dtype": "video", "shape": [2 * h, 2 * w, 3], "names": None},
    }
    rng = np.random.default_rng(0)
    lengths = [100, 100, 100, 40]
    session = LeRobotV3Writer(options=support.fast_options()).create(
        tmp_path / "ds",
        fps=30,
        features=features,
        chunks_size=2,
        data_files_size_in_mb=1,
        video_files_size_in_mb=1,
    )
    with session:
        for length in lengths:
            for _ in range(length):
                session.add_frame(
                    {
                        "observation.state": rng.standard_normal(2).astype(np.float32),
                        "observation.images.wrist": rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
                        "observation.images.front": rng.integers(
                            0, 256, (2 * h, 2 * w, 3), dtype=np.uint8
                        ),
                        "task": "noise",
                    }
                )
            session.save_episode()
    root = tmp_path / "ds"
    rows = support.episodes_table(root).to_pylist()
    data_files = [(r["data/chunk_index"], r["data/file_index"]) for r in rows]
    assert data_files == [(0, 0), (0, 1), (1, 0), (1, 1)]
    files = support.parquet_files(root / "data")
    assert [pq.ParquetFile(path).metadata.num_rows for path in files] == lengths
    key = "observation.images.front"
    spans: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for row in rows:
        file = (row[f"videos/{key}/chunk_index"], row[f"videos/{key}/file_index"])
        spans.setdefault(file, []).append(
            (row[f"videos/{key}/from_timestamp"], row[f"videos/{key}/to_timestamp"])
        )
    assert len(spans) > 1, "340 frames of noise pass 1 MB: expected several files"
    for file_spans in spans.values():
        assert file_spans[0][0] == 0.0
        for (_, end), (start, _) in itertools.pairwise(file_spans):
            assert start == pytest.approx(end)
    for row, length in zip(rows, lengths):
        assert len(support.video_frames(root, row, key, 30)) == length
    assert LeRobotMetaReader().read_meta(root).total_frames == sum(lengths)


def test_episodes_share_files_under_the_limits(tmp_path: Path) -> None:
    plan = support.DatasetPlan(
        fps=10, state_dim=3, episodes=(("a",) * 4, ("b",) * 5, ("a",) * 3), video=True
    )
    support.write(tmp_path / "ds", plan)
    rows = support.episodes_table(tmp_path / "ds").to_pylist()
    key = support.VIDEO
    assert {(r["data/chunk_index"], r["data/file_index"]) for r in rows} == {(0, 0)}
    assert [r[f"videos/{key}/from_timestamp"] for r in rows] == [0.0, 0.4, 0.9]
    assert [r[f"videos/{key}/to_timestamp"] for r in rows] == [0.4, 0.9, 1.2]
    data_file = pq.ParquetFile(tmp_path / "ds/data/chunk-000/file-000.parquet")
    assert data_file.num_row_groups == 3  # one per episode, as LeRobot appends them


@pytest.mark.slow
def test_subprocess_encoding_writes_the_same_dataset(tmp_path: Path) -> None:
    plan = support.DatasetPlan(
        fps=30, state_dim=2, episodes=(("a",) * 7, ("b",) * 9), video=True, image=True
    )
    support.write(tmp_path / "ds", plan, options=WriterOptions())
    support.check_dataset(tmp_path / "ds", plan)


def test_stats_aggregate_every_episode(tmp_path: Path) -> None:
    plan = support.DatasetPlan(
        fps=10, state_dim=2, episodes=(("a",) * 5, ("b",) * 7), image=True, video=True
    )
    support.write(tmp_path / "ds", plan)
    stats = json.loads((tmp_path / "ds/meta/stats.json").read_text())
    states = np.stack(
        [
            support.frame(plan, ep, t)[support.STATE]
            for ep, n in enumerate(plan.lengths)
            for t in range(n)
        ]
    )
    np.testing.assert_allclose(stats[support.STATE]["mean"], states.mean(0), rtol=1e-6)
    np.testing.assert_allclose(stats[support.STATE]["std"], states.std(0), rtol=1e-5)
    np.testing.assert_allclose(stats[support.STATE]["min"], states.min(0))
    assert stats[support.STATE]["count"] == [12]
    assert stats["index"]["max"] == [11.0]
    for key in (support.IMAGE, support.VIDEO):
        assert np.asarray(stats[key]["mean"]).shape == (3, 1, 1)
        assert 0.0 <= np.min(stats[key]["min"]) <= np.max(stats[key]["max"]) <= 1.0


@pytest.mark.parametrize(("shape", "dtype"), [((2, 3), "float32"), ((4, 4, 3), "int16")])
def test_rank_2_and_3_features_read_back_in_windows_with_lerobots_stats(
    tmp_path: Path, shape: tuple[int, ...], dtype: str
) -> None:
    plan = support.DatasetPlan(
        fps=10, state_dim=2, episodes=(("a",) * 4, ("b",) * 3), grid=shape, grid_dtype=dtype
    )
    support.write(tmp_path / "ds", plan)
    support.check_dataset(tmp_path / "ds", plan)
    key = support.GRID
    reader = LeRobotDatasetReader(tmp_path / "ds", delta_timestamps={key: [-0.1, 0.0, 0.1]})
    frames = [
        [support.frame(plan, ep, t)[key] for t in range(n)] for ep, n in enumerate(plan.lengths)
    ]
    position = 0
    for ep, n in enumerate(plan.lengths):
        for t in range(n):
            item = reader[position]
            window = item[key].numpy()
            # As LeRobot's items: floats float32, integers int64, the window axis first.
            assert window.dtype == (np.float32 if dtype == "float32" else np.int64)
            assert window.shape == (3, *shape)
            for step, offset in enumerate((-1, 0, 1)):
                expected = frames[ep][min(max(t + offset, 0), n - 1)]
                np.testing.assert_array_equal(window[step], expected)
            assert item[f"{key}_is_pad"].tolist() == [t == 0, False, t == n - 1]
            position += 1
    # LeRobot reduces a rank >= 2 feature over every axis but the last; count is frames.
    values = np.stack([f for episode in frames for f in episode]).astype(np.float64)
    flat = values.reshape(-1, shape[-1])
    stats = json.loads((tmp_path / "ds/meta/stats.json").read_text())[key]
    np.testing.assert_allclose(stats["mean"], flat.mean(0), rtol=1e-6)
    np.testing.assert_allclose(stats["std"], flat.std(0), rtol=1e-6)
    np.testing.assert_array_equal(stats["min"], flat.min(0))
    np.testing.assert_array_equal(stats["max"], flat.max(0))
    assert stats["count"] == [7]
    assert np.asarray(stats["q50"]).shape == (shape[-1],)
    episodes = support.episodes_table(tmp_path / "ds")
    assert episodes.column(f"stats/{key}/mean").type.value_type == "double"
    assert [len(v) for v in episodes.column(f"stats/{key}/mean").to_pylist()] == [shape[-1]] * 2


def test_flush_returns_what_is_on_disk(tmp_path: Path) -> None:
    plan = support.DatasetPlan(fps=10, state_dim=2, episodes=(("a",) * 3,), video=True)
    session = LeRobotV3Writer(options=support.fast_options()).create(
        tmp_path / "ds", fps=10, features=plan.features()
    )
    for t in range(3):
        session.add_frame(support.frame(plan, 0, t))
    record = session.save_episode()
    assert (record.index, record.dataset_from_index, record.dataset_to_index) == (0, 0, 3)
    meta = session.flush()
    assert meta.total_episodes == 1 and meta.tasks == ("a",)
    info = meta.features[support.VIDEO].info
    assert info["video.codec"] == "av1" and info["video.height"] == 16
    session.finalize()
    assert not (tmp_path / "ds/.rlctl-staging").exists()


@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_yuv444p_codecs_are_options_and_info_json_records_them(tmp_path: Path, codec) -> None:
    plan = support.DatasetPlan(fps=10, state_dim=2, episodes=(("a",) * 5, ("b",) * 4), video=True)
    encoding = VideoEncoding(codec=codec, pix_fmt="yuv444p", crf=23)
    support.write(tmp_path / "ds", plan, video=encoding)
    support.check_dataset(tmp_path / "ds", plan)
    info = support.info(tmp_path / "ds")["features"][support.VIDEO]["info"]
    assert (info["video.codec"], info["video.pix_fmt"], info["video.crf"]) == (
        codec,
        "yuv444p",
        23,
    )
    assert info["video.g"] == 2 and info["video.video_backend"] == "pyav"
