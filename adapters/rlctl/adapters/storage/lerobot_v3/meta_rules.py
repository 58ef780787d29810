"""The one rulebook for a LeRobot v3.0 dataset's `meta/` folder.

The reader, the writer's `resume` and `rlctl dataset check` all run `load_meta`; what differs is
what happens to a fault. `Refuse` raises the first error (the reader and resume stop there),
`Collect` notes every fault and lets the walk go on with what could be trusted (`check`). So
whatever the reader refuses, `check` reports with the same message, and `check` cannot pass a
folder the reader refuses.

The rules are LeRobot 0.6.1's, never stricter: numbers where LeRobot takes any number
(`data_files_size_in_mb` may be 0.001), optional keys optional, unknown keys kept. Faults LeRobot
would load anyway (an episode's statistics, a stats.json of the wrong shape, fewer tasks than
`total_tasks`) are warnings for both. On top, metadata is input from strangers: path templates
must stay inside the root, numbers must be finite and below JSON's exact integers, strings and
files must have sane sizes; each breach is one `DatasetError` naming the file and key.
"""

from __future__ import annotations

import itertools
import math
import re
import string
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Protocol

import attrs
import numpy as np
import pyarrow as pa
import structlog

from rlctl.adapters.storage.episode_source import MAX_INFO_BYTES, parse_version
from rlctl.adapters.storage.lerobot_v3.column_values import bad_values
from rlctl.adapters.storage.lerobot_v3.errors import (
    CORRUPT_HINT,
    INCOMPLETE_HINT,
    check_hint,
    read_json,
    read_parquet_table,
)
from rlctl.adapters.storage.lerobot_v3.paths import (
    DEFAULT_DATA_PATH,
    DEFAULT_VIDEO_PATH,
    EPISODES_DIR,
    INFO_PATH,
    STATS_PATH,
    TASKS_PATH,
)
from rlctl.domain.dataset_meta import CODEBASE_VERSION, DatasetMeta, EpisodeRecord
from rlctl.domain.errors import (
    CorruptDataset,
    DatasetError,
    DatasetNotFound,
    DatasetVersionError,
    InvalidInput,
)
from rlctl.domain.features import FeatureSpec, features_from_info
from rlctl.domain.statistics import FeatureStats

log = structlog.get_logger()

SUPPORTED_MAJOR = 3
# Counts and sizes past JSON's exact integers are not counts of anything on a disk.
MAX_COUNT = 2**53 - 1
MAX_STATS_BYTES = 256 * 2**20
MAX_TEMPLATE_CHARS = 1024
MAX_TEXT_CHARS = 4096
# One row of one feature: a 16k x 16k RGBA frame is 2**30 values.
MAX_FEATURE_VALUES = 2**31
# Columns every episodes row must have: the reader cannot place an episode without them.
REQUIRED_EPISODE_COLUMNS = ("episode_index", "length", "dataset_from_index", "dataset_to_index")
RESTORE_INFO_HINT = "restore info.json from the original dataset"
RECOVER_HINT = "reopen the dataset with resume (or ignore: readers skip it)"
STATS_VALUES_HINT = (
    "statistics must be finite numbers (normalising with NaN or inf makes every input NaN): "
    "recompute them with `rlctl dataset recompute-stats` (after removing or re-recording "
    "episodes whose data holds such values: `rlctl dataset check` lists them)"
)
_FORMAT_SPEC = re.compile(r"^0?\d{0,2}d?$")

Severity = Literal["error", "warning"]


@attrs.frozen
class Fault:
    """One rule broken: `file` relative to the root, then the key and episode inside it."""

    message: str
    file: str
    key: str | None = None
    episode: int | None = attrs.field(default=None, kw_only=True)
    hint: str | None = attrs.field(default=None, kw_only=True)
    severity: Severity = attrs.field(default="error", kw_only=True)
    kind: str | None = attrs.field(default=None, kw_only=True)
    error: type[DatasetError] = attrs.field(default=CorruptDataset, kw_only=True)

    def where(self, root: Path) -> str:
        parts = [str(root / self.file)]
        if self.episode is not None:
            parts.append(f"episode {self.episode}")
        if self.key is not None:
            parts.append(self.key)
        return ": ".join(parts)

    def as_error(self, root: Path) -> DatasetError:
        return self.error(self.message, where=self.where(root), hint=self.hint)


class Verdicts(Protocol):
    """What becomes of a fault. `thorough`: also run the rules only a check needs (slow ones
    over every episode's statistics), which are warnings whatever they find."""

    thorough: bool

    def __call__(self, fault: Fault) -> None: ...


