"""The edits made to a dataset in place, newest last: `ROOT/.rlctl-edits.jsonl`.

Each edit writes the journal into the folder it builds, before the swap, so the dataset at the
path and its journal change together: after a kill at any moment, the journal says whether the
dataset there already reflects the edit. LeRobot reads only the files it knows, and the name is
hidden, so `dataset push` never sends it. A line that cannot be read is skipped: the journal is a
record, not the data.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

import attrs

from rlctl.adapters.storage.lerobot_v3.atomic_files import write_atomic
from rlctl.application.ports.dataset_tools import EditRecord

JOURNAL_NAME = ".rlctl-edits.jsonl"
# Edits remembered; older lines are dropped.
_KEPT = 200
_MAX_BYTES = 4 * 1024 * 1024


def read_journal(root: Path) -> list[EditRecord]:
    try:
        with (root / JOURNAL_NAME).open("rb") as file:
            text = file.read(_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return []
    records = []
    for line in text.splitlines():
        record = _parse(line)
        if record is not None:
            records.append(record)
    return records


def _parse(line: str) -> EditRecord | None:
    try:
        data: Any = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    fields = {f.name for f in attrs.fields(EditRecord)}
    values = {k: str(v) for k, v in data.items() if k in fields and isinstance(v, (str, int))}
    if not {"tool", "request", "after"} <= set(values):
        return None
    return EditRecord(**values)


def last_edit(root: Path) -> EditRecord | None:
    records = read_journal(root)
    return records[-1] if records else None


def stamped(record: EditRecord) -> EditRecord:
    """`record` with when, who and by which command, filled in where missing."""
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) or "python"
    return attrs.evolve(
        record,
        at=record.at or datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        command=record.command or command[:300],
        pid=record.pid or str(os.getpid()),
    )


def write_journal(target: Path, previous: Path, record: EditRecord) -> None:
    """`previous`'s journal plus `record`, written into the folder `target`."""
    records = [*read_journal(previous), stamped(record)][-_KEPT:]
    text = "".join(json.dumps(attrs.asdict(r), ensure_ascii=False) + "\n" for r in records)
    write_atomic(target / JOURNAL_NAME, lambda temp: temp.write_text(text, encoding="utf-8"))
