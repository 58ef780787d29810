"""Turning pyarrow, json and OS failures into dataset errors that name the file and the fix.

Readers open every file through `read_json` / `read_parquet_table` (or inside `reading(...)`), so
no pyarrow or json traceback reaches a user: what surfaces is a `DatasetError` whose `where` is
the file (and key) and whose hint says what to do.

Each of them first makes sure the path (links followed) is a regular file: a FIFO blocks the
open until someone writes to it, and a device such as `/dev/zero` reports a size of 0 while it
reads forever, so either would hang a reader that only asked `stat` for a size. A file of
`meta/` must also lead (through any links) to a file inside the dataset folder, or inside the
blob store of the Hugging Face cache snapshot the folder is.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rlctl.domain.errors import CorruptDataset, DatasetError, RlctlError

INCOMPLETE_HINT = (
    "the local copy looks incomplete: download the dataset again "
    "(`rlctl dataset pull`), or run `rlctl dataset check ROOT` to list every missing file"
)
CORRUPT_HINT = (
    "the file is damaged (an interrupted copy or write?): download the dataset again, "
    "or run `rlctl dataset check ROOT` to list every problem"
)


NOT_REGULAR_HINT = (
    "put the dataset's real file there (a copy, not a pipe, device or socket): download the "
    "dataset again (`rlctl dataset pull`), or run `rlctl dataset check ROOT` to list every problem"
)
OUTSIDE_HINT = (
    "metadata must be files of the dataset folder: replace the link with a copy of the file, "
    "or download the dataset again (`rlctl dataset pull`)"
)
# The metadata folder: its files must stay inside the dataset (links included).
META_FOLDER = "meta"


def check_hint(root: Path, hint: str) -> str:
    return hint.replace("ROOT", str(root))


def special_kind(mode: int) -> str | None:
    """What a file of this mode is when it is not a regular file (None when it is one)."""
    if stat.S_ISREG(mode):
        return None
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def not_regular(path: Path) -> str | None:
    """What `path` (links followed) is when it exists but is not a regular file, else None.

    `stat` neither opens the file nor blocks, whatever the file is."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return special_kind(mode)


def _allowed_folders(root: Path) -> list[Path]:
    """Where metadata of the dataset at `root` may lead: the folder itself and, for a snapshot of
    the Hugging Face cache (`<repo>/snapshots/<commit>`), the repo's blob store its links use."""
    real = root.resolve()
    folders = [real]
    for folder in (Path.cwd() / root, real):
        if folder.parent.name == "snapshots":
            folders.append((folder.parent.parent / "blobs").resolve())
    return folders


def _in_meta(path: Path, root: Path) -> bool:
    try:
        relative = (Path.cwd() / path).relative_to(Path.cwd() / root)
    except ValueError:
        return False
    return relative.parts[:1] == (META_FOLDER,)


def check_regular_file(path: Path, what: str, root: Path | None = None) -> os.stat_result:
    """The `stat` of `path`, a regular file (links followed), or the `DatasetError` saying what
    it is instead. A file of `meta/` must also lead inside the dataset (see the module's doc).
    A missing file raises `FileNotFoundError`, which `reading` turns into "missing"."""
    hint_root = root if root is not None else path.parent
    info = path.stat()
    kind = special_kind(info.st_mode)
    if kind == "a directory":
        raise IsADirectoryError(str(path))
    link = f"a link to {path.resolve()}, " if path.is_symlink() else ""
    if kind is not None:
        raise CorruptDataset(
            f"the {what} is {link}{kind}, not a regular file: reading it could block or never end",
            where=str(path),
            hint=check_hint(hint_root, NOT_REGULAR_HINT),
        )
    if root is not None and _in_meta(path, root):
        target = path.resolve()
        if not any(target.is_relative_to(folder) for folder in _allowed_folders(root)):
            raise CorruptDataset(
                f"the {what} is a link to {target}, outside the dataset folder",
                where=str(path),
                hint=OUTSIDE_HINT,
            )
    return info


@contextmanager
def reading(path: Path, what: str, root: Path | None = None) -> Iterator[None]:
    """Run a read of `path` (a `what`: "parquet file", "video", ...), translating its failures."""
    hint_root = root if root is not None else path.parent
    try:
        yield
    except RlctlError:
        raise
    except FileNotFoundError as err:
        raise CorruptDataset(
            f"the {what} is missing",
            where=str(path),
            hint=check_hint(hint_root, INCOMPLETE_HINT),
        ) from err
    except PermissionError as err:
        raise DatasetError(
            f"the {what} cannot be read: permission denied",
            where=str(path),
            hint="check the file's owner and mode",
        ) from err
    except IsADirectoryError as err:
        raise CorruptDataset(
            f"the {what} is a directory", where=str(path), hint=check_hint(hint_root, CORRUPT_HINT)
        ) from err
    except json.JSONDecodeError as err:
        raise CorruptDataset(
            f"the {what} is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}",
            where=str(path),
            hint=check_hint(hint_root, CORRUPT_HINT),
        ) from err
    except RecursionError as err:
        raise CorruptDataset(
            f"the {what} is nested too deeply to be read",
            where=str(path),
            hint=check_hint(hint_root, CORRUPT_HINT),
        ) from err
    except UnicodeDecodeError as err:
        raise CorruptDataset(
            f"the {what} is not UTF-8 text ({err.reason})",
            where=str(path),
            hint=check_hint(hint_root, CORRUPT_HINT),
        ) from err
    except (pa.ArrowException, OSError, ValueError) as err:
        raise CorruptDataset(
            f"the {what} cannot be read: {_first_line(err)}",
            where=str(path),
            hint=check_hint(hint_root, CORRUPT_HINT),
        ) from err


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]


