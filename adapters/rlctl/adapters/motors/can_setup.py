"""`rlctl setup-can`: bring CAN interfaces up for Damiao motors, find the motors on them, time
their answers — what LeRobot 0.6.1's `lerobot-setup-can` does, with its modes and settings.

- `setup`: `ip link set <if> type can bitrate B [dbitrate D fd on]` and up (through sudo when not
  root), then the link's state as the kernel reports it;
- `test`: a state query (a refresh: it moves nothing and enables no torque, where LeRobot's test
  enables each motor) to every id; who answers, on which id, in which state;
- `speed`: round trips to the first motor that answers.

Every failure is said, and a mode that found nothing fails: a link that is down, an interface
python-can cannot open, no motor answering. `--can_interface=virtual` runs test and speed on
python-can's in-process virtual bus (emulated motors); setup is for socketcan links only.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from rlctl.adapters.motors import damiao_protocol as dm
from rlctl.application.ports.control import Console
from rlctl.domain.errors import HardwareError, InvalidInput, NotSupported

# LeRobot's names for the OpenArm's ids.
MOTOR_NAMES = {i: f"joint_{i}" for i in range(1, 8)} | {8: "gripper"}

Run = Callable[..., subprocess.CompletedProcess[str]]


@attrs.frozen
class LinkStatus:
    exists: bool
    up: bool
    fd: bool
    detail: str

    def describe(self) -> str:
        if not self.exists:
            return self.detail
        return ("UP" if self.up else "DOWN") + (" (CAN FD)" if self.fd else "")


@attrs.frozen
class MotorAnswer:
    motor_id: int
    recv_id: int
    state: str  # disabled, enabled, or the fault the motor reports
    data: str  # the frame, hex


class CanSetup:
    def __init__(
        self,
        console: Console,
        *,
        can_interface: str = "socketcan",
        bitrate: int = 1_000_000,
        data_bitrate: int = 5_000_000,
        use_fd: bool = True,
        timeout_s: float = 1.0,
        run: Run = subprocess.run,
    ) -> None:
        self._console = console
        self._interface = can_interface
        self._bitrate = bitrate
        self._data_bitrate = data_bitrate
        self._fd = use_fd
        self._timeout = timeout_s
        self._run = run

    # Links

    def link_status(self, name: str) -> LinkStatus:
        try:
            result = self._run(
                ["ip", "-details", "link", "show", name], capture_output=True, text=True
            )
        except FileNotFoundError:
            return LinkStatus(False, False, False, "the `ip` command is not installed")
        if result.returncode != 0:
            return LinkStatus(False, False, False, (result.stderr or "not found").strip())
        flags = re.search(r"<([^>]*)>", result.stdout)
        up = bool(flags) and "UP" in flags.group(1).split(",")  # type: ignore[union-attr]
        fd = "fd on" in result.stdout.lower() or "canfd" in result.stdout.lower()
        return LinkStatus(True, up, fd, result.stdout.strip())

    def setup(self, interfaces: Sequence[str]) -> dict[str, LinkStatus]:
        if self._interface != "socketcan":
            raise NotSupported(
                f"setup configures Linux socketcan links; {self._interface!r} has none",
                where="setup-can --mode=setup",
                hint="use --mode=test or --mode=speed with this interface",
            )
        self._console.show(
            f"CAN interface setup: {'CAN FD' if self._fd else 'CAN 2.0'}, bitrate "
            f"{self._bitrate / 1e6:g} Mbps"
            + (f", data bitrate {self._data_bitrate / 1e6:g} Mbps" if self._fd else "")
        )
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        done: dict[str, LinkStatus] = {}
        failed: list[str] = []
        for name in interfaces:
            link = ["ip", "link", "set", name]
            steps = [
                [*sudo, *link, "down"],
                [*sudo, *link, "type", "can", "bitrate", str(self._bitrate)]
                + (["dbitrate", str(self._data_bitrate), "fd", "on"] if self._fd else []),
                [*sudo, *link, "up"],
            ]
            error = None
            for step in steps:
                try:
                    result = self._run(step, capture_output=True, text=True)
                except FileNotFoundError as missing:
                    error = f"{missing.filename} is not installed"
                    break
                if result.returncode != 0:
                    error = f"`{' '.join(step)}` failed: {(result.stderr or '').strip()}"
                    break
            status = self.link_status(name)
            if error is None and not status.up:
                error = f"it is {status.describe()} after setup"
            if error is not None:
                self._console.show(f"  ✗ {name}: {error}")
                failed.append(f"{name}: {error}")
            else:
                self._console.show(f"  ✓ {name}: {status.describe()}")
            done[name] = status
        if failed:
            raise HardwareError(
                f"could not bring up {len(failed)} of {len(done)} CAN interface(s): "
                + "; ".join(failed),
                where="setup-can",
                hint="check that the CAN adapter is plugged in (`ip link` lists it) and that "
                "you may use sudo",
            )
        self._console.show(f"Next: rlctl setup-can --mode=test --interfaces={','.join(interfaces)}")
        return done

    # Motors

    def test(self, interfaces: Sequence[str], motor_ids: Sequence[int]) -> dict[str, Any]:
        found: dict[str, list[MotorAnswer]] = {}
        problems: list[str] = []
        for name in interfaces:
            try:
                answers = self._probe(name, motor_ids)
            except HardwareError as error:
                self._console.show(f"{name}: ✗ {error.message}")
                problems.append(f"{name}: {error.message}")
                continue
            found[name] = answers
            by_id = {a.motor_id: a for a in answers}
            self._console.show(f"{name}:")
            for motor_id in motor_ids:
                label = MOTOR_NAMES.get(motor_id, f"motor_0x{motor_id:02X}")
                answer = by_id.get(motor_id)
                if answer is None:
                    self._console.show(f"  motor 0x{motor_id:02X} ({label}): ✗ no answer")
                else:
                    self._console.show(
                        f"  motor 0x{motor_id:02X} ({label}): ✓ answers on "
                        f"0x{answer.recv_id:02X}, {answer.state} ({answer.data})"
                    )
            self._console.show(f"  {len(answers)}/{len(motor_ids)} motors found")
        total = sum(len(a) for a in found.values())
        if problems or total == 0:
            raise HardwareError(
                "no motor answered" if not problems else "; ".join(problems),
                where="setup-can --mode=test",
                hint="check that the motors are powered (24 V), the wiring (CANH, CANL, GND), "
                "a 120 Ω termination at both ends, the motors' CAN timeout parameter, and "
                "that the interface is up (`rlctl setup-can --mode=setup`)",
            )
        return found

    def speed(self, interface: str, motor_ids: Sequence[int], iterations: int) -> dict[str, float]:
        if iterations < 1:
            raise InvalidInput(f"speed_iterations must be >= 1, got {iterations}")
        bus = self._open(interface)
        try:
            first = next((a for a in self._query(bus, motor_ids)), None)
            if first is None:
                raise HardwareError(
                    "no motor answered, so no round trip could be timed",
                    where=f"CAN bus {interface}",
                    hint="run `rlctl setup-can --mode=test` first",
                )
            latencies = []
            for _ in range(iterations):
                start = time.perf_counter()
                if self._query(bus, [first.motor_id], timeout_s=0.1):
                    latencies.append((time.perf_counter() - start) * 1000)
        finally:
            bus.shutdown()
        if not latencies:
            raise HardwareError(
                f"motor 0x{first.motor_id:02X} stopped answering", where=f"CAN bus {interface}"
            )
        mean = sum(latencies) / len(latencies)
        self._console.show(
            f"{interface}: motor 0x{first.motor_id:02X}: {len(latencies)}/{iterations} answered, "
            f"mean round trip {mean:.2f} ms (max {max(latencies):.2f} ms), "
            f"{1000 / mean:.0f} Hz"
        )
        return {"answered": len(latencies), "mean_ms": mean, "max_ms": max(latencies)}

    def _probe(self, name: str, motor_ids: Sequence[int]) -> list[MotorAnswer]:
        if self._interface == "socketcan":
            status = self.link_status(name)
            if not status.up:
                raise HardwareError(
                    f"the interface is {status.describe()}"
                    if status.exists
                    else f"no such interface ({status.detail})",
                    where=name,
                    hint=f"rlctl setup-can --mode=setup --interfaces={name}",
                )
        bus = self._open(name)
        try:
            return self._query(bus, motor_ids)
        finally:
            bus.shutdown()

    def _open(self, name: str) -> Any:
        import can

        kwargs: dict[str, Any] = {
            "interface": self._interface,
            "channel": name,
            "bitrate": self._bitrate,
        }
        if self._interface == "socketcan" and self._fd:
            kwargs.update(fd=True, data_bitrate=self._data_bitrate)
        try:
            return can.Bus(**kwargs)
        except (can.CanError, OSError, ValueError, ImportError) as error:
            raise HardwareError(
                f"python-can cannot open it ({self._interface}): {error}", where=name
            ) from error

    def _query(
        self, bus: Any, motor_ids: Sequence[int], *, timeout_s: float | None = None
    ) -> list[MotorAnswer]:
        """A refresh to each id; the feedback frames that name it, within the timeout."""
        import can

        while bus.recv(timeout=0) is not None:
            pass
        for motor_id in motor_ids:
            bus.send(
                can.Message(
                    arbitration_id=dm.PARAM_ID,
                    data=dm.param_request(motor_id, dm.CMD_REFRESH),
                    is_extended_id=False,
                    is_fd=self._fd,
                )
            )
        wanted = {motor_id & 0xF: motor_id for motor_id in motor_ids}
        answers: dict[int, MotorAnswer] = {}
        deadline = time.monotonic() + (self._timeout if timeout_s is None else timeout_s)
        while len(answers) < len(motor_ids) and (left := deadline - time.monotonic()) > 0:
            msg = bus.recv(timeout=left)
            if msg is None:
                break
            data = bytes(msg.data)
            if msg.arbitration_id == dm.PARAM_ID or len(data) != 8:
                continue
            found = wanted.get(data[0] & 0xF)
            if found is None or found in answers:
                continue
            status = data[0] >> 4
            state = {dm.STATE_DISABLED: "disabled", dm.STATE_ENABLED: "enabled"}.get(
                status, dm.FAULTS.get(status, f"fault 0x{status:X}")
            )
            answers[found] = MotorAnswer(found, msg.arbitration_id, state, data.hex())
        return [answers[i] for i in motor_ids if i in answers]