class Refuse:
    """The reader's and resume's verdicts: the first error is raised, warnings are logged."""

    thorough = False

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, fault: Fault) -> None:
        if fault.severity == "error":
            raise fault.as_error(self.root)
        log.warning(fault.message, where=fault.where(self.root))


class Collect:
    """The check's verdicts: every fault is handed to `note`, and the walk goes on."""

    thorough = True

    def __init__(self, note: Callable[[Fault], None]) -> None:
        self._note = note

    def __call__(self, fault: Fault) -> None:
        self._note(fault)


# --- the folder and info.json ------------------------------------------------------------------


def _version_fault(version: object, root: Path) -> Fault | None:
    """v3.x reads; v2.x needs converting; anything newer than v3 needs a newer rlctl."""
    where = f"{root / INFO_PATH}: codebase_version"
    try:
        major, minor = parse_version(version, where)
    except CorruptDataset as err:
        return Fault(err.message, INFO_PATH, "codebase_version", hint=err.hint)
    if major < SUPPORTED_MAJOR:
        return Fault(
            f"the dataset is in LeRobot format {version}; rlctl reads {CODEBASE_VERSION}",
            INFO_PATH,
            "codebase_version",
            hint=f"convert it once: rlctl dataset convert {root}",
            error=DatasetVersionError,
        )
    if major > SUPPORTED_MAJOR:
        return Fault(
            f"the dataset is in LeRobot format {version}, newer than this rlctl reads "
            f"({CODEBASE_VERSION})",
            INFO_PATH,
            "codebase_version",
            hint="upgrade rlctl (pip install -U rlctl), or rewrite the dataset in v3.0",
            error=DatasetVersionError,
        )
    if minor > int(CODEBASE_VERSION.split(".")[1]):
        # Minor versions add keys; LeRobot reads them too, so read and say so.
        log.warning("dataset is a newer minor format version", version=version, root=str(root))
    return None


def read_info(root: Path, verdicts: Verdicts | None = None) -> dict[str, Any] | None:
    """info.json as a JSON object whose version rlctl reads; None when a fault was noted."""
    verdicts = verdicts if verdicts is not None else Refuse(root)
    path = root / INFO_PATH
    if not path.exists():
        legacy = (root / "meta" / "episodes.jsonl").exists()
        verdicts(
            Fault(
                "no meta/info.json: this folder is not a LeRobot dataset",
                INFO_PATH,
                hint=(
                    "this looks like a partly copied dataset; copy meta/info.json too"
                    if legacy or (root / "data").is_dir()
                    else "give the dataset's root folder (the one holding meta/ and data/)"
                ),
                error=DatasetNotFound,
            )
        )
        return None
    info = _read_json(root, INFO_PATH, "dataset info file", MAX_INFO_BYTES, verdicts)
    if info is None:
        return None
    if not isinstance(info, dict):
        verdicts(
            Fault(
                f"info.json must hold a JSON object, found {type(info).__name__}",
                INFO_PATH,
                hint=check_hint(root, CORRUPT_HINT),
            )
        )
        return None
    if "codebase_version" not in info:
        verdicts(
            Fault(
                "info.json has no codebase_version",
                INFO_PATH,
                "codebase_version",
                hint='add "codebase_version": "v3.0" if the files are in LeRobot\'s v3.0 layout',
            )
        )
        return None
    fault = _version_fault(info["codebase_version"], root)
    if fault is not None:
        verdicts(fault)
        return None
    return info


def _read_json(
    root: Path, name: str, what: str, max_bytes: int, verdicts: Verdicts
) -> object | None:
    try:
        return read_json(root / name, what, root, max_bytes=max_bytes)
    except DatasetError as err:
        verdicts(Fault(err.message, name, hint=err.hint, error=type(err)))
        return None
    except OSError as err:
        verdicts(Fault(f"the {what} cannot be read: {err}", name, hint=CORRUPT_HINT))
        return None


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


@attrs.frozen
class InfoFields:
    """info.json's keys, each checked; `features` parsed."""

    fps: int
    total_episodes: int
    total_frames: int
    total_tasks: int | None
    chunks_size: int
    data_files_size_in_mb: float
    video_files_size_in_mb: float
    data_path: str
    video_path: str | None
    robot_type: str | None
    features: dict[str, FeatureSpec]


