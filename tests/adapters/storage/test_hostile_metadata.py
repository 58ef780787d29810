"""Metadata is input from strangers: whatever is written into `meta/`, rlctl either reads the
dataset correctly or stops with one `RlctlError` naming a file, never another exception, never a
hang, and `rlctl dataset check` agrees with the reader.

Hypothesis mutates a small valid dataset's info.json, stats.json, tasks.parquet and episodes
parquet (a value replaced by any JSON or Arrow value, a key dropped or added, the file cut short
or replaced by noise), then reads it whole under a watchdog.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.tools.checker import LeRobotDatasetChecker
from rlctl.application.use_cases.check_dataset import CheckDataset
from rlctl.domain.errors import RlctlError


def _load(name: str):
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


writer = _load("writer_support")
INFO = "meta/info.json"
STATS = "meta/stats.json"
TASKS = "meta/tasks.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
DATA = "data/chunk-000/file-000.parquet"
META_FILES = (INFO, STATS, TASKS, EPISODES)
# The data file too: the check must never pass a folder the reader refuses.
MUTATED = (*META_FILES, DATA)
WATCHDOG_S = 20


class Hang(Exception):
    pass


@contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """Turn a read that never ends into a failure (SIGALRM interrupts Python code)."""

    def fire(*_: object) -> None:
        raise Hang(f"no outcome within {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Pristine(tuple):
    """(root, original metadata bytes); a short repr, as hypothesis prints failing examples."""

    def __repr__(self) -> str:
        return f"Pristine({self[0]})"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Pristine:
    root = tmp_path_factory.mktemp("hostile") / "ds"
    plan = writer.DatasetPlan(
        fps=10, state_dim=2, episodes=(("a",) * 3, ("b",) * 2), video=True, image=False
    )
    writer.write(root, plan)
    return Pristine((root, {name: (root / name).read_bytes() for name in MUTATED}))


# --- mutations ---------------------------------------------------------------------------------

numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 0.5, 1e-9, 2**53, 2**63, 10**30]),
)
texts = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        [
            "../../escape",
            "/etc/passwd",
            "{chunk_index:099999999d}",
            "{video_key}/../../../{chunk_index}",
            "{0}",
            "{chunk_index.__class__}",
            "data/{chunk_index}/{file_index}.parquet",
            "v3.0",
            "v2.1",
            "video",
            "image",
            "float32",
            "string",
        ]
    ),
    st.integers(min_value=10_000, max_value=200_000).map(lambda n: "x" * n),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON tree: the paths of its keys and list items."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:4]):
            found += _paths(item, (*prefix, index))
    return found


def _set(tree: Any, path: tuple, value: Any, delete: bool) -> None:
    for step in path[:-1]:
        tree = tree[step]
    last = path[-1]
    if delete and isinstance(tree, dict):
        del tree[last]
    else:
        tree[last] = value


def json_mutation(draw, content: bytes) -> bytes:
    how = draw(st.sampled_from(["value", "value", "value", "delete", "add", "noise", "cut"]))
    if how == "noise":
        return draw(st.binary(max_size=64))
    if how == "cut":
        return content[: draw(st.integers(0, len(content) - 1))]
    tree = json.loads(content)
    if how == "add" or not _paths(tree):
        tree[draw(st.text(max_size=8))] = draw(json_values)
    else:
        path = draw(st.sampled_from(_paths(tree)))
        _set(tree, path, draw(json_values), delete=how == "delete")
    return json.dumps(tree, allow_nan=True).encode()


arrow_values = st.one_of(
    st.none(),
    st.integers(min_value=-(2**62), max_value=2**62),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.text(max_size=6), max_size=3),
)


def parquet_mutation(draw, content: bytes) -> bytes:
    how = draw(st.sampled_from(["cell", "cell", "column", "drop", "rows", "noise", "cut"]))
    if how == "noise":
        return draw(st.binary(max_size=64))
    if how == "cut":
        return content[: draw(st.integers(0, len(content) - 1))]
    table = pq.read_table(pa.BufferReader(content))
    columns = table.to_pydict()
    name = draw(st.sampled_from(sorted(columns)))
    if how == "drop":
        del columns[name]
    elif how == "rows":
        keep = draw(st.integers(0, len(columns[name]) - 1))
        for values in columns.values():
            del values[keep:]
    elif how == "column":
        kind = draw(arrow_values)
        columns[name] = [kind] * len(columns[name])
    else:
        row = draw(st.integers(0, len(columns[name]) - 1))
        columns[name][row] = draw(arrow_values)
    try:
        mutated = pa.table(columns)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        mutated = pa.table({k: pa.array([str(v) for v in vs]) for k, vs in columns.items()})
    sink = pa.BufferOutputStream()
    pq.write_table(mutated, sink)
    return sink.getvalue().to_pybytes()


def mutations(draw, originals: dict[str, bytes]) -> dict[str, bytes]:
    """One or two metadata files changed; `draw` is hypothesis' `data.draw`."""
    chosen = draw(st.lists(st.sampled_from(MUTATED), min_size=1, max_size=2, unique=True))
    out = {}
    for name in chosen:
        mutate = json_mutation if name.endswith(".json") else parquet_mutation
        out[name] = mutate(draw, originals[name])
    return out


