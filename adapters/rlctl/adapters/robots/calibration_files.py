"""Calibrations as LeRobot keeps them: one JSON file per device, in LeRobot's folder.

`$HF_LEROBOT_CALIBRATION/<kind>/<type>/<id>.json`, where `HF_LEROBOT_CALIBRATION` defaults to
`$HF_LEROBOT_HOME/calibration` and that to `~/.cache/huggingface/lerobot` — so an arm calibrated
by LeRobot is ready here, and the other way round. A device's `calibration_dir` replaces
`<kind>/<type>`. The environment is read when a file is looked up, not at import.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from rlctl.application.ports.robot import CalibrationKey
from rlctl.domain.calibration import Calibration
from rlctl.domain.errors import CalibrationError


def calibration_root(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("HF_LEROBOT_CALIBRATION"):
        return Path(env["HF_LEROBOT_CALIBRATION"]).expanduser()
    if env.get("HF_LEROBOT_HOME"):
        return Path(env["HF_LEROBOT_HOME"]).expanduser() / "calibration"
    xdg = env.get("XDG_CACHE_HOME") or str(Path("~", ".cache"))
    hf_home = Path(env.get("HF_HOME") or Path(xdg, "huggingface")).expanduser()
    return hf_home / "lerobot" / "calibration"


class CalibrationFiles:
    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        """`root` replaces the folder found from the environment (for tests and services)."""
        self._root = Path(root) if root is not None else None

    def path_for(self, key: CalibrationKey) -> Path:
        if key.directory:
            folder = Path(key.directory).expanduser()
        else:
            folder = (self._root or calibration_root()) / key.kind / key.type
        # LeRobot names the file after the id even when it is unset: "None.json".
        return folder / f"{key.id}.json"

    def load(self, key: CalibrationKey) -> Calibration | None:
        path = self.path_for(key)
        text = read_calibration_text(path)
        if text is None:
            return None
        try:
            return Calibration.from_json(text)
        except CalibrationError as error:
            raise CalibrationError(
                error.message,
                where=f"{path}" + (f" ({error.where})" if error.where else ""),
                hint=f"fix the file, or delete it and run `rlctl calibrate` for {key.label}",
            ) from error

    def save(self, key: CalibrationKey, calibration: Calibration) -> str:
        path = self.path_for(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed, so a crash never leaves half a calibration behind.
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(calibration.to_json() + "\n", encoding="utf-8")
        tmp.replace(path)
        return str(path)


def read_calibration_text(path: Path) -> str | None:
    """A calibration file's text; None when there is none yet; unreadable: one error naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise CalibrationError(
            f"cannot read the calibration file ({error.strerror})", where=str(path)
        ) from error
