"""A dataset file that is a FIFO, a link to a device or a link out of the dataset is refused with
one error, never read: `rlctl dataset info`, `check` and opening the dataset must end.

A FIFO blocks `open` until someone writes to it, and `/dev/zero` has a size of 0 and never ends,
so a regression hangs or eats memory instead of failing. Every probe therefore runs in a child
process with a time limit and a memory limit; the child prints one line per finished case, so a
hang names the case it hung on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from rlctl.adapters.storage.lerobot_v3.errors import read_json
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.domain.errors import CorruptDataset
from rlctl.entrypoints.cli.main import cli

INFO = "meta/info.json"
STATS = "meta/stats.json"
TASKS = "meta/tasks.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
DATA = "data/chunk-000/file-000.parquet"
VIDEO = "videos/observation.images.front/chunk-000/file-000.mp4"
META_FILES = (INFO, STATS, TASKS, EPISODES)
PROBE_TIMEOUT_S = 120
MEMORY_LIMIT = 6 << 30


def _load_support():
    path = Path(__file__).with_name("tools_support.py")
    spec = importlib.util.spec_from_file_location("tools_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = _load_support()

# Runs in the child: each case's command in-process, one JSON line per case as it ends.
PROBE = r"""
import json, sys
from click.testing import CliRunner
from rlctl.entrypoints.cli.main import cli
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.domain.errors import RlctlError

for root, action in json.loads(sys.argv[1]):
    if action == "read":
        try:
            reader = LeRobotDatasetReader(root, video_backend="pyav")
            reader[0]
            code, text = 0, "read"
        except RlctlError as err:
            code, text = 1, f"{err.message} | {err.where} | {err.hint}"
    else:
        result = CliRunner().invoke(cli, ["dataset", action, root])
        code, text = result.exit_code, result.output
    print(json.dumps([root, action, code, text]), flush=True)
"""


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_LIMIT, MEMORY_LIMIT))


def probe(cases: list[tuple[Path, str]]) -> dict[tuple[str, str], tuple[int, str]]:
    """(root, action) -> (exit code, output) of each case, run in one bounded child process."""
    wanted = [[str(root), action] for root, action in cases]
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, json.dumps(wanted)],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            preexec_fn=_limits,
            cwd=Path(__file__).parents[3],
        )
        stdout, stderr = done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        stdout = (expired.stdout or b"").decode() if isinstance(expired.stdout, bytes) else ""
        stderr = "timed out"
    results = {}
    for line in stdout.splitlines():
        if line.startswith("["):
            root, action, code, text = json.loads(line)
            results[(root, action)] = (code, text)
    unfinished = [c for c in wanted if tuple(c) not in results]
    assert not unfinished, f"hung or crashed on {unfinished[0]}: {stderr[-2000:]}"
    return results


def dataset(fixtures_dir: Path, root: Path) -> Path:
    return support.copy_dataset(fixtures_dir / "sim_video", root)


def make_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def link_to_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


SPECIAL = {"fifo": (make_fifo, "a FIFO (named pipe)"), "zero": (link_to_zero, "character device")}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", [*META_FILES, DATA])
def test_a_fifo_is_one_error_for_info_check_and_reading(name, fixtures_dir, tmp_path):
    """In-process (a FIFO blocks without eating memory; the timeout interrupts a hang)."""
    root = dataset(fixtures_dir, tmp_path / "ds")
    make_fifo(root / name)
    runner = CliRunner()

    for action in ("check",) if name == DATA else ("info", "check"):
        result = runner.invoke(cli, ["dataset", action, str(root)])
        assert result.exit_code == 1, result.output
        assert "a FIFO (named pipe)" in result.output and name in result.output
        assert "Traceback" not in result.output
    with pytest.raises(CorruptDataset, match="FIFO") as raised:
        LeRobotDatasetReader(root, video_backend="pyav")
    assert name in raised.value.where


@pytest.mark.slow
def test_special_files_are_refused_in_a_bounded_child(fixtures_dir, tmp_path):
    """FIFOs and links to /dev/zero in place of every metadata file and the data file, the image
    path of a row naming /dev/zero, and the pristine copy: one child, bounded in time and memory."""
    cases, expected = [], {}
    for name in (*META_FILES, DATA):
        for kind, (make, said) in SPECIAL.items():
            root = dataset(fixtures_dir, tmp_path / f"{kind}-{name.replace('/', '_')}")
            make(root / name)
            actions = ("check", "read") if name == DATA else ("info", "check", "read")
            for action in actions:
                cases.append((root, action))
                expected[(str(root), action)] = (Path(name).name, said)
    pristine = dataset(fixtures_dir, tmp_path / "pristine")
    cases += [(pristine, "info"), (pristine, "check"), (pristine, "read")]
    images = image_path_to_zero(fixtures_dir, tmp_path / "images")
    cases.append((images, "read"))
    expected[(str(images), "read")] = ("image file of row 0", "character device")

    results = probe(cases)

    for (root, action), (name, said) in expected.items():
        code, text = results[(root, action)]
        assert code == 1, (root, action, text)
        assert said in text and "not a regular file" in text, (root, action, text)
        assert name in text and "Traceback" not in text, (root, action, text)
    assert {results[(str(pristine), a)][0] for a in ("info", "check", "read")} == {0}, results


def image_path_to_zero(fixtures_dir: Path, root: Path) -> Path:
    """sim_images with row 0's picture not embedded but named by a path: /dev/zero."""
    root = support.copy_dataset(fixtures_dir / "sim_images", root)
    path = root / DATA
    table = pq.read_table(path)
    key = "observation.images.front"
    images = table.column(key).combine_chunks()
    struct = pa.StructArray.from_arrays(
        [
            pa.array([None, *images.field("bytes").to_pylist()[1:]], pa.binary()),
            pa.array(["/dev/zero"] + [None] * (len(images) - 1), pa.string()),
        ],
        names=["bytes", "path"],
    )
    pq.write_table(table.set_column(table.schema.get_field_index(key), key, struct), path)
    return root


