"""Fixtures the entry-point tests share: SO arm calibration files, a virtual SO-101 arm pair
(follower and leader on two virtual servo buses the real Feetech SDK talks to) as `rlctl record`
and `rlctl rollout` drive it, and a plugin package installed into a folder of its own."""

from __future__ import annotations

import json
import math
import shutil
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.adapters.robots.servo_arm import ServoArm
from rlctl.adapters.robots.so_follower import SO_JOINTS


@pytest.fixture
def so_calibration(tmp_path, monkeypatch) -> Callable[[str, str, str], Path]:
    """Calibration files where rlctl and LeRobot look for them (`HF_LEROBOT_CALIBRATION`, a
    fresh folder): `so_calibration(kind, device, name)` writes a full-range SO arm calibration
    as `kind/device/name.json` there and returns its path."""
    root = tmp_path / "calibration"
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(root))
    full_range = {
        motor: {"id": i, "drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": 4095}
        for i, motor in enumerate(SO_JOINTS, start=1)
    }

    def write(kind: str, device: str, name: str) -> Path:
        folder = root / kind / device
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.json"
        path.write_text(json.dumps(full_range, indent=4))
        return path

    return write


@pytest.fixture
def so101(so_calibration, monkeypatch) -> Iterator[tuple[VirtualServoBus, VirtualServoBus]]:
    """A calibrated virtual SO-101 pair, `(follower, leader)`: the follower's id is `f`, the
    leader's `l`; a thread moves the leader's joints as a hand would."""
    # Replies through a pty are late on a loaded 2-core machine; real arms need no such margin.
    monkeypatch.setattr(FeetechMotorBus, "default_timeout_margin_ms", 1000.0)
    so_calibration("robots", "so_follower", "f")
    so_calibration("teleoperators", "so_leader", "l")
    follower = VirtualServoBus.uniform("feetech", "sts3215", range(1, 7), tau_s=0.02).start()
    leader = VirtualServoBus.uniform("feetech", "sts3215", range(1, 7)).start()
    stop = threading.Event()

    def hand() -> None:
        start = time.monotonic()
        while not stop.wait(0.01):
            t = time.monotonic() - start
            for motor in leader.motors:
                motor.move_by_hand(2048 + 300 * math.sin(2 * math.pi * t / 1.5 + motor.id))

    mover = threading.Thread(target=hand, daemon=True)
    mover.start()
    yield follower, leader
    stop.set()
    mover.join(timeout=5)
    follower.stop()
    leader.stop()


def _install(source: Path, site: Path) -> Path:
    """Lay the package at `source` out in `site` as an installer does: its import package, and
    `NAME-VERSION.dist-info` with METADATA and the entry points of its pyproject.toml."""
    declared = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))
    project = declared["project"]
    name, version = project["name"], project["version"]
    wheel = declared.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {})
    for package in wheel.get("wheel", {}).get("packages", [name.replace("-", "_")]):
        shutil.copytree(source / package, site / package)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.3\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    groups = project.get("entry-points", {})
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in points.items()) + "\n"
            for group, points in groups.items()
        ),
        encoding="utf-8",
    )
    (info / "INSTALLER").write_text("rlctl-tests\n", encoding="utf-8")
    return info


@pytest.fixture(scope="session")
def install_plugin() -> Callable[[Path, Path], Path]:
    """`install_plugin(source, site)` lays the package at `source` (a folder with its
    pyproject.toml) out in the folder `site` as an installer lays its wheel out, and returns its
    `.dist-info`: a process with `site` on its path finds its entry points through
    `importlib.metadata`, as a `pip install`ed package's, without a wheel build."""
    return _install


def fail_at_tick(
    monkeypatch, robot_class: type, episode: int, tick: int, fail: Callable[[], None]
) -> None:
    """Run `fail` (unplug a motor) when `robot_class` reads its `tick`-th observation of the
    `episode`-th episode (counted by its resets): a fault in the middle of a recording."""
    reads = {"resets": 0, "ticks": 0}
    original_reset = robot_class.reset
    original_read = robot_class.get_observation

    def reset(self):
        reads["resets"] += 1
        reads["ticks"] = 0
        original_reset(self)

    def get_observation(self):
        reads["ticks"] += 1
        if reads["resets"] == episode and reads["ticks"] == tick:
            fail()
        return original_read(self)

    monkeypatch.setattr(robot_class, "reset", reset)
    monkeypatch.setattr(robot_class, "get_observation", get_observation)


class GoalLog:
    """Every goal the follower wrote, beside the positions it had read last: what the guard
    steps from (the arm moves on between the two, so the dataset's states cannot tell)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pairs: list[tuple[np.ndarray, np.ndarray]] = []
        self._present: np.ndarray | None = None
        positions, write_goals = ServoArm.positions, ServoArm.write_goals
        log = self

        def read(arm: ServoArm, motors: Any = None) -> np.ndarray:
            values = positions(arm, motors)
            if motors is None:
                log._present = np.asarray(values, dtype=float)
            return values

        def write(arm: ServoArm, goals: np.ndarray) -> None:
            assert log._present is not None, "a goal written before any position was read"
            log.pairs.append((log._present.copy(), np.asarray(goals, dtype=float)))
            write_goals(arm, goals)

        monkeypatch.setattr(ServoArm, "positions", read)
        monkeypatch.setattr(ServoArm, "write_goals", write)

    def largest_step(self) -> float:
        assert self.pairs, "no goal was written"
        return max(float(np.abs(goals - present).max()) for present, goals in self.pairs)