class _InfoKeys:
    """Reads one key of info.json after another, noting a fault for each bad one."""

    def __init__(self, info: Mapping[str, Any], verdicts: Verdicts) -> None:
        self.info = info
        self.verdicts = verdicts
        self.bad = False

    def fault(self, message: str, key: str, hint: str = RESTORE_INFO_HINT) -> None:
        self.bad = True
        self.verdicts(Fault(message, INFO_PATH, key, hint=hint))

    def whole(self, key: str, default: int | None = None, *, least: int = 0) -> int | None:
        """A whole number (30 and 30.0 alike, as LeRobot) of at least `least`."""
        value = self.info.get(key)
        if value is None:
            if default is None:
                self.fault(f"info.json has no {key!r}", key)
            return default
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or int(value) != value
        ):
            self.fault(f"{key} must be a whole number, found {_shown(value)}", key)
            return None
        if not least <= value <= MAX_COUNT:
            self.fault(f"{key} must be a whole number from {least} to 2**53, found {value}", key)
            return None
        return int(value)

    def positive(self, key: str, default: float) -> float | None:
        """Any positive number: LeRobot compares file sizes with it, fractions included."""
        value = self.info.get(key)
        if value is None:
            return default
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or not 0 < value <= MAX_COUNT
        ):
            self.fault(f"{key} must be a positive number, found {_shown(value)}", key)
            return None
        return value

    def text(self, key: str, limit: int = MAX_TEXT_CHARS) -> str | None:
        value = self.info.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.fault(f"{key} must be a string, found {_shown(value)}", key)
            return None
        if len(value) > limit:
            self.fault(f"{key} is {len(value)} characters long, more than {limit}", key)
            return None
        return value


def _shown(value: object) -> str:
    if isinstance(value, str):
        return repr(_short(value))
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'list'}"
    return _short(repr(value))


def info_fields(info: Mapping[str, Any], root: Path, verdicts: Verdicts) -> InfoFields | None:
    """Every key of info.json the files depend on, checked; None when one is wrong."""
    keys = _InfoKeys(info, verdicts)
    fps = keys.whole("fps", least=1)
    totals = {k: keys.whole(k) for k in ("total_episodes", "total_frames")}
    total_tasks = keys.whole("total_tasks", default=-1)
    chunks_size = keys.whole("chunks_size", default=1000, least=1)
    data_mb = keys.positive("data_files_size_in_mb", 100)
    video_mb = keys.positive("video_files_size_in_mb", 200)
    robot_type = keys.text("robot_type")
    data_path = keys.text("data_path", MAX_TEMPLATE_CHARS) or DEFAULT_DATA_PATH
    video_path = keys.text("video_path", MAX_TEMPLATE_CHARS)
    features = _features(info, root, verdicts)
    if features is None:
        return None
    video_keys = [k for k, f in features.items() if f.is_video]
    templates_ok = _template_ok(keys, data_path, "data_path", ("chunk_index", "file_index"), [""])
    if video_keys and video_path is None and not keys.bad:
        keys.fault(
            f"feature {_short(video_keys[0])!r} is a video but info.json has no video_path",
            "video_path",
            hint=f"set video_path to {DEFAULT_VIDEO_PATH!r}",
        )
    if video_path is not None:
        fields = ("chunk_index", "file_index", "video_key")
        templates_ok &= _template_ok(keys, video_path, "video_path", fields, video_keys)
    if keys.bad or not templates_ok:
        return None
    assert fps is not None and data_mb is not None and video_mb is not None
    assert chunks_size is not None and None not in totals.values()
    return InfoFields(
        fps=fps,
        total_episodes=totals["total_episodes"],  # type: ignore[arg-type]
        total_frames=totals["total_frames"],  # type: ignore[arg-type]
        total_tasks=None if total_tasks in (None, -1) else total_tasks,
        chunks_size=chunks_size,
        data_files_size_in_mb=data_mb,
        video_files_size_in_mb=video_mb,
        data_path=data_path,
        video_path=video_path,
        robot_type=robot_type,
        features=features,
    )


def _template_ok(
    keys: _InfoKeys, template: str, key: str, fields: Sequence[str], video_keys: Sequence[str]
) -> bool:
    try:
        check_template(template, key, fields)
        for video_key in video_keys:
            values = {"chunk_index": 0, "file_index": 0, "video_key": video_key}
            check_inside_root(template.format(**values), key)
    except CorruptDataset as err:
        keys.fault(err.message, key, hint=err.hint or RESTORE_INFO_HINT)
        return False
    return True


def check_template(template: str, key: str, fields: Sequence[str]) -> None:
    """A path template names only `fields`, each with a plain integer format ({x:03d})."""
    hint = "use LeRobot's template, e.g. " + (
        DEFAULT_DATA_PATH if key == "data_path" else DEFAULT_VIDEO_PATH
    )
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as err:
        raise CorruptDataset(
            f"the path template {_short(template)!r} is not a format string ({err})",
            where=f"{INFO_PATH}: {key}",
            hint=hint,
        ) from err
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in fields or conversion or (spec and not _FORMAT_SPEC.match(spec)):
            raise CorruptDataset(
                f"the path template {_short(template)!r} may only use "
                f"{', '.join('{' + f + '}' for f in fields)} with an integer width like :03d, "
                "found "
                + _short(
                    f"{{{name}{'!' + conversion if conversion else ''}"
                    f"{':' + spec if spec else ''}}}"
                ),
                where=f"{INFO_PATH}: {key}",
                hint=hint,
            )


