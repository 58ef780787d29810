"""What a training or evaluation run left on disk, read for its report.

`rlctl train` writes `rlctl_config.json`, `metrics.jsonl` and `checkpoints/<step>/`, and the
evaluations it runs put videos under `eval/videos_step_<step>/`; `rlctl eval` (and lerobot-eval)
write `eval_info.json` and `videos/`; `rlctl rollout` writes one report file
(`--report_path`, default `<dataset>.rollout_info.json`). A run still going may end its metrics
file mid-line: such lines are counted and skipped, never fatal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlctl.application.ports.run_report import RunRecord
from rlctl.domain.errors import InvalidInput

CONFIG_NAMES = ("rlctl_config.json", "train_config.json", "config.json")
METRICS_NAME = "metrics.jsonl"
EVAL_INFO_NAME = "eval_info.json"
VIDEO_SUFFIXES = (".mp4", ".webm")
# Folders of other tools' logs, and checkpoints: no report video lives there.
_SKIPPED_DIRS = {"checkpoints", "wandb", "tensorboard", ".git"}


def _json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InvalidInput(
            f"cannot read {path.name} ({error})",
            where=str(path),
            hint="the file is damaged or still being written; run the report again",
        ) from error


ROLLOUT_INFO_NAME = "rollout_info.json"


def _rollout_info(path: Path) -> dict[str, Any]:
    info = _json_file(path)
    if not (isinstance(info, dict) and "strategy" in info and "timing" in info):
        raise InvalidInput(
            "this file is not a rollout's report (rollout_info.json)",
            where=str(path),
            hint="give `rlctl rollout`'s --report_path file, or a run folder of `rlctl train` "
            "or `rlctl eval`",
        )
    return info


class LocalRunFolder:
    def read(self, location: str) -> RunRecord:
        root = Path(location).expanduser()
        if root.is_file():
            return RunRecord(location=str(root), rollout_info=_rollout_info(root))
        if (root / ROLLOUT_INFO_NAME).is_file() and not (root / METRICS_NAME).is_file():
            return RunRecord(
                location=str(root), rollout_info=_rollout_info(root / ROLLOUT_INFO_NAME)
            )
        if not root.is_dir():
            raise InvalidInput(
                "no run folder here",
                where=str(root),
                hint="give the output dir of `rlctl train` or `rlctl eval`",
            )
        config = next(
            (_json_file(root / name) for name in CONFIG_NAMES if (root / name).is_file()), None
        )
        metrics, skipped = self._metrics(root / METRICS_NAME)
        eval_info = _json_file(root / EVAL_INFO_NAME) if (root / EVAL_INFO_NAME).is_file() else None
        return RunRecord(
            location=str(root),
            config=config if isinstance(config, dict) else None,
            metrics=metrics,
            eval_info=eval_info if isinstance(eval_info, dict) else None,
            videos=tuple(self._videos(root)),
            checkpoints=tuple(self._checkpoints(root)),
            skipped_lines=skipped,
        )

    @staticmethod
    def _metrics(path: Path) -> tuple[list[dict[str, Any]], int]:
        if not path.is_file():
            return [], 0
        records: list[dict[str, Any]] = []
        skipped = 0
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                skipped += 1
                continue
            if isinstance(record, dict) and "step" in record:
                records.append(record)
            else:
                skipped += 1
        return records, skipped

    @staticmethod
    def _videos(root: Path) -> list[str]:
        found = []
        for path in root.rglob("*"):
            relative = path.relative_to(root)
            if _SKIPPED_DIRS & set(relative.parts[:-1]):
                continue
            if path.suffix.lower() in VIDEO_SUFFIXES and path.is_file():
                found.append(relative.as_posix())
        return sorted(found)

    @staticmethod
    def _checkpoints(root: Path) -> list[int]:
        folder = root / "checkpoints"
        if not folder.is_dir():
            return []
        return sorted(
            int(p.name) for p in folder.iterdir() if p.name.isdigit() and not p.is_symlink()
        )