def test_metadata_linked_from_outside_the_dataset_is_refused(fixtures_dir, tmp_path):
    root = dataset(fixtures_dir, tmp_path / "ds")
    outside = tmp_path / "elsewhere" / "info.json"
    outside.parent.mkdir()
    shutil.move(root / INFO, outside)
    (root / INFO).symlink_to(outside)

    with pytest.raises(CorruptDataset) as raised:
        LeRobotMetaReader().read_meta(root)

    assert "outside the dataset folder" in raised.value.message
    assert raised.value.where == str(root / INFO)


def test_metadata_linked_inside_the_dataset_reads(fixtures_dir, tmp_path):
    root = dataset(fixtures_dir, tmp_path / "ds")
    kept = root / "meta" / "info.original.json"
    shutil.move(root / INFO, kept)
    (root / INFO).symlink_to(kept.name)

    assert LeRobotMetaReader().read_meta(root).total_episodes == 3


def test_a_cache_snapshot_whose_links_lead_to_its_blobs_reads(fixtures_dir, tmp_path):
    """The Hugging Face cache's layout: `snapshots/<commit>/<file>` links to `blobs/<hash>`."""
    source = fixtures_dir / "sim_video"
    repo = tmp_path / "datasets--alice--sim"
    snapshot = repo / "snapshots" / ("0" * 40)
    for path in source.rglob("*"):
        if path.is_file():
            name = path.relative_to(source)
            blob = repo / "blobs" / str(abs(hash(str(name))))
            blob.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, blob)
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            (snapshot / name).symlink_to(os.path.relpath(blob, (snapshot / name).parent))

    assert LeRobotMetaReader().read_meta(snapshot).total_episodes == 3


def test_a_json_file_larger_than_allowed_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.json"
    path.write_text("[" + "0," * 1000 + "0]")

    with pytest.raises(CorruptDataset, match="more than"):
        read_json(path, "statistics file", tmp_path, max_bytes=1000)
    assert read_json(path, "statistics file", tmp_path, max_bytes=10_000)[0] == 0