def check_inside_root(relative: str, key: str) -> PurePosixPath:
    """A filled template must name a file below the root: no absolute path, no '..'."""
    path = PurePosixPath(relative.replace("\\", "/"))
    if (
        not relative
        or path.is_absolute()
        or ".." in path.parts
        or re.match(r"^[A-Za-z]:", relative)
        or "\x00" in relative
    ):
        raise CorruptDataset(
            f"the path {_short(relative)!r} made from {key} is outside the dataset folder",
            where=f"{INFO_PATH}: {key}",
            hint="paths in info.json must be relative to the dataset root, without '..'; use "
            + (DEFAULT_DATA_PATH if key == "data_path" else DEFAULT_VIDEO_PATH),
        )
    return path


def _features(
    info: Mapping[str, Any], root: Path, verdicts: Verdicts
) -> dict[str, FeatureSpec] | None:
    raw = info.get("features")
    if raw is None:
        verdicts(
            Fault("info.json has no 'features'", INFO_PATH, "features", hint=RESTORE_INFO_HINT)
        )
        return None
    problem = _feature_entries_problem(raw)
    try:
        if problem is not None:
            raise InvalidInput(problem[0], where=problem[1], hint=RESTORE_INFO_HINT)
        return features_from_info(raw)
    except InvalidInput as err:
        verdicts(Fault(err.message, INFO_PATH, err.where, hint=err.hint))
        return None


def _feature_entries_problem(raw: object) -> tuple[str, str] | None:
    """The first feature entry whose JSON types cannot be a feature: (message, key)."""
    if not isinstance(raw, dict):
        return f"'features' must be an object of key -> feature, found {_shown(raw)}", "features"
    for key, entry in raw.items():
        where = f"features.{_short(key)}"
        if len(key) > MAX_TEXT_CHARS or not key or "\x00" in key:
            return f"the feature name {_short(key)!r} is empty or too long", where
        if not isinstance(entry, dict):
            return f"a feature must be an object with dtype and shape, found {_shown(entry)}", where
        dtype, shape = entry.get("dtype"), entry.get("shape")
        if "dtype" in entry and (not isinstance(dtype, str) or len(dtype) > 64):
            return f"dtype must be a short string, found {_shown(dtype)}", f"{where}.dtype"
        if isinstance(shape, int) and not isinstance(shape, bool):
            shape = [shape]
        if "shape" in entry and (
            not isinstance(shape, list)
            or len(shape) > 8
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in shape)
        ):
            return (
                f"shape must be a list of at most 8 whole numbers >= 0, found {_shown(shape)}",
                f"{where}.shape",
            )
        if dtype in ("image", "video") and isinstance(shape, list) and len(shape) != 3:
            return (
                f"an {dtype} feature's shape must be [height, width, channels], found {shape}",
                f"{where}.shape",
            )
        if isinstance(shape, list) and math.prod(shape) > MAX_FEATURE_VALUES:
            return f"shape {shape} is more than 2**31 values per frame", f"{where}.shape"
        if not _names_ok(entry.get("names")):
            return (
                "names must be a list of strings or an object of such lists, found "
                f"{_shown(entry.get('names'))}",
                f"{where}.names",
            )
        if entry.get("info") is not None and not isinstance(entry["info"], dict):
            return f"info must be an object, found {_shown(entry['info'])}", f"{where}.info"
    return None


def _names_ok(names: object) -> bool:
    def strings(value: object) -> bool:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)

    if names is None or strings(names):
        return True
    return isinstance(names, dict) and all(strings(v) or isinstance(v, str) for v in names.values())


# --- tasks.parquet ----------------------------------------------------------------------------


