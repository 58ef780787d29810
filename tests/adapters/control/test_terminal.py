"""Recording controls from a terminal (a pseudo-terminal here) or a pipe, prompts, the clock."""

from __future__ import annotations

import io
import os
import termios
import time

import pytest

from rlctl.adapters.clock.system import SystemClock
from rlctl.adapters.control.terminal import KeyboardControls, TerminalConsole, parse_keys
from rlctl.application.ports.control import Control


def test_keys_are_read_as_lerobots_arrows_esc_and_letters():
    assert parse_keys("\x1b[C\x1bOD\x1b") == [Control.NEXT, Control.RERECORD, Control.STOP]
    assert parse_keys("nrQx\x1b[A") == [Control.NEXT, Control.RERECORD, Control.STOP]


def wait_for(controls: KeyboardControls) -> frozenset[Control]:
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        if pressed := controls.poll():
            return pressed
        time.sleep(0.01)
    return frozenset()


def test_a_terminal_is_read_key_by_key_and_given_back_as_it_was():
    master, slave = os.openpty()
    stream = os.fdopen(slave, "r")
    before = termios.tcgetattr(slave)
    controls = KeyboardControls(stream)
    try:
        assert termios.tcgetattr(slave)[3] & termios.ICANON == 0  # no Enter needed
        os.write(master, b"\x1b[C")
        assert wait_for(controls) == {Control.NEXT}
        os.write(master, b"\x1b")
        assert wait_for(controls) == {Control.STOP}
    finally:
        controls.close()
    assert termios.tcgetattr(slave) == before
    stream.close()
    os.close(master)


def test_a_pipe_is_read_line_by_line():
    read, write = os.pipe()
    stream = os.fdopen(read, "r")
    controls = KeyboardControls(stream)
    try:
        os.write(write, b"rerecord\nnonsense\nstop\n")
        pressed: set[Control] = set()
        while len(pressed) < 2 and (more := wait_for(controls)):
            pressed |= more
        assert pressed == {Control.RERECORD, Control.STOP}
    finally:
        controls.close()
        os.close(write)
        stream.close()


def test_console_prompts_and_sees_enter():
    out = io.StringIO()
    console = TerminalConsole(io.StringIO("yes\n\n"), out)
    assert console.ask("Ready?") == "yes"
    assert console.enter_pressed()
    console.show_table(["NAME", "MIN"], [["elbow_flex", 12]])
    assert "Ready? " in out.getvalue() and "elbow_flex" in out.getvalue()
    with pytest.raises(EOFError):
        TerminalConsole(io.StringIO(""), out).ask("more?")


def test_the_clock_never_wakes_early():
    clock = SystemClock()
    for _ in range(5):
        deadline = clock.now() + 0.01
        clock.sleep_until(deadline)
        assert clock.now() >= deadline
