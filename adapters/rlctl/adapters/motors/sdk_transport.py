"""One serial port driven through a vendor SDK: instructions to motors by id, bounded retries, and
failures turned into HardwareErrors naming the port, the motor and what was being done.

feetech-servo-sdk is a fork of dynamixel-sdk, so both offer the same PortHandler, PacketHandler
and GroupSyncRead/Write calls; only their result codes differ, read from the module given.
Values travel little-endian on both families' wires.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import serial
import structlog

from rlctl.adapters.motors.bus_errors import CommFailure, comm_error, status_error
from rlctl.domain.errors import HardwareError

DescribeStatus = Callable[[int, int], "tuple[str, str] | None"]
"""(error byte, motor id) -> (cause, hint), or None when the byte reports nothing."""

_IDLE_POLL_S = 0.0005  # between empty reads of a broadcast window; spinning would starve others

log = structlog.get_logger(__name__)


class SdkTransport:
    def __init__(
        self,
        sdk: ModuleType,
        port_handler: Any,
        packet_handler: Any,
        *,
        retries: int,
        describe_status: DescribeStatus,
    ) -> None:
        self.sdk = sdk
        self.retries = retries
        self.lock = threading.RLock()  # one instruction/answer exchange at a time
        self._port = port_handler
        self._packets = packet_handler
        self._describe_status = describe_status
        self._sync_reader = sdk.GroupSyncRead(port_handler, packet_handler, 0, 0)
        self._sync_writer = sdk.GroupSyncWrite(port_handler, packet_handler, 0, 0)

    # The port

    @property
    def port(self) -> str:
        return str(self._port.getPortName())

    @property
    def is_open(self) -> bool:
        return bool(self._port.is_open)

    @property
    def baudrate(self) -> int:
        return int(self._port.getBaudRate())

    def open(self, baudrate: int) -> bool:
        """False when the SDK does not support `baudrate`."""
        self._port.baudrate = baudrate
        try:
            return bool(self._port.openPort())
        except (OSError, serial.SerialException) as err:
            raise HardwareError(
                f"cannot open the serial port: {err}",
                where=self.port,
                hint="check the port name (`rlctl find-port`) and that you may use it "
                "(on Linux: be in the dialout group)",
            ) from err

    def close(self) -> None:
        self._port.closePort()

    def set_baudrate(self, baudrate: int) -> bool:
        with self.lock:
            return self._port.getBaudRate() == baudrate or bool(self._port.setBaudRate(baudrate))

    # Instructions

    def read(
        self, motor_id: int, address: int, size: int, *, motor: str | None, action: str
    ) -> int:
        def call() -> tuple[Any, int, int]:
            data, comm, error = self._packets.readTxRx(self._port, motor_id, address, size)
            return data, self._checked_size(comm, data, size), error

        data, error = self._retrying(call, motor=motor, motor_id=motor_id, action=action)
        self._raise_status(error, motor, motor_id, action)
        return _int_le(data, size)

    def read_once(self, motor_id: int, address: int, size: int) -> int | None:
        """One attempt, no error: for reading what went wrong while reporting another error."""
        with self.lock:
            self._flush_input()
            data, comm, _ = self._packets.readTxRx(self._port, motor_id, address, size)
            ok = self._checked_size(comm, data, size) == self.sdk.COMM_SUCCESS
            return _int_le(data, size) if ok else None

    def write(
        self, motor_id: int, address: int, payload: bytes, *, motor: str | None, action: str
    ) -> None:
        def call() -> tuple[Any, int, int]:
            comm, error = self._packets.writeTxRx(
                self._port, motor_id, address, len(payload), list(payload)
            )
            return None, comm, error

        _, error = self._retrying(call, motor=motor, motor_id=motor_id, action=action)
        self._raise_status(error, motor, motor_id, action)

    def ping(self, motor_id: int) -> int | None:
        """The model number answering at `motor_id`, None when nothing answers."""
        try:
            number, _ = self._retrying(
                lambda: self._packets.ping(self._port, motor_id),
                motor=None,
                motor_id=motor_id,
                action="ping",
            )
        except HardwareError:
            return None
        return int(number)

    def sync_write(
        self,
        address: int,
        size: int,
        payloads: Mapping[int, bytes],
        *,
        names: Mapping[int, str],
        action: str,
    ) -> None:
        """One broadcast instruction, no answer: only the sending can fail."""
        writer = self._sync_writer
        first = next(iter(payloads))
        with self.lock:
            writer.clearParam()
            writer.start_address, writer.data_length = address, size
            for motor_id, payload in payloads.items():
                writer.addParam(motor_id, list(payload))
            self._retrying(
                lambda: (None, writer.txPacket(), 0),
                motor=names.get(first),
                motor_id=first,
                action=action,
            )

    def sync_read(
        self, address: int, size: int, names: Mapping[int, str | None], *, action: str
    ) -> dict[int, int]:
        """id -> value for every id of `names`, one instruction and one answer per motor."""
        reader = self._sync_reader
        ids = list(names)
        with self.lock:
            self._require_open()
            reader.clearParam()
            reader.start_address, reader.data_length = address, size
            for motor_id in ids:
                reader.addParam(motor_id)
            tries = self.retries + 1
            for attempt in range(1, tries + 1):
                self._flush_input()
                values, errors, failure = self._sync_read_once(ids, size)
                if failure is None:
                    break
                self._log_retry(failure[0], action, attempt, failure[1])
            else:
                assert failure is not None  # every try failed
                motor_id, comm = failure
                raise self._comm_error(comm, names.get(motor_id), motor_id, action, tries)
            for motor_id, error in errors.items():
                self._raise_status(error, names.get(motor_id), motor_id, action)
            return values

    def broadcast(self, packet: bytes, window_s: float) -> bytes:
        """Send `packet` as is and collect whatever comes back for `window_s` seconds."""
        with self.lock:
            self._require_open()
            self._flush_input()
            self._port.writePort(packet)
            deadline = time.monotonic() + window_s
            data = bytearray()
            while time.monotonic() < deadline:
                chunk = self._port.readPort(4096)
                if chunk:
                    data += chunk
                else:
                    time.sleep(_IDLE_POLL_S)
            return bytes(data)

    # Retries and errors

    def _retrying(
        self,
        call: Callable[[], tuple[Any, int, int]],
        *,
        motor: str | None,
        motor_id: int,
        action: str,
    ) -> tuple[Any, int]:
        """Run an SDK call returning (payload, comm result, error byte) until it communicates."""
        with self.lock:
            self._require_open()
            tries = self.retries + 1
            for attempt in range(1, tries + 1):
                self._flush_input()
                try:
                    payload, comm, error = call()
                except IndexError:
                    # The SDKs index into replies without checking their length: a stale or
                    # foreign status packet taken for the answer is as good as corrupt.
                    payload, comm, error = None, self.sdk.COMM_RX_CORRUPT, 0
                if comm == self.sdk.COMM_SUCCESS:
                    return payload, error
                self._log_retry(motor_id, action, attempt, comm)
            raise self._comm_error(comm, motor, motor_id, action, tries)

    def _sync_read_once(
        self, ids: list[int], size: int
    ) -> tuple[dict[int, int], dict[int, int], tuple[int, int] | None]:
        # GroupSyncRead.rxPacket would tell neither which motor failed nor its error bits, so
        # the answers are collected one by one, as it does internally.
        comm = self._sync_reader.txPacket()
        if comm != self.sdk.COMM_SUCCESS:
            return {}, {}, (ids[0], comm)
        values: dict[int, int] = {}
        errors: dict[int, int] = {}
        for motor_id in ids:
            data, comm, error = self._packets.readRx(self._port, motor_id, size)
            comm = self._checked_size(comm, data, size)
            if comm != self.sdk.COMM_SUCCESS:
                return values, errors, (motor_id, comm)
            values[motor_id] = _int_le(data, size)
            if error:
                errors[motor_id] = error
        return values, errors, None

    def _checked_size(self, comm: int, data: Any, size: int) -> int:
        # An answer of the wrong size answers another instruction: a reply that came late.
        if comm == self.sdk.COMM_SUCCESS and len(data) != size:
            return int(self.sdk.COMM_RX_CORRUPT)
        return comm

    def _raise_status(self, error: int, motor: str | None, motor_id: int, action: str) -> None:
        described = self._describe_status(error, motor_id) if error else None
        if described is not None:
            cause, hint = described
            raise status_error(
                port=self.port,
                motor=motor,
                motor_id=motor_id,
                action=action,
                cause=cause,
                hint=hint,
            )

    def _comm_error(
        self, comm: int, motor: str | None, motor_id: int, action: str, tries: int
    ) -> HardwareError:
        sdk = self.sdk
        failure = {
            sdk.COMM_PORT_BUSY: CommFailure.PORT_BUSY,
            sdk.COMM_TX_FAIL: CommFailure.TX_FAIL,
            sdk.COMM_RX_TIMEOUT: CommFailure.TIMEOUT,
            sdk.COMM_RX_CORRUPT: CommFailure.CORRUPT,
        }.get(comm, CommFailure.OTHER)
        return comm_error(
            failure,
            port=self.port,
            motor=motor,
            motor_id=motor_id,
            action=action,
            tries=tries,
            baudrate=self.baudrate,
            detail=self._packets.getTxRxResult(comm),
        )

    def _log_retry(self, motor_id: int, action: str, attempt: int, comm: int) -> None:
        log.debug(
            "motor bus retry",
            port=self.port,
            motor_id=motor_id,
            action=action,
            attempt=attempt,
            result=self._packets.getTxRxResult(comm),
        )

    def _flush_input(self) -> None:
        # Replies that arrived after a timeout must not be taken for the next answer (Feetech's
        # SDK does not clear its input before sending).
        self._port.ser.reset_input_buffer()

    def _require_open(self) -> None:
        if not self.is_open:
            raise HardwareError(
                "the bus is not connected", where=self.port, hint="call connect() first"
            )


def _int_le(data: Any, size: int) -> int:
    return int.from_bytes(bytes(data[:size]), "little")
