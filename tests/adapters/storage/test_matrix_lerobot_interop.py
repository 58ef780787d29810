"""The compatibility matrix with LeRobot 0.6.1, both ways, over the settings users change.

Rows (`matrix_rows.py`): video codecs and pixel formats, GOP and CRF, fractional and tiny
file-size limits, a small `chunks_size`, images instead of video, depth video, every dtype,
rank >= 2 features, datasets edited by LeRobot's tools, a dataset converted from v2.1.

- read-equal: LeRobot writes the row (`lerobot_matrix.py generate`), rlctl reads it, and every
  item (delta windows included) equals LeRobot's: numbers and strings exactly, RGB video frames
  within 2/255 on average (both decode the same file).
- LeRobot-reads-ours: rlctl writes the row with the same settings (and edits it with its own
  tool: delete, split, merge, convert, add and remove features, modify tasks, convert images to
  video, re-encode videos), LeRobot reads it, and its items equal rlctl's; rlctl's items of an
  unedited row are the frames that went in.

Runs when RLCTL_LEROBOT_PYTHON names a Python with lerobot 0.6.1 (e.g.
/tmp/lerobot-anchor/bin/python). LeRobot's datasets are cached under the temporary folder,
keyed by the generator's content, so reruns only read. The matrix is printed at the end of the
session and written to `matrix.md` next to the cache.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.lerobot_v3.tools.checker import LeRobotDatasetChecker
from rlctl.adapters.storage.lerobot_v3.tools.folders import LocalDatasetFolders
from rlctl.adapters.storage.lerobot_v3.tools.rebuild import LeRobotRebuilder
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.adapters.storage.lerobot_v21.source import LeRobotV21Reader
from rlctl.application.use_cases.check_dataset import CheckDataset
from rlctl.application.use_cases.convert_dataset import ConvertDataset
from rlctl.application.use_cases.delete_episodes import DeleteEpisodes
from rlctl.application.use_cases.edit_features import AddFeatures, RemoveFeatures
from rlctl.application.use_cases.encode_videos import ConvertImagesToVideo, ReencodeVideos
from rlctl.application.use_cases.merge_datasets import MergeDatasets
from rlctl.application.use_cases.modify_tasks import ModifyTasks
from rlctl.application.use_cases.split_dataset import SplitDataset
from rlctl.domain.video import VideoEncoding

HERE = Path(__file__).parent
GENERATOR = HERE / "lerobot_matrix.py"
LEROBOT_PYTHON = os.environ.get("RLCTL_LEROBOT_PYTHON")


def _load_rows():
    spec = importlib.util.spec_from_file_location("matrix_rows", HERE / "matrix_rows.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mr = _load_rows()
ROWS = {row["id"]: row for row in mr.ROWS}
# Two decodes of the same file (LeRobot's and rlctl's) differ by rounding at most.
SAME_FILE_TOLERANCE = 2 / 255
# rlctl's items against the frames that went in: one lossy encode (see writer_support.py).
ENCODE_TOLERANCE = 16 / 255
NO_RLCTL_TOOL = "no rlctl tool"
# LeRobot's torchcodec and PyAV give the same frames; rlctl reads with both.
BACKENDS = ("pyav", "torchcodec") if importlib.util.find_spec("torchcodec") else ("pyav",)

pytestmark = [
    pytest.mark.lerobot,
    pytest.mark.slow,
    # The first test waits for LeRobot to write every row (about a minute on a quiet machine).
    pytest.mark.timeout(1800),
    pytest.mark.skipif(
        not LEROBOT_PYTHON,
        reason="set RLCTL_LEROBOT_PYTHON to a Python with lerobot 0.6.1 installed "
        "(e.g. /tmp/lerobot-anchor/bin/python) to run the compatibility matrix",
    ),
]

MATRIX: dict[str, dict[str, str]] = {}


def run_lerobot(*args: object) -> dict[str, str]:
    result = subprocess.run(
        [LEROBOT_PYTHON, str(GENERATOR), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def cache_dir() -> Path:
    digest = hashlib.sha256()
    for path in (GENERATOR, HERE / "matrix_rows.py"):
        digest.update(path.read_bytes())
    digest.update(str(LEROBOT_PYTHON).encode())
    return Path(tempfile.gettempdir()) / "rlctl-lerobot-matrix" / digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def matrix_report(request):
    yield MATRIX
    lines = [
        "| setting | read-equal | LeRobot-reads-ours | LeRobot-reads-rlctl-edits-of-its-own |",
        "| --- | --- | --- | --- |",
    ]
    for row in mr.ROWS:
        entry = MATRIX.get(row["id"], {})
        default = "not run" if recorded(row) else "—"
        cells = [entry.get("read", "not run"), entry.get("ours", "not run")]
        lines.append(f"| {row['name']} | {' | '.join(cells)} | {entry.get('tools', default)} |")
    text = "\n".join(lines)
    if MATRIX:
        (cache_dir().parent / "matrix.md").write_text(text + "\n")
        plugins = request.config.pluginmanager
        reporter = plugins.get_plugin("terminalreporter")
        capture = plugins.get_plugin("capturemanager")
        if reporter is not None and capture is not None:
            with capture.global_and_fixture_disabled():  # teardown output is captured
                reporter.write_line("\nLeRobot 0.6.1 compatibility matrix:\n" + text)


@pytest.fixture(scope="session")
def lerobot_written() -> Path:
    """LeRobot's dataset and items of every row (generated once, then cached)."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    rows_file = cache / "rows.json"
    rows_file.write_text(json.dumps(mr.ROWS))
    run_lerobot("generate", rows_file, cache)
    return cache


