"""Turning pyarrow, json and OS failures into dataset errors that name the file and the fix.

Readers open every file through `read_json` / `read_parquet_table` (or inside `reading(...)`), so
no pyarrow or json traceback reaches a user: what surfaces is a `DatasetError` whose `where` is
the file (and key) and whose hint says what to do.
"""

from __future__ import annotations

import json
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


def check_hint(root: Path, hint: str) -> str:
    return hint.replace("ROOT", str(root))


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


def read_json(path: Path, what: str = "JSON file", root: Path | None = None) -> Any:
    with reading(path, what, root):
        return json.loads(path.read_text(encoding="utf-8"))


def read_parquet_table(
    path: Path,
    what: str = "parquet file",
    root: Path | None = None,
    columns: Sequence[str] | None = None,
    filters: Any = None,
) -> pa.Table:
    """A whole parquet file as one Arrow table, memory-mapped while it is decoded."""
    with reading(path, what, root):
        return pq.read_table(
            path,
            columns=list(columns) if columns is not None else None,
            filters=filters,
            memory_map=True,
        )


def read_parquet_schema(
    path: Path, what: str = "parquet file", root: Path | None = None
) -> pa.Schema:
    with reading(path, what, root):
        return pq.read_schema(path, memory_map=True)
