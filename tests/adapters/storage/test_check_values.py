"""`rlctl dataset check` on values and types: NaN, +inf, -inf and empty values in the data and in
the statistics, and declared dtypes and shapes that differ from what the parquet files store.

Each is an error naming the file, the column and the episode, with a hint; LeRobot's own
fixtures (and rlctl-written datasets) still pass without a word.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.tools.checker import LeRobotDatasetChecker
from rlctl.application.use_cases.check_dataset import CheckDataset, CheckReport
from rlctl.domain.errors import CorruptDataset


def load_support():
    path = Path(__file__).with_name("tools_support.py")
    spec = importlib.util.spec_from_file_location("tools_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = load_support()
INFO = "meta/info.json"
STATS = "meta/stats.json"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
DATA = "data/chunk-000/file-000.parquet"
STATE = "observation.state"
# sim_video: episode 0 is rows 0-19, episode 1 rows 20-44, episode 2 rows 45-74.
FIRST_ROW = {0: 0, 1: 20, 2: 45}
CUSTOM = "observation.custom"  # a 2 x 3 feature added by the tests: lists of lists
SCALAR = "next.reward"  # one value a row


@pytest.fixture
def sim_video(fixtures_dir: Path, tmp_path: Path) -> Path:
    return support.copy_dataset(fixtures_dir / "sim_video", tmp_path / "sim_video")


def check(root: Path) -> CheckReport:
    return CheckDataset(LeRobotDatasetChecker(), SilentProgress())(str(root))


def errors(report: CheckReport, file: str = DATA, key: str | None = None) -> list:
    return [p for p in report.errors if p.file == file and (key is None or p.key == key)]


def set_column(root: Path, key: str, array: pa.Array, dtype: str | None, shape) -> None:
    """Replace (or add) a data column and declare it in info.json (dtype None: leave it)."""
    path = root / DATA
    table = pq.read_table(path)
    if key in table.column_names:
        table = table.set_column(table.schema.get_field_index(key), key, array)
    else:
        table = table.append_column(key, array)
    pq.write_table(table, path)
    info = json.loads((root / INFO).read_text())
    entry = info["features"].setdefault(key, {"names": None})
    if dtype is not None:
        entry["dtype"] = dtype
    if shape is not None:
        entry["shape"] = list(shape)
    (root / INFO).write_text(json.dumps(info, indent=4))


def add_custom_features(root: Path) -> None:
    rows = 75
    grid = np.arange(rows * 6, dtype=np.float64).reshape(rows, 2, 3)
    set_column(
        root, CUSTOM, pa.array(grid.tolist(), pa.list_(pa.list_(pa.float64()))), "float64", (2, 3)
    )
    set_column(root, SCALAR, pa.array(np.linspace(0, 1, rows, dtype=np.float32)), "float32", (1,))


def poison(root: Path, key: str, rows_and_values: dict[int, float]) -> None:
    """Put the values in the given rows of a feature (the first value of the row)."""
    table = pq.read_table(root / DATA)
    column = table.column(key).combine_chunks()
    kind = column.type
    values = column.to_pylist()
    for row, value in rows_and_values.items():
        if isinstance(values[row], list) and isinstance(values[row][0], list):
            values[row][0][0] = value
        elif isinstance(values[row], list):
            values[row][0] = value
        else:
            values[row] = value
    set_column(root, key, pa.array(values, kind), None, None)


def test_fixtures_and_rlctl_datasets_have_no_value_or_type_problems(sim_video):
    add_custom_features(sim_video)
    report = check(sim_video)
    assert report.ok and not report.problems, report.problems


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "+inf", "-inf"])
@pytest.mark.parametrize("key", [STATE, "action", CUSTOM, SCALAR])
def test_a_value_that_is_not_a_finite_number_is_an_error_naming_where(sim_video, key, value):
    add_custom_features(sim_video)
    poison(sim_video, key, {FIRST_ROW[1] + 3: value})

    report = check(sim_video)

    found = errors(report, key=key)
    assert len(found) == 1, report.problems
    problem = found[0]
    name = {math.inf: "+inf", -math.inf: "-inf"}.get(value, "NaN")
    assert problem.episode == 1
    assert f"holds 1 {name} value(s) in 1 row(s)" in problem.message
    assert f"frame 3, row {FIRST_ROW[1] + 3} of the file" in problem.message
    assert "delete-episodes" in problem.hint and "--episodes 1" in problem.hint
    assert len(report.errors) == 1, report.errors  # nothing else is blamed


def test_counts_are_per_episode_with_the_first_row(sim_video):
    poison(sim_video, "action", {2: math.nan, 5: math.inf, 6: math.nan, 50: -math.inf})

    found = {p.episode: p.message for p in errors(check(sim_video), key="action")}

    assert set(found) == {0, 2}
    assert "2 NaN, 1 +inf value(s) in 3 row(s); the first at frame 2, row 2" in found[0]
    assert "1 -inf value(s) in 1 row(s); the first at frame 5, row 50" in found[2]


def test_many_values_in_one_row_and_every_value_of_a_row(sim_video):
    table = pq.read_table(sim_video / DATA)
    state = np.array(table.column(STATE).to_pylist(), dtype=np.float32)
    state[10, :] = np.nan  # a whole row
    state[60, 1:4] = np.inf
    set_column(
        sim_video, STATE, pa.FixedSizeListArray.from_arrays(pa.array(state.ravel()), 6), None, None
    )

    found = {p.episode: p.message for p in errors(check(sim_video), key=STATE)}

    assert "6 NaN value(s) in 1 row(s); the first at frame 10, row 10" in found[0]
    assert "3 +inf value(s) in 1 row(s); the first at frame 15, row 60" in found[2]


def test_empty_values_are_errors_too(sim_video):
    add_custom_features(sim_video)
    values = pq.read_table(sim_video / DATA).column(SCALAR).to_pylist()
    values[30] = None
    set_column(sim_video, SCALAR, pa.array(values, pa.float32()), None, None)

    found = errors(check(sim_video), key=SCALAR)

    assert [(p.episode, "1 empty value(s)" in p.message) for p in found] == [(1, True)]


def test_a_column_no_feature_declares_is_checked_too(sim_video):
    table = pq.read_table(sim_video / DATA)
    values = np.zeros(75, np.float64)
    values[70] = math.nan
    pq.write_table(table.append_column("extra", pa.array(values)), sim_video / DATA)

    found = errors(check(sim_video), key="extra")

    assert [p.episode for p in found] == [2]


@pytest.mark.parametrize("stat", ["mean", "std", "min", "max", "q01", "q99"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "+inf", "-inf"])
def test_statistics_that_are_not_finite_are_errors(sim_video, stat, value):
    stats = json.loads((sim_video / STATS).read_text())
    stats["action"][stat][2] = value
    (sim_video / STATS).write_text(json.dumps(stats))  # json writes NaN, Infinity, -Infinity

    report = check(sim_video)

    found = errors(report, STATS)
    assert [p.key for p in found] == [f"action.{stat}"], report.problems
    name = {math.inf: "+inf", -math.inf: "-inf"}.get(value, "NaN")
    assert f"holds 1 {name} value(s), the first at [2]" in found[0].message
    assert "recompute-stats" in found[0].hint


@pytest.mark.parametrize("stat", ["mean", "std", "min", "max", "q50"])
def test_per_episode_statistics_that_are_not_finite_are_errors(sim_video, stat):
    path = sim_video / EPISODES
    table = pq.read_table(path)
    column = f"stats/{STATE}/{stat}"
    values = table.column(column).to_pylist()
    values[1][4] = math.nan
    values[2][0] = math.inf
    table = table.set_column(
        table.schema.get_field_index(column),
        column,
        pa.array(values, table.schema.field(column).type),
    )
    pq.write_table(table, path)

    report = check(sim_video)

    found = errors(report, EPISODES, column)
    assert [(p.episode, p.message.split(" holds ")[1]) for p in found] == [
        (1, "1 NaN value(s)"),
        (2, "1 +inf value(s)"),
    ], report.problems
    assert all("recompute-stats" in p.hint for p in found)


def _declare(root: Path, key: str, **entry) -> None:
    info = json.loads((root / INFO).read_text())
    info["features"][key].update(entry)
    (root / INFO).write_text(json.dumps(info, indent=4))


@pytest.mark.parametrize(
    ("declared", "said"),
    [
        ("complex128", "which is no type of numbers"),
        ("int64", "but its column holds float32 values"),
        ("float64", "but its column holds float32 values"),
        ("bool", "but its column holds float32 values"),
        ("uint8", "but its column holds float32 values"),
        ("string", "but its column holds lists of 6 float32 values"),
        ("image", "but its column holds lists of 6 float32 values"),
        ("int", "which is no type of numbers"),
    ],
)
def test_a_declared_dtype_that_differs_from_the_stored_one_is_an_error(sim_video, declared, said):
    # An image's shape is [height, width, channels]: info.json's rules want three numbers.
    _declare(
        sim_video, STATE, dtype=declared, **({"shape": [1, 2, 3]} if declared == "image" else {})
    )

    found = errors(check(sim_video), key=STATE)

    assert found, f"{declared} over float32 passed"
    assert said in found[0].message and f"is declared {declared!r}" in found[0].message
    assert "info.json" in found[0].hint


def test_numbers_declared_over_a_column_of_strings_is_an_error(sim_video):
    set_column(sim_video, "note", pa.array(["a"] * 75), "float32", (1,))

    found = errors(check(sim_video), key="note")

    assert len(found) == 1 and "holds string values" in found[0].message


def test_an_int_column_declared_float_is_an_error(sim_video):
    _declare(sim_video, "frame_index", dtype="float32")

    found = errors(check(sim_video), key="frame_index")

    assert len(found) == 1 and "holds int64 values" in found[0].message


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        ([7], "holds lists of 6 float32 values"),
        ([2, 3], "holds lists of 6 float32 values"),
        ([1], "holds lists of 6 float32 values"),
        ([6, 1], "holds lists of 6 float32 values"),
    ],
)
def test_a_declared_shape_that_differs_from_the_stored_one_is_an_error(sim_video, shape, said):
    _declare(sim_video, STATE, shape=shape)

    found = errors(check(sim_video), key=STATE)

    assert len(found) == 1, found
    assert f"declares shape {shape}" in found[0].message and said in found[0].message


def test_lists_of_uneven_length_are_an_error_for_check_and_reader(sim_video):
    """Equal totals (5 + 7 values for two rows of 6) must not pass: the rows would shift."""
    values = pq.read_table(sim_video / DATA).column("action").to_pylist()
    values[3] = values[3][:5]
    values[4] = values[4] + [0.5]
    set_column(sim_video, "action", pa.array(values, pa.list_(pa.float32())), None, None)

    found = errors(check(sim_video), key="action")

    assert len(found) == 1 and "row 3 of its column holds 5 values" in found[0].message
    with pytest.raises(CorruptDataset, match="row 3 of its column holds 5 values"):
        LeRobotDatasetReader(sim_video)


def test_a_2d_feature_with_a_wrong_inner_length_names_the_dimension(sim_video):
    add_custom_features(sim_video)
    values = pq.read_table(sim_video / DATA).column(CUSTOM).to_pylist()
    values[40][1] = values[40][1][:2]
    set_column(sim_video, CUSTOM, pa.array(values, pa.list_(pa.list_(pa.float64()))), None, None)

    found = errors(check(sim_video), key=CUSTOM)

    assert len(found) == 1
    assert "dimension 1 of row 40 of its column holds 2 values" in found[0].message
