"""Language annotations written by LeRobot 0.6.1's annotation tool read item for item as LeRobot
reads them, and LeRobot reads back what rlctl's tools write from them."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.entrypoints.cli.main import cli

pytestmark = [pytest.mark.slow, pytest.mark.lerobot, pytest.mark.timeout(600)]

HARNESS = Path(__file__).with_name("lerobot_language.py")
COLUMNS = ("language_persistent", "language_events")


def ours(root: Path) -> list[dict]:
    reader = LeRobotDatasetReader(root)
    return [
        {"episode_index": item["episode_index"].item(), **{k: item[k] for k in COLUMNS}}
        for item in (reader[i] for i in range(len(reader)))
    ]


def test_annotations_match_lerobot_both_ways(lerobot, tmp_path):
    root = tmp_path / "annotated"
    lerobot(HARNESS, "write", root, tmp_path / "staging")

    theirs = lerobot(HARNESS, "read", root)["items"]
    mine = ours(root)
    assert len(mine) == 15
    assert mine == theirs
    styles = {r["style"] for item in mine for k in COLUMNS for r in item[k]}
    assert styles == {
        "plan",
        "subtask",
        "memory",
        "motion",
        "task_aug",
        "interjection",
        "vqa",
        "trace",
        None,
    }

    edited = tmp_path / "edited"
    result = CliRunner().invoke(
        cli, ["dataset", "split", str(root), "--episodes", "2,0", "--output", str(edited)]
    )
    assert result.exit_code == 0, result.output
    back = lerobot(HARNESS, "read", edited)["items"]
    assert back == ours(edited)
    assert [i for i in back if i["episode_index"] == 1] == [
        {**i, "episode_index": 1} for i in theirs if i["episode_index"] == 2
    ]
