"""`CalibrateRobot`: LeRobot's interactive calibration of an arm on a motor bus.

1. A saved calibration is offered first (Enter reuses it, `c` calibrates again).
2. The person moves the arm to the middle of its range; homing offsets make every motor read half
   a turn there (but `unhomed_motors`, LeKiwi's wheels: their offset is 0).
3. The person moves each joint through its whole range while positions are read and the
   extremes kept, until Enter; motors that turn freely get the whole encoder range instead.
   Motors zeroed in a described pose instead (`CalibrationPlan.zero_pose`, Damiao's) are put in
   it, and a fixed range (`fixed_range`) replaces the recorded one, as LeRobot's OpenArm does
   (or one per motor, `fixed_ranges`: LeRobot's reBot arms get their joint limits).
   A gripper calibrated by its ends (`closed_open_motors`, the OpenArm Mini's) is read fully
   closed, then fully open; its direction follows which of the two reads higher.
4. The calibration is written to the motors and saved (LeRobot's JSON file, reused next time).

A device that keeps its homing (`CalibrationPlan.keeps_homing`, LeRobot's Hope JR and Homunculus)
skips step 2: its offsets are read back from it; its ranges may be recorded group by group
(`range_groups`, a hand's fingers).

An arm calibrated at the factory (`CalibrationPlan.factory_calibration`, ROBOTIS's OMX) skips
steps 2 and 3: its factory calibration is written and saved, as LeRobot's `calibrate` does.
"""

from __future__ import annotations

from typing import Literal

import attrs
import structlog

from rlctl.application.ports.clock import Clock
from rlctl.application.ports.control import Console
from rlctl.application.ports.robot import CalibrationStore, CalibrationTarget
from rlctl.domain.calibration import Calibration, MotorCalibration
from rlctl.domain.errors import CalibrationError

log = structlog.get_logger(__name__)

RANGE_POLL_S = 0.02  # LeRobot reads the positions every 20 ms while ranges are recorded
Reuse = Literal["ask", "yes", "no"]


@attrs.frozen
class CalibrationOutcome:
    target: str
    calibration: Calibration
    location: str | None
    reused: bool


