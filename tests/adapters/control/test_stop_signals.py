"""Ctrl-C and SIGTERM during training (`StopSignals`), signalled to this very process: the first
one stops (after the update, never inside it), a repeated one (`uv run` sends each Ctrl-C twice)
never cuts a checkpoint being saved, and only a user who insists abandons that save."""

from __future__ import annotations

import os
import signal

import pytest

from rlctl.adapters.control import stop_signals as signals_module
from rlctl.adapters.control.stop_signals import ABANDON_AFTER, StopSignals


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def stops(clock, monkeypatch):
    said: list[str] = []
    monkeypatch.setattr(signals_module, "_say", said.append)
    guard = StopSignals(clock=clock).install()
    guard.said = said
    yield guard
    guard.uninstall()


def press(clock: Clock | None = None, signum: int = signal.SIGINT, *, later: float = 1.0) -> None:
    if clock is not None:
        clock.now += later
    os.kill(os.getpid(), signum)


def test_installed_over_the_defaults_and_restored():
    guard = StopSignals().install()
    try:
        assert signal.getsignal(signal.SIGINT) == guard._handle
        assert signal.getsignal(signal.SIGTERM) == guard._handle
    finally:
        guard.uninstall()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_program_s_own_handler_is_left_alone():
    own = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        guard = StopSignals().install()
        assert signal.getsignal(signal.SIGTERM) != guard._handle
        guard.uninstall()
    finally:
        signal.signal(signal.SIGTERM, own)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_first_signal_stops_at_once(stops, clock, signum):
    with pytest.raises(KeyboardInterrupt):
        press(clock, signum)
    assert stops.stop_requested


def test_ctrl_c_waits_for_the_end_of_the_update(stops, clock):
    applied = []
    with pytest.raises(KeyboardInterrupt), stops.update():
        press(clock)
        press(clock)  # pressed again and again: still never half an update
        press(clock)
        press(clock)
        applied.append("after the signals")
    assert applied == ["after the signals"]


def test_a_repeated_ctrl_c_does_not_cut_the_save_it_started(stops, clock):
    with pytest.raises(KeyboardInterrupt):
        press(clock)
    press(clock, later=0.001)  # uv's copy of the same press, before the save even starts
    written = []
    with stops.saving():
        press(clock, later=0.001)
        press(clock)  # one more press while saving: a message, not an abort
        written.append("checkpoint")
    assert written == ["checkpoint"]
    assert any("saving the checkpoint, please wait" in s for s in stops.said)


def test_insisting_abandons_the_save(stops, clock):
    with pytest.raises(KeyboardInterrupt):
        press(clock)
    written = []
    with pytest.raises(KeyboardInterrupt), stops.saving():
        for _ in range(ABANDON_AFTER):
            press(clock)
            press(clock, later=0.001)  # each press arrives twice under uv
        written.append("checkpoint")
    assert written == []
    assert "abandoning the checkpoint: the previous checkpoint is kept" in stops.said


def test_a_first_ctrl_c_during_a_periodic_save_is_raised_after_it(stops, clock):
    written = []
    with stops.saving():
        press(clock)
        written.append("checkpoint")
    assert written == ["checkpoint"]
    with pytest.raises(KeyboardInterrupt):
        stops.raise_pending()
    stops.raise_pending()  # once
