"""`discard`: a new dataset that never got an episode goes, with only what its session made."""

from __future__ import annotations

import numpy as np

from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions

FEATURES = {"observation.state": {"dtype": "float32", "shape": [2], "names": None}}


def writer() -> LeRobotV3Writer:
    return LeRobotV3Writer(options=WriterOptions(durable=False, encode_in_subprocess=False))


def test_discard_removes_the_folders_create_made(tmp_path):
    session = writer().create(tmp_path / "a" / "b" / "ds", fps=10, features=FEATURES)
    session.add_frame({"observation.state": np.zeros(2, np.float32), "task": "t"})
    session.discard()  # the unsaved episode goes too
    assert list(tmp_path.iterdir()) == []


def test_discard_keeps_a_folder_that_was_there(tmp_path):
    root = tmp_path / "ds"
    root.mkdir()
    writer().create(root, fps=10, features=FEATURES).discard()
    assert root.is_dir() and list(root.iterdir()) == []
