"""`rlctl dataset check | merge | split | delete-episodes | recompute-stats | convert` as a user
types them (click's runner), on small datasets written by rlctl and LeRobot's fixture."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.entrypoints.cli.main import cli

SUPPORT = Path(__file__).parents[1] / "adapters/storage/tools_support.py"


def load_support():
    spec = importlib.util.spec_from_file_location("tools_support", SUPPORT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = load_support()
ws = support.writer
PLAN = ws.DatasetPlan(
    fps=10, state_dim=2, episodes=(("pick",) * 4, ("place",) * 3, ("pick",) * 5), video=True
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def dataset(tmp_path) -> Path:
    root = tmp_path / "ds"
    ws.write(root, PLAN)
    return root


def run(runner: CliRunner, *args: str, code: int = 0):
    result = runner.invoke(cli, ["dataset", *map(str, args)])
    assert result.exit_code == code, (result.output, result.exception)
    return result


def test_check_passes_a_good_dataset(runner, fixtures_dir):
    out = run(runner, "check", fixtures_dir / "sim_video").output
    assert "ok, 0 warnings (2 data and video files read)" in out


def test_check_lists_every_problem_and_exits_1(runner, fixtures_dir, tmp_path):
    root = support.copy_dataset(fixtures_dir / "sim_video", tmp_path / "broken")
    (root / "meta/stats.json").write_text("{")
    (root / "videos/observation.images.front/chunk-000/file-000.mp4").unlink()
    result = run(runner, "check", root, code=1)
    assert "2 problems" in result.output
    assert "error   meta/stats.json: the statistics file is not valid JSON" in result.output
    assert "videos/observation.images.front/chunk-000/file-000.mp4" in result.output
    assert "hint: " in result.output
    data = json.loads(run(runner, "check", root, "--json", code=1).stdout)
    assert not data["ok"]
    assert {p["file"] for p in data["problems"]} == {
        "meta/stats.json",
        "videos/observation.images.front/chunk-000/file-000.mp4",
    }


def test_check_names_values_that_are_not_numbers_and_dtypes_that_lie(
    runner, fixtures_dir, tmp_path
):
    import math

    import pyarrow as pa
    import pyarrow.parquet as pq

    root = support.copy_dataset(fixtures_dir / "sim_video", tmp_path / "poisoned")
    data = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(data)
    action = table.column("action").to_pylist()
    action[22][1] = math.nan  # episode 1, frame 2
    column = pa.array(action, table.schema.field("action").type)
    pq.write_table(table.set_column(table.schema.get_field_index("action"), "action", column), data)
    info = json.loads((root / "meta/info.json").read_text())
    info["features"]["observation.state"]["dtype"] = "complex128"
    (root / "meta/info.json").write_text(json.dumps(info))

    result = run(runner, "check", root, code=1)

    assert "2 problems" in result.output
    assert "holds 1 NaN value(s) in 1 row(s); the first at frame 2, row 22" in result.output
    assert "is declared 'complex128' in meta/info.json" in result.output
    problems = json.loads(run(runner, "check", root, "--json", code=1).stdout)["problems"]
    assert {(p["key"], p["episode"]) for p in problems} == {
        ("action", 1),
        ("observation.state", None),
    }


def test_merge_split_delete_recompute_end_to_end(runner, dataset, tmp_path):
    merged = tmp_path / "merged"
    out = run(runner, "merge", dataset, dataset.with_name("ds2"), "-o", merged, code=1).output
    assert "no dataset folder here" in out or "ds2" in out  # a missing input is one message
    ws.write(tmp_path / "ds2", PLAN)
    out = run(runner, "merge", dataset, tmp_path / "ds2", "-o", merged).output
    assert "merged into" in out and "6 episodes, 24 frames, 2 tasks" in out

    part = tmp_path / "part"
    data = json.loads(
        run(runner, "split", merged, "--episodes", "1,4-5", "-o", part, "--json").stdout
    )
    assert (data["episodes"], data["frames"]) == (3, 11)

    run(runner, "split", merged, "--fractions", "train=0.5,val=0.5", "-o", tmp_path / "parts")
    assert LeRobotMetaReader().read_meta(tmp_path / "parts/val").total_episodes == 3

    out = run(runner, "delete-episodes", merged, "--episodes", "0-2").output
    assert "rewrote" in out and "3 episodes, 12 frames" in out
    assert LeRobotMetaReader().read_meta(merged).total_episodes == 3

    out = run(
        runner,
        "recompute-stats",
        merged,
        "--relative-actions",
        "--chunk-size",
        "3",
        "--exclude-joints",
        "joint_1",
    ).output
    # Episodes of 4, 3 and 5 frames hold 2, 1 and 3 chunks of 3.
    assert "stats.json 'action' is relative (6 chunks)" in out
    run(runner, "check", merged)


def test_delete_refuses_bad_specs_without_touching_the_dataset(runner, dataset):
    before = sorted(p.name for p in dataset.rglob("*"))
    out = run(runner, "delete-episodes", dataset, "--episodes", "7", code=1).output
    assert "do not exist" in out
    out = run(runner, "delete-episodes", dataset, "--episodes", "0-2", code=1).output
    assert "all the dataset has" in out
    assert sorted(p.name for p in dataset.rglob("*")) == before


def test_convert_a_v21_dataset(runner, dataset, tmp_path):
    legacy = support.make_v21(dataset, tmp_path / "legacy")
    out = run(runner, "convert", legacy).output
    assert "converted v2.1 -> " in out and f"the original is kept at {legacy}.v2.1" in out
    run(runner, "check", legacy)
    out = run(runner, "info", legacy).output
    assert "LeRobot v3.0" in out


def test_delete_in_place_says_what_it_kept_and_refuses_a_blind_retry(runner, dataset):
    (dataset / "README.md").write_text("| Episodes | 3 |\n")
    (dataset / "notes.txt").write_text("mine")
    out = run(runner, "delete-episodes", dataset, "--episodes", "0").output
    assert "kept beside the data, untouched: README.md (counts updated), notes.txt" in out
    assert (dataset / "README.md").read_text() == "| Episodes | 2 |\n"

    again = run(runner, "delete-episodes", dataset, "--episodes", "0", code=1)
    assert "was already applied" in again.output and "--force" in again.output
    assert LeRobotMetaReader().read_meta(dataset).total_episodes == 2

    forced = run(runner, "delete-episodes", dataset, "--episodes", "0", "--force", "--json")
    data = json.loads(forced.stdout)
    assert data["episodes"] == 1 and data["kept"] == ["README.md (counts updated)", "notes.txt"]


def test_check_fix_removes_what_killed_writers_left(runner, dataset):
    staging = dataset / ".rlctl-staging" / "front"
    staging.mkdir(parents=True)
    temp = dataset / "meta" / ".stats.json.99999999.rlctl-tmp"
    temp.write_text("{")
    beside = dataset.with_name(f".{dataset.name}.rlctl-edit-99999999-0")
    (beside / "meta").mkdir(parents=True)
    (dataset / "notes.txt").write_text("mine")

    plain = run(runner, "check", dataset).output  # a warning naming each, and the fix
    for path in (staging.parent, temp, beside):
        assert path.name in plain and path.exists()
    assert "left over by an interrupted write or edit" in plain and "check --fix" in plain
    assert "notes.txt" not in plain
    out = run(runner, "check", dataset, "--fix").output
    assert "removed 3 leftover(s) of interrupted writers" in out
    for path in (staging.parent, temp, beside):
        assert str(path) in out and not path.exists()
    assert (dataset / "notes.txt").read_text() == "mine"
    assert "ok" in out
    assert "removed 0 leftover(s)" in run(runner, "check", dataset, "--fix").output
