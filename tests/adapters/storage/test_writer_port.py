"""The DatasetWriter port: the LeRobot writer and the in-memory fake behave the same way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.dataset_writer import InMemoryDatasetWriter
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.application.ports.dataset_writer import DatasetWriter
from rlctl.domain.errors import FeatureMismatch, InvalidInput
from rlctl.domain.features import FeatureSpec
from rlctl.domain.frames import Frame

FEATURES = {
    "observation.state": FeatureSpec("observation.state", "float32", (2,)),
    "observation.images.cam": FeatureSpec(
        "observation.images.cam", "video", (8, 8, 3), names=["height", "width", "channels"]
    ),
}


def frame(t: int, task: str) -> Frame:
    image = np.full((8, 8, 3), t * 10, np.uint8)
    return Frame(
        values={
            "observation.state": np.array([t, -t], np.float32),
            "observation.images.cam": image,
        },
        task=task,
    )


@pytest.fixture(params=["lerobot_v3", "memory"])
def writer(request) -> DatasetWriter:
    if request.param == "memory":
        return InMemoryDatasetWriter()
    return LeRobotV3Writer(options=WriterOptions(encode_in_subprocess=False, durable=False))


def test_episodes_and_tasks_are_numbered_alike(writer: DatasetWriter, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with writer.create(root, fps=10, features=FEATURES) as session:
        for t in range(3):
            session.add_frame(frame(t, "pick"))
        first = session.save_episode()
        session.add_frame(frame(0, "drop me"))
        session.clear_episode_buffer()
        for t in range(2):
            session.add_frame(frame(t, "place" if t else "pick"))
        second = session.save_episode()
        with pytest.raises(FeatureMismatch, match=r"observation\.state"):
            bad = {**frame(0, "x").values, "observation.state": np.zeros(3), "task": "x"}
            session.add_frame(bad)
    assert (first.index, first.dataset_from_index, first.dataset_to_index) == (0, 0, 3)
    assert (second.index, second.tasks, second.dataset_from_index) == (1, ("pick", "place"), 3)

    with writer.resume(root) as session:
        assert (session.num_episodes, session.num_frames) == (2, 5)
        session.add_frame(frame(0, "push"))
        third = session.save_episode()
        meta = session.flush()
    assert third.dataset_from_index == 5
    assert (meta.total_episodes, meta.total_frames) == (3, 6)
    assert meta.tasks == ("pick", "place", "push")
    assert list(meta.features)[-5:] == [
        "timestamp",
        "frame_index",
        "episode_index",
        "index",
        "task_index",
    ]


def test_a_finalized_session_is_closed(writer: DatasetWriter, tmp_path: Path) -> None:
    session = writer.create(tmp_path / "ds", fps=10, features=FEATURES)
    session.finalize()
    with pytest.raises(InvalidInput, match="finalized"):
        session.add_frame(frame(0, "pick"))


def test_discard_takes_only_a_new_dataset_without_episodes(
    writer: DatasetWriter, tmp_path: Path
) -> None:
    root = tmp_path / "ds"
    session = writer.create(root, fps=10, features=FEATURES)
    session.add_frame(frame(0, "pick"))
    session.discard()
    writer.create(root, fps=10, features=FEATURES).finalize()  # the place is free again

    session = writer.resume(root)
    session.add_frame(frame(0, "pick"))
    session.save_episode()
    with pytest.raises(InvalidInput, match="this session created"):
        session.discard()
    session.finalize()
    resumed = writer.resume(root)
    with pytest.raises(InvalidInput, match="this session created"):
        resumed.discard()
    assert resumed.finalize().total_episodes == 1