# --- rlctl writes the rows -------------------------------------------------------------------


def encoding(row: dict[str, Any]) -> VideoEncoding | None:
    video = dict(row["video"])
    if not video:
        return None
    return VideoEncoding(codec=video.pop("vcodec", "libsvtav1"), **video)


OPTIONS = WriterOptions(encode_in_subprocess=False, durable=False)


def rlctl_write(root: Path, row: dict[str, Any], episodes, seed: int = 0) -> None:
    session = LeRobotV3Writer(options=OPTIONS).create(
        root,
        fps=row["fps"],
        features=row["features"],
        video=encoding(row),
        chunks_size=row["chunks_size"],
        data_files_size_in_mb=row["data_files_size_in_mb"],
        video_files_size_in_mb=row["video_files_size_in_mb"],
    )
    add_episodes(session, row, episodes, seed)


def add_episodes(session, row: dict[str, Any], episodes, seed: int = 0, first: int = 0) -> None:
    """Episodes `first`, `first + 1`... of `episodes` (their values numbered from `first`)."""
    with session:
        for ep in range(first, len(episodes)):
            for t, task in enumerate(episodes[ep]):
                session.add_frame({**mr.frame_values(row["features"], ep, t, seed), "task": task})
            session.save_episode()


def rlctl_edit(folder: Path, row: dict[str, Any], lerobot_folder: Path) -> Path | None:
    """rlctl's dataset of the row (edited by rlctl's tool); None when rlctl has no such tool."""
    change = row["edit"]
    target = folder / "dataset"
    tools = (LeRobotMetaReader(), LeRobotRebuilder(), LocalDatasetFolders(), SilentProgress())
    if change is None:
        rlctl_write(target, row, row["episodes"])
    elif change["tool"] == "resume":
        rlctl_write(target, row, row["episodes"][: change["first"]])
        session = LeRobotV3Writer(options=OPTIONS).resume(target, video=encoding(row))
        add_episodes(session, row, row["episodes"], first=change["first"])
    elif change["tool"] == "convert_v21":
        ConvertDataset(LeRobotV21Reader(), *tools[1:])(str(lerobot_folder / "v21"), str(target))
    elif change["tool"] in ("delete", "split", "merge"):
        source = folder / "source"
        rlctl_write(source, row, row["episodes"])
        if change["tool"] == "delete":
            DeleteEpisodes(*tools)(str(source), change["episodes"], str(target))
        elif change["tool"] == "split":
            SplitDataset(*tools)(str(source), str(target), episodes=change["episodes"])
        else:
            other = folder / "other"
            rlctl_write(other, row, mr.merged_episodes(row), seed=1)
            MergeDatasets(*tools)([str(source), str(other)], str(target))
    elif change["tool"] in EDITS:
        source = folder / "source"
        rlctl_write(source, row, row["episodes"])
        EDITS[change["tool"]](tools, str(source), str(target), row)
    else:
        return None
    return target


