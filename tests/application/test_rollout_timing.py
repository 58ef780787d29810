"""The loop's timing with a model taking 10 x the tick period, on the loop's own clock.

The model computes on the loop's clock too (`LockstepClock`): in the loop's tick (sync) it
moves the clock on by its compute time, as a blocking call does; in the acting engine's worker
it is done when the loop's clock reaches its finish time, and the loop's sleep does not pass
that moment before the chunk is in the engine's queue. So the figures are exact, whatever the
load of the machine running the test (no wall-clock bound, no CPU-bound stand-in): the sync
loop misses nine ticks at every chunk (its next tick comes ten periods on), the engine with
real-time chunking misses none and acts a fresh action on every tick once the first chunk is
in. The wall-clock figures are
`benchmarks/rollout_timing.py`'s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from structlog.testing import capture_logs

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.adapters.memory.robot import ScriptedRobot
from rlctl.application.acting_engine import AsyncActing, LocalChunks
from rlctl.application.use_cases.run_rollout import RolloutReport, RolloutSettings, RunRollout
from rlctl.application.use_cases.serve_policy import PolicyService
from rlctl.domain.policies.rtc import RTCConfig
from rlctl.domain.remote_inference import RemotePolicySettings
from rlctl.domain.rollout import BaseStrategyConfig

FPS = 30
PERIOD = 1 / FPS
MODEL_TICKS = 10
DIM = 6
CHUNK = 50
SECONDS = 6.0
WARMUP = 2  # the first chunk is waited for by every engine (nothing to act yet)
REAL_WAIT_S = 10.0  # a bound on each hand-over between the threads, never reached


def until(condition: Callable[[], bool], what: str) -> None:
    give_up = time.monotonic() + REAL_WAIT_S
    while not condition():
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.0002)


class LockstepClock(ManualClock):
    """The loop's manual clock, on which the worker's model computes too."""

    def __init__(self) -> None:
        super().__init__()
        self.engine: AsyncActing | None = None
        self._lock = threading.Lock()
        self._jobs: list[tuple[float, threading.Event]] = []

    def compute(self, seconds: float) -> None:
        """Called by the model in the worker: returns once the loop's clock is `seconds` on."""
        done = threading.Event()
        with self._lock:
            self._jobs.append((self.now() + seconds, done))
        assert done.wait(REAL_WAIT_S), "the loop's clock never reached the chunk's finish"

    def release_all(self) -> None:
        with self._lock:
            jobs, self._jobs = self._jobs, []
        for _, done in jobs:
            done.set()

    def sleep_until(self, deadline: float) -> None:
        engine = self.engine
        while engine is not None:
            # A chunk asked for is being computed (its finish time known) before time moves.
            until(lambda: not engine.in_flight or bool(self._jobs), "the worker to take a request")
            with self._lock:
                if not self._jobs or self._jobs[0][0] > deadline + 1e-9:
                    break
                finish, done = self._jobs.pop(0)
            super().sleep_until(finish)
            received = engine.chunks_received
            done.set()
            until(
                lambda e=engine, r=received: e.chunks_received > r or not e.in_flight,
                "the chunk to reach the queue",
            )
        super().sleep_until(deadline)


class SlowModel(ScriptedPolicy):
    """A chunk of a ramp in the clock's time (1 a tick, from when the first chunk is in),
    taken at its observation: a late chunk's first actions are for ticks already past. It
    takes `MODEL_TICKS` periods of the loop's clock: in the tick (sync) or in the worker (the
    first chunk, which the loop waits for, moves the clock itself)."""

    def __init__(self, clock: LockstepClock, *, in_worker: bool, ticks: int = MODEL_TICKS) -> None:
        self.clock = clock
        self.calls = 0
        origin = 0.0

        def chunker(batch: Any) -> np.ndarray:
            nonlocal origin
            observed = clock.now()
            seconds = ticks * PERIOD
            if not in_worker or self.calls == 0:
                clock.advance(seconds)
            else:
                clock.compute(seconds)
            if self.calls == 0:  # the motion starts when the first chunk is in
                origin = clock.now()
            self.calls += 1
            ramp = max(0.0, observed - origin) * FPS + np.arange(CHUNK, dtype=np.float32)
            return np.repeat(ramp[None, :, None], DIM, axis=2)

        super().__init__(DIM, chunk_size=CHUNK, chunker=chunker)


class Arm(ScriptedRobot):
    """Letting go of the arm lets the model finish the chunk it computes (so the engine's
    worker ends at once when the rollout closes it)."""

    def __init__(self, clock: LockstepClock) -> None:
        super().__init__(joints=[f"j{i}" for i in range(DIM)])
        self.clock = clock

    def disconnect(self) -> None:
        super().disconnect()
        self.clock.release_all()


