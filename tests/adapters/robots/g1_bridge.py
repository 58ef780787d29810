"""An emulated G1 bridge: LeRobot 0.6.1's `run_g1_server.py` with the robot replaced by joints that
go where they are told, on real ZeroMQ sockets on localhost.

Like the real bridge it binds a PULL socket for commands and a PUB socket for the state, sends
`{"topic": "rt/lowstate", "data": lowstate_to_dict(...)}` (35 motor states, the IMU, the
wireless remote as base64, `mode_machine`) at a steady rate, and takes `{"topic": "rt/lowcmd",
"data": {...}}` commands; every command is kept (`commands`) and, in position mode with a
positive kp, moves the emulated joint to its `q`. `silence()` stops the state (a bridge that
died), `corrupt(index)` makes a joint's position NaN in what is sent.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from typing import Any

import zmq

NUM_MOTORS = 35


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EmulatedBridge:
    def __init__(
        self,
        *,
        lowcmd_port: int | None = None,
        lowstate_port: int | None = None,
        period_s: float = 0.005,
        mode_machine: int = 5,
        host: str = "127.0.0.1",
    ) -> None:
        self.lowcmd_port = lowcmd_port or free_port()
        self.lowstate_port = lowstate_port or free_port()
        self.period_s = period_s
        self.mode_machine = mode_machine
        self.q = [0.01 * i for i in range(NUM_MOTORS)]
        self.commands: list[dict[str, Any]] = []
        self.states_sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._silent = threading.Event()
        self._corrupt: set[int] = set()
        self._context = zmq.Context()
        ipv6 = ":" in host
        where = f"[{host}]" if ipv6 else host
        self._pull = self._context.socket(zmq.PULL)
        self._pub = self._context.socket(zmq.PUB)
        for sock in (self._pull, self._pub):
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.IPV6, int(ipv6))
        self._pull.bind(f"tcp://{where}:{self.lowcmd_port}")
        self._pub.bind(f"tcp://{where}:{self.lowstate_port}")
        self._threads = [
            threading.Thread(target=self._publish, daemon=True),
            threading.Thread(target=self._take_commands, daemon=True),
        ]

    def __enter__(self) -> EmulatedBridge:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=5)
        self._pull.close()
        self._pub.close()
        self._context.term()

    def silence(self) -> None:
        self._silent.set()

    def corrupt(self, *indices: int) -> None:
        with self._lock:
            self._corrupt = set(indices)

    def lowstate(self) -> dict[str, Any]:
        with self._lock:
            q = list(self.q)
            for i in self._corrupt:
                q[i] = float("nan")
        motors = [
            {"q": q[i], "dq": 0.0, "tau_est": 0.1 * i, "temperature": 30.0}
            for i in range(NUM_MOTORS)
        ]
        return {
            "motor_state": motors,
            "imu_state": {
                "quaternion": [1.0, 0.0, 0.0, 0.0],
                "gyroscope": [0.0, 0.0, 0.0],
                "accelerometer": [0.0, 0.0, 9.81],
                "rpy": [0.0, 0.0, 0.0],
                "temperature": 35.0,
            },
            "wireless_remote": base64.b64encode(bytes(40)).decode("ascii"),
            "mode_machine": self.mode_machine,
        }

    def _publish(self) -> None:
        while not self._stop.is_set():
            if not self._silent.is_set():
                payload = json.dumps({"topic": "rt/lowstate", "data": self.lowstate()})
                # json.dumps writes NaN as the bare word NaN, as Python's json on the robot does.
                try:
                    self._pub.send(payload.encode("utf-8"), zmq.NOBLOCK)
                    self.states_sent += 1
                except zmq.Again:
                    pass
            time.sleep(self.period_s)

    def _take_commands(self) -> None:
        while not self._stop.is_set():
            if not self._pull.poll(20):
                continue
            message = json.loads(self._pull.recv().decode("utf-8"))
            with self._lock:
                self.commands.append(message)
                if message.get("topic") != "rt/lowcmd":
                    continue  # the real bridge drops other topics
                for i, command in enumerate(message["data"]["motor_cmd"]):
                    if command["mode"] == 1 and command["kp"] > 0:
                        self.q[i] = command["q"]

    def wait_for_commands(self, count: int, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.commands) >= count:
                    return list(self.commands)
            time.sleep(0.005)
        with self._lock:
            return list(self.commands)