def _add_features(tools, source: str, target: str, row: dict[str, Any]) -> None:
    total = sum(len(ep) for ep in row["episodes"])
    added = {
        key: (np.stack([mr.added_value(key, i) for i in range(total)]), spec)
        for key, spec in mr.ADDED.items()
    }
    AddFeatures(*tools)(source, added, target)


def _modify_tasks(tools, source: str, target: str, row: dict[str, Any]) -> None:
    change = row["edit"]
    episode_tasks = {int(k): v for k, v in change["episode_tasks"].items()}
    ModifyTasks(*tools)(
        source, new_task=change["new_task"], episode_tasks=episode_tasks, output=target
    )


def _video_encoding(video: dict[str, Any]) -> VideoEncoding:
    video = dict(video)
    return VideoEncoding(codec=video.pop("vcodec", "libsvtav1"), **video)


# rlctl's own tool for each of LeRobot's edits: (tools, source, target, row).
EDITS = {
    "add_features": _add_features,
    "remove_features": lambda tools, source, target, row: RemoveFeatures(*tools)(
        source, row["edit"]["keys"], target
    ),
    "modify_tasks": _modify_tasks,
    "convert_images_to_video": lambda tools, source, target, row: ConvertImagesToVideo(*tools)(
        source, target, encoding=_video_encoding(row["edit"]["video"])
    ),
    "reencode_videos": lambda tools, source, target, row: ReencodeVideos(*tools)(
        source, _video_encoding(row["edit"]["video"]), target
    ),
}


def rlctl_edit_theirs(source: Path, target: Path, row: dict[str, Any]) -> None:
    """rlctl's tools on LeRobot's dataset of the row: episode 1 deleted, then the first episode
    split off and merged back after the rest."""
    tools = (LeRobotMetaReader(), LeRobotRebuilder(), LocalDatasetFolders(), SilentProgress())
    work = target.parent / "theirs-work"
    DeleteEpisodes(*tools)(str(source), [1], str(work / "deleted"))
    SplitDataset(*tools)(str(work / "deleted"), str(work / "head"), episodes=[0])
    DeleteEpisodes(*tools)(str(work / "deleted"), [0], str(work / "tail"))
    MergeDatasets(*tools)([str(work / "tail"), str(work / "head")], str(target))


@pytest.fixture(scope="session")
def rlctl_written(lerobot_written: Path, tmp_path_factory) -> dict[str, Any]:
    """rlctl's dataset of every row and LeRobot's items of it: row id -> (root, dump folder),
    or the error rlctl's writer raised, or None (no rlctl tool)."""
    base = tmp_path_factory.mktemp("matrix")
    out: dict[str, Any] = {}
    jobs = []
    for row_id, row in ROWS.items():
        folder = base / row_id
        folder.mkdir()
        try:
            root = rlctl_edit(folder, row, lerobot_written / row_id)
        except Exception as error:  # reported by the row's test
            out[row_id] = error
            continue
        if root is None:
            out[row_id] = None
            continue
        out[row_id] = (root, folder / "lerobot")
        if recorded(row):  # rlctl's tools on LeRobot's own files of the row, too
            edited = folder / "theirs-edited"
            try:
                rlctl_edit_theirs(lerobot_written / row_id / "dataset", edited, row)
            except Exception as error:
                out[f"{row_id}/theirs"] = error
            else:
                out[f"{row_id}/theirs"] = (edited, folder / "lerobot-theirs")
                jobs.append(
                    {
                        "id": f"{row_id}/theirs",
                        "root": str(edited),
                        "deltas": row["deltas"],
                        "subset": None,
                        "out": str(folder / "lerobot-theirs"),
                    }
                )
        jobs.append(
            {
                "id": row_id,
                "root": str(root),
                "deltas": row["deltas"],
                "subset": row["subset"],
                "out": str(folder / "lerobot"),
            }
        )
    jobs_file = base / "jobs.json"
    jobs_file.write_text(json.dumps(jobs))
    run_lerobot("dump", jobs_file)
    return out


