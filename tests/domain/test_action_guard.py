"""The action guard: whatever a policy, a teleoperator or a file produces, what reaches a robot
is finite and inside its limits, each joint's step is bounded when asked, and garbage holds the
last safe command instead of choosing a bound by accident."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.domain.action_guard import ActionGuard, ActionLimits, step_caps
from rlctl.domain.calibration import MotorCalibration, MotorNormMode, unnormalize, user_range
from rlctl.domain.errors import InvalidInput

ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True, width=64)
NAMES = ("a", "b", "c")


@st.composite
def limits(draw: st.DrawFn, n: int = 3) -> ActionLimits:
    lows, highs = [], []
    for _ in range(n):
        low = draw(st.floats(-1e4, 1e4))
        width = draw(st.floats(1e-2, 1e5))
        lows.append(low)
        highs.append(low + width)
    return ActionLimits(NAMES[:n], lows, highs)


def inside(values: np.ndarray, lim: ActionLimits) -> bool:
    v = values.astype(np.float64)  # what is sent, exactly: float32
    return bool(np.all(np.isfinite(v)) and np.all(v >= lim.low) and np.all(v <= lim.high))


@settings(max_examples=300, deadline=None)
@given(
    lim=limits(),
    actions=st.lists(st.lists(ANY_FLOAT, min_size=3, max_size=3), min_size=1, max_size=20),
    cap=st.none() | st.floats(1e-3, 1e3),
    present=st.none() | st.lists(ANY_FLOAT, min_size=3, max_size=3),
    overshoot=st.none() | st.floats(0, 1),
)
def test_nothing_unsafe_ever_leaves_the_guard(lim, actions, cap, present, overshoot):
    guard = ActionGuard(lim, max_step=cap, overshoot=overshoot)
    for action in actions:
        decision = guard(np.asarray(action), present=present)
        if decision.values is not None:
            assert decision.values.dtype == np.float32
            assert inside(decision.values, lim), (action, decision)
        if not np.all(np.isfinite(action)):
            assert decision.held and "non-finite" in decision.reason


@settings(max_examples=200, deadline=None)
@given(lim=limits(), data=st.data())
def test_an_action_inside_the_limits_is_sent_as_asked(lim, data):
    action = [data.draw(st.floats(lo, hi)) for lo, hi in zip(lim.low, lim.high)]
    decision = ActionGuard(lim)(action)
    assert not decision.held and decision.clipped == ()
    np.testing.assert_allclose(decision.values, np.float32(action), rtol=1e-6, atol=1e-30)


@settings(max_examples=200, deadline=None)
@given(
    lim=limits(),
    data=st.data(),
    cap=st.floats(1e-2, 1e3),
)
def test_each_step_is_capped_from_where_the_joints_are(lim, data, cap):
    present = np.asarray([data.draw(st.floats(lo, hi)) for lo, hi in zip(lim.low, lim.high)])
    action = np.asarray([data.draw(st.floats(lo, hi)) for lo, hi in zip(lim.low, lim.high)])
    decision = ActionGuard(lim, max_step=cap)(action, present=present)
    assert not decision.held
    step = decision.values.astype(np.float64) - present
    assert np.all(np.abs(step) <= cap * (1 + 1e-5) + 1e-3 * np.abs(present).max())


def test_an_overshoot_is_clipped_and_garbage_is_held():
    guard = ActionGuard(ActionLimits(("j", "grip"), [-100, 0], [100, 100]))
    sent = guard([105.0, 50.0])
    assert not sent.held and sent.clipped == ("j",)
    np.testing.assert_array_equal(sent.values, [100, 50])
    garbage = guard([5000.0, 50.0])
    assert garbage.held and "far outside its range" in garbage.reason and garbage.first_hold
    np.testing.assert_array_equal(garbage.values, [100, 50])  # the last safe command again
    nan = guard([0.0, math.nan])
    assert nan.held and not nan.first_hold and "grip" in nan.reason
    np.testing.assert_array_equal(nan.values, [100, 50])
    guard.begin_episode()
    assert guard([math.inf, 0]).first_hold  # said once per episode
    assert guard.holds == 3


def test_the_first_hold_takes_the_present_position_into_range():
    guard = ActionGuard(ActionLimits(("j",), [-10], [10]))
    assert guard([math.nan]).values is None  # nothing commanded, nothing known
    held = guard([math.nan], present=[12.0])
    np.testing.assert_array_equal(held.values, [10.0])
    np.testing.assert_array_equal(guard([math.nan]).values, [10.0])


def test_the_step_cap_needs_a_finite_present_position():
    guard = ActionGuard(ActionLimits(("j",), [-10], [10]), max_step=1.0)
    assert guard([5.0], present=[math.nan]).held
    assert not guard([5.0], present=[4.5]).held


def test_wrong_sizes_and_bad_caps_are_one_clear_error():
    guard = ActionGuard(ActionLimits(("a", "b"), [0, 0], [1, 1]))
    with pytest.raises(InvalidInput, match="an action has 3 values, the robot takes 2"):
        guard([0.1, 0.2, 0.3])
    with pytest.raises(InvalidInput, match="max_relative_target"):
        step_caps({"a": 1.0}, ("a", "b"))
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(InvalidInput, match="positive and finite"):
            step_caps(bad, ("a",))
    with pytest.raises(InvalidInput, match="NaN"):
        ActionLimits(("a",), [math.nan], [1])


def test_open_limits_still_hold_non_finite_actions():
    guard = ActionGuard(ActionLimits.unbounded(("a", "b")))
    np.testing.assert_array_equal(guard([1e30, -3.0]).values, np.float32([1e30, -3.0]))
    assert guard([math.nan, 0]).held


CALIBRATIONS = st.builds(
    lambda low, width, drive: MotorCalibration(1, drive, 0, low, min(4095, low + width)),
    st.integers(0, 4000),
    st.integers(10, 4095),
    st.integers(0, 1),
)


@settings(max_examples=300, deadline=None)
@given(calib=CALIBRATIONS, mode=st.sampled_from(list(MotorNormMode)), value=ANY_FLOAT)
def test_a_guarded_goal_never_leaves_the_calibrated_range_in_ticks(calib, mode, value):
    low, high = user_range(calib, mode, 4096)
    decision = ActionGuard(ActionLimits(("m",), [low], [high]))([value])
    if decision.values is None:
        return
    ticks = unnormalize(float(decision.values[0]), calib, mode, 4096)
    assert calib.range_min <= ticks <= calib.range_max


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e308])
@pytest.mark.parametrize("mode", list(MotorNormMode))
def test_unnormalizing_garbage_is_a_clear_error_not_a_bare_one(value, mode):
    calib = MotorCalibration(1, 0, 0, 100, 3000)
    if mode is not MotorNormMode.DEGREES and math.isfinite(value):
        assert 100 <= unnormalize(value, calib, mode, 4096) <= 3000  # clamped, as LeRobot
        return
    with pytest.raises(InvalidInput, match="finite numbers only"):
        unnormalize(value, calib, mode, 4096)
