"""Merge, split and delete on real files: every frame of the output is the input frame it came
from, indices are contiguous, videos are copied (bit-identical frames), statistics consistent."""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.tools import packers
from rlctl.adapters.storage.lerobot_v3.tools.checker import LeRobotDatasetChecker
from rlctl.adapters.storage.lerobot_v3.tools.folders import LocalDatasetFolders
from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuilder
from rlctl.adapters.video.pyav_encoder import encode_frames
from rlctl.application.use_cases.check_dataset import CheckDataset
from rlctl.application.use_cases.delete_episodes import DeleteEpisodes
from rlctl.application.use_cases.merge_datasets import MergeDatasets
from rlctl.application.use_cases.split_dataset import SplitDataset
from rlctl.domain.errors import FeatureMismatch
from rlctl.domain.statistics import aggregate_stats, stats_from_json
from rlctl.domain.video import VideoEncoding


def load_support():
    path = Path(__file__).with_name("tools_support.py")
    spec = importlib.util.spec_from_file_location("tools_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = load_support()
ws = support.writer
TASKS = ("pick", "place", "push")
USER_FEATURES = (ws.STATE, ws.ACTION, ws.VIDEO, ws.IMAGE, ws.GRID)


def tools():
    reader, rebuilder, folders = LeRobotMetaReader(), LeRobotRebuilder(), LocalDatasetFolders()
    progress = SilentProgress()
    return {
        "merge": MergeDatasets(reader, rebuilder, folders, progress),
        "split": SplitDataset(reader, rebuilder, folders, progress),
        "delete": DeleteEpisodes(reader, rebuilder, folders, progress),
        "check": CheckDataset(LeRobotDatasetChecker(), progress),
    }


def assert_checks(root: Path) -> None:
    report = tools()["check"](str(root))
    assert report.ok and not report.warnings, report.problems


def assert_copied(out_root: Path, sources: list[tuple[Path, int]]) -> None:
    """Episode k of `out_root` is episode sources[k] (root, index), frame for frame."""
    out_items = support.items(out_root)
    meta = LeRobotMetaReader().read_meta(out_root)
    cache: dict[Path, list] = {}
    position = 0
    for new_index, (root, old_index) in enumerate(sources):
        source_items = cache.setdefault(root, support.items(root))
        old = LeRobotMetaReader().read_meta(root).episodes[old_index]
        assert meta.episodes[new_index].length == old.length
        for t in range(old.length):
            got, expected = out_items[position], source_items[old.dataset_from_index + t]
            support.assert_same_frame(got, expected)
            assert int(got["index"]) == position
            assert int(got["episode_index"]) == new_index
            assert meta.tasks[int(got["task_index"])] == expected["task"]
            position += 1
    assert position == len(out_items) == meta.total_frames


def user_stats(root: Path) -> dict:
    stats = stats_from_json(LeRobotMetaReader().read_meta(root).stats)
    return {k: v for k, v in stats.items() if k in USER_FEATURES}


def assert_stats_close(got: dict, expected: dict) -> None:
    assert set(got) == set(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(got[key].mean, value.mean, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(got[key].std, value.std, rtol=1e-6, atol=1e-9)
        np.testing.assert_array_equal(got[key].min, value.min)
        np.testing.assert_array_equal(got[key].max, value.max)
        assert got[key].count == value.count
        for q, v in value.quantiles.items():
            np.testing.assert_allclose(got[key].quantiles[q], v, rtol=1e-6, atol=1e-9)


@st.composite
def plan_pairs(draw):
    shared = {
        "fps": draw(st.sampled_from([5, 10])),
        "state_dim": draw(st.integers(1, 3)),
        "video": draw(st.booleans()),
        "image": draw(st.booleans()),
        "grid": draw(st.sampled_from([None, (2, 3), (2, 2, 3)])),
    }
    episodes = st.lists(
        st.lists(st.sampled_from(TASKS), min_size=1, max_size=5).map(tuple), min_size=1, max_size=3
    ).map(tuple)
    return [ws.DatasetPlan(episodes=draw(episodes), seed=seed, **shared) for seed in (1, 2)]


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(plans=plan_pairs(), data=st.data())
def test_merge_split_delete_preserve_frames_indices_and_stats(plans, data):
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        ws.write(a, plans[0])
        ws.write(b, plans[1])
        run = tools()

        merged = Path(tmp) / "merged"
        run["merge"]([str(a), str(b)], str(merged))
        sources = [(a, i) for i in range(len(plans[0].episodes))]
        sources += [(b, i) for i in range(len(plans[1].episodes))]
        assert_copied(merged, sources)
        assert_checks(merged)
        expected = aggregate_stats([user_stats(a), user_stats(b)])
        assert_stats_close(user_stats(merged), expected)

        total = len(sources)
        chosen = sorted(data.draw(st.sets(st.integers(0, total - 1), min_size=1)))
        part = Path(tmp) / "part"
        run["split"](str(merged), str(part), episodes=",".join(map(str, chosen)))
        assert_copied(part, [(merged, i) for i in chosen])
        assert_checks(part)

        doomed = set(data.draw(st.sets(st.integers(0, total - 1), max_size=total - 1)) or {0})
        if len(doomed) == total:
            doomed.pop()
        kept = [i for i in range(total) if i not in doomed]
        copy = Path(tmp) / "copy"
        support.copy_dataset(merged, copy)
        run["delete"](str(copy), ",".join(map(str, sorted(doomed))))
        assert_copied(copy, [(merged, i) for i in kept])
        assert_checks(copy)
        kept_stats = [
            {k: v for k, v in stats.items() if k in USER_FEATURES}
            for stats in episode_stats(merged, kept)
        ]
        assert_stats_close(user_stats(copy), aggregate_stats(kept_stats))


def episode_stats(root: Path, indices: list[int]) -> list[dict]:
    from rlctl.adapters.storage.lerobot_v3.tools.sources import stats_from_columns

    meta = LeRobotMetaReader().read_meta(root)
    return [stats_from_columns(meta.episodes[i].columns, "") for i in indices]


PLAN = ws.DatasetPlan(
    fps=10,
    state_dim=2,
    episodes=(("pick",) * 4, ("place",) * 3, ("pick", "push", "push"), ("place",) * 5),
    video=True,
    image=True,
)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tools") / "source"
    ws.write(root, PLAN)
    return root


def test_split_and_delete_copy_video_frames_bit_for_bit(source, tmp_path):
    run = tools()
    run["split"](str(source), str(tmp_path / "part"), episodes="1,3")
    assert_copied(tmp_path / "part", [(source, 1), (source, 3)])
    meta = LeRobotMetaReader().read_meta(tmp_path / "part")
    assert meta.tasks == ("place",)
    copy = support.copy_dataset(source, tmp_path / "copy")
    result = run["delete"](str(copy), "0,2")
    assert (result.output, result.episodes) == (str(copy), 2)
    assert_copied(copy, [(source, 1), (source, 3)])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "staging left behind"


def test_merging_different_datasets_lists_the_differences(source, tmp_path):
    other = tmp_path / "other"
    ws.write(other, attrs.evolve(PLAN, fps=30, state_dim=3, image=False))
    with pytest.raises(FeatureMismatch) as caught:
        tools()["merge"]([str(source), str(other)], str(tmp_path / "out"))
    text = str(caught.value)
    for part in ("fps: 10 vs 30", "observation.state.shape", "lacks feature(s)"):
        assert part in text, text
    assert not (tmp_path / "out").exists()


def test_small_file_limits_spread_episodes_over_files_and_chunks(source, tmp_path, monkeypatch):
    # A "MB" of one byte: every episode starts new data and video files, 2 files per chunk.
    monkeypatch.setattr(packers, "_MB", 1)
    meta = attrs.evolve(LeRobotMetaReader().read_meta(source), chunks_size=2)
    session = LeRobotRebuilder().start(str(tmp_path / "out"), meta)
    from rlctl.application.ports.dataset_tools import EpisodeRef

    for index in range(4):
        session.add_episode(EpisodeRef(str(source), index))
    session.finish()
    out = tmp_path / "out"
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("videos/*/*/*.mp4")) == [
        f"videos/{ws.VIDEO}/chunk-000/file-000.mp4",
        f"videos/{ws.VIDEO}/chunk-000/file-001.mp4",
        f"videos/{ws.VIDEO}/chunk-001/file-000.mp4",
        f"videos/{ws.VIDEO}/chunk-001/file-001.mp4",
    ]
    assert len(list(out.glob("data/*/*.parquet"))) == 4
    assert_copied(out, [(source, i) for i in range(4)])
    assert_checks(out)


def test_a_span_off_keyframes_is_reencoded(source, tmp_path):
    # Another tool re-encoded the camera's file whole with one long GOP: episode 1 starts
    # mid-GOP and cannot be copied packet for packet.
    copy = support.copy_dataset(source, tmp_path / "copy")
    video = next(copy.glob("videos/*/*/*.mp4"))
    frames = [f for _, f in ws.decode_video(video)]
    video.unlink()
    encode_frames(video, np.stack(frames), PLAN.fps, VideoEncoding(codec="h264", g=50, crf=10))
    assert tools()["check"](str(copy)).warnings  # the check says spans are off keyframes
    tools()["split"](str(copy), str(tmp_path / "part"), episodes="1-2")
    out_items = support.items(tmp_path / "part")
    source_items = support.items(source)
    for got, expected in zip(out_items, source_items[4:10]):
        support.assert_same_frame(got, expected, video_tolerance=ws.VIDEO_TOLERANCE)
    assert_checks(tmp_path / "part")


def test_a_failed_rebuild_removes_its_output_and_keeps_the_source(source, tmp_path):
    copy = support.copy_dataset(source, tmp_path / "copy")
    before = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    (copy / "data/chunk-000/file-000.parquet").write_bytes(b"not parquet")
    with pytest.raises(Exception, match="data file"):
        tools()["delete"](str(copy), "0")
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == before
    assert [p.name for p in tmp_path.iterdir()] == ["copy"]
