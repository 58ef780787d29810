"""An emulated FrodoBots SDK server, as LeRobot 0.6.1's `EarthRoverMiniPlus` talks to it: a real
HTTP server on 127.0.0.1 in a thread, serving `GET /data` (the rover's telemetry), `GET /v2/front`
and `GET /v2/rear` (`{"front_frame": <base64 JPEG>}`) and taking `POST /control`
(`{"command": {"linear", "angular", "lamp"}}`).

The rover it stands for drives as it is told: its `speed` and wheel RPMs follow the last command.
Faults to inject: a request answered late (`delay`), a frame that is not a picture
(`corrupt_frames`), telemetry set to anything (`telemetry`, NaN included: it is sent as JSON's
`NaN`), and the server going away (`stop`: nothing listens on the port any more).

Run as a script (`python earthrover_sdk.py`) it serves until killed and prints its port first.
"""

from __future__ import annotations

import base64
import contextlib
import json
import sys
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import cv2
import numpy as np

TELEMETRY: dict[str, Any] = {
    "battery": 87,
    "signal_level": 5,
    "orientation": 128,
    "lamp": 0,
    "speed": 0,
    "gps_signal": 31.25,
    "latitude": 22.753256,
    "longitude": 114.089163,
    "vibration": 0.12,
    "timestamp": 1724189733.208559,
    "accels": [[0.1, 0.2, 9.7, 1724189733.1], [0.11, 0.21, 9.81, 1724189733.2]],
    "gyros": [[0.01, -0.02, 0.03, 1724189733.2]],
    "mags": [[-31.5, 12.25, 40.0, 1724189733.2]],
    "rpms": [[0, 0, 0, 0, 1724189733.2]],
}


def picture(width: int, height: int, seed: int) -> np.ndarray:
    """A BGR picture with structure (gradients and blocks), so resizing and colour order show."""
    y, x = np.mgrid[0:height, 0:width]
    image = np.stack(
        [
            (x * 255 // max(width - 1, 1)),
            (y * 255 // max(height - 1, 1)),
            ((x // 40 + y // 40) % 2) * 200,
        ],
        axis=-1,
    ).astype(np.uint8)
    image[: height // 4, : width // 4] = (seed * 40 % 256, 30, 220)  # a blue-ish corner in BGR
    return image


def jpeg(image: np.ndarray) -> bytes:
    ok, encoded = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    return encoded.tobytes()


class FakeEarthRoverSdk:
    def __init__(self, *, front: tuple[int, int] = (640, 480), rear: tuple[int, int] = (320, 240)):
        self.lock = threading.Lock()
        self.telemetry: dict[str, Any] = json.loads(json.dumps(TELEMETRY))
        self.frames = {
            "front": jpeg(picture(*front, seed=1)),
            "rear": jpeg(picture(*rear, seed=2)),
        }
        self.commands: list[tuple[float, float, float, int]] = []
        self.requests: dict[str, int] = defaultdict(int)
        self.delays: dict[str, list[float]] = defaultdict(list)
        self.corrupt: dict[str, int] = defaultdict(int)
        # Telemetry fields to force (e.g. NaN) whatever the rover does.
        self.forced: dict[str, Any] = {}
        # Answers to send once as they are, in place of the next one for a path.
        self.raw: dict[str, list[bytes]] = defaultdict(list)
        handler = type("Handler", (_Handler,), {"sdk": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeEarthRoverSdk:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """The SDK goes away: the port is closed, requests are refused."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> FakeEarthRoverSdk:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Faults

    def delay(self, path: str, seconds: float, times: int = 1) -> None:
        """The next `times` requests for `path` are answered `seconds` late."""
        with self.lock:
            self.delays[path].extend([seconds] * times)

    def corrupt_frames(self, camera: str, times: int = 1) -> None:
        with self.lock:
            self.corrupt[camera] += times

    def last_command(self) -> tuple[float, float] | None:
        with self.lock:
            return None if not self.commands else self.commands[-1][1:3]

    # What the handler serves

    def _data(self) -> dict[str, Any]:
        with self.lock:
            data = json.loads(json.dumps(self.telemetry))
            linear, angular = self.commands[-1][1:3] if self.commands else (0.0, 0.0)
            now = time.time()
            data["speed"] = round(abs(linear) * 3.0, 3)
            left, right = linear * 100 - angular * 50, linear * 100 + angular * 50
            data["rpms"] = [*data["rpms"], [left, right, left, right, now]]
            data["timestamp"] = now
            data.update(self.forced)
            return data

    def _frame(self, camera: str) -> str:
        with self.lock:
            if self.corrupt[camera] > 0:
                self.corrupt[camera] -= 1
                return base64.b64encode(b"\xff\xd8 this is not a picture").decode()
            return base64.b64encode(self.frames[camera]).decode()

    def _wait(self, path: str) -> None:
        with self.lock:
            self.requests[path] += 1
            pause = self.delays[path].pop(0) if self.delays[path] else 0.0
        if pause:
            time.sleep(pause)


class _Handler(BaseHTTPRequestHandler):
    sdk: FakeEarthRoverSdk
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, body: dict[str, Any], status: int = 200) -> None:
        payload = json.dumps(body).encode()  # NaN stays NaN, as Python's JSON writes it
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        # The client may have given up waiting (a delayed answer).
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(payload)

    def do_GET(self) -> None:
        self.sdk._wait(self.path)
        with self.sdk.lock:
            raw = self.sdk.raw[self.path].pop(0) if self.sdk.raw[self.path] else None
        if raw is not None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        elif self.path == "/data":
            self._reply(self.sdk._data())
        elif self.path in ("/v2/front", "/v2/rear"):
            camera = self.path.rsplit("/", 1)[1]
            self._reply({f"{camera}_frame": self.sdk._frame(camera), "timestamp": time.time()})
        else:
            self._reply({"detail": "Not Found"}, status=404)

    def do_POST(self) -> None:
        self.sdk._wait(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path != "/control":
            self._reply({"detail": "Not Found"}, status=404)
            return
        try:
            command = json.loads(body)["command"]
            linear, angular = float(command["linear"]), float(command["angular"])
            lamp = int(command.get("lamp", 0))
        except (ValueError, KeyError, TypeError):
            self._reply({"detail": "bad command"}, status=422)
            return
        with self.sdk.lock:
            self.sdk.commands.append((time.monotonic(), linear, angular, lamp))
        self._reply({"message": "Command sent successfully"})


if __name__ == "__main__":
    sdk = FakeEarthRoverSdk().start()
    print(sdk.port, flush=True)
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        sdk.stop()
        sys.exit(0)