def rollout(clock: LockstepClock, policy: Any) -> tuple[RolloutReport, np.ndarray, np.ndarray]:
    report = RunRollout(Arm(clock), clock, policy=policy)(
        BaseStrategyConfig(),
        RolloutSettings(fps=FPS, duration_s=SECONDS, return_to_initial_position=False),
    )
    starts = np.asarray(report.timeline.starts)
    periods = np.diff(starts[WARMUP:])
    return report, periods, np.asarray(report.timeline.fresh)


def engine(model: SlowModel, clock: LockstepClock, *, threshold: int, rtc: bool) -> AsyncActing:
    acting = AsyncActing(
        LocalChunks(PolicyService({"local": model})),
        RemotePolicySettings(rtc_config=RTCConfig(execution_horizon=threshold) if rtc else None),
        label="policy",
        queue_threshold=threshold,
        now=clock.now,
    )
    clock.engine = acting
    return acting


def missed(periods: np.ndarray) -> int:
    return int(np.sum(np.maximum(np.round(periods / PERIOD) - 1, 0)))


def test_a_model_ten_ticks_slow_makes_the_sync_loop_miss_ticks_at_every_chunk() -> None:
    clock = LockstepClock()
    model = SlowModel(clock, in_worker=False)
    report, periods, fresh = rollout(clock, model)

    chunks_after_the_first = model.calls - 1
    assert chunks_after_the_first >= 2
    # Computing for ten periods in a tick: the next tick starts ten periods on, nine skipped.
    assert missed(periods) == (MODEL_TICKS - 1) * chunks_after_the_first
    assert np.isclose(np.max(periods), MODEL_TICKS * PERIOD)
    assert report.held_ticks == 0 and fresh.all()  # it waits instead: every action is fresh
    # Each chunk starts where the motion is now, ten ticks on from where the last one ended.
    assert report.max_policy_jump >= MODEL_TICKS


def test_the_async_engine_with_rtc_acts_a_fresh_action_on_time_at_every_tick() -> None:
    clock = LockstepClock()
    model = SlowModel(clock, in_worker=True)
    acting = engine(model, clock, threshold=20, rtc=True)
    report, periods, fresh = rollout(clock, acting)

    assert acting.chunks_received >= 4
    assert missed(periods) == 0 and report.timing.late_ticks == 1  # the first chunk's wait
    assert abs(np.percentile(periods, 95) - PERIOD) < 1e-3
    assert np.allclose(periods, PERIOD)
    assert report.held_ticks == 0 and acting.stalls == 0 and fresh.all()
    # The chunk outlasts the delay: every command continues the last, at chunk boundaries too.
    assert report.max_policy_jump <= 1.0 + 1e-4
    # Each chunk after the first followed the actions still queued, the delay measured.
    followed = [c for c in model.committed[1:] if c is not None]
    assert len(followed) == acting.chunks_received - 1
    # The second chunk too: the first chunk's wall time gave the delay before any was counted.
    assert all(c.inference_delay == MODEL_TICKS for c in followed)


def test_the_first_chunks_wall_time_seeds_the_delay_so_no_tick_holds() -> None:
    """The loop waits for the first chunk: no tick passes, so its delay cannot be counted in
    ticks. Its time on the clock (10 periods) over the loop's period is the delay until a
    chunk is measured in ticks: asked when 5 actions are left, a chunk taking 10 ticks would
    come 5 ticks late (the arm held 5 ticks before the second chunk when the first chunk
    counted as a delay of 0); the engine asks 11 ahead from the first chunk on."""
    clock = LockstepClock()
    model = SlowModel(clock, in_worker=True)
    acting = engine(model, clock, threshold=5, rtc=False)
    _report, periods, fresh = rollout(clock, acting)

    assert acting.chunks_received >= 4
    assert acting.waited_chunk_s is not None
    assert np.isclose(acting.waited_chunk_s, MODEL_TICKS * PERIOD)
    assert fresh.all() and acting.held_ticks == 0 and acting.stalls == 0
    assert missed(periods) == 0
    assert acting.delay_ticks() == MODEL_TICKS and acting.lead_ticks() == MODEL_TICKS + 1
    assert acting.delay.samples[0] == MODEL_TICKS  # the second chunk, in ticks


def test_a_model_slower_than_its_chunk_lasts_holds_the_arm_and_says_why() -> None:
    """Each chunk (50 actions) comes 60 ticks after its observation: every action is for a
    tick already past, so none is acted (never a stale one replayed). The loop keeps its
    time, the arm holds, and the log says once what to change."""
    clock = LockstepClock()
    model = SlowModel(clock, in_worker=True, ticks=CHUNK + 10)
    acting = engine(model, clock, threshold=20, rtc=True)
    with capture_logs() as logs:
        _report, periods, fresh = rollout(clock, acting)

    assert acting.chunks_stale >= 2
    assert missed(periods) == 0
    assert fresh[:CHUNK].all() and not fresh[CHUNK:].any()
    said = [entry for entry in logs if "none can be acted" in entry["event"]]
    assert len(said) == 1 and said[0]["delay_ticks"] == CHUNK + 10
    assert "lower --fps" in said[0]["hint"]
