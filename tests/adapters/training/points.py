"""A tiny state-only LeRobot dataset (a 2-d point walking to the origin), and ways to damage it
as a disk, a converter or a hand edit might: NaN in one row of the data, NaN in the statistics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import rlctl.api

FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
    "action": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
}


def points_dataset(root: Path, *, episodes: int = 2, length: int = 10) -> Path:
    session = rlctl.api.create_dataset(root, fps=10, features=FEATURES)
    rng = np.random.default_rng(0)
    for _ in range(episodes):
        state = rng.uniform(-1, 1, size=2).astype(np.float32)
        for _ in range(length):
            target = (0.8 * state).astype(np.float32)
            session.add_frame({"observation.state": state, "action": target, "task": "walk"})
            state = target
        session.save_episode()
    session.finalize()
    return root


def data_file(root: Path) -> Path:
    return next((root / "data").rglob("*.parquet"))


def set_action(root: Path, row: int, element: int, value: float) -> None:
    """Overwrite one action value in the data file (the statistics stay as they were)."""
    path = data_file(root)
    table = pq.read_table(path)
    actions = table.column("action").to_pylist()
    actions[row][element] = value
    at = table.schema.get_field_index("action")
    field = table.schema.field(at)
    pq.write_table(table.set_column(at, field, pa.array(actions, type=field.type)), path)


def set_stat(root: Path, key: str, stat: str, element: int, value: float) -> None:
    path = root / "meta" / "stats.json"
    stats = json.loads(path.read_text())
    stats[key][stat][element] = value
    path.write_text(json.dumps(stats))
