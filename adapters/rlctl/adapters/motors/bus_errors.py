"""The HardwareErrors a servo bus raises: what failed, on which port, motor and register, and what
to try. Messages read like `/dev/ttyACM0: motor 'gripper' (id 6) sent no status packet for read
Present_Position after 3 tries`."""

from __future__ import annotations

import enum

from rlctl.domain.errors import HardwareError


class CommFailure(enum.Enum):
    """The SDKs' communication results, shared by both vendors (their codes differ)."""

    PORT_BUSY = "port busy"
    TX_FAIL = "tx fail"
    TIMEOUT = "timeout"
    CORRUPT = "corrupt"
    OTHER = "other"


def who(motor: str | None, motor_id: int) -> str:
    return f"motor {motor!r} (id {motor_id})" if motor else f"the motor at id {motor_id}"


def comm_error(
    failure: CommFailure,
    *,
    port: str,
    motor: str | None,
    motor_id: int,
    action: str,
    tries: int,
    baudrate: int,
    detail: str = "",
) -> HardwareError:
    """`action` reads like "read Present_Position" or "sync read Present_Position"."""
    subject = who(motor, motor_id)
    after = f" after {tries} {'try' if tries == 1 else 'tries'}"
    if failure is CommFailure.TIMEOUT:
        return HardwareError(
            f"{subject} sent no status packet for {action}{after}",
            where=port,
            hint=(
                f"check that the motor is powered and cabled, that its id is {motor_id} and "
                f"that it runs at {baudrate} baud (`rlctl setup-motors` sets both)"
            ),
        )
    if failure is CommFailure.CORRUPT:
        return HardwareError(
            f"{subject} answered {action} with a corrupt status packet (bad checksum){after}",
            where=port,
            hint=(
                "check the cable and the power supply; two motors sharing one id also garble "
                "their replies (`rlctl setup-motors` gives each its own)"
            ),
        )
    if failure in (CommFailure.PORT_BUSY, CommFailure.TX_FAIL):
        return HardwareError(
            f"could not send {action} to {subject}: the port refused the packet{after}",
            where=port,
            hint="close other programs using this port, then unplug and replug the USB adapter",
        )
    return HardwareError(
        f"{subject} failed {action}{after}: {detail or 'unknown communication error'}",
        where=port,
    )


def status_error(
    *, port: str, motor: str | None, motor_id: int, action: str, cause: str, hint: str
) -> HardwareError:
    return HardwareError(
        f"{who(motor, motor_id)} reports {cause} on {action}", where=port, hint=hint
    )
