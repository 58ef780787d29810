"""The person watching a rollout: keys on the terminal, or a USB foot pedal (`RolloutControls`).

`rollout_controls(strategy)` binds each strategy's keys as LeRobot 0.6.1's `lerobot-rollout`
does, plus Esc (or `q`) to stop everywhere:

- dagger: `--strategy.keyboard.pause_resume` (space), `.correction` (tab), `.upload` (enter);
  with `--strategy.input_device=pedal` the pedals `--strategy.pedal.*` (evdev key names) on
  `--strategy.pedal.device_path`;
- highlight: `--strategy.save_key` (s) and `--strategy.push_key` (h);
- episodic: → (or n) ends the phase, ← (or r) re-records;
- sentry: `u` uploads now.

A key is a character (`s`) or a name (`space`, `tab`, `enter`, `esc`, `right`, `left`). On a
terminal the keys are read in cbreak mode (no Enter; Ctrl-C still interrupts); when stdin is a
pipe (a script, a test) each line is a key name or an event name (`pause_resume`,
`correction`, `upload`, `save`, `next`, `rerecord`, `stop`). The pedal is read from the Linux
input device itself (`struct input_event`), with no library.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Mapping
from typing import IO, Any

from rlctl.adapters.control.terminal import KeyboardControls, _readable
from rlctl.adapters.descriptors import close_after
from rlctl.application.ports.control import RolloutEvent
from rlctl.domain.errors import ConfigError, HardwareError
from rlctl.domain.rollout import (
    DAggerStrategyConfig,
    EpisodicStrategyConfig,
    HighlightStrategyConfig,
    RolloutStrategyConfig,
    SentryStrategyConfig,
)

_NAMED = {"space": " ", "tab": "\t", "enter": "\n", "return": "\n", "esc": "\x1b"}
_ARROWS = {"C": "right", "D": "left", "A": "up", "B": "down"}
_ESC = "\x1b"

# Linux input events (linux/input.h): struct input_event on a 64-bit kernel.
_EVENT = struct.Struct("llHHi")
_EV_KEY = 1
_KEY_DOWN = 1
# linux/input-event-codes.h: the keys a pedal is usually set to send.
_KEY_CODES = {
    **{f"KEY_{c}": code for c, code in zip("QWERTYUIOP", range(16, 26), strict=True)},
    **{f"KEY_{c}": code for c, code in zip("ASDFGHJKL", range(30, 39), strict=True)},
    **{f"KEY_{c}": code for c, code in zip("ZXCVBNM", range(44, 51), strict=True)},
    **{f"KEY_{n}": code for n, code in zip("1234567890", range(2, 12), strict=True)},
    "KEY_ESC": 1,
    "KEY_ENTER": 28,
    "KEY_SPACE": 57,
    "KEY_TAB": 15,
    "KEY_LEFT": 105,
    "KEY_RIGHT": 106,
    "KEY_UP": 103,
    "KEY_DOWN": 108,
    "KEY_PAGEUP": 104,
    "KEY_PAGEDOWN": 109,
    **{f"KEY_F{n}": 58 + n for n in range(1, 11)},
}


def key_token(key: str, where: str) -> str:
    """The byte a key sends on a terminal (`" "` for `space`), or `right`/`left` for arrows."""
    name = key.strip().lower() if len(key) != 1 else key
    if name in _NAMED:
        return _NAMED[name]
    if name in ("right", "left", "up", "down"):
        return name
    if len(key) == 1 and key.isprintable():
        return key.lower()
    raise ConfigError(
        f"{key!r} is not a key rlctl can read",
        where=where,
        hint="give one character (s) or one of: space, tab, enter, esc, right, left",
    )


def rollout_bindings(strategy: RolloutStrategyConfig) -> dict[str, RolloutEvent]:
    """Key (as `key_token` writes it) → event, for `strategy`; Esc and q stop everywhere."""
    pairs: list[tuple[str, RolloutEvent, str]] = []
    if isinstance(strategy, DAggerStrategyConfig):
        keys = strategy.keyboard
        pairs = [
            (keys.pause_resume, RolloutEvent.PAUSE_RESUME, "strategy.keyboard.pause_resume"),
            (keys.correction, RolloutEvent.CORRECTION, "strategy.keyboard.correction"),
            (keys.upload, RolloutEvent.UPLOAD, "strategy.keyboard.upload"),
        ]
    elif isinstance(strategy, HighlightStrategyConfig):
        pairs = [
            (strategy.save_key, RolloutEvent.SAVE, "strategy.save_key"),
            (strategy.push_key, RolloutEvent.UPLOAD, "strategy.push_key"),
        ]
    elif isinstance(strategy, EpisodicStrategyConfig):
        pairs = [
            ("right", RolloutEvent.NEXT, "episodic"),
            ("n", RolloutEvent.NEXT, "episodic"),
            ("left", RolloutEvent.RERECORD, "episodic"),
            ("r", RolloutEvent.RERECORD, "episodic"),
        ]
    elif isinstance(strategy, SentryStrategyConfig):
        pairs = [("u", RolloutEvent.UPLOAD, "sentry")]
    bindings: dict[str, RolloutEvent] = {}
    for key, event, where in pairs:
        token = key_token(key, where)
        if token in (_ESC, "q"):
            raise ConfigError(
                f"{_describe(token)} stops the rollout: bind another key", where=where
            )
        if token in bindings:
            raise ConfigError(
                f"{_describe(token)!r} is bound twice ({bindings[token].value} and {event.value})",
                where=where,
                hint="give each action its own key",
            )
        bindings[token] = event
    bindings[_ESC] = bindings["q"] = RolloutEvent.STOP
    return bindings


def _describe(token: str) -> str:
    reverse = {v: k for k, v in _NAMED.items() if k != "return"}
    return reverse.get(token, token)


def parse_rollout_keys(data: str, bindings: Mapping[str, RolloutEvent]) -> list[RolloutEvent]:
    """Events in a burst of key bytes: arrows (`ESC [ C`), Esc, characters."""
    found: list[RolloutEvent] = []
    i = 0
    while i < len(data):
        char = data[i]
        if char == _ESC and i + 2 < len(data) and data[i + 1] in "[O":
            event = bindings.get(_ARROWS.get(data[i + 2], ""))
            if event is not None:
                found.append(event)
            i += 3
            continue
        token = "\n" if char == "\r" else char if char in "\t\n " + _ESC else char.lower()
        event = bindings.get(token)
        if event is not None:
            found.append(event)
        i += 1
    return found


class RolloutKeyboard(KeyboardControls):
    """`RolloutControls` from the terminal (or lines on a pipe), with `bindings`."""

    def __init__(self, bindings: Mapping[str, RolloutEvent], stream: IO[str] | None = None) -> None:
        self._bindings = dict(bindings)
        self._words: dict[str, RolloutEvent] = {e.value: e for e in set(bindings.values())}
        for token, event in bindings.items():
            self._words.setdefault(_describe(token).strip() or token, event)
        super().__init__(stream)

    @property
    def keys(self) -> str:
        by_event: dict[RolloutEvent, list[str]] = {}
        for token, event in self._bindings.items():
            by_event.setdefault(event, []).append(_describe(token))
        return "; ".join(f"{e.value}: {' or '.join(k)}" for e, k in by_event.items())

    def poll(self) -> frozenset[RolloutEvent]:  # type: ignore[override]
        return super().poll()  # type: ignore[return-value]

    def press(self, control: Any) -> None:
        with self._lock:
            self._pending.add(control)

    def _read_keys(self) -> None:
        fd = self._fd
        assert fd is not None
        while not self._stop.is_set():
            if not _readable(fd, 0.1):
                continue
            data = os.read(fd, 16).decode("utf-8", "replace")
            if data.endswith(_ESC) and _readable(fd, 0.05):
                data += os.read(fd, 16).decode("utf-8", "replace")
            for event in parse_rollout_keys(data, self._bindings):
                self.press(event)

    def _read_lines(self) -> None:
        fd = self._fd
        assert fd is not None
        buffer = b""
        while not self._stop.is_set():
            if not _readable(fd, 0.1):
                continue
            chunk = os.read(fd, 256)
            if not chunk:
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                word = line.decode("utf-8", "replace").strip()
                event = self._words.get(word) or self._words.get(word.lower())
                if event is not None:
                    self.press(event)


class NoRolloutControls:
    """For a rollout nobody watches: nothing is ever pressed (it stops at `--duration`)."""

    def poll(self) -> frozenset[RolloutEvent]:
        return frozenset()

    def close(self) -> None:
        pass


class FootPedal:
    """DAgger's foot pedal (`RolloutControls`): key-down events of a Linux input device, each
    pedal's evdev key name bound to an event."""

    def __init__(self, device_path: str, bindings: Mapping[str, RolloutEvent]) -> None:
        self._codes: dict[int, RolloutEvent] = {}
        for name, event in bindings.items():
            code = _KEY_CODES.get(name.strip().upper())
            if code is None:
                raise ConfigError(
                    f"{name!r} is not a key code rlctl knows",
                    where=f"strategy.pedal.{event.value}",
                    hint="use an evdev name such as KEY_A, KEY_B, KEY_SPACE, KEY_ENTER",
                )
            self._codes[code] = event
        try:
            self._fd = os.open(device_path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as err:
            raise HardwareError(
                f"cannot open the foot pedal: {err.strerror}",
                where=device_path,
                hint="check --strategy.pedal.device_path (ls /dev/input/by-id/) and that you "
                "may read it (the `input` group), or use --strategy.input_device=keyboard",
            ) from err
        self._pending: set[RolloutEvent] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="rollout-pedal", daemon=True)
        self._thread.start()

    @property
    def keys(self) -> str:
        names = {code: name for name, code in _KEY_CODES.items()}
        return "; ".join(f"{e.value}: pedal {names[c]}" for c, e in self._codes.items())

    def poll(self) -> frozenset[RolloutEvent]:
        with self._lock:
            pressed = frozenset(self._pending)
            self._pending.clear()
        return pressed

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        close_after([self._thread], [self._fd], name="rollout-pedal", timeout_s=0.5)

    def _read(self) -> None:
        buffer = b""
        while not self._stop.is_set():
            if not _readable(self._fd, 0.1):
                continue
            try:
                chunk = os.read(self._fd, _EVENT.size * 16)
            except BlockingIOError:
                continue
            except OSError:
                return  # unplugged: the keyboard's Esc and Ctrl-C still stop
            if not chunk:
                continue
            buffer += chunk
            while len(buffer) >= _EVENT.size:
                _, _, kind, code, value = _EVENT.unpack_from(buffer)
                buffer = buffer[_EVENT.size :]
                event = self._codes.get(code)
                if kind == _EV_KEY and value == _KEY_DOWN and event is not None:
                    with self._lock:
                        self._pending.add(event)