def read_tasks(
    root: Path, expected: int | None = None, verdicts: Verdicts | None = None
) -> tuple[str, ...] | None:
    """Task strings in `task_index` order (pandas wrote them as the index: `task` column)."""
    verdicts = verdicts if verdicts is not None else Refuse(root)
    path = root / TASKS_PATH
    if not path.exists() and not expected:
        return ()
    try:
        table = read_parquet_table(path, "tasks file", root)
    except DatasetError as err:
        verdicts(Fault(err.message, TASKS_PATH, hint=err.hint, error=type(err)))
        return None
    task_column = next(
        (name for name in ("task", "__index_level_0__") if name in table.column_names), None
    )
    if task_column is None or "task_index" not in table.column_names:
        verdicts(
            Fault(
                f"tasks.parquet needs a 'task' and a 'task_index' column, found "
                f"{table.column_names[:8]}",
                TASKS_PATH,
                hint=check_hint(root, CORRUPT_HINT),
            )
        )
        return None
    if not pa.types.is_integer(table.schema.field("task_index").type):
        verdicts(
            Fault(
                f"task_index must be integers, found {table.schema.field('task_index').type}",
                TASKS_PATH,
                "task_index",
                hint=check_hint(root, CORRUPT_HINT),
            )
        )
        return None
    indices = table.column("task_index").to_pylist()
    if sorted(indices, key=lambda i: -1 if i is None else i) != list(range(len(indices))):
        shown = indices[:8] + (["..."] if len(indices) > 8 else [])
        verdicts(
            Fault(
                f"task_index must number the tasks 0..{len(indices) - 1}, found {shown}",
                TASKS_PATH,
                "task_index",
                hint=check_hint(root, CORRUPT_HINT),
            )
        )
        return None
    tasks = [str(t) for t in table.column(task_column).to_pylist()]
    by_index = dict(zip(indices, tasks))
    return tuple(by_index[i] for i in range(len(indices)))


def _tasks(root: Path, fields: InfoFields, verdicts: Verdicts) -> tuple[str, ...] | None:
    total = fields.total_tasks
    tasks = read_tasks(root, expected=total, verdicts=verdicts)
    if tasks is None or total is None:
        return tasks
    if len(tasks) < total:
        # LeRobot never reads total_tasks; a task_index past the list is the data's fault.
        verdicts(
            Fault(
                f"info.json says {total} tasks but tasks.parquet lists {len(tasks)}",
                TASKS_PATH,
                "total_tasks",
                hint="set total_tasks to the number of tasks in meta/tasks.parquet",
                severity="warning",
            )
        )
    elif len(tasks) > total:
        verdicts(
            Fault(
                f"tasks.parquet lists {len(tasks) - total} task(s) past info.json's total_tasks "
                "(an interrupted commit)",
                TASKS_PATH,
                hint=RECOVER_HINT,
                severity="warning",
            )
        )
    return tasks


# --- meta/episodes ----------------------------------------------------------------------------


def episode_files(root: Path) -> list[Path]:
    """The episodes parquet files in LeRobot's order (sorted chunk, then file)."""
    return sorted((root / EPISODES_DIR).glob("*/*.parquet"))


def file_columns(features: Mapping[str, FeatureSpec]) -> list[str]:
    """The columns placing an episode in its data and video files."""
    needed = ["data/chunk_index", "data/file_index"]
    for key, spec in features.items():
        if spec.is_video:
            needed += [f"videos/{key}/{c}" for c in ("chunk_index", "file_index")]
            needed += [f"videos/{key}/{c}" for c in ("from_timestamp", "to_timestamp")]
    return needed


def _episodes(
    root: Path,
    fields: InfoFields,
    tasks: tuple[str, ...] | None,
    verdicts: Verdicts,
) -> list[EpisodeRecord] | None:
    files = episode_files(root)
    total = fields.total_episodes
    if not files:
        if total:
            verdicts(
                Fault(
                    f"info.json counts {total} episodes but meta/episodes holds no parquet file",
                    EPISODES_DIR,
                    hint=check_hint(root, INCOMPLETE_HINT),
                )
            )
            return None
        return []
    placed: list[tuple[str, EpisodeRecord]] = []
    complete = True
    for path in files:
        name = str(path.relative_to(root))
        records = _episode_rows(root, name, fields.features, tasks, verdicts)
        complete &= records is not None
        placed += [(name, r) for r in records or ()]
    complete &= _numbering(placed, verdicts)
    if len(placed) > total:
        # The writer renames meta/episodes before info.json: a kill between the two leaves rows
        # info.json does not count yet. They were not committed; resume removes them.
        verdicts(
            Fault(
                f"meta/episodes holds {len(placed) - total} row(s) past info.json's "
                f"total_episodes ({total}): an interrupted commit, ignored",
                placed[total][0],
                episode=placed[total][1].index,
                hint=RECOVER_HINT,
                severity="warning",
            )
        )
    elif len(placed) < total and complete:
        verdicts(
            Fault(
                f"info.json says {total} episodes but meta/episodes lists {len(placed)}",
                INFO_PATH,
                "total_episodes",
                hint=check_hint(root, CORRUPT_HINT),
            )
        )
    return [record for _, record in placed[:total]]


