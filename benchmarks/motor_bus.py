"""Sync-read latency of six motors over the virtual servo bus, for both wire protocols.

Rows:
- `rlctl <family>`: `bus.sync_read("Present_Position")`, normalised through a calibration, as a
  robot's observation step calls it;
- `sdk <family>`: the vendor SDK's bare `GroupSyncRead.txRxPacket()` + `getData`, what LeRobot
  0.6.1's `sync_read` costs before its own decoding — the floor under any adapter.

The bus is a pseudo-terminal served by a thread of this process (`thread`: the firmware's Python
time and the GIL hand-offs count) or by a process of its own (`process`: closer to real motors,
which cost the host nothing). No wire's transmission time is simulated.

Usage: python benchmarks/motor_bus.py [--reads N] [--motors N]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator

import dynamixel_sdk
import real_size
import scservo_sdk
import structlog

from rlctl.adapters.motors.dynamixel import DynamixelMotorBus
from rlctl.adapters.motors.feetech import FeetechMotorBus
from rlctl.adapters.motors.virtual_bus import VirtualServoBus
from rlctl.domain.calibration import Calibration, MotorCalibration, MotorNormMode
from rlctl.domain.motors import Motor

FAMILIES = {
    "feetech": ("sts3215", FeetechMotorBus, scservo_sdk, 0, 56, 2),
    "dynamixel": ("xl430-w250", DynamixelMotorBus, dynamixel_sdk, 2.0, 132, 4),
}


def percentiles(samples_s: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples_s, n=100, method="inclusive")
    return cuts[49] * 1e3, cuts[94] * 1e3


def time_calls(call: Callable[[], object], reads: int) -> list[float]:
    for _ in range(20):  # warm-up
        call()
    return real_size.seconds_each(call, reads)


@contextlib.contextmanager
def threaded_bus(family: str, n_motors: int) -> Iterator[str]:
    with VirtualServoBus.uniform(family, FAMILIES[family][0], range(1, n_motors + 1)) as virtual:
        yield virtual.port


@contextlib.contextmanager
def bus_process(family: str, n_motors: int) -> Iterator[str]:
    command = [sys.executable, "-m", "rlctl.adapters.motors.virtual_bus", "--family", family]
    command += ["--model", FAMILIES[family][0], "--ids", f"1-{n_motors}"]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)


def rlctl_sync_read(family: str, port: str, n_motors: int, reads: int) -> list[float]:
    model, bus_type, *_ = FAMILIES[family]
    motors = {
        f"joint_{i}": Motor(i, model, MotorNormMode.RANGE_M100_100) for i in range(1, n_motors + 1)
    }
    calibration = Calibration(
        {name: MotorCalibration(m.id, 0, 0, 0, 4095) for name, m in motors.items()}
    )
    bus = bus_type(port, motors, calibration)
    bus.connect()
    try:
        return time_calls(lambda: bus.sync_read("Present_Position"), reads)
    finally:
        bus.disconnect(disable_torque=False)


def sdk_sync_read(family: str, port_name: str, n_motors: int, reads: int) -> list[float]:
    _, _, sdk, protocol, address, size = FAMILIES[family]
    port = sdk.PortHandler(port_name)
    port.openPort()
    reader = sdk.GroupSyncRead(port, sdk.PacketHandler(protocol), address, size)
    ids = range(1, n_motors + 1)
    for motor_id in ids:
        reader.addParam(motor_id)

    def call() -> None:
        if reader.txRxPacket() != sdk.COMM_SUCCESS:
            failures.append(1)  # the SDK does not retry; LeRobot's default num_retry is 0
        for motor_id in ids:
            reader.getData(motor_id, address, size)

    failures: list[int] = []
    try:
        return time_calls(call, reads)
    finally:
        port.closePort()
        if failures:
            print(f"  ({len(failures)} bare SDK sync reads failed: no status packet in time)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=1000)
    parser.add_argument("--motors", type=int, default=6)
    args = parser.parse_args()

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))

    print(f"sync read of Present_Position, {args.motors} motors, {args.reads} reads")
    print(f"{'':<28} {'p50 ms':>8} {'p95 ms':>8}")
    for family in FAMILIES:
        for server_name, server in (("thread", threaded_bus), ("process", bus_process)):
            for label, run in (("rlctl", rlctl_sync_read), ("sdk", sdk_sync_read)):
                with server(family, args.motors) as port:
                    p50, p95 = percentiles(run(family, port, args.motors, args.reads))
                row = f"{label} {family} ({server_name})"
                print(f"{row:<28} {p50:>8.3f} {p95:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
