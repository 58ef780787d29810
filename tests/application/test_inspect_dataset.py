"""InspectDataset end to end through the container, with the in-memory store swapped in."""

import pytest
from dependency_injector import providers
from hypothesis import given
from hypothesis import strategies as st

from rlctl.adapters.memory.dataset_store import InMemoryDatasetStore
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import DatasetNotFound
from rlctl.domain.features import features_from_info
from rlctl.entrypoints.container import build_container
from rlctl.entrypoints.settings import AppSettings, DatasetSettings

FEATURES = features_from_info(
    {
        "observation.state": {"dtype": "float32", "shape": [6], "names": None},
        "action": {"dtype": "float32", "shape": [6], "names": None},
        "observation.images.top": {
            "dtype": "video",
            "shape": [48, 64, 3],
            "names": ["height", "width", "channels"],
            "info": {"video.codec": "av1"},
        },
    }
)


def make_meta(lengths: list[int], tasks: list[str], fps: int) -> DatasetMeta:
    episodes, start = [], 0
    for i, n in enumerate(lengths):
        episodes.append(EpisodeRecord(i, n, (tasks[i % len(tasks)],), start, start + n))
        start += n
    return DatasetMeta(
        codebase_version="v3.0",
        fps=fps,
        features=FEATURES,
        total_episodes=len(lengths),
        total_frames=start,
        tasks=tuple(tasks),
        episodes=tuple(episodes),
        robot_type="koch",
    )


def memory_container(store: InMemoryDatasetStore):
    container = build_container(AppSettings(dataset=DatasetSettings(store="memory")))
    container.meta_reader.override(providers.Object(store))
    return container


@given(
    st.lists(st.integers(1, 500), min_size=1, max_size=10),
    st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=4, unique=True),
    st.integers(1, 120),
)
def test_summary_reports_what_the_store_holds(lengths, tasks, fps):
    store = InMemoryDatasetStore()
    store.add("mem://demo", make_meta(lengths, tasks, fps), size_bytes=1234)
    summary = memory_container(store).inspect_dataset()("mem://demo")
    assert summary.total_episodes == len(lengths)
    assert summary.total_frames == sum(lengths)
    assert summary.tasks == tuple(tasks)
    assert summary.fps == fps and summary.robot_type == "koch"
    assert summary.video_keys == ("observation.images.top",)
    assert summary.size_bytes == 1234
    assert summary.duration_s == pytest.approx(sum(lengths) / fps, abs=1e-3)
    assert summary.to_dict()["features"]["action"]["shape"] == [6]


def test_memory_selector_serves_the_in_memory_store():
    container = build_container(AppSettings(dataset=DatasetSettings(store="memory")))
    with pytest.raises(DatasetNotFound, match="no dataset here"):
        container.inspect_dataset()("mem://missing")