def _episode_rows(
    root: Path,
    name: str,
    features: Mapping[str, FeatureSpec],
    tasks: tuple[str, ...] | None,
    verdicts: Verdicts,
) -> list[EpisodeRecord] | None:
    """The rows of one episodes file; None when the file or a required column is unusable."""
    try:
        table = read_parquet_table(root / name, "episodes metadata file", root)
    except DatasetError as err:
        verdicts(Fault(err.message, name, hint=err.hint, error=type(err)))
        return None
    rewrite = "rewrite the episodes metadata with LeRobot or rlctl"
    needed = [*REQUIRED_EPISODE_COLUMNS, *file_columns(features)]
    missing = [c for c in needed if c not in table.column_names]
    if missing:
        verdicts(
            Fault(
                f"the episodes metadata lacks the column(s) {', '.join(missing)}",
                name,
                hint=rewrite,
            )
        )
        return None
    for column in needed:
        kind = table.schema.field(column).type
        numeric = pa.types.is_floating(kind) if column.endswith("timestamp") else False
        if not (pa.types.is_integer(kind) or numeric):
            verdicts(
                Fault(
                    f"column {column} must hold "
                    f"{'numbers' if column.endswith('timestamp') else 'integers'}, found {kind}",
                    name,
                    column,
                    hint=rewrite,
                )
            )
            return None
    if "tasks" in table.column_names and not _is_string_list(table.schema.field("tasks").type):
        verdicts(
            Fault(
                "column tasks must hold lists of strings, found "
                f"{table.schema.field('tasks').type}",
                name,
                "tasks",
                hint=rewrite,
            )
        )
        return None
    if verdicts.thorough:
        _episode_stats_finite(table, name, verdicts)
    # Column-wise conversion: much faster than row by row on thousands of episodes.
    columns = {column: table.column(column).to_pylist() for column in table.column_names}
    records: list[EpisodeRecord] = []
    usable = True
    for row in range(table.num_rows):
        values = {column: data[row] for column, data in columns.items()}
        record = _episode_record(values, name, needed, verdicts)
        if record is None:
            usable = False
            continue
        if verdicts.thorough:
            _thorough_row_rules(record, values, name, tasks, verdicts)
        records.append(record)
    return records if usable else None


def _episode_stats_finite(table: pa.Table, name: str, verdicts: Verdicts) -> None:
    """Per-episode statistics holding NaN or infinities (a check's rule: column by column)."""
    if "episode_index" not in table.column_names:
        return
    episodes: np.ndarray | None = None
    for column in table.column_names:
        if not column.startswith("stats/"):
            continue
        found = bad_values(table.column(column), empty=False)
        if found is None:
            continue
        if episodes is None:
            episodes = table.column("episode_index").to_numpy(zero_copy_only=False)
        for row in np.unique(found.rows):
            verdicts(
                Fault(
                    f"the episode's statistic {column} holds {found.counts(found.rows == row)} "
                    "value(s)",
                    name,
                    column,
                    episode=int(episodes[row]),
                    hint=STATS_VALUES_HINT,
                    kind="statistics that are not finite numbers",
                )
            )


def _stats_finite(stats: Mapping[str, Mapping[str, np.ndarray]], verdicts: Verdicts) -> None:
    """stats.json values that are NaN or infinite: normalising with them gives NaN everywhere."""
    for key, entry in stats.items():
        for name, array in entry.items():
            if array.dtype.kind != "f" or np.isfinite(array).all():
                continue
            flat = array.reshape(-1)
            first = np.unravel_index(int(np.flatnonzero(~np.isfinite(flat))[0]), array.shape)
            kinds = [
                (int(np.isnan(flat).sum()), "NaN"),
                (int((flat == np.inf).sum()), "+inf"),
                (int((flat == -np.inf).sum()), "-inf"),
            ]
            verdicts(
                Fault(
                    f"statistic {_short(name)!r} of {_short(key)!r} holds "
                    + ", ".join(f"{n} {what}" for n, what in kinds if n)
                    + f" value(s), the first at {list(map(int, first))}",
                    STATS_PATH,
                    f"{_short(key)}.{_short(name)}",
                    hint=STATS_VALUES_HINT,
                    kind="statistics that are not finite numbers",
                )
            )


def _is_string_list(kind: pa.DataType) -> bool:
    return (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and (
        pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)
    )


