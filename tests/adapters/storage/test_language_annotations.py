"""Language annotations (`language_persistent`, `language_events`): written, read back as LeRobot
returns them, kept through every dataset tool, summarised by `dataset info`. No LeRobot needed:
`lerobot_language.py` holds the comparison with LeRobot itself."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from rlctl.adapters.storage.lerobot_v3.language_summary import LeRobotLanguageSummary
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer
from rlctl.domain.errors import FeatureMismatch
from rlctl.entrypoints.cli.main import cli

FRONT = "observation.images.front"
FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [2], "names": None},
    "action": {"dtype": "float32", "shape": [2], "names": None},
    "language_persistent": {"dtype": "language", "shape": [1], "names": None},
    "language_events": {"dtype": "language", "shape": [1], "names": None},
}
LENGTHS = (4, 3, 5)
SAY = {"type": "function", "function": {"name": "say", "arguments": {"text": "on it"}}}


def persistent(episode: int) -> list[dict]:
    return [
        {"role": "assistant", "content": f"plan {episode}", "style": "plan", "timestamp": 0.0},
        {"role": "assistant", "content": "reach", "style": "subtask", "timestamp": 0.0},
        {"role": "assistant", "content": "grasp", "style": "subtask", "timestamp": 0.1},
    ]


def events(episode: int, t: int) -> list[dict]:
    if t == 1:
        return [
            {"role": "user", "content": f"where? {episode}", "style": "vqa", "camera": FRONT},
            {"role": "assistant", "content": "left", "style": "vqa", "camera": FRONT},
        ]
    if t == 2:
        return [{"role": "assistant", "content": None, "style": None, "tool_calls": [SAY]}]
    return []


def expected_persistent(episode: int) -> list[dict]:
    """As LeRobot returns rows: every field, timestamps as float32 values, no tool call."""
    return [
        {
            "role": row["role"],
            "content": row["content"],
            "style": row["style"],
            "timestamp": float(np.float32(row["timestamp"])),
            "camera": None,
            "tool_calls": None,
        }
        for row in persistent(episode)
    ]


def expected_events(episode: int, t: int) -> list[dict]:
    fields = ("role", "content", "style", "camera", "tool_calls")
    return [{name: row.get(name) for name in fields} for row in events(episode, t)]


@pytest.fixture
def annotated(tmp_path: Path) -> Path:
    root = tmp_path / "annotated"
    with LeRobotV3Writer().create(root, fps=10, features=FEATURES) as session:
        for episode, length in enumerate(LENGTHS):
            for t in range(length):
                session.add_frame(
                    {
                        "observation.state": np.full(2, t, np.float32),
                        "action": np.full(2, episode, np.float32),
                        "language_persistent": persistent(episode),
                        "language_events": events(episode, t),
                        "task": f"task {episode}",
                    }
                )
            session.save_episode()
    return root


def assert_annotations(root: Path, episodes: list[int]) -> None:
    """Every frame of `root` carries the rows written for the source episode it came from."""
    reader = LeRobotDatasetReader(root)
    assert len(reader) == sum(LENGTHS[e] for e in episodes)
    position = 0
    for new, source in enumerate(episodes):
        for t in range(LENGTHS[source]):
            item = reader[position]
            assert item["episode_index"].item() == new
            assert item["index"].item() == position
            assert item["frame_index"].item() == t
            assert item["language_persistent"] == expected_persistent(source)
            assert item["language_events"] == expected_events(source, t)
            position += 1


def test_written_annotations_read_back_as_lerobot_returns_them(annotated):
    assert_annotations(annotated, [0, 1, 2])
    info = json.loads((annotated / "meta" / "info.json").read_text())
    assert info["features"]["language_events"] == {"dtype": "language", "shape": [1], "names": None}
    stats = json.loads((annotated / "meta" / "stats.json").read_text())
    assert "language_persistent" not in stats  # as LeRobot: no statistics of text
    schema = pq.read_schema(annotated / "data" / "chunk-000" / "file-000.parquet")
    calls = schema.field("language_events").type.value_type.field("tool_calls").type
    assert calls.value_type == pa.json_()  # LeRobot's canonical type


def test_a_bad_annotation_row_is_refused_when_added(tmp_path):
    session = LeRobotV3Writer().create(tmp_path / "bad", fps=10, features=FEATURES)
    try:
        frame = {
            "observation.state": np.zeros(2, np.float32),
            "action": np.zeros(2, np.float32),
            "language_persistent": [{"role": "assistant", "content": "x", "style": "plan"}],
            "language_events": [],
            "task": "t",
        }
        with pytest.raises(FeatureMismatch, match="timestamp"):
            session.add_frame(frame)
        with pytest.raises(FeatureMismatch, match="fields"):
            session.add_frame(
                {
                    **frame,
                    "language_persistent": [],
                    "language_events": [{"role": "user", "when": 1}],
                }
            )
    finally:
        session.discard()


def test_columns_as_lerobots_annotation_tool_writes_them_read_the_same(annotated):
    # LeRobot's writer lets pyarrow infer the types: float64 timestamps, null cameras, tool
    # calls as nested structs. Rewrite the file that way.
    path = annotated / "data" / "chunk-000" / "file-000.parquet"
    table = pq.read_table(path)
    reader = LeRobotDatasetReader(annotated)
    inferred = {
        "language_persistent": pa.array(
            [persistent(reader[i]["episode_index"].item()) for i in range(len(reader))]
        ),
        "language_events": pa.array(
            [
                [dict(r, camera=r.get("camera")) for r in events(e, t)]
                for e, length in enumerate(LENGTHS)
                for t in range(length)
            ]
        ),
    }
    assert pa.types.is_struct(
        inferred["language_events"].type.value_type.field("tool_calls").type.value_type
    )
    for key, column in inferred.items():
        table = table.set_column(table.schema.get_field_index(key), key, column)
    pq.write_table(table, path)

    assert_annotations(annotated, [0, 1, 2])


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, ["dataset", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_annotations_survive_every_dataset_tool_and_move_with_their_frames(annotated, tmp_path):
    run("split", str(annotated), "--episodes", "2,0", "--output", str(tmp_path / "split"))
    assert_annotations(tmp_path / "split", [0, 2])

    run("merge", str(tmp_path / "split"), str(annotated), "--output", str(tmp_path / "merged"))
    assert_annotations(tmp_path / "merged", [0, 2, 0, 1, 2])

    run("delete-episodes", str(tmp_path / "merged"), "--episodes", "1,3")
    assert_annotations(tmp_path / "merged", [0, 0, 2])

    run("recompute-stats", str(tmp_path / "merged"))
    assert_annotations(tmp_path / "merged", [0, 0, 2])
    assert "ok" in run("check", str(tmp_path / "merged"))


def test_dataset_info_counts_annotations_by_kind_and_style(annotated):
    summary = json.loads(run("info", str(annotated), "--json"))["language"]

    assert summary["language_persistent"] == {
        "rows": 9,  # three per episode, counted once per episode
        "episodes": 3,
        "styles": {"plan": 3, "subtask": 6},
        "cameras": {},
    }
    assert summary["language_events"] == {
        "rows": 9,
        "episodes": 3,
        "styles": {"none": 3, "vqa": 6},
        "cameras": {FRONT: 6},
    }
    text = run("info", str(annotated))
    assert "language_events" in text and "vqa 6" in text and f"{FRONT} 6" in text


def test_datasets_without_annotations_have_no_summary(tmp_path):
    features = {k: v for k, v in FEATURES.items() if not k.startswith("language")}
    root = tmp_path / "plain"
    with LeRobotV3Writer().create(root, fps=10, features=features) as session:
        session.add_frame(
            {
                "observation.state": np.zeros(2, np.float32),
                "action": np.zeros(2, np.float32),
                "task": "t",
            }
        )
        session.save_episode()

    assert LeRobotLanguageSummary().summarize_language(str(root)) == {}
    assert json.loads(run("info", str(root), "--json"))["language"] == {}
