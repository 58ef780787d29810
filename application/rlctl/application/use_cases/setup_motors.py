"""`SetupMotors` and `FindPort`: the one-time chores before an arm is first used.

`SetupMotors` gives each motor of an arm its id and the bus's baud rate, one motor at a time
(new motors all answer at id 1 and the factory rate), from the last motor to the first as
LeRobot goes (or in the device's own `setup_order`, LeKiwi's), so a daisy chain can be
assembled as it is set up.

`FindPort` finds which serial port an arm's controller board is on by listing the ports before
and after the person unplugs its cable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from rlctl.application.ports.control import Console
from rlctl.application.ports.robot import CalibrationTarget
from rlctl.domain.errors import HardwareError, NotSupported

log = structlog.get_logger(__name__)


class SetupMotors:
    def __init__(self, console: Console) -> None:
        self._console = console

    def __call__(self, target: CalibrationTarget) -> list[str]:
        """Returns the motors set up, in the order they were."""
        bus = target.bus
        tool = target.calibration_plan.ids_set_by
        if tool is not None:
            raise NotSupported(
                f"the motors of {target.calibration_key.label} get their ids from {tool}, "
                "not through their bus",
                where=bus.port,
                hint=f"set them with {tool}",
            )
        order = list(target.calibration_plan.setup_order) or list(reversed(list(bus.motors)))
        if sorted(order) != sorted(bus.motors):
            raise NotSupported(
                f"the setup order of {target.calibration_key.label} does not list its motors "
                f"({', '.join(order)} for {', '.join(bus.motors)})",
                where=bus.port,
            )
        done: list[str] = []
        bus.connect(handshake=False)
        try:
            for motor in order:
                self._console.ask(
                    f"Connect the controller board to the '{motor}' motor only and press ENTER."
                )
                bus.setup_motor(motor)
                done.append(motor)
                self._console.show(f"'{motor}' motor id set to {bus.motors[motor].id}")
        finally:
            bus.disconnect(disable_torque=False)
        log.info("motors set up", device=target.calibration_key.label, motors=done)
        return done


class FindPort:
    def __init__(self, list_ports: Callable[[], Sequence[str]], console: Console) -> None:
        self._list_ports = list_ports
        self._console = console

    def __call__(self) -> str:
        before = set(self._list_ports())
        self._console.show(f"Ports before disconnecting: {', '.join(sorted(before)) or '(none)'}")
        self._console.ask("Remove the USB cable from your motors board and press ENTER when done.")
        after = set(self._list_ports())
        gone = sorted(before - after)
        if len(gone) == 1:
            self._console.show(f"The port of this motors board is '{gone[0]}'")
            self._console.show("Reconnect the USB cable.")
            return gone[0]
        if not gone:
            raise HardwareError(
                "no port disappeared when the cable was removed",
                hint="unplug the board's USB cable itself (not its power), then run it again",
            )
        raise HardwareError(
            f"several ports disappeared ({', '.join(gone)})",
            hint="unplug only one motors board, then run it again",
        )