def _episode_record(
    values: dict[str, Any], name: str, needed: Sequence[str], verdicts: Verdicts
) -> EpisodeRecord | None:
    index = values["episode_index"]
    empty = [c for c in needed if values[c] is None]
    if empty:
        verdicts(
            Fault(
                f"the episode's {', '.join(empty[:4])} {'is' if len(empty) == 1 else 'are'} empty",
                name,
                empty[0],
                episode=index,
                hint="rewrite the episodes metadata with LeRobot or rlctl",
                kind="empty columns",
            )
        )
        return None
    record = EpisodeRecord(
        index=int(index),
        length=int(values["length"]),
        tasks=tuple(values.get("tasks") or ()),
        dataset_from_index=int(values["dataset_from_index"]),
        dataset_to_index=int(values["dataset_to_index"]),
        columns=values,
    )
    bad_numbers = [
        c for c in needed if not c.endswith("timestamp") and not 0 <= values[c] <= MAX_COUNT
    ]
    if bad_numbers:
        verdicts(
            Fault(
                f"{bad_numbers[0]} {values[bad_numbers[0]]} is not a count from 0 to 2**53",
                name,
                bad_numbers[0],
                episode=record.index,
                hint="rewrite the episodes metadata with LeRobot or rlctl",
                kind="negative or absurd counts",
            )
        )
        return None
    spans = [c for c in needed if c.endswith("timestamp")]
    if any(not math.isfinite(values[c]) or values[c] < 0 for c in spans):
        verdicts(
            Fault(
                "video timestamps must be finite numbers >= 0",
                name,
                next(c for c in spans if not math.isfinite(values[c]) or values[c] < 0),
                episode=record.index,
                hint="rewrite the episodes metadata with LeRobot or rlctl",
                kind="video spans",
            )
        )
        return None
    if record.dataset_to_index - record.dataset_from_index != record.length:
        # The record is kept: a check goes on to compare the data file with both numbers.
        verdicts(
            Fault(
                f"length {record.length} but rows [{record.dataset_from_index}, "
                f"{record.dataset_to_index})",
                name,
                "length",
                episode=record.index,
                hint="length must equal dataset_to_index - dataset_from_index; "
                "rewrite the episodes metadata",
                kind="lengths disagreeing with dataset_from/to_index",
            )
        )
    return record


def _thorough_row_rules(
    record: EpisodeRecord,
    values: Mapping[str, Any],
    name: str,
    tasks: tuple[str, ...] | None,
    verdicts: Verdicts,
) -> None:
    """What LeRobot loads anyway, so warnings: tasks unknown, per-episode statistics unusable."""
    unknown = [t for t in record.tasks if t not in (tasks or ())]
    if unknown and tasks:
        verdicts(
            Fault(
                f"tasks {[_short(t) for t in unknown[:4]]} are not in meta/tasks.parquet",
                name,
                "tasks",
                episode=record.index,
                severity="warning",
                kind="tasks",
            )
        )
    grouped: dict[str, dict[str, Any]] = {}
    for column, value in values.items():
        if column.startswith("stats/") and value is not None:
            key, _, stat = column[len("stats/") :].rpartition("/")
            grouped.setdefault(key, {})[stat] = value
    for key, entry in grouped.items():
        if not {"min", "max", "mean", "std"} <= set(entry):
            continue
        try:
            FeatureStats.from_json(entry, where=f"stats/{key}")
        except (InvalidInput, TypeError, ValueError) as err:
            message = err.message if isinstance(err, InvalidInput) else str(err)
            verdicts(
                Fault(
                    message,
                    name,
                    f"stats/{key}",
                    episode=record.index,
                    hint="recompute them: rlctl dataset recompute-stats",
                    severity="warning",
                    kind="statistics",
                )
            )


def _numbering(placed: list[tuple[str, EpisodeRecord]], verdicts: Verdicts) -> bool:
    # LeRobot finds an episode's row by its position, so episode_index must be 0..N-1 in order.
    ok = True
    for position, (name, record) in enumerate(placed):
        if record.index != position:
            ok = False
            verdicts(
                Fault(
                    f"row {position} of meta/episodes is episode {record.index}; episodes must "
                    "be numbered 0..N-1 in order",
                    name,
                    "episode_index",
                    episode=record.index,
                    hint="rewrite the episodes metadata with LeRobot or rlctl",
                    kind="episode numbering",
                )
            )
    for (_, before), (name, after) in itertools.pairwise(placed):
        if after.dataset_from_index != before.dataset_to_index:
            ok = False
            verdicts(
                Fault(
                    f"starts at row {after.dataset_from_index} but episode {before.index} ends "
                    f"at row {before.dataset_to_index}",
                    name,
                    "dataset_from_index",
                    episode=after.index,
                    hint="rewrite the episodes metadata with LeRobot or rlctl",
                    kind="gaps between episodes",
                )
            )
    return ok


# --- stats.json -------------------------------------------------------------------------------