class CalibrateRobot:
    def __init__(self, store: CalibrationStore, console: Console, clock: Clock) -> None:
        self._store = store
        self._console = console
        self._clock = clock

    def __call__(self, target: CalibrationTarget, *, reuse: Reuse = "ask") -> CalibrationOutcome:
        """`reuse`: what to do with a saved calibration — ask, reuse it, or calibrate anew."""
        key = target.calibration_key
        saved = self._store.load(key)
        plan = target.calibration_plan
        if saved is not None and saved == plan.factory_calibration and reuse != "no":
            # Connecting a fresh factory-calibrated arm saved exactly this: asking whether to
            # reuse it or write it again would offer the same calibration twice.
            target.apply_calibration(saved)
            log.info("factory calibration already saved", device=key.label)
            return CalibrationOutcome(key.label, saved, None, reused=True)
        if saved is not None and self._reuse(saved, key.label, reuse):
            target.apply_calibration(saved)
            log.info("calibration reused", device=key.label)
            return CalibrationOutcome(key.label, saved, None, reused=True)

        if plan.factory_calibration is not None:
            self._console.show(f"Writing the factory calibration of {key.label} to its motors")
            target.prepare_calibration()
            return self._finish(target, plan.factory_calibration)
        self._console.show(f"Running calibration of {key.label}")
        target.prepare_calibration()
        if plan.keeps_homing:
            held = target.bus.read_calibration()
            homings = {name: held[name].homing_offset for name in target.bus.motors}
        else:
            if plan.zero_pose is not None:
                self._console.ask(f"Put {key.label} {plan.zero_pose} and press ENTER...")
            else:
                self._console.ask(
                    f"Move {key.label} to the middle of its range of motion and press ENTER..."
                )
            homed = [m for m in target.bus.motors if m not in plan.unhomed_motors]
            homings = {**dict.fromkeys(target.bus.motors, 0), **self._home(target, homed)}
        motors = list(target.bus.motors)
        ends = [m for m in motors if m in plan.closed_open_motors]
        drive_modes = dict(plan.drive_modes)
        ranged = [m for m in motors if m not in plan.full_turn_motors and m not in ends]
        if plan.fixed_range is not None:
            low, high = plan.fixed_range
            mins, maxes = dict.fromkeys(motors, low), dict.fromkeys(motors, high)
        elif plan.fixed_ranges and set(motors) <= set(plan.fixed_ranges):
            mins = {m: plan.fixed_ranges[m][0] for m in motors}
            maxes = {m: plan.fixed_ranges[m][1] for m in motors}
        elif ends and not ranged:
            mins, maxes = {}, {}
        elif plan.range_groups:
            grouped = {m for _, members in plan.range_groups for m in members}
            if missing := [m for m in ranged if m not in grouped]:
                raise CalibrationError(
                    f"the calibration's groups leave out {', '.join(missing)}",
                    where=key.label,
                    hint="the device's adapter must put every recorded motor in a group",
                )
            mins, maxes = {}, {}
            for group, members in plan.range_groups:
                self._console.show(
                    f"Move the {group} ({', '.join(members)}) through its entire range of "
                    "motion.\nRecording positions. Press ENTER to stop..."
                )
                lows, highs = self._record_ranges(target, [m for m in members if m in ranged])
                mins.update(lows)
                maxes.update(highs)
        else:
            free = f" except {', '.join(plan.full_turn_motors)}" if plan.full_turn_motors else ""
            self._console.show(
                f"Move all joints{free} sequentially through their entire ranges of motion.\n"
                "Recording positions. Press ENTER to stop..."
            )
            mins, maxes = self._record_ranges(target, ranged)
        for motor in plan.full_turn_motors:
            mins[motor], maxes[motor] = 0, plan.resolution - 1
        for motor in ends:
            mins[motor], maxes[motor], drive_modes[motor] = self._closed_open(target, motor)
        calibration = Calibration(
            {
                name: MotorCalibration(
                    id=motor.id,
                    drive_mode=int(drive_modes.get(name, 0)),
                    homing_offset=int(homings[name]),
                    range_min=int(mins[name]),
                    range_max=int(maxes[name]),
                )
                for name, motor in target.bus.motors.items()
            }
        )
        return self._finish(target, calibration)

    def _finish(self, target: CalibrationTarget, calibration: Calibration) -> CalibrationOutcome:
        key = target.calibration_key
        target.apply_calibration(calibration)
        location = self._store.save(key, calibration)
        self._console.show(f"Calibration saved to {location}")
        log.info("calibration saved", device=key.label, file=location)
        return CalibrationOutcome(key.label, calibration, location, reused=False)

    @staticmethod
    def _home(target: CalibrationTarget, motors: list[str]) -> dict[str, int]:
        if len(motors) == len(target.bus.motors):
            return dict(target.bus.set_half_turn_homings())
        return dict(target.bus.set_half_turn_homings(motors)) if motors else {}

    def _reuse(self, saved: Calibration, label: str, reuse: Reuse) -> bool:
        if reuse != "ask":
            return reuse == "yes"
        answer = self._console.ask(
            f"Press ENTER to use the saved calibration of {label}, or type 'c' and press ENTER "
            "to run calibration: "
        )
        return answer.strip().lower() != "c"

    def _closed_open(self, target: CalibrationTarget, motor: str) -> tuple[int, int, int]:
        """LeRobot's OpenArm Mini gripper: the raw reading fully closed, then fully open."""
        label = target.calibration_key.label
        self._console.ask(f"CLOSE the {motor} of {label} fully and press ENTER...")
        closed = int(target.bus.read("Present_Position", motor, normalize=False))
        self._console.ask(f"OPEN the {motor} of {label} fully and press ENTER...")
        opened = int(target.bus.read("Present_Position", motor, normalize=False))
        if closed == opened:
            raise CalibrationError(
                f"the {motor} read {closed} both closed and open",
                where=label,
                hint=f"close the {motor} fully, then open it fully, at each prompt, and run the "
                "calibration again",
            )
        return (closed, opened, 0) if closed < opened else (opened, closed, 1)

    def _record_ranges(
        self, target: CalibrationTarget, motors: list[str]
    ) -> tuple[dict[str, int], dict[str, int]]:
        bus = target.bus
        mins: dict[str, int] = {}
        maxes: dict[str, int] = {}
        if not motors:
            self._console.enter_pressed()
            return mins, maxes
        while True:
            positions = bus.sync_read("Present_Position", motors, normalize=False)
            for motor in motors:
                value = int(positions[motor])
                mins[motor] = min(mins.get(motor, value), value)
                maxes[motor] = max(maxes.get(motor, value), value)
            self._console.show_table(
                ["NAME", "MIN", "POS", "MAX"],
                [[m, mins[m], int(positions[m]), maxes[m]] for m in motors],
            )
            if self._console.enter_pressed():
                break
            self._clock.sleep_until(self._clock.now() + RANGE_POLL_S)
        unmoved = [m for m in motors if mins[m] == maxes[m]]
        if unmoved:
            raise CalibrationError(
                f"these motors did not move while ranges were recorded: {', '.join(unmoved)}",
                where=target.calibration_key.label,
                hint="move every joint through its whole range before pressing ENTER, then "
                "run the calibration again",
            )
        return mins, maxes
