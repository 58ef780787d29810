"""The dataset tools' use cases through the container, with the in-memory adapters swapped in."""

from __future__ import annotations

import numpy as np
import pytest
from dependency_injector import providers
from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.adapters.memory.dataset_store import InMemoryDatasetStore
from rlctl.adapters.memory.dataset_tools import (
    InMemoryDatasetFolders,
    InMemoryDatasetRebuilder,
    InMemoryStatsAccess,
    ScriptedDatasetChecker,
)
from rlctl.adapters.memory.progress import RecordingProgress
from rlctl.application.ports.dataset_tools import DatasetProblem
from rlctl.application.relative_action_stats import valid_chunk_starts
from rlctl.application.use_cases.recompute_stats import RecomputeRequest
from rlctl.application.use_cases.split_dataset import fraction_splits, parse_fractions
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import FeatureMismatch, InvalidInput
from rlctl.domain.features import features_from_info
from rlctl.domain.statistics import aggregate_stats, compute_stats, stats_from_json, stats_to_json
from rlctl.entrypoints.container import build_container
from rlctl.entrypoints.settings import AppSettings, DatasetSettings

NAMES = ["shoulder", "elbow", "wrist", "gripper"]
FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [4], "names": NAMES},
    "action": {"dtype": "float32", "shape": [4], "names": NAMES},
    "observation.images.top": {
        "dtype": "video",
        "shape": [48, 64, 3],
        "names": ["height", "width", "channels"],
        "info": {"video.codec": "av1", "video.crf": 30},
    },
}


def make_meta(episode_tasks, fps=10, features=FEATURES, seed=0, version="v3.0") -> DatasetMeta:
    """A dataset whose episode i has len(episode_tasks[i]) frames and per-episode statistics."""
    rng = np.random.default_rng(seed)
    episodes, start, tasks = [], 0, []
    for index, frame_tasks in enumerate(episode_tasks):
        n = len(frame_tasks)
        stats = {"action": compute_stats(rng.standard_normal((n, 4)))}
        episodes.append(
            EpisodeRecord(
                index,
                n,
                tuple(dict.fromkeys(frame_tasks)),
                start,
                start + n,
                columns={"stats": stats},
            )
        )
        tasks += [t for t in frame_tasks if t not in tasks]
        start += n
    all_stats = aggregate_stats([e.columns["stats"] for e in episodes])
    return DatasetMeta(
        codebase_version=version,
        fps=fps,
        features=features_from_info(features),
        total_episodes=len(episodes),
        total_frames=start,
        tasks=tuple(tasks),
        episodes=tuple(episodes),
        stats=stats_to_json(all_stats),
    )


class Tools:
    def __init__(self, fail_at: int | None = None, checker=None, stats_access=None) -> None:
        self.store = InMemoryDatasetStore()
        self.rebuilder = InMemoryDatasetRebuilder(self.store, fail_at=fail_at)
        self.progress = RecordingProgress()
        container = build_container(AppSettings(dataset=DatasetSettings(store="memory")))
        container.meta_reader.override(providers.Object(self.store))
        container.legacy_dataset_reader.override(providers.Object(self.store))
        container.dataset_rebuilder.override(providers.Object(self.rebuilder))
        container.dataset_folders.override(providers.Object(InMemoryDatasetFolders(self.store)))
        container.progress.override(providers.Object(self.progress))
        if checker is not None:
            container.dataset_checker.override(providers.Object(checker))
        if stats_access is not None:
            container.dataset_stats_access.override(providers.Object(stats_access))
        self.container = container


episode_lists = st.lists(
    st.lists(st.sampled_from(["pick", "place", "push"]), min_size=1, max_size=5),
    min_size=1,
    max_size=5,
)


def assert_contiguous(meta: DatasetMeta) -> None:
    assert [e.index for e in meta.episodes] == list(range(meta.total_episodes))
    start = 0
    for episode in meta.episodes:
        assert episode.dataset_from_index == start
        start = episode.dataset_to_index
    assert start == meta.total_frames


# --- merge ------------------------------------------------------------------------------------


