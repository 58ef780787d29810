"""Checking a dataset's `meta/` folder, problem by problem instead of stopping at the first.

The rules are the reader's own (`meta_rules.py`): the same walk runs with verdicts that note each
fault instead of raising it, so every message here is the one the reader would stop with. What
could be trusted is handed on so the data and video files get checked too.
"""

from __future__ import annotations

from pathlib import Path

from rlctl.adapters.storage.lerobot_v3.meta_rules import Collect, Fault, load_meta
from rlctl.adapters.storage.lerobot_v3.tools.findings import Findings
from rlctl.domain.dataset_meta import DatasetMeta


def check_meta(root: Path, findings: Findings) -> DatasetMeta | None:
    """The metadata as far as it can be trusted, or None when the files cannot be placed."""

    def note(fault: Fault) -> None:
        findings.add(
            fault.message,
            file=fault.file,
            key=fault.key,
            episode=fault.episode,
            hint=fault.hint,
            severity=fault.severity,
            kind=fault.kind,
        )

    return load_meta(root, Collect(note))
