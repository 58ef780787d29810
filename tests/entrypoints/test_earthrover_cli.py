"""`rlctl teleoperate` and `rlctl record` with `--robot.type=earthrover_mini_plus
--teleop.type=keyboard_rover` as a user types them, against the emulated FrodoBots SDK server (a
real HTTP server in a thread) and key events through the `pynput` module the teleoperator
imports: the rover drives while `w` is held and is stopped when the command ends; two recorded
episodes have LeRobot's features and check clean; the SDK server dying mid-episode keeps the
finished episodes and names the part that was lost."""

from __future__ import annotations

import re
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.entrypoints.cli.main import cli

from ..adapters.robots.earthrover_sdk import FakeEarthRoverSdk

QUIET = ["--controls=off", "--progress=silent"]
STATE = [
    "speed",
    "battery_level",
    "orientation",
    "gps_latitude",
    "gps_longitude",
    "gps_signal",
    "signal_level",
    "vibration",
    "lamp",
    *(f"accelerometer_{a}" for a in "xyz"),
    *(f"gyroscope_{a}" for a in "xyz"),
    *(f"magnetometer_filtered_{a}" for a in "xyz"),
    *(f"wheel_rpm_{i}" for i in range(4)),
]


def fake_pynput(held: list[str]) -> types.ModuleType:
    """`pynput` whose listener, once started, says the `held` characters went down (and stay)."""

    class Listener:
        def __init__(self, on_press: Callable[[Any], None], on_release: Callable[[Any], None]):
            self.on_press = on_press
            self.alive = False

        def start(self) -> None:
            self.alive = True
            for char in held:
                self.on_press(types.SimpleNamespace(char=char))

        def is_alive(self) -> bool:
            return self.alive

        def stop(self) -> None:
            self.alive = False

    keyboard = types.ModuleType("pynput.keyboard")
    keyboard.Listener = Listener  # type: ignore[attr-defined]
    package = types.ModuleType("pynput")
    package.keyboard = keyboard  # type: ignore[attr-defined]
    return package


@pytest.fixture
def sdk(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynput", fake_pynput(["w"]))
    server = FakeEarthRoverSdk().start()
    yield server
    server.stop()


def rover(sdk: FakeEarthRoverSdk, *settings: str) -> list[str]:
    return [
        "--robot.type=earthrover_mini_plus",
        f"--robot.sdk_url={sdk.url}",
        *settings,
        "--teleop.type=keyboard_rover",
        "--teleop.linear_speed=0.6",
    ]


def record(root, sdk, episodes: int, *settings: str):
    return CliRunner().invoke(
        cli,
        [
            "record",
            *rover(sdk, *settings),
            f"--dataset.root={root}",
            "--dataset.single_task=drive forward",
            f"--dataset.num_episodes={episodes}",
            "--dataset.fps=10",
            "--dataset.episode_time_s=1",
            "--dataset.reset_time_s=0",
            *QUIET,
        ],
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_teleoperate_drives_the_rover_while_w_is_held_and_stops_it_at_the_end(sdk):
    result = CliRunner().invoke(
        cli, ["teleoperate", *rover(sdk), "--fps=20", "--teleop_time_s=1", *QUIET]
    )
    assert result.exit_code == 0, result.output
    # The teleoperator's float32 0.6, as the dataset would keep it.
    sent = [(round(linear, 6), angular) for _, linear, angular, _ in sdk.commands]
    assert sent.count((0.6, 0.0)) >= 5, sent
    assert sent[0] == (0.0, 0.0) and sent[-1] == (0.0, 0.0)  # still at connect, stopped at the end


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_record_two_episodes_with_lerobots_features_that_check_clean(sdk, tmp_path):
    root = tmp_path / "rover"
    result = record(root, sdk, 2)
    assert result.exit_code == 0, result.output
    reader = LeRobotDatasetReader(root)
    meta = reader.meta
    assert meta.total_episodes == 2 and len(reader) == 20
    assert meta.robot_type == "earthrover_mini_plus"
    features = meta.features
    assert features["observation.state"].names == STATE
    assert (features["observation.state"].dtype, features["observation.state"].shape) == (
        "float32",
        (22,),
    )
    assert features["action"].names == ["linear_velocity", "angular_velocity"]
    for camera in ("front", "rear"):
        assert features[f"observation.images.{camera}"].dtype == "video"
        assert features[f"observation.images.{camera}"].shape == (480, 640, 3)
    frames = [reader[i] for i in range(len(reader))]
    actions = np.stack([f["action"].numpy() for f in frames])
    np.testing.assert_allclose(actions, np.tile([0.6, 0.0], (20, 1)), atol=1e-6)
    speeds = np.array([f["observation.state"][0].item() for f in frames])
    assert speeds.max() == pytest.approx(1.8)  # the emulated rover drove as it was told
    assert frames[0]["observation.images.front"].shape == (3, 480, 640)
    assert sdk.last_command() == (0.0, 0.0)
    check = CliRunner().invoke(cli, ["dataset", "check", str(root)])
    assert check.exit_code == 0, check.output


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_sdk_dying_mid_episode_keeps_the_finished_episodes_and_names_the_part(sdk, tmp_path):
    root = tmp_path / "lost"
    done = threading.Event()

    def stop_the_sdk_in_the_second_episode() -> None:
        # One telemetry read at connect, ten per episode: the 13th is the second's second tick,
        # leaving eight ticks (0.8 s at 10 fps) to run past observation_timeout_s (0.5 s).
        deadline = time.monotonic() + 120
        while not done.is_set() and time.monotonic() < deadline:
            if sdk.requests["/data"] >= 13:
                break
            time.sleep(0.01)
        sdk.stop()

    killer = threading.Thread(target=stop_the_sdk_in_the_second_episode, daemon=True)
    killer.start()
    try:
        result = record(
            root,
            sdk,
            5,
            "--robot.request_timeout_s=0.3",
            "--robot.observation_timeout_s=0.5",
            "--dataset.video=false",  # pictures as PNG: the other way cameras are stored
        )
    finally:
        done.set()
        killer.join(timeout=10)
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("error: "))
    assert f"earthrover_mini_plus {sdk.url}" in error, result.output
    # Whichever request of the tick met the dead server first is the one named.
    assert re.search(r"the SDK \(/(v2/front|v2/rear|data|control)\)", error), error
    assert "connection refused" in error
    assert "hypercorn main:app" in result.output  # the hint
    reader = LeRobotDatasetReader(root)
    assert reader.meta.total_episodes == 1 and len(reader) == 10
    assert reader[0]["observation.images.front"].shape == (3, 480, 640)
    check = CliRunner().invoke(cli, ["dataset", "check", str(root)])
    assert check.exit_code == 0, check.output