@given(st.lists(episode_lists, min_size=2, max_size=4))
def test_merge_keeps_every_episode_in_order_and_renumbers(datasets):
    tools = Tools()
    names = [f"mem://{i}" for i in range(len(datasets))]
    for i, (name, episodes) in enumerate(zip(names, datasets)):
        tools.store.add(name, make_meta(episodes, seed=i))
    result = tools.container.merge_datasets()(names, "mem://out")
    out = tools.store.read_meta("mem://out")
    assert_contiguous(out)
    expected = [(name, i) for name, eps in zip(names, datasets) for i in range(len(eps))]
    assert [e.columns["source"] for e in out.episodes] == expected
    assert out.tasks == tuple(dict.fromkeys(t for eps in datasets for ep in eps for t in ep))
    assert (result.episodes, result.frames) == (out.total_episodes, out.total_frames)
    assert tools.progress.tasks[-1].done == len(expected)


@given(st.lists(episode_lists, min_size=2, max_size=3))
def test_stats_of_a_merge_are_the_merge_of_stats(datasets):
    tools = Tools()
    names = [f"mem://{i}" for i in range(len(datasets))]
    metas = [make_meta(eps, seed=i) for i, eps in enumerate(datasets)]
    for name, meta in zip(names, metas):
        tools.store.add(name, meta)
    tools.container.merge_datasets()(names, "mem://out")
    merged = stats_from_json(tools.store.read_meta("mem://out").stats)["action"]
    expected = aggregate_stats([stats_from_json(m.stats) for m in metas])["action"]
    np.testing.assert_allclose(merged.mean, expected.mean)
    np.testing.assert_allclose(merged.std, expected.std)
    assert merged.count == sum(m.total_frames for m in metas)


def test_merge_lists_every_difference_at_once():
    tools = Tools()
    tools.store.add("mem://a", make_meta([["pick"]]))
    other = dict(FEATURES)
    other["action"] = {"dtype": "float32", "shape": [5], "names": None}
    other.pop("observation.images.top")
    tools.store.add("mem://b", make_meta([["pick"]], fps=30, features=other))
    with pytest.raises(FeatureMismatch) as caught:
        tools.container.merge_datasets()(["mem://a", "mem://b"], "mem://out")
    text = str(caught.value)
    for part in ("fps: 10 vs 30", "action.shape", "action.names", "observation.images.top"):
        assert part in text
    assert not tools.rebuilder.sessions, "nothing is written when the datasets differ"


def test_merge_ignores_encoder_settings_and_keeps_only_shared_ones():
    tools = Tools()
    tools.store.add("mem://a", make_meta([["pick"]]))
    other = {**FEATURES, "observation.images.top": dict(FEATURES["observation.images.top"])}
    other["observation.images.top"]["info"] = {"video.codec": "av1", "video.crf": 24}
    tools.store.add("mem://b", make_meta([["pick"]], features=other))
    tools.container.merge_datasets()(["mem://a", "mem://b"], "mem://out")
    info = tools.store.read_meta("mem://out").features["observation.images.top"].info
    assert info == {"video.codec": "av1", "video.crf": None}


def test_merge_refuses_an_existing_output_and_a_single_input():
    tools = Tools()
    tools.store.add("mem://a", make_meta([["pick"]]))
    tools.store.add("mem://b", make_meta([["pick"]]))
    tools.store.add("mem://c", make_meta([["pick"]]))
    with pytest.raises(InvalidInput, match="one of the inputs"):
        tools.container.merge_datasets()(["mem://a", "mem://b"], "mem://b")
    with pytest.raises(InvalidInput, match="already there"):
        tools.container.merge_datasets()(["mem://a", "mem://b"], "mem://c")
    with pytest.raises(InvalidInput, match="at least two"):
        tools.container.merge_datasets()(["mem://a"], "mem://out")


# --- split ------------------------------------------------------------------------------------


@given(episode_lists, st.data())
def test_split_copies_the_chosen_episodes(episodes, data):
    tools = Tools()
    tools.store.add("mem://src", make_meta(episodes))
    chosen = data.draw(st.sets(st.integers(0, len(episodes) - 1), min_size=1))
    spec = ",".join(str(i) for i in chosen)
    tools.container.split_dataset()("mem://src", "mem://out", episodes=spec)
    out = tools.store.read_meta("mem://out")
    assert_contiguous(out)
    assert [e.columns["source"][1] for e in out.episodes] == sorted(chosen)
    assert tools.store.read_meta("mem://src").total_episodes == len(episodes)