class EitherControls:
    """Events from several sources (a pedal and the keyboard's Esc)."""

    def __init__(self, *sources: Any) -> None:
        self._sources = sources

    @property
    def keys(self) -> str:
        return "; ".join(k for s in self._sources if (k := getattr(s, "keys", "")))

    def poll(self) -> frozenset[RolloutEvent]:
        events: frozenset[RolloutEvent] = frozenset()
        for source in self._sources:
            events |= source.poll()
        return events

    def close(self) -> None:
        for source in self._sources:
            source.close()


def rollout_controls(strategy: RolloutStrategyConfig, enabled: bool = True) -> Any:
    """The controls of a rollout with `strategy`: keys (or DAgger's pedal), or none."""
    if not enabled:
        return NoRolloutControls()
    if isinstance(strategy, DAggerStrategyConfig) and strategy.input_device == "pedal":
        pedal = strategy.pedal
        stop_only = RolloutKeyboard({_ESC: RolloutEvent.STOP, "q": RolloutEvent.STOP})
        try:
            return EitherControls(
                FootPedal(
                    pedal.device_path,
                    {
                        pedal.pause_resume: RolloutEvent.PAUSE_RESUME,
                        pedal.correction: RolloutEvent.CORRECTION,
                        pedal.upload: RolloutEvent.UPLOAD,
                    },
                ),
                stop_only,
            )
        except BaseException:
            stop_only.close()
            raise
    return RolloutKeyboard(rollout_bindings(strategy))