# --- comparing -------------------------------------------------------------------------------


def present_deltas(root: Path, row: dict[str, Any]) -> dict[str, list[float]]:
    features = json.loads((root / "meta/info.json").read_text())["features"]
    return {k: v for k, v in row["deltas"].items() if k in features}


def rlctl_items(root: Path, deltas=None, episodes=None, backend="pyav") -> list[dict[str, Any]]:
    reader = LeRobotDatasetReader(
        root, delta_timestamps=deltas, episodes=episodes, video_backend=backend
    )
    return reader.get_items(range(len(reader)))


def rgb_cameras(root: Path) -> set[str]:
    features = json.loads((root / "meta/info.json").read_text())["features"]
    return {
        key
        for key, spec in features.items()
        if spec["dtype"] == "video" and not (spec.get("info") or {}).get("is_depth_map")
    }


def assert_same_items(root: Path, row: dict[str, Any], dumped: Path) -> None:
    """rlctl's items of `root` are those LeRobot dumped into `dumped`: read whole with PyAV and
    torchcodec, and the row's episode subset alone."""
    error = dumped / "error.txt"
    assert not error.exists(), "LeRobot failed:\n" + error.read_text()[-3000:]
    report = CheckDataset(LeRobotDatasetChecker(), SilentProgress())(str(root))
    allowed = row.get("allowed_warnings", ())
    warnings = [w for w in report.warnings if not any(a in w.message for a in allowed)]
    assert report.ok and not warnings, (report.problems, warnings)
    deltas = present_deltas(root, row)
    for backend in BACKENDS:
        compare_items(root, rlctl_items(root, deltas, backend=backend), dumped)
    if row["subset"]:
        compare_items(root, rlctl_items(root, deltas, row["subset"]), dumped / "subset")


def compare_items(root: Path, ours: list[dict[str, Any]], dumped: Path) -> None:
    summary = json.loads((dumped / "summary.json").read_text())
    assert len(ours) == summary["len"]
    cameras = rgb_cameras(root)
    with np.load(dumped / "items.npz") as theirs:
        for i, item in enumerate(ours):
            strings = {k: v for k, v in item.items() if isinstance(v, str)}
            assert strings == summary["strings"][i], i
            tensors = {k: v.numpy() for k, v in item.items() if isinstance(v, torch.Tensor)}
            assert sorted(tensors) == sorted(
                k.split("/", 1)[1] for k in theirs.files if k.startswith(f"{i}/")
            ), i
            for key, value in tensors.items():
                other = theirs[f"{i}/{key}"]
                assert (value.dtype, value.shape) == (other.dtype, other.shape), (i, key)
                if key in cameras:
                    error = float(np.abs(value - other).mean())
                    assert error <= SAME_FILE_TOLERANCE, (i, key, error)
                else:
                    np.testing.assert_array_equal(value, other, err_msg=f"{i}/{key}")


def assert_frames_went_in(root: Path, row: dict[str, Any]) -> None:
    """rlctl's items of an unedited row are the frames written (cameras within one encode)."""
    items = rlctl_items(root)
    position = 0
    for ep, tasks in enumerate(row["episodes"]):
        for t, task in enumerate(tasks):
            item = items[position]
            assert item["task"] == task
            for key, value in mr.frame_values(row["features"], ep, t).items():
                spec = row["features"][key]
                got = item[key]
                if spec.get("info", {}).get("is_depth_map"):
                    continue  # quantized; the depth tests check the codes
                if spec["dtype"] in ("video", "image"):
                    expected = torch.from_numpy(value).permute(2, 0, 1).float() / 255
                    tolerance = ENCODE_TOLERANCE if spec["dtype"] == "video" else 0
                    assert (got - expected).abs().mean().item() <= tolerance, (ep, t, key)
                elif spec["dtype"] == "string":
                    assert got == value, (ep, t, key)
                else:
                    np.testing.assert_array_equal(
                        got.numpy(),
                        np.asarray(value).astype(got.numpy().dtype).reshape(got.shape),
                        err_msg=key,
                    )
            position += 1