def lerobot_fractions(total, splits):
    """LeRobot 0.6.1's `_fractions_to_episode_indices`, for comparison."""
    indices, result, start = list(range(total)), {}, 0
    for name, fraction in splits.items():
        count = int(total * fraction)
        if count == 0:
            continue
        end = total if name == list(splits)[-1] else start + count
        result[name] = indices[start:end]
        start = end
    return result


@given(st.integers(1, 40), st.lists(st.integers(1, 9), min_size=1, max_size=3))
def test_fraction_splits_follow_lerobot(total, weights):
    fractions = {f"s{i}": w / (sum(weights) + 1) for i, w in enumerate(weights)}
    assert fraction_splits(total, fractions) == lerobot_fractions(total, fractions)


def test_split_by_fractions_writes_one_dataset_per_part():
    tools = Tools()
    tools.store.add("mem://src", make_meta([["pick"]] * 10))
    results = tools.container.split_dataset()(
        "mem://src", "mem://out", fractions=parse_fractions("train=0.8,val=0.2")
    )
    assert [(r.output, r.episodes) for r in results] == [
        ("mem://out/train", 8),
        ("mem://out/val", 2),
    ]
    with pytest.raises(InvalidInput, match="NAME=FRACTION"):
        parse_fractions("train")


# --- delete -----------------------------------------------------------------------------------


@given(episode_lists, st.data())
def test_delete_in_place_keeps_the_others_renumbered(episodes, data):
    tools = Tools()
    tools.store.add("mem://ds", make_meta([*episodes, ["pick"]]))
    total = len(episodes) + 1
    doomed = data.draw(st.sets(st.integers(0, total - 1), max_size=total - 1, min_size=1))
    tools.container.delete_episodes()("mem://ds", ",".join(map(str, doomed)))
    out = tools.store.read_meta("mem://ds")
    assert_contiguous(out)
    assert [e.columns["source"][1] for e in out.episodes] == [
        i for i in range(total) if i not in doomed
    ]
    assert not tools.container.dataset_folders().exists("mem://ds.rlctl-staging")


def test_a_failed_delete_leaves_the_original_untouched():
    tools = Tools(fail_at=1)
    original = make_meta([["pick"], ["place"], ["push"]])
    tools.store.add("mem://ds", original)
    with pytest.raises(OSError, match="simulated"):
        tools.container.delete_episodes()("mem://ds", "0")
    assert tools.store.read_meta("mem://ds") is original
    assert tools.rebuilder.sessions[0].aborted


def test_deleting_every_episode_is_refused():
    tools = Tools()
    tools.store.add("mem://ds", make_meta([["pick"], ["place"]]))
    with pytest.raises(InvalidInput, match="all the dataset has"):
        tools.container.delete_episodes()("mem://ds", "0-1")


# --- convert ----------------------------------------------------------------------------------


def test_convert_in_place_keeps_the_original_beside_it():
    tools = Tools()
    legacy = make_meta([["pick"], ["place", "pick"]], version="v2.1")
    tools.store.add("mem://old", legacy)
    converted = tools.container.convert_dataset()("mem://old")
    assert converted.original == "mem://old.v2.1"
    assert tools.store.read_meta("mem://old.v2.1") is legacy
    out = tools.store.read_meta("mem://old")
    assert (out.chunks_size, out.data_files_size_in_mb, out.video_files_size_in_mb) == (
        1000,
        100,
        200,
    )
    assert out.total_episodes == 2
    with pytest.raises(InvalidInput, match="taken"):
        tools.store.add("mem://old", legacy)
        tools.container.convert_dataset()("mem://old")


# --- check ------------------------------------------------------------------------------------


def test_check_lists_problems_of_every_file_and_keeps_going():
    checker = ScriptedDatasetChecker(
        opening=[DatasetProblem("bad stats", file="meta/stats.json")],
        files={
            "data/a.parquet": [DatasetProblem("truncated", file="data/a.parquet")],
            "videos/x.mp4": [],
            "videos/y.mp4": [DatasetProblem("odd", file="videos/y.mp4", severity="warning")],
        },
    )
    tools = Tools(checker=checker)
    report = tools.container.check_dataset()("mem://ds")
    assert [p.message for p in report.problems] == ["bad stats", "truncated", "odd"]
    assert not report.ok and len(report.errors) == 2 and len(report.warnings) == 1
    assert checker.opened[0].checked == ["data/a.parquet", "videos/x.mp4", "videos/y.mp4"]
    assert tools.progress.tasks[0].done == 3 and tools.progress.tasks[0].closed


