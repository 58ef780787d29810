"""The serial ports a motors board may sit on."""

from __future__ import annotations

import platform
from pathlib import Path


def list_serial_ports() -> list[str]:
    """pyserial's list where it is installed; else the device files LeRobot's `find_port` lists
    (`/dev/tty*` on Linux and macOS)."""
    try:
        from serial.tools import list_ports
    except ImportError:
        pattern = "tty*" if platform.system() != "Windows" else ""
        return sorted(str(p) for p in Path("/dev").glob(pattern)) if pattern else []
    return sorted(port.device for port in list_ports.comports())
