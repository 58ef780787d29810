"""`rlctl find-cameras` lists every kind: OpenCV devices, RealSense (or why not), and the
cameras of a ZeroMQ publisher given its address."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlctl.entrypoints.cli.main import cli

PUBLISHER = Path(__file__).parents[1] / "adapters" / "cameras" / "zmq_publisher.py"
pytestmark = pytest.mark.timeout(60)


def test_find_cameras_lists_a_zmq_publishers_camera_and_says_what_it_did_not_look_at():
    process = subprocess.Popen(
        [sys.executable, str(PUBLISHER), "head", "64", "48", "30", "-1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        # The publisher says its port before its first image; a loaded machine can take
        # seconds between the two (the listing ends at the first image, not the limit).
        result = CliRunner().invoke(
            cli, ["find-cameras", f"--zmq=127.0.0.1:{port}", "--zmq-timeout=30"]
        )
    finally:
        process.kill()
        process.wait(timeout=10)
    assert result.exit_code == 0, result.output
    assert f"zmq head@127.0.0.1:{port}: 64x48, JPEG over ZeroMQ" in result.output
    assert f"{{type: zmq, server_address: 127.0.0.1, port: {port}, camera_name: head}}" in (
        result.output
    )
    try:
        import pyrealsense2  # noqa: F401
    except ImportError:
        assert "note: intelrealsense: not looked for, pyrealsense2 is not installed" in (
            result.output
        )


def test_a_silent_or_malformed_zmq_address_is_said():
    result = CliRunner().invoke(cli, ["find-cameras", "--zmq=127.0.0.1:1", "--zmq-timeout=0.2"])
    assert result.exit_code == 0, result.output
    assert "note: zmq 127.0.0.1:1: no images published within 0.2 s" in result.output
    result = CliRunner().invoke(cli, ["find-cameras", "--zmq=nowhere"])
    assert result.exit_code == 1
    assert "'nowhere' is not HOST:PORT" in result.output