def test_warnings_alone_pass_the_check():
    warning = DatasetProblem("interrupted commit", severity="warning")
    tools = Tools(checker=ScriptedDatasetChecker(opening=[warning]))
    assert tools.container.check_dataset()("mem://ds").ok


# --- statistics -------------------------------------------------------------------------------


def lerobot_relative_stats(actions, states, episode_index, chunk, mask):
    """LeRobot 0.6.1's chunk sampling, written out with numpy for comparison."""
    total = len(episode_index)
    starts = np.arange(total - chunk + 1)
    starts = starts[episode_index[starts] == episode_index[starts + chunk - 1]]
    chunks = actions[starts[:, None] + np.arange(chunk)].copy()
    chunks -= states[starts][:, None, :] * mask
    return chunks.reshape(-1, actions.shape[1]), len(starts)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=4), st.integers(1, 6), st.integers(0, 99))
def test_relative_action_stats_match_lerobots_chunks(lengths, chunk, seed):
    rng = np.random.default_rng(seed)
    data = {
        i: {
            "observation.state": rng.standard_normal((n, 4)).astype(np.float32),
            "action": rng.standard_normal((n, 4)).astype(np.float32),
        }
        for i, n in enumerate(lengths)
    }
    tools = Tools(stats_access=InMemoryStatsAccess({"mem://ds": data}))
    tools.store.add("mem://ds", make_meta([["pick"] * n for n in lengths]))
    request = RecomputeRequest("mem://ds", relative_actions=True, chunk_size=chunk, visual=False)
    episode_index = np.concatenate([np.full(n, i) for i, n in enumerate(lengths)])
    if len(valid_chunk_starts(episode_index, chunk)) == 0:
        with pytest.raises(InvalidInput, match="no episode has"):
            tools.container.recompute_stats()(request)
        return
    result = tools.container.recompute_stats()(request)
    actions = np.concatenate([d["action"] for d in data.values()])
    states = np.concatenate([d["observation.state"] for d in data.values()])
    mask = np.array([1, 1, 1, 0], dtype=np.float32)  # the gripper stays absolute
    values, chunks = lerobot_relative_stats(actions, states, episode_index, chunk, mask)
    per_episode, stats = tools.container.dataset_stats_access().written["mem://ds"]
    assert result.relative_chunks == chunks
    np.testing.assert_allclose(stats["action"].mean, values.mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats["action"].std, values.std(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats["action"].min, values.min(axis=0))
    assert stats["action"].count == len(values)
    # Per-episode statistics stay absolute; stats.json's state is the plain aggregate.
    np.testing.assert_allclose(
        per_episode[0]["action"].mean, data[0]["action"].astype(float).mean(axis=0)
    )
    np.testing.assert_allclose(
        stats["observation.state"].mean, states.astype(float).mean(axis=0), rtol=1e-6, atol=1e-9
    )


def test_recompute_keeps_camera_statistics_when_skipped_and_computes_them_otherwise():
    rng = np.random.default_rng(3)
    frames = rng.integers(0, 256, (5, 48, 64, 3), dtype=np.uint8)
    data = {
        0: {
            "observation.state": np.zeros((5, 4), np.float32),
            "action": np.ones((5, 4), np.float32),
            "observation.images.top": frames,
        }
    }
    access = InMemoryStatsAccess({"mem://ds": data})
    tools = Tools(stats_access=access)
    meta = make_meta([["pick"] * 5])
    camera = compute_stats(np.zeros((2, 3, 1, 1)))
    tools.store.add("mem://ds", attrs_evolve(meta, {"observation.images.top": camera}))
    tools.container.recompute_stats()(RecomputeRequest("mem://ds", visual=False))
    _, stats = access.written["mem://ds"]
    np.testing.assert_array_equal(stats["observation.images.top"].mean, camera.mean)
    tools.container.recompute_stats()(RecomputeRequest("mem://ds"))
    _, stats = access.written["mem://ds"]
    expected = frames.reshape(-1, 3).mean(axis=0) / 255
    np.testing.assert_allclose(stats["observation.images.top"].mean.reshape(-1), expected)
    assert stats["observation.images.top"].count == 5


def attrs_evolve(meta: DatasetMeta, extra_stats) -> DatasetMeta:
    import attrs

    stats = {**meta.stats, **stats_to_json(extra_stats)}
    return attrs.evolve(meta, stats=stats)
