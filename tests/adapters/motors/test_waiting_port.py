"""The SDKs' reply loop waits for bytes instead of spinning, and still times out on time."""

from __future__ import annotations

import gc
import time

import pytest

from rlctl.domain.errors import HardwareError


def test_a_missing_reply_is_waited_for_without_spinning(rig):
    bus = rig.fault_bus(timeout_margin_ms=150, retries=0)
    rig.virtual.faults.drop_replies(3)
    # A garbage collection of a long test session's heap would be CPU time of this thread.
    gc.collect()
    gc.disable()
    try:
        started, cpu_started = time.perf_counter(), time.thread_time()
        with pytest.raises(HardwareError, match="no status packet"):
            bus.read("Present_Position", "elbow_flex")
        elapsed, cpu = time.perf_counter() - started, time.thread_time() - cpu_started
    finally:
        gc.enable()
    assert elapsed >= 0.15
    # Polling the port would keep this thread on the CPU for the whole timeout.
    assert cpu < elapsed / 2


def test_replies_still_come_through_in_pieces(rig):
    rig.virtual.faults.latency_s = 0.005
    values = rig.bus.sync_read("Present_Position", normalize=False)
    assert values == dict.fromkeys(rig.names, 2048)
