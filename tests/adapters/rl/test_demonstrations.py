"""Demonstrations for the learner's offline buffer, read from a LeRobot v3.0 dataset: LeRobot's
sim_images fixture with a `next.reward` column added (1 at each episode's last frame), and the
same dataset without it refused with what to do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlctl.adapters.rl.demonstrations import Demonstrations
from rlctl.domain.errors import InvalidInput


def with_rewards(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    data = target / "data" / "chunk-000" / "file-000.parquet"
    table = pq.read_table(data)
    episodes = np.asarray(table["episode_index"])
    last = np.append(episodes[1:] != episodes[:-1], True)
    table = table.append_column("next.reward", pa.array(last.astype(np.float32)))
    pq.write_table(table, data)
    info_path = target / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info["features"]["next.reward"] = {"dtype": "float32", "shape": [1], "names": None}
    info_path.write_text(json.dumps(info))
    return target


def test_a_dataset_with_rewards_becomes_transitions(fixtures_dir: Path, tmp_path: Path) -> None:
    root = with_rewards(fixtures_dir / "sim_images", tmp_path / "demos")
    demos = Demonstrations(root)
    batch = demos.transitions(["observation.state", "observation.images.front"])
    assert len(batch) == 27
    assert batch.state["observation.images.front"].shape == (27, 3, 48, 64)
    assert batch.action.shape == (27, 6)
    done = batch.done.astype(bool)
    assert done.sum() == 2 and done[-1]  # the last frame of each of the two episodes
    np.testing.assert_array_equal(batch.reward, done.astype(np.float32))
    # Within an episode the next state is the next frame; at its end, the frame itself.
    states = batch.state["observation.state"]
    following = batch.next_state["observation.state"]
    inner = np.flatnonzero(~done)
    np.testing.assert_array_equal(following[inner], states[inner + 1])
    np.testing.assert_array_equal(following[done], states[done])


def test_a_dataset_without_rewards_is_refused(fixtures_dir: Path) -> None:
    with pytest.raises(InvalidInput, match=r"no next\.reward") as err:
        Demonstrations(fixtures_dir / "sim_images").transitions()
    assert "rewards" in (err.value.hint or "")


def test_one_number_features_keep_their_dimension(tmp_path: Path) -> None:
    """A 1-D action (Pendulum's torque) is read back as a scalar by the dataset: the transitions
    keep it as (N, 1), as the actors send it."""
    from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
    from rlctl.domain.features import FeatureSpec

    features = {
        "observation.state": FeatureSpec("observation.state", "float32", (1,)),
        "action": FeatureSpec("action", "float32", (1,)),
        "next.reward": FeatureSpec("next.reward", "float32", (1,)),
    }
    options = WriterOptions(encode_in_subprocess=False, durable=False)
    with LeRobotV3Writer(options=options).create(tmp_path, fps=10, features=features) as session:
        for i in range(4):
            value = np.float32([i])
            session.add_frame(
                {"observation.state": value, "action": -value, "next.reward": value, "task": "t"}
            )
        session.save_episode()
    batch = Demonstrations(tmp_path).transitions()
    assert batch.action.shape == (4, 1) and batch.state["observation.state"].shape == (4, 1)
    np.testing.assert_array_equal(batch.action[:, 0], [0, -1, -2, -3])


def test_a_dataset_without_actions_is_refused_naming_it(fixtures_dir: Path, tmp_path: Path) -> None:
    root = with_rewards(fixtures_dir / "sim_images", tmp_path / "demos")
    demos = Demonstrations(root)
    features = dict(demos.meta.features)
    del features["action"]
    demos.meta = type("Meta", (), {"features": features})()  # as a dataset lacking it reads
    with pytest.raises(InvalidInput, match="no action") as err:
        demos.transitions(["observation.state"])
    assert err.value.where == str(demos.dataset.root)