STREAM_CODECS = {"libsvtav1": "av1", "h264": "h264", "hevc": "hevc"}


def assert_settings(root: Path, row: dict[str, Any]) -> None:
    """The dataset holds the row's settings: info.json records them and the files are split
    into as many files and chunk folders as the row expects."""
    assert_info_settings(root, row)
    layout = row["layout"]
    data = sorted((root / "data").glob("chunk-*/file-*.parquet"))
    assert len(data) >= layout.get("data_files", 1), [p.name for p in data]
    assert len({p.parent for p in data}) >= layout.get("chunks", 1)
    for key in rgb_cameras(root):
        videos = sorted((root / "videos" / key).glob("chunk-*/file-*.mp4"))
        assert len(videos) >= layout.get("video_files", 1), key
        assert len({p.parent for p in videos}) >= layout.get("chunks", 1), key


def assert_info_settings(root: Path, row: dict[str, Any]) -> None:
    """info.json records the row's file settings and video encoding."""
    info = json.loads((root / "meta/info.json").read_text())
    for key in ("chunks_size", "data_files_size_in_mb", "video_files_size_in_mb"):
        if row[key] is not None:
            assert info[key] == row[key], key
    video = row["video"]
    for key, spec in info["features"].items():
        if spec["dtype"] != "video" or spec["info"].get("is_depth_map"):
            continue
        recorded = spec["info"]
        assert recorded["video.codec"] == STREAM_CODECS[video.get("vcodec", "libsvtav1")], key
        assert recorded["video.pix_fmt"] == video.get("pix_fmt", "yuv420p"), key
        assert recorded["video.g"] == video.get("g", 2), key
        assert recorded["video.crf"] == video.get("crf", 30), key


def recorded(row: dict[str, Any]) -> bool:
    """Written by recording (and resuming), not by a dataset tool."""
    return row["edit"] is None or row["edit"]["tool"] == "resume"


def record(row_id: str, column: str, work) -> None:
    try:
        result = work()
    except BaseException as error:
        MATRIX.setdefault(row_id, {})[column] = f"FAIL: {type(error).__name__}"
        raise
    MATRIX.setdefault(row_id, {})[column] = result or "yes"


@pytest.mark.parametrize("row_id", list(ROWS))
def test_rlctl_reads_what_lerobot_wrote(row_id, lerobot_written, matrix_report) -> None:
    folder = lerobot_written / row_id

    def check() -> None:
        error = folder / "error.txt"
        assert not error.exists(), "LeRobot could not write the row:\n" + error.read_text()
        if recorded(ROWS[row_id]):
            assert_settings(folder / "dataset", ROWS[row_id])
        assert_same_items(folder / "dataset", ROWS[row_id], folder)

    record(row_id, "read", check)


@pytest.mark.parametrize("row_id", list(ROWS))
def test_lerobot_reads_what_rlctl_wrote(row_id, rlctl_written, matrix_report) -> None:
    written = rlctl_written[row_id]
    row = ROWS[row_id]

    def check() -> str | None:
        if written is None:
            return NO_RLCTL_TOOL
        if isinstance(written, BaseException):
            raise written
        root, dumped = written
        if recorded(row):
            assert_settings(root, row)
            assert_frames_went_in(root, row)
        assert_same_items(root, row, dumped)
        return None

    record(row_id, "ours", check)


@pytest.mark.parametrize("row_id", [row_id for row_id, row in ROWS.items() if recorded(row)])
def test_lerobot_reads_what_rlctls_tools_made_of_its_datasets(
    row_id, rlctl_written, matrix_report
) -> None:
    written = rlctl_written[f"{row_id}/theirs"]

    def check() -> None:
        if isinstance(written, BaseException):
            raise written
        root, dumped = written
        assert_info_settings(root, ROWS[row_id])  # the tools keep the row's settings
        assert_same_items(root, {**ROWS[row_id], "subset": None}, dumped)

    record(row_id, "tools", check)