def read_stats(
    root: Path, verdicts: Verdicts | None = None
) -> dict[str, dict[str, np.ndarray]] | None:
    """`meta/stats.json` with every statistic as a numpy array (as LeRobot loads it), or None."""
    verdicts = verdicts if verdicts is not None else Refuse(root)
    if not (root / STATS_PATH).exists():
        return None
    raw = _read_json(root, STATS_PATH, "statistics file", MAX_STATS_BYTES, verdicts)
    if raw is None:
        return None
    hint = f"recompute it: rlctl dataset recompute-stats {root}"
    if not isinstance(raw, dict):
        verdicts(
            Fault(
                "stats.json must hold a JSON object of feature -> statistics", STATS_PATH, hint=hint
            )
        )
        return None
    stats: dict[str, dict[str, np.ndarray]] = {}
    for key, entry in raw.items():
        if not isinstance(entry, dict):
            verdicts(
                Fault(
                    f"statistics of {_short(key)!r} must be an object of name -> values",
                    STATS_PATH,
                    _short(key),
                    hint=hint,
                )
            )
            return None
        stats[key] = {}
        for name, value in entry.items():
            array = _numbers(value)
            if array is None:
                verdicts(
                    Fault(
                        f"statistic {_short(name)!r} must be a number or a rectangular list of "
                        f"numbers, found {_shown(value)}",
                        STATS_PATH,
                        f"{_short(key)}.{_short(name)}",
                        hint=hint,
                    )
                )
                return None
            stats[key][name] = array
    return stats


def _numbers(value: object) -> np.ndarray | None:
    try:
        array = np.asarray(value)
    except (ValueError, TypeError, OverflowError):
        return None
    if array.dtype.kind not in "biuf":
        return None
    return array


def _stats_shapes_agree(
    root: Path, features: Mapping[str, FeatureSpec], stats: Mapping[str, Any], verdicts: Verdicts
) -> None:
    from rlctl.adapters.storage.lerobot_v3.meta_writer import stats_shapes

    shapes = stats_shapes(features)
    hint = f"recompute them: rlctl dataset recompute-stats {root}"
    for key, entry in stats.items():
        expected = shapes.get(key)
        if expected is None:
            continue  # LeRobot keeps statistics of removed features; harmless
        try:
            parsed = FeatureStats.from_json({k: v.tolist() for k, v in entry.items()}, where=key)
        except (InvalidInput, TypeError, ValueError) as err:
            message = err.message if isinstance(err, InvalidInput) else str(err)
            verdicts(Fault(message, STATS_PATH, key, hint=hint, severity="warning"))
            continue
        if parsed.shape != tuple(expected):
            verdicts(
                Fault(
                    f"statistics of shape {list(parsed.shape)}, expected {list(expected)}",
                    STATS_PATH,
                    key,
                    hint=hint,
                    severity="warning",
                )
            )


# --- the whole folder -------------------------------------------------------------------------


def load_meta(root: Path, verdicts: Verdicts) -> DatasetMeta | None:
    """`meta/` read under the rulebook: the DatasetMeta, or None when what is wrong leaves the
    files impossible to place (after `verdicts` has heard about it)."""
    info = read_info(root, verdicts)
    if info is None:
        return None
    fields = info_fields(info, root, verdicts)
    if fields is None:
        return None
    tasks = _tasks(root, fields, verdicts)
    episodes = _episodes(root, fields, tasks, verdicts)
    stats = read_stats(root, verdicts)
    if stats is not None and verdicts.thorough:
        _stats_shapes_agree(root, fields.features, stats, verdicts)
        _stats_finite(stats, verdicts)
    if episodes is None:
        return None
    frames = sum(e.length for e in episodes)
    if len(episodes) == fields.total_episodes and frames != fields.total_frames:
        verdicts(
            Fault(
                f"info.json says {fields.total_frames} frames but the episodes add up to {frames}",
                INFO_PATH,
                "total_frames",
                hint=check_hint(root, CORRUPT_HINT),
            )
        )
    if tasks is None:
        return None
    if verdicts.thorough and (root / STATS_PATH).exists() is False and fields.total_episodes:
        verdicts(
            Fault(
                "there is no meta/stats.json; policies need it for normalisation",
                STATS_PATH,
                hint=f"compute it: rlctl dataset recompute-stats {root}",
                severity="warning",
            )
        )
    return DatasetMeta(
        codebase_version=str(info["codebase_version"]),
        fps=fields.fps,
        features=fields.features,
        total_episodes=len(episodes),
        total_frames=frames,
        tasks=tasks,
        episodes=tuple(episodes),
        robot_type=fields.robot_type,
        chunks_size=fields.chunks_size,
        data_files_size_in_mb=fields.data_files_size_in_mb,
        video_files_size_in_mb=fields.video_files_size_in_mb,
        data_path=fields.data_path,
        video_path=fields.video_path,
        stats=stats,
        info=info,
    )
