"""`rlctl find-cameras`: list the cameras OpenCV can open, and optionally grab a frame of each."""

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
    help="Save one frame of each camera found as a PNG in this folder.",
)
def find_cameras_command(capture_dir: str | None) -> None:
    """List cameras with the size, rate and format they start in."""
    from rlctl.entrypoints.cli.config_options import start_command
    from rlctl.entrypoints.container import build_container

    start_command(click.get_current_context())
    container = build_container()
    cameras = container.find_cameras()()
    if not cameras:
        click.echo("no camera found")
        return
    for camera in cameras:
        click.echo(
            f"{camera.id}: {camera.width}x{camera.height} @ {camera.fps:g} fps, "
            f"{camera.fourcc.strip() or '?'} ({camera.backend})"
        )
        if capture_dir is not None:
            click.echo(f"  saved {_capture(container, camera, Path(capture_dir))}")


def _capture(container: Any, camera: Any, folder: Path) -> Path:
    import cv2

    from rlctl.entrypoints.parts import OpenCVCameraConfig

    device = container.opencv_camera(
        OpenCVCameraConfig(index_or_path=camera.id, color_mode="bgr", warmup_s=0.5)
    )
    device.connect()
    try:
        frame = device.read()
    finally:
        device.disconnect()
    folder.mkdir(parents=True, exist_ok=True)
    name = str(camera.id).replace("/", "_").strip("_")
    path = folder / f"opencv_{name}.png"
    cv2.imwrite(str(path), frame)
    return path
