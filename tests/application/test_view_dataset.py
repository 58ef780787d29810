"""ViewDataset through the container with in-memory adapters: what the viewer page shows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.application.use_cases.view_dataset import (
    dimension_names,
    episode_annotations,
    language_runs,
)
from rlctl.domain.dataset_meta import EpisodeRecord
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec
from rlctl.entrypoints.container import build_container
from rlctl.entrypoints.settings import AppSettings, DatasetSettings

ROOT = Path("/memory/demo")
JOINTS = ["pan", "lift", "gripper"]


def recorded_container(lengths: list[int]):
    """A container whose in-memory writer holds a recorded dataset, and whose meta reader
    reads it."""
    container = build_container(AppSettings(dataset=DatasetSettings(store="memory")))
    features = {
        "observation.state": {"dtype": "float32", "shape": [3], "names": JOINTS},
        "action": {"dtype": "float32", "shape": [3], "names": {"motors": JOINTS}},
        "observation.environment_state": {"dtype": "float32", "shape": [2], "names": None},
    }
    session = container.dataset_writer().create(ROOT, fps=5, features=features)
    for episode, length in enumerate(lengths):
        for frame in range(length):
            value = np.array([episode, frame, episode * frame], np.float32)
            session.add_frame(
                {
                    "observation.state": value,
                    "action": value + 0.5,
                    "observation.environment_state": np.array([frame, -frame], np.float32),
                    "task": f"task {episode % 2}",
                }
            )
        session.save_episode()
    session.finalize()
    meta = container.dataset_writer().datasets[ROOT].meta()
    container.meta_reader().add(str(ROOT), meta)
    return container


@given(st.lists(st.integers(1, 12), min_size=1, max_size=5))
def test_the_page_lists_every_episode_and_each_series_is_what_was_recorded(lengths):
    viewer = recorded_container(lengths).view_dataset()(str(ROOT))
    page = viewer.page
    assert [e.index for e in page.episodes] == list(range(len(lengths)))
    assert [e.length for e in page.episodes] == lengths
    assert [e.tasks for e in page.episodes] == [(f"task {i % 2}",) for i in range(len(lengths))]
    assert [g.key for g in page.groups] == [
        "observation.state",
        "action",
        "observation.environment_state",
    ]
    for index, length in enumerate(lengths):
        episode = viewer.episode(index)
        frames = np.arange(length)
        np.testing.assert_allclose(episode.timestamps, frames / 5)
        state = episode.series["observation.state"]
        np.testing.assert_array_equal(
            state, np.stack([0 * frames + index, frames, index * frames], 1)
        )
        np.testing.assert_array_equal(episode.series["action"], state + 0.5)
        data = json.loads(json.dumps(episode.to_dict()))  # what the page receives
        assert data["series"]["action"][1] == [f + 0.5 for f in range(length)]
        assert data["videos"] == []


def test_lines_are_named_from_the_features_names():
    viewer = recorded_container([3]).view_dataset()(str(ROOT))
    names = {g.key: g.names for g in viewer.page.groups}
    assert names["observation.state"] == ("pan", "lift", "gripper")
    assert names["action"] == ("pan", "lift", "gripper")  # {"motors": [...]}
    assert names["observation.environment_state"] == (
        "observation.environment_state[0]",
        "observation.environment_state[1]",
    )


def test_an_unknown_episode_is_a_clear_error():
    viewer = recorded_container([3, 4]).view_dataset()(str(ROOT))
    with pytest.raises(InvalidInput, match="episode 5 does not exist"):
        viewer.episode(5)


def test_dimension_names_fall_back_when_names_do_not_fit():
    spec = FeatureSpec(key="action", dtype="float32", shape=(2,), names=["only one"])
    assert dimension_names(spec) == ("action[0]", "action[1]")
    scalar = FeatureSpec(key="next.reward", dtype="float32", shape=(1,), names=None)
    assert dimension_names(scalar) == ("next.reward",)


def test_annotations_are_the_text_columns_beyond_lerobots_own():
    record = EpisodeRecord(
        index=0,
        length=3,
        tasks=("pick",),
        dataset_from_index=0,
        dataset_to_index=3,
        columns={
            "tasks": ["pick"],
            "data/chunk_index": 0,
            "videos/cam/from_timestamp": 0.0,
            "language_instruction": "pick the red cube",
            "notes": ["slipped", "regrasped"],
            "success": True,
        },
    )
    assert episode_annotations(record) == {
        "language_instruction": "pick the red cube",
        "notes": "slipped; regrasped",
    }


def test_language_runs_group_equal_values():
    values = np.array(["reach", "reach", "grasp", "", "lift"], dtype=object)
    assert language_runs(values) == [
        {"from": 0, "to": 2, "text": "reach"},
        {"from": 2, "to": 3, "text": "grasp"},
        {"from": 4, "to": 5, "text": "lift"},
    ]


def test_missing_values_reach_the_page_as_null():
    viewer = recorded_container([2]).view_dataset()(str(ROOT))
    episode = viewer.episode(0)
    episode.series["action"][0, 0] = np.nan
    assert episode.to_dict()["series"]["action"][0][0] is None


def test_pictures_of_image_cameras_come_from_the_recorded_frames():
    from io import BytesIO

    from PIL import Image

    container = build_container(AppSettings(dataset=DatasetSettings(store="memory")))
    features = {
        "observation.state": {"dtype": "float32", "shape": [1], "names": ["x"]},
        "observation.images.top": {
            "dtype": "image",
            "shape": [4, 6, 3],
            "names": ["height", "width", "channels"],
        },
    }
    session = container.dataset_writer().create(ROOT, fps=5, features=features)
    for frame in range(3):
        picture = np.full((4, 6, 3), 40 * frame, np.uint8)
        session.add_frame(
            {
                "observation.state": np.array([frame], np.float32),
                "observation.images.top": picture,
                "task": "look",
            }
        )
    session.save_episode()
    session.finalize()
    container.meta_reader().add(str(ROOT), container.dataset_writer().datasets[ROOT].meta())
    viewer = container.view_dataset()(str(ROOT))
    assert viewer.page.image_cameras == ("observation.images.top",)
    png = viewer.frame_image(0, "observation.images.top", 2)
    np.testing.assert_array_equal(np.asarray(Image.open(BytesIO(png))), np.full((4, 6, 3), 80))
    with pytest.raises(InvalidInput, match="not an image camera"):
        viewer.frame_image(0, "observation.state", 0)
    with pytest.raises(InvalidInput, match="no frame 3 in episode 0"):
        viewer.frame_image(0, "observation.images.top", 3)
