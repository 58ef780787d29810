"""`DatasetIntegrity` for LeRobot v3.0 copies: which files of a local copy cannot be loaded.

The check runs each time a repo id is resolved, so it reads what is cheap and decisive:

- `meta/` through the reader's own rulebook (`meta_rules.load_meta`), each fault naming a file;
- each data file the episodes need: present, a parquet header and footer (a cut file has no
  footer), the columns the features need, and at least the rows its episodes place in it;
- each video: present, and its top-level MP4 boxes whole (sizes adding up to the file's size,
  a `moov` box to index the frames), which is what an interrupted download or a cut copy breaks.

Damage inside a file's body (bytes flipped in the middle of a parquet page or a video frame) is
only found by decoding everything, which `rlctl dataset check` does, or by comparing the file with
the Hub's hashes (`differing_files`, see `file_hashes.py`), which a pull and a failed read do.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq

from rlctl.adapters.hub.file_hashes import differing_files
from rlctl.adapters.hub.settings import HubSettings
from rlctl.adapters.storage.dataset_lock import writing
from rlctl.adapters.storage.lerobot_v3.atomic_files import replacing
from rlctl.adapters.storage.lerobot_v3.errors import not_regular
from rlctl.adapters.storage.lerobot_v3.meta_rules import Fault, load_meta
from rlctl.adapters.storage.lerobot_v3.paths import episode_data_file, episode_video_file
from rlctl.adapters.storage.lerobot_v3.table import stored_columns
from rlctl.application.ports.hub import DamagedFile, RecordedFile
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import DatasetError, InvalidInput

PARQUET_MAGIC = b"PAR1"
# Box types are four printable characters; anything else means the file is not MP4 (any more).
_PRINTABLE = frozenset(range(0x20, 0x7F))


class _Faults:
    """Verdicts for `load_meta`: every error kept (the files they name), warnings ignored."""

    thorough = False

    def __init__(self) -> None:
        self.errors: list[Fault] = []

    def __call__(self, fault: Fault) -> None:
        if fault.severity == "error":
            self.errors.append(fault)


class LeRobotIntegrity:
    """`state_dir`: where hashes of checked files are kept between pulls (default: under
    HF_HOME, `rlctl/file-hashes`); None keeps none."""

    def __init__(self, state_dir: Path | Literal["default"] | None = "default") -> None:
        if state_dir == "default":
            state_dir = HubSettings.from_environment().hf_home / "rlctl" / "file-hashes"
        self._state_dir = state_dir

    def differing_files(
        self, root: Path, recorded: Sequence[RecordedFile], *, trust_cache: bool = True
    ) -> list[DamagedFile]:
        return differing_files(root, recorded, state_dir=self._state_dir, trust_cache=trust_cache)

    def damaged_files(self, root: Path, episodes: Sequence[int] | None = None) -> list[DamagedFile]:
        root = Path(root)
        faults = _Faults()
        try:
            meta = load_meta(root, faults)
        except DatasetError as error:  # a rule that raises instead of reporting
            return [DamagedFile("meta/", error.message)]
        if faults.errors or meta is None:
            return _meta_damage(root, faults.errors)
        try:
            return _file_damage(root, meta, episodes)
        except DatasetError as error:  # a path template or an episodes row that places nothing
            return [DamagedFile("meta/", f"{error.where}: {error.message}")]

    def replace_files(self, root: Path, names: Sequence[str], source: Path) -> None:
        root, source = Path(root), Path(source)
        with writing(root):
            for name in names:
                target = root / name
                if not target.resolve().is_relative_to(root.resolve()):
                    raise InvalidInput(f"{name!r} is outside the dataset folder", where=str(root))
                with replacing(target) as temp:
                    # A cache snapshot's files are links into its blobs: copy the content.
                    shutil.copyfile(source / name, temp)


def _meta_damage(root: Path, faults: Sequence[Fault]) -> list[DamagedFile]:
    found: dict[str, str] = {}
    for fault in faults:
        name = fault.file.rstrip("/")
        if not name.startswith("meta/") and name != "meta":
            # A fault of a data file seen from meta/ (a template, a count): meta/ is what to fetch.
            name = "meta"
        if (root / name).is_dir() or not Path(name).suffix:
            name += "/"
        found.setdefault(name, fault.message)
    if not found:
        found["meta/"] = "meta/ cannot be read"
    return [DamagedFile(path, problem) for path, problem in found.items()]


def _file_damage(
    root: Path, meta: DatasetMeta, episodes: Sequence[int] | None
) -> list[DamagedFile]:
    chosen = set(range(meta.total_episodes) if episodes is None else episodes)
    # Rows each data file must hold: those of every episode placed in it, chosen or not.
    rows: dict[Path, int] = {}
    data: dict[Path, None] = {}
    videos: dict[Path, list[EpisodeRecord]] = {}
    for episode in meta.episodes:
        path = episode_data_file(meta, episode)
        rows[path] = rows.get(path, 0) + episode.length
        if episode.index in chosen:
            data[path] = None
            for key in meta.video_keys:
                videos.setdefault(episode_video_file(meta, episode, key), []).append(episode)
    columns = stored_columns(meta)
    damaged: list[DamagedFile] = []
    for path in data:
        problem = _parquet_problem(root / path, rows[path], columns)
        if problem:
            damaged.append(DamagedFile(path.as_posix(), problem))
    for path in videos:
        problem = _mp4_problem(root / path)
        if problem:
            damaged.append(DamagedFile(path.as_posix(), problem))
    return damaged


def _absent(path: Path) -> str:
    kind = not_regular(path)
    return "missing" if kind is None else f"{kind}, not a regular file"


def _parquet_problem(path: Path, rows: int, columns: Sequence[str]) -> str | None:
    if not path.is_file():
        return _absent(path)
    try:
        with path.open("rb") as file:
            if file.read(4) != PARQUET_MAGIC:
                return "not a parquet file (its first bytes are wrong)"
        metadata = pq.read_metadata(path, memory_map=True)
    except (OSError, pa.ArrowException) as error:
        return f"cannot be read: {_first_line(error)}"
    size = path.stat().st_size
    for group in range(metadata.num_row_groups):
        chunks = metadata.row_group(group)
        for column in range(chunks.num_columns):
            chunk = chunks.column(column)
            start = chunk.dictionary_page_offset or chunk.data_page_offset
            if start + chunk.total_compressed_size > size:
                return "cut short (its footer points past the end of the file)"
    names = set(metadata.schema.to_arrow_schema().names)
    lacking = [c for c in columns if c not in names]
    if lacking:
        return f"lacks the column(s) {lacking[:4]} the features need"
    if metadata.num_rows < rows:
        return f"holds {metadata.num_rows} rows, its episodes {rows}"
    return None


def _mp4_problem(path: Path) -> str | None:
    if not path.is_file():
        return _absent(path)
    if path.suffix.lower() not in (".mp4", ".m4v", ".mov"):
        return None if path.stat().st_size else "empty"
    size = path.stat().st_size
    seen: set[bytes] = set()
    try:
        with path.open("rb") as file:
            offset = 0
            while offset < size:
                file.seek(offset)
                header = file.read(16)
                if len(header) < 8:
                    return f"cut short (a partial box header at byte {offset})"
                length, kind = struct.unpack(">I4s", header[:8])
                if not set(kind) <= _PRINTABLE:
                    return f"not an MP4 file (garbage at byte {offset})"
                if length == 1:
                    if len(header) < 16:
                        return f"cut short (a partial box header at byte {offset})"
                    length = struct.unpack(">Q", header[8:16])[0]
                elif length == 0:
                    length = size - offset
                if length < 8:
                    return f"not an MP4 file (a box of {length} bytes at byte {offset})"
                if offset + length > size:
                    return (
                        f"cut short: its {kind.decode()} box needs {offset + length} bytes, "
                        f"the file has {size}"
                    )
                seen.add(kind)
                offset += length
    except OSError as error:
        return f"cannot be read: {_first_line(error)}"
    if b"moov" not in seen:
        return "has no moov box (the frame index): an interrupted write or download"
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