# --- the property ------------------------------------------------------------------------------


def _names_a_file(error: RlctlError, root: Path) -> bool:
    where = error.where or ""
    return str(root) in where or where.startswith(("meta/", "data/", "videos/"))


def _read_everything(root: Path) -> int:
    reader = LeRobotDatasetReader(root, video_backend="pyav")
    items = reader.get_items(range(len(reader)))
    for item in items:  # a correct read: every item has its features and a finite timestamp
        assert set(reader.meta.features) <= set(item)
        assert math.isfinite(float(item["timestamp"]))
    return len(items)


@settings(
    max_examples=int(os.environ.get("RLCTL_HOSTILE_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_metadata_reads_or_stops_with_an_error_naming_a_file(pristine, data):
    root, originals = pristine
    changed = mutations(data.draw, originals)
    for name, content in originals.items():
        (root / name).write_bytes(changed.get(name, content))
    meta_error = read_error = None
    with watchdog(WATCHDOG_S):
        try:
            _read_everything(root)
        except RlctlError as err:
            assert _names_a_file(err, root), f"{type(err).__name__} names no file: {err}"
            assert err.message and len(err.message) < 2000, "one clear line, not a dump"
            read_error = err
        try:
            LeRobotMetaReader().read_meta(root)
        except RlctlError as err:
            meta_error = err
        report = CheckDataset(LeRobotDatasetChecker(), SilentProgress())(str(root))
    meta_problems = [p for p in report.errors if (p.file or "").startswith("meta/")]
    if meta_error is None:
        assert not meta_problems, meta_problems
    else:
        assert meta_error.message in [p.message for p in report.errors], (meta_error, report)
    if read_error is not None:
        assert not report.ok, f"check passes a folder the reader refuses: {read_error}"


def test_the_pristine_dataset_reads(pristine):
    root, originals = pristine
    for name, content in originals.items():
        (root / name).write_bytes(content)
    assert _read_everything(root) == 5


@pytest.mark.parametrize(
    ("key", "template"),
    [
        ("data_path", "../outside/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"),
        ("data_path", "{OUTSIDE}/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"),
        ("video_path", "../outside/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"),
    ],
)
def test_files_outside_the_root_are_never_read_even_when_they_exist(tmp_path, key, template):
    # A copy of the dataset beside it: a template leading there would read valid files.
    root = tmp_path / "ds"
    writer.write(root, writer.DatasetPlan(fps=10, state_dim=2, episodes=(("a",) * 3,), video=True))
    outside = tmp_path / "outside"
    for folder in ("data", "videos"):
        for path in (root / folder).rglob("*"):
            if path.is_file():
                target = outside / path.relative_to(root / folder)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(path.read_bytes())
    info = json.loads((root / INFO).read_text())
    info[key] = template.replace("{OUTSIDE}", str(outside))
    (root / INFO).write_text(json.dumps(info))
    with pytest.raises(RlctlError) as caught:
        _read_everything(root)
    assert "outside the dataset folder" in caught.value.message
    assert caught.value.where.endswith(f"meta/info.json: {key}")


def test_an_absurd_episode_length_the_metadata_agrees_on_is_caught_at_the_data(tmp_path):
    # info.json, meta/episodes and the totals all say 2**40 frames; the data file holds 3. No
    # range of 2**40 row numbers may be built before the count is compared.
    root = tmp_path / "ds"
    writer.write(root, writer.DatasetPlan(fps=10, state_dim=2, episodes=(("a",) * 3,)))
    huge = 2**40
    info = json.loads((root / INFO).read_text())
    info["total_frames"] = huge
    (root / INFO).write_text(json.dumps(info))
    table = pq.read_table(root / EPISODES)
    columns = table.to_pydict()
    columns.update(length=[huge], dataset_to_index=[huge])
    pq.write_table(pa.table(columns, schema=table.schema), root / EPISODES)
    with watchdog(WATCHDOG_S), pytest.raises(RlctlError) as caught:
        _read_everything(root)
    assert caught.value.message == f"meta/episodes gives it {huge} rows but the file holds 3"
    assert caught.value.where.endswith("data/chunk-000/file-000.parquet: episode 0")
    with watchdog(WATCHDOG_S):
        report = CheckDataset(LeRobotDatasetChecker(), SilentProgress())(str(root))
    assert caught.value.message in [p.message for p in report.errors]


@pytest.mark.parametrize("name", [INFO, STATS])
def test_json_nested_beyond_reason_is_one_error_naming_the_file(tmp_path, name):
    root = tmp_path / "ds"
    writer.write(root, writer.DatasetPlan(fps=10, state_dim=2, episodes=(("a",) * 3,)))
    (root / name).write_text('{"fps": ' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(RlctlError) as caught:
        LeRobotMetaReader().read_meta(root)
    assert "nested too deeply" in caught.value.message
    assert caught.value.where == str(root / name)
