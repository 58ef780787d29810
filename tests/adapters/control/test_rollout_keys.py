"""Rollout controls: each strategy's keys (LeRobot's defaults), a terminal, a pipe, a foot pedal
read from a Linux input device (a FIFO of `struct input_event` here)."""

from __future__ import annotations

import os
import struct
import time

import pytest

from rlctl.adapters.control.rollout_keys import (
    FootPedal,
    RolloutKeyboard,
    parse_rollout_keys,
    rollout_bindings,
    rollout_controls,
)
from rlctl.application.ports.control import RolloutEvent as E
from rlctl.domain.errors import ConfigError, HardwareError
from rlctl.domain.rollout import (
    BaseStrategyConfig,
    DAggerKeyboardConfig,
    DAggerPedalConfig,
    DAggerStrategyConfig,
    EpisodicStrategyConfig,
    HighlightStrategyConfig,
)


def wait_for(controls, count: int = 1) -> set[E]:
    pressed: set[E] = set()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and len(pressed) < count:
        pressed |= controls.poll()
        time.sleep(0.01)
    return pressed


def test_each_strategy_binds_lerobots_keys_and_esc_stops():
    dagger = rollout_bindings(DAggerStrategyConfig())
    assert parse_rollout_keys(" \t\n\r\x1b", dagger) == [
        E.PAUSE_RESUME,
        E.CORRECTION,
        E.UPLOAD,
        E.UPLOAD,
        E.STOP,
    ]
    highlight = rollout_bindings(HighlightStrategyConfig())
    assert parse_rollout_keys("sHxq", highlight) == [E.SAVE, E.UPLOAD, E.STOP]
    episodic = rollout_bindings(EpisodicStrategyConfig())
    assert parse_rollout_keys("\x1b[C\x1bOD n r", episodic) == [
        E.NEXT,
        E.RERECORD,
        E.NEXT,
        E.RERECORD,
    ]
    assert parse_rollout_keys(" s\t", rollout_bindings(BaseStrategyConfig())) == []


def test_a_key_bound_twice_or_to_stop_or_unreadable_is_refused_with_where():
    with pytest.raises(ConfigError, match="bound twice") as info:
        rollout_bindings(DAggerStrategyConfig(keyboard=DAggerKeyboardConfig(correction="space")))
    assert info.value.where == "strategy.keyboard.correction"
    with pytest.raises(ConfigError, match="stops the rollout"):
        rollout_bindings(HighlightStrategyConfig(save_key="q"))
    with pytest.raises(ConfigError, match="not a key") as info:
        rollout_bindings(HighlightStrategyConfig(push_key="ctrl+h"))
    assert info.value.where == "strategy.push_key" and info.value.hint


def test_a_terminal_is_read_key_by_key():
    master, slave = os.openpty()
    stream = os.fdopen(slave, "r")
    controls = RolloutKeyboard(rollout_bindings(DAggerStrategyConfig()), stream)
    try:
        os.write(master, b" ")
        assert wait_for(controls) == {E.PAUSE_RESUME}
        os.write(master, b"\t")
        assert wait_for(controls) == {E.CORRECTION}
        assert "pause_resume: space" in controls.keys
    finally:
        controls.close()
    stream.close()
    os.close(master)


def test_a_pipe_takes_key_names_or_event_names_line_by_line():
    read, write = os.pipe()
    stream = os.fdopen(read, "r")
    controls = RolloutKeyboard(rollout_bindings(DAggerStrategyConfig()), stream)
    try:
        os.write(write, b"space\nnonsense\ncorrection\nstop\n")
        assert wait_for(controls, 3) == {E.PAUSE_RESUME, E.CORRECTION, E.STOP}
    finally:
        controls.close()
        os.close(write)
        stream.close()


def test_a_foot_pedal_is_read_from_its_input_device(tmp_path):
    fifo = tmp_path / "pedal"
    os.mkfifo(fifo)
    writer_fd = os.open(fifo, os.O_RDWR)  # held open so the reader never sees the end
    pedal = FootPedal(str(fifo), {"KEY_A": E.PAUSE_RESUME, "key_b": E.CORRECTION})
    try:
        event = struct.Struct("llHHi")
        os.write(
            writer_fd,
            event.pack(0, 0, 1, 30, 1)  # KEY_A down
            + event.pack(0, 0, 0, 0, 0)  # a sync report
            + event.pack(0, 0, 1, 30, 0)  # KEY_A up: not a press
            + event.pack(0, 0, 1, 48, 1),  # KEY_B down
        )
        assert wait_for(pedal, 2) == {E.PAUSE_RESUME, E.CORRECTION}
        assert not pedal.poll()
    finally:
        pedal.close()
        os.close(writer_fd)


def test_a_pedal_that_is_not_there_or_an_unknown_code_says_how_to_fix_it(tmp_path):
    missing = DAggerStrategyConfig(
        input_device="pedal", pedal=DAggerPedalConfig(device_path=str(tmp_path / "none"))
    )
    with pytest.raises(HardwareError, match="cannot open the foot pedal") as info:
        rollout_controls(missing)
    assert "device_path" in info.value.hint
    with pytest.raises(ConfigError, match="KEY_WHAT") as info:
        FootPedal(str(tmp_path / "none"), {"KEY_WHAT": E.UPLOAD})
    assert info.value.where == "strategy.pedal.upload"