def read_bytes(
    path: Path, what: str, root: Path | None = None, max_bytes: int | None = None
) -> bytes:
    """The content of the regular file `path`, at most `max_bytes` of it (more is an error).

    The file is opened without blocking and checked again through the open descriptor, so a
    FIFO or device swapped in after the first check is refused all the same."""
    hint_root = root if root is not None else path.parent
    with reading(path, what, root):
        check_regular_file(path, what, root)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(file.fileno())
            kind = special_kind(info.st_mode)
            if kind is not None:
                raise CorruptDataset(
                    f"the {what} is {kind}, not a regular file",
                    where=str(path),
                    hint=check_hint(hint_root, NOT_REGULAR_HINT),
                )
            if max_bytes is not None and info.st_size > max_bytes:
                raise _too_large(path, what, info.st_size, max_bytes, hint_root)
            data = file.read() if max_bytes is None else file.read(max_bytes + 1)
        if max_bytes is not None and len(data) > max_bytes:  # it grew while read
            raise _too_large(path, what, len(data), max_bytes, hint_root)
        return data


def _too_large(path: Path, what: str, size: int, max_bytes: int, root: Path) -> CorruptDataset:
    return CorruptDataset(
        f"the {what} is {size / 2**20:.0f} MiB, more than the {max_bytes / 2**20:.0f} MiB "
        "a LeRobot dataset's metadata can need",
        where=str(path),
        hint=check_hint(root, CORRUPT_HINT),
    )


def read_text(path: Path, what: str, root: Path | None = None, max_bytes: int | None = None) -> str:
    data = read_bytes(path, what, root, max_bytes)
    with reading(path, what, root):
        return data.decode("utf-8")


def read_json(
    path: Path, what: str = "JSON file", root: Path | None = None, max_bytes: int | None = None
) -> Any:
    text = read_text(path, what, root, max_bytes)
    with reading(path, what, root):
        return json.loads(text)


def read_parquet_table(
    path: Path,
    what: str = "parquet file",
    root: Path | None = None,
    columns: Sequence[str] | None = None,
    filters: Any = None,
) -> pa.Table:
    """A whole parquet file as one Arrow table, memory-mapped while it is decoded."""
    with reading(path, what, root):
        check_regular_file(path, what, root)
        return plain_table(
            pq.read_table(
                path,
                columns=list(columns) if columns is not None else None,
                filters=filters,
                memory_map=True,
            )
        )


def read_parquet_schema(
    path: Path, what: str = "parquet file", root: Path | None = None
) -> pa.Schema:
    with reading(path, what, root):
        check_regular_file(path, what, root)
        return plain_schema(pq.read_schema(path, memory_map=True))


def plain_field(field: pa.Field) -> pa.Field:
    """`field` as pyarrow reads it when no extension type is registered: `datasets` registers
    its ArrayND types on import, and a table read while it is imported would otherwise hold
    them instead of the nested lists they store (and readers, writers and checks would see
    other types depending on what else the process imported)."""
    kind = field.type
    if not isinstance(kind, pa.ExtensionType):
        return field
    metadata = dict(field.metadata or {})
    metadata[b"ARROW:extension:name"] = kind.extension_name.encode()
    metadata[b"ARROW:extension:metadata"] = kind.__arrow_ext_serialize__()
    return pa.field(field.name, kind.storage_type, field.nullable, metadata)


def plain_schema(schema: pa.Schema) -> pa.Schema:
    if not any(isinstance(field.type, pa.ExtensionType) for field in schema):
        return schema
    return pa.schema([plain_field(field) for field in schema], metadata=schema.metadata)


def plain_table(table: pa.Table) -> pa.Table:
    """`table` with extension-typed columns as their storage (see `plain_field`); no copy."""
    schema = plain_schema(table.schema)
    if schema is table.schema:
        return table
    columns = [
        pa.chunked_array([chunk.storage for chunk in column.chunks], field.type)
        if isinstance(column.type, pa.ExtensionType)
        else column
        for column, field in zip(table.columns, schema, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=schema)
