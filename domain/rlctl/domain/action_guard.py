"""The one guard every action passes before it reaches a robot: finite, in range, bounded step.

A policy (local or served), a teleoperator or a replayed dataset may produce anything: NaN from a
diverged model, 3e38 from a corrupt observation, a gripper command of 5000 from a unit mix-up.
Motors must never see such values, nor a bound picked by accident (`np.clip(nan, a, b)` is NaN;
`max(-100, nan)` is -100, the end of the range). The guard decides, per tick:

- a finite action inside the limits is sent as asked (after the step cap, when there is one);
- a small overshoot (within `overshoot` of the range's width past either end) is clipped to the
  limit, as LeRobot's normalisation clips it;
- a non-finite action, or one far outside the range (garbage, not an overshoot), is *held*: the
  last safe command is sent again (or, before any, the present position brought into range), and
  the robot reports it once per episode;
- with `max_step`, each joint moves at most that far from where it is (`present`), as LeRobot's
  `ensure_safe_goal_position` caps it, and the capped goal is still inside the limits.

Whatever the input, `values` of the decision is finite and inside `[low, high]`, or None when
there is nothing safe to send (no command yet and no finite present position).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs
import numpy as np

from rlctl.domain.errors import InvalidInput

# Past either end of a joint's range by more than this fraction of its width, an action is
# garbage rather than an overshoot, and it is held instead of clipped.
DEFAULT_OVERSHOOT = 0.1


def _names(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


def _as_vector(values: object) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1).copy()


def _inward(bounds: np.ndarray, *, up: bool) -> np.ndarray:
    """`bounds` as float32 values no further out than they are (infinities kept)."""
    rounded = bounds.astype(np.float32)
    outside = rounded < bounds if up else rounded > bounds
    towards = np.float32(np.inf if up else -np.inf)
    with np.errstate(over="ignore"):
        rounded = np.where(outside, np.nextafter(rounded, towards), rounded)
    return rounded.astype(np.float64)


@attrs.frozen
class ActionLimits:
    """Per-dimension bounds of what a robot may be sent, in the units of its action.

    An infinite bound means that side is open (a simulator's unbounded action space); the
    finiteness check still applies."""

    names: tuple[str, ...] = attrs.field(converter=_names)
    low: np.ndarray = attrs.field(converter=_as_vector, eq=False)
    high: np.ndarray = attrs.field(converter=_as_vector, eq=False)

    def __attrs_post_init__(self) -> None:
        n = len(self.names)
        if self.low.shape != (n,) or self.high.shape != (n,):
            raise InvalidInput(
                f"action limits need one low and one high per dimension ({n}), got "
                f"{self.low.shape[0]} and {self.high.shape[0]}",
                where="action limits",
            )
        if np.isnan(self.low).any() or np.isnan(self.high).any():
            raise InvalidInput("action limits must not be NaN", where="action limits")
        bad = [name for name, lo, hi in zip(self.names, self.low, self.high) if not lo <= hi]
        if bad:
            raise InvalidInput(
                f"the lower limit is above the upper one for {', '.join(bad)}",
                where="action limits",
                hint="recalibrate the arm (`rlctl calibrate`) or fix the configured limits",
            )

    @classmethod
    def unbounded(cls, names: Sequence[str]) -> ActionLimits:
        n = len(names)
        return cls(tuple(names), np.full(n, -np.inf), np.full(n, np.inf))

    def __len__(self) -> int:
        return len(self.names)


def step_caps(max_step: float | Mapping[str, float], names: Sequence[str]) -> np.ndarray:
    """`max_relative_target` as one cap per dimension: one number for all, or one per name."""
    if isinstance(max_step, Mapping):
        missing = [n for n in names if n not in max_step]
        extra = sorted(set(max_step) - set(names))
        if missing or extra:
            raise InvalidInput(
                f"max_relative_target names {sorted(max_step)}, the motors are {list(names)}",
                where="max_relative_target",
                hint="give one number for every motor, or a single number for all",
            )
        caps = np.asarray([float(max_step[n]) for n in names], dtype=np.float64)
    else:
        caps = np.full(len(names), float(max_step), dtype=np.float64)
    if not np.all(np.isfinite(caps)) or np.any(caps <= 0):
        raise InvalidInput(
            f"max_relative_target must be positive and finite, got {max_step!r}",
            where="max_relative_target",
        )
    return caps


@attrs.frozen
class GuardDecision:
    """What the guard made of one action.

    `values`: what to send (float32, finite, inside the limits), or None when nothing safe can be
    sent. `held`: the action was refused and the last safe command stands in for it; `reason`
    says why. `clipped`: the names of the dimensions brought back to their limits or step cap.
    `first_hold`: this is the episode's first hold, the one to report."""

    values: np.ndarray | None = attrs.field(eq=False)
    held: bool = False
    reason: str | None = None
    clipped: tuple[str, ...] = ()
    first_hold: bool = False


class ActionGuard:
    """Checks every action sent to one robot; remembers the last safe command to hold."""

    def __init__(
        self,
        limits: ActionLimits,
        *,
        max_step: float | Mapping[str, float] | None = None,
        overshoot: float | None = DEFAULT_OVERSHOOT,
    ) -> None:
        """`overshoot`: how far past a limit (as a fraction of the range's width) still counts as
        an overshoot to clip; None clips any finite value."""
        if overshoot is not None and not (np.isfinite(overshoot) and overshoot >= 0):
            raise InvalidInput(f"overshoot must be >= 0, got {overshoot!r}", where="action guard")
        self.limits = limits
        self._caps = None if max_step is None else step_caps(max_step, limits.names)
        width = limits.high - limits.low
        # Open ranges, and single-valued ones, have no garbage threshold: finite values clip.
        sized = np.isfinite(width) & (width > 0) & (overshoot is not None)
        margin = np.where(sized, width * (overshoot or 0.0), np.inf)
        with np.errstate(invalid="ignore"):
            self._garbage_low = np.where(sized, limits.low - margin, -np.inf)
            self._garbage_high = np.where(sized, limits.high + margin, np.inf)
        # What is sent is float32: the limits rounded inwards to float32 keep it inside them.
        self._low = _inward(limits.low, up=True)
        self._high = _inward(limits.high, up=False)
        self._last_safe: np.ndarray | None = None
        self._held_this_episode = 0
        self.holds = 0

    @property
    def last_safe(self) -> np.ndarray | None:
        return None if self._last_safe is None else self._last_safe.astype(np.float32)

    @property
    def held_this_episode(self) -> int:
        return self._held_this_episode

    def begin_episode(self) -> None:
        """A new episode: its first hold is reported again."""
        self._held_this_episode = 0

    def forget(self) -> None:
        """The robot was reconnected or moved by other means: no command to hold any more."""
        self._last_safe = None

    def __call__(self, action: object, *, present: object | None = None) -> GuardDecision:
        limits = self.limits
        try:
            wanted = np.asarray(action, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as err:
            return self._hold(f"the action is not a vector of numbers ({err})", present)
        if wanted.shape[0] != len(limits):
            raise InvalidInput(
                f"an action has {wanted.shape[0]} values, the robot takes {len(limits)} "
                f"({', '.join(limits.names)})",
                where="action",
            )
        bad = ~np.isfinite(wanted)
        if bad.any():
            names = [limits.names[i] for i in np.flatnonzero(bad)]
            return self._hold(f"non-finite action for {', '.join(names)}", present)
        far = (wanted < self._garbage_low) | (wanted > self._garbage_high)
        if far.any():
            i = int(np.flatnonzero(far)[0])
            return self._hold(
                f"action {wanted[i]:.6g} for {limits.names[i]} is far outside its range "
                f"[{limits.low[i]:.6g}, {limits.high[i]:.6g}]",
                present,
            )
        goal = wanted
        capped = np.zeros(len(limits), dtype=bool)
        if self._caps is not None:
            here = self._finite_present(present)
            if here is None:
                reason = "the present position is unknown: the step cannot be capped"
                return self._hold(reason, None)
            step = np.clip(goal - here, -self._caps, self._caps)
            capped = step != goal - here
            goal = here + step
        safe = np.clip(goal, self._low, self._high)
        clipped = capped | (goal < limits.low) | (goal > limits.high)
        self._last_safe = safe
        return GuardDecision(
            safe.astype(np.float32),
            clipped=tuple(limits.names[i] for i in np.flatnonzero(clipped)),
        )

    def hold_at(self, present: object) -> np.ndarray | None:
        """Nothing was commanded yet: take the present position (brought into range) as the
        command to hold, and return it; None when it is not a finite vector."""
        here = self._finite_present(present)
        if here is None:
            return None
        self._last_safe = np.clip(here, self._low, self._high)
        return self._last_safe.astype(np.float32)

    def _finite_present(self, present: object | None) -> np.ndarray | None:
        if present is None:
            return None
        try:
            here = np.asarray(present, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            return None
        if here.shape[0] != len(self.limits) or not np.all(np.isfinite(here)):
            return None
        return here

    def _hold(self, reason: str, present: object | None) -> GuardDecision:
        self.holds += 1
        self._held_this_episode += 1
        first = self._held_this_episode == 1
        if self._last_safe is not None:
            values: np.ndarray | None = self._last_safe.astype(np.float32)
        else:
            values = self.hold_at(present)
        return GuardDecision(values, held=True, reason=reason, first_hold=first)
