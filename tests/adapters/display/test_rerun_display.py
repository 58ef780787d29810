"""The rerun display writes recordings rerun reads back, with the entities the loops log."""

from __future__ import annotations

import socket
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.display.rerun_display import RerunDisplay, chosen_mode, has_screen, shrink
from rlctl.adapters.display.settings import DisplaySettings
from rlctl.domain.features import FeatureSpec

rr = pytest.importorskip("rerun")

JOINTS = ["shoulder_pan.pos", "elbow_flex.pos", "gripper.pos"]
FEATURES = {
    "observation.state": FeatureSpec("observation.state", "float32", (3,), JOINTS),
    "observation.images.front": FeatureSpec(
        "observation.images.front", "video", (48, 64, 3), ["height", "width", "channels"]
    ),
    "action": FeatureSpec("action", "float32", (3,), JOINTS),
}


def frames(n: int) -> list[tuple[dict, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [
        (
            {
                "observation.state": rng.random(3, dtype=np.float32),
                "observation.images.front": rng.integers(0, 255, (48, 64, 3), dtype=np.uint8),
                "task": "not a feature: ignored",
            },
            rng.random(3, dtype=np.float32),
        )
        for _ in range(n)
    ]


def rows_by_entity(path: Path) -> dict[str, int]:
    """Rows per entity of the first recording in the file (static rows left out)."""
    rows: dict[str, int] = {}
    for chunk in rr.chunk.RrdReader(path).stream().collect().stream():
        if not chunk.is_static:
            rows[chunk.entity_path] = rows.get(chunk.entity_path, 0) + chunk.num_rows
    return rows


def static_names(path: Path) -> dict[str, list[str]]:
    out = {}
    for chunk in rr.chunk.RrdReader(path).stream().collect().stream():
        if chunk.is_static and not chunk.entity_path.startswith("/__"):
            batch = chunk.to_record_batch()
            for column in batch.schema.names:
                if column.endswith(":names"):
                    out[chunk.entity_path] = batch.column(column).to_pylist()[0]
    return out


def test_a_file_display_writes_every_frame_with_named_dimensions(tmp_path: Path) -> None:
    messages: list[str] = []
    rrd = tmp_path / "run.rrd"
    display = RerunDisplay(
        DisplaySettings(mode="auto", rrd=str(rrd)),
        announce=messages.append,
        environ={},
    )
    display.open(FEATURES, fps=30, name="record", paced=False)
    for step, (observation, action) in enumerate(frames(12)):
        display.log_frame(step, observation, action)
    display.close()
    display.close()  # safe twice

    assert display.mode == "file" and display.rrd_path == rrd
    assert len(messages) == 1 and str(rrd) in messages[0] and "rerun " in messages[0]
    assert rows_by_entity(rrd) == {
        "/observation.state": 12,
        "/observation.images.front": 12,
        "/action": 12,
    }
    assert static_names(rrd) == {"/observation.state": JOINTS, "/action": JOINTS}


def test_a_display_that_falls_behind_drops_frames_instead_of_blocking(tmp_path: Path) -> None:
    display = RerunDisplay(
        DisplaySettings(mode="file", rrd=str(tmp_path / "x.rrd"), queue_frames=1),
        announce=lambda _: None,
    )
    display.open(FEATURES, fps=30, name="burst")
    many = frames(200)
    started = time.perf_counter()
    for step, (observation, action) in enumerate(many):
        display.log_frame(step, observation, action)
    spent = time.perf_counter() - started
    display.close()
    assert display.dropped > 0 and display.shown + display.dropped == 200
    # Handing a frame over is a queue put, whatever the pictures cost to send.
    assert spent / 200 < 1e-3


def test_pictures_are_shrunk_by_whole_steps() -> None:
    image = np.zeros((480, 640, 3), np.uint8)
    assert shrink(image, 320).shape == (240, 320, 3)
    assert shrink(image, 300).shape == (160, 214, 3)
    assert shrink(image, 0) is image and shrink(image, 640) is image


def test_depth_in_millimetres_is_shown_as_a_depth_image() -> None:
    display = RerunDisplay(DisplaySettings(image_max_side=16))
    depth = np.arange(24 * 32, dtype=np.uint16).reshape(24, 32, 1)
    picture = display._picture(depth)
    assert isinstance(picture, rr.DepthImage)
    colour = display._picture(np.zeros((24, 32, 3), np.uint8))
    assert not isinstance(colour, rr.DepthImage)


def test_the_mode_follows_the_screen() -> None:
    assert not has_screen({}, "linux")
    assert has_screen({"DISPLAY": ":0"}, "linux")
    assert has_screen({"WAYLAND_DISPLAY": "wayland-0"}, "linux")
    assert has_screen({}, "darwin") and not has_screen({"SSH_CONNECTION": "x"}, "darwin")
    assert chosen_mode("auto", True) == "viewer"
    assert chosen_mode("auto", False) == "file"
    assert chosen_mode("web", False) == "web"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_web_mode_serves_rerun_web_viewer_and_prints_its_address() -> None:
    messages: list[str] = []
    settings = DisplaySettings(mode="web", web_port=_free_port(), grpc_port=_free_port())
    display = RerunDisplay(settings, announce=messages.append)
    display.open(FEATURES, fps=30, name="teleoperate")
    observation, action = frames(1)[0]
    display.log_frame(0, observation, action)
    try:
        assert display.web_url is not None and display.web_url in messages[0]
        assert f":{settings.web_port}/" in display.web_url
        assert f"{settings.grpc_port}" in display.web_url
        with urllib.request.urlopen(display.web_url, timeout=5) as page:
            assert b"Rerun" in page.read()
    finally:
        display.close()


def test_a_viewer_that_cannot_start_falls_back_to_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `rerun` program to spawn
    messages: list[str] = []
    rrd = tmp_path / "fallback.rrd"
    display = RerunDisplay(
        DisplaySettings(mode="viewer", rrd=str(rrd), grpc_port=_free_port()),
        announce=messages.append,
    )
    display.open(FEATURES, fps=30, name="record", paced=False)
    observation, action = frames(1)[0]
    display.log_frame(0, observation, action)
    display.close()
    assert display.mode == "file" and messages == [
        f"live display: the frames go to {rrd}; view it with `rerun {rrd}` "
        "(or watch live in a browser: --display.mode=web)"
    ]
    assert rows_by_entity(rrd)["/action"] == 1
