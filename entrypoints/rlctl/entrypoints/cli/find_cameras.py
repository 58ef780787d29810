"""`rlctl find-cameras`: list the cameras of every kind rlctl opens (OpenCV devices, Intel
RealSense devices when pyrealsense2 is installed, the cameras of ZeroMQ publishers given with
`--zmq`), and optionally grab a frame of each OpenCV one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click


@click.command(name="find-cameras")
@click.option(
    "--capture",
    "capture_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Save one frame of each OpenCV camera found as a PNG in this folder.",
)
@click.option(
    "--zmq",
    "zmq_addresses",
    multiple=True,
    metavar="HOST:PORT",
    help="Also list the cameras a ZeroMQ publisher sends (LeRobot's image server); repeatable.",
)
@click.option(
    "--zmq-timeout",
    type=float,
    default=2.0,
    show_default=True,
    help="Seconds to wait for each publisher's first message.",
)
def find_cameras_command(
    capture_dir: str | None, zmq_addresses: tuple[str, ...], zmq_timeout: float
) -> None:
    """List cameras with the size, rate and format they start in."""
    from rlctl.entrypoints.cli.config_options import start_command
    from rlctl.entrypoints.container import build_container

    start_command(click.get_current_context())
    container = build_container()
    found = container.find_cameras()(zmq_addresses, zmq_timeout_s=zmq_timeout)
    if not found.cameras:
        click.echo("no camera found")
    for camera in found.cameras:
        rate = f" @ {camera.fps:g} fps" if camera.fps else ""
        click.echo(
            f"{camera.kind} {camera.id}: {camera.width}x{camera.height}{rate}, {camera.detail}"
        )
        settings = ", ".join(f"{k}: {v}" for k, v in camera.settings.items())
        click.echo(f"  {{type: {camera.kind}, {settings}}}")
        if capture_dir is not None and camera.kind == "opencv":
            saved = _capture(container, camera.settings["index_or_path"], Path(capture_dir))
            click.echo(f"  saved {saved}")
    for note in found.notes:
        click.echo(f"note: {note}")


def _capture(container: Any, index_or_path: Any, folder: Path) -> Path:
    import cv2

    from rlctl.entrypoints.parts import OpenCVCameraConfig

    device = container.opencv_camera(
        OpenCVCameraConfig(index_or_path=index_or_path, color_mode="bgr", warmup_s=0.5)
    )
    device.connect()
    try:
        frame = device.read()
    finally:
        device.disconnect()
    folder.mkdir(parents=True, exist_ok=True)
    name = str(index_or_path).replace("/", "_").strip("_")
    path = folder / f"opencv_{name}.png"
    cv2.imwrite(str(path), frame)
    return path
