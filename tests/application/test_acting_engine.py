"""The acting engine's hand-over between the loop and its worker: a request that could be lost,
a stale chunk after a reset, and a close while the model computes.

(Its behaviour with a slow model on the loop's clock: `test_rollout_timing.py`; holds, failures
and real-time chunking in a rollout: `test_run_rollout.py`.)
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Mapping

import numpy as np
import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.application.acting_engine import AsyncActing, LocalChunks
from rlctl.application.use_cases.serve_policy import PolicyService
from rlctl.domain.features import FeatureSpec
from rlctl.domain.remote_inference import (
    ChunkReply,
    ChunkRequest,
    PolicyDescription,
    RemotePolicySettings,
)

DIM = 4
CHUNK = 10
PERIOD = 1 / 30
MODEL_S = 10 * PERIOD
REAL_WAIT_S = 10.0  # a bound on each hand-over between the threads, never reached


def test_a_reset_before_the_worker_takes_a_request_leaves_nothing_in_flight() -> None:
    """A scene that ends (or a DAgger resume) resets the engine in the same tick that asked
    for a chunk, often before the worker has woken up to take the request. The request is
    dropped with the queue; it must not stay counted as in flight, or no chunk is ever asked
    again and the next tick waits `connect_timeout_s` and fails."""
    model = ScriptedPolicy(
        DIM, chunk_size=CHUNK, chunker=lambda b: np.ones((1, CHUNK, DIM), np.float32)
    )
    engine = AsyncActing(
        LocalChunks(PolicyService({"local": model})),
        # A loop at no pace (its ticks microseconds apart): the delay is pinned, or the first
        # chunk's milliseconds would be a delay of hundreds of ticks and asked for at once.
        RemotePolicySettings(connect_timeout_s=5.0, rtc_inference_delay=0),
        label="policy",
        queue_threshold=2,
    )
    batch = {"observation.state": np.zeros((1, DIM), np.float32), "task": ["pick"]}
    try:
        for _ in range(CHUNK - 2):  # the first chunk (waited for), then 7 ticks from the queue
            engine.select_action(batch)
        assert not engine.in_flight and engine.chunks_received == 1
        # The worker cannot take the request between the tick and the reset: the loop holds the
        # engine's lock (reentrant) over both, as a worker that has not woken yet would.
        with engine._cond:
            engine.select_action(batch)  # 2 actions left: the next chunk is asked for
            assert engine.in_flight
            engine.reset()
            assert not engine.in_flight
        action = engine.select_action(batch)  # a new episode: its first chunk is waited for
        assert np.allclose(action, 1.0) and engine.chunks_received == 2
    finally:
        engine.close()


class SideBySideChunks:
    """A `ChunkClient` computing calls side by side (a server with room for two), on the
    loop's manual clock: each chunk holds the value of its observation's state (the episode),
    and takes `MODEL_S` of the clock, except the call `gated` (counted from 1), which waits in
    the model until `gate` is set (the test holds it there across the reset)."""

    def __init__(self, clock: ManualClock, *, gated: int) -> None:
        self.clock = clock
        self.gated = gated
        self.gate = threading.Event()
        self.inside = threading.Event()
        self.calls = 0
        self.service = PolicyService({"local": ScriptedPolicy(DIM, chunk_size=CHUNK)})

    def describe(
        self,
        policy: str = "",
        provided: Mapping[str, FeatureSpec] | None = None,
        *,
        timeout: float = 10.0,
    ) -> PolicyDescription:
        return self.service.describe(policy, provided)

    def predict(self, request: ChunkRequest, *, timeout: float) -> ChunkReply:
        self.calls += 1
        if self.calls == self.gated:
            self.inside.set()
            assert self.gate.wait(REAL_WAIT_S), "the test never let the stale call finish"
        else:
            self.clock.advance(MODEL_S)
        value = float(request.observation["observation.state"][0, 0])
        actions = np.full((1, CHUNK, DIM), value, np.float32)
        return ChunkReply(actions=actions, timestep=request.timestep, inference_s=MODEL_S)

    def close(self) -> None:
        self.gate.set()


def until(condition: object, what: str) -> None:
    give_up = time.monotonic() + REAL_WAIT_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.001)


def test_a_reset_drops_the_stale_chunk_and_the_first_tick_waits_only_for_its_own() -> None:
    """A scene ends while the worker computes the next chunk of the last episode. The reset
    drops that call (its chunk is dropped when it comes) and the new episode's first request
    goes to a fresh worker at once: the first tick waits one model time on the loop's clock,
    not the stale call's rest and then its own (here the stale call never ends before the test
    lets it: a tick queued behind it would fail after `connect_timeout_s`)."""
    clock = ManualClock()
    client = SideBySideChunks(clock, gated=2)
    engine = AsyncActing(
        client,
        RemotePolicySettings(connect_timeout_s=2.0, rtc_inference_delay=0),
        label="policy",
        queue_threshold=CHUNK,  # the next chunk is asked at every tick with none in flight
        now=clock.now,
    )

    def tick(episode: float) -> np.ndarray:
        clock.advance(PERIOD)
        state = np.full((1, DIM), episode, np.float32)
        return engine.select_action({"observation.state": state, "task": ["pick"]})

    try:
        assert np.allclose(tick(0.0), 0.0)  # the first chunk, waited for
        assert np.allclose(tick(0.0), 0.0)  # acted from the queue; the next chunk is asked
        assert client.inside.wait(REAL_WAIT_S)  # ... and the model is computing it
        engine.reset()
        assert not engine.in_flight
        before = clock.now()
        first = tick(1.0)
        assert np.allclose(first, 1.0)  # the new episode's own chunk
        assert np.isclose(clock.now() - before, PERIOD + MODEL_S)  # one model time, not two
        assert engine.chunks_received == 2 and engine.workers_alive == 2

        client.gate.set()  # the stale call returns now: its chunk is dropped, its worker ends
        until(lambda: engine.workers_alive == 1, "the stale call's worker to end")
        assert engine.chunks_received == 2
        assert np.allclose(tick(1.0), 1.0)  # never an action of the last episode's chunk
    finally:
        engine.close()
    assert engine.workers_alive == 0


def test_a_simulation_counts_its_delay_in_ticks_not_in_wall_time() -> None:
    """A loop that waits for every chunk (a simulation) keeps no real time: the chunks it
    waited for give no wall-clock delay (it would ask each chunk at once, from an older
    observation)."""
    clock = ManualClock()
    client = SideBySideChunks(clock, gated=0)
    engine = AsyncActing(
        client, RemotePolicySettings(), realtime=False, label="policy", now=clock.now
    )
    try:
        for _ in range(3):
            clock.advance(PERIOD)
            engine.select_action({"observation.state": np.zeros((1, DIM), np.float32)})
        assert engine.waited_chunk_s is None and engine.delay_ticks() == 0
    finally:
        engine.close()


# A policy call inside torch (a C++ op that lets go of the interpreter, as a model's forward
# does) while the engine closes and the program ends.
CLOSE_DURING_A_CALL = """
import threading, time
import numpy as np
import torch
from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.application.acting_engine import AsyncActing, LocalChunks
from rlctl.application.use_cases.serve_policy import PolicyService
from rlctl.domain.remote_inference import RemotePolicySettings

DIM, CHUNK, CALL_S = 4, 10, {call_s}
inside, release, calls = threading.Event(), threading.Event(), []
a = torch.randn(256, 256)

def chunker(batch):
    calls.append(1)
    if len(calls) > 1:  # the second chunk: the model computes until the engine has closed
        inside.set()
        end = time.monotonic() + CALL_S
        # Short waits between the torch ops, as a real model's Python between its kernels:
        # a loop that never let go of the interpreter once kept `close` from running at all
        # under a loaded CI machine (it returned when this call did, 30 s later).
        while not release.wait(0.002) and time.monotonic() < end:
            torch.mm(a, a)
        print("the call returned", flush=True)
    return np.ones((1, CHUNK, DIM), np.float32)

model = ScriptedPolicy(DIM, chunk_size=CHUNK, chunker=chunker)
engine = AsyncActing(
    LocalChunks(PolicyService({{"local": model}})),
    RemotePolicySettings(chunk_deadline_s=0.1),
    label="policy",
    queue_threshold=CHUNK,
)
batch = {{"observation.state": np.zeros((1, DIM), np.float32), "task": ["pick"]}}
engine.select_action(batch)
engine.select_action(batch)
assert inside.wait(10)
started = time.monotonic()
engine.close()
took = time.monotonic() - started
print(f"closed after {{took:.2f}} s, workers {{engine.workers_alive}}", flush=True)
release.set()  # the worker ends its call inside torch as the program ends
"""


@pytest.mark.slow
def test_closing_while_the_model_computes_never_aborts_the_process() -> None:
    """The engine closes (it waits `chunk_deadline_s` + 1 s) while its worker is inside a torch
    op for longer, and the program ends. A daemon worker was cut off inside torch at exit and
    the process aborted (`terminate called without an active exception`, exit -6); the worker
    is let finish its call, and the process exits 0 once it returns."""
    # The call lasts until the engine has closed (30 s at most), whatever the machine's load.
    script = textwrap.dedent(CLOSE_DURING_A_CALL.format(call_s=30.0))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "terminate called" not in said
    closed = re.search(r"closed after ([0-9.]+) s, workers (\d)", said)
    assert closed, said
    assert float(closed[1]) >= 1.0 and closed[2] == "1"  # it waited, then left it computing
    assert "still computing a chunk at close" in said
    assert said.index("closed after") < said.index("the call returned")  # then let finish


NEVER_CLOSED = """
import numpy as np
from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.application.acting_engine import AsyncActing, LocalChunks
from rlctl.application.use_cases.serve_policy import PolicyService
from rlctl.domain.remote_inference import RemotePolicySettings

model = ScriptedPolicy(4, chunk_size=10)
engine = AsyncActing(
    LocalChunks(PolicyService({"local": model})), RemotePolicySettings(), label="policy"
)
engine.select_action({"observation.state": np.zeros((1, 4), np.float32), "task": ["pick"]})
print("done", engine.workers_alive, flush=True)
"""


def test_an_engine_never_closed_does_not_keep_the_process_alive() -> None:
    """Its worker is no daemon (so the interpreter waits for a call under way), yet an idle
    one ends with the program's main thread: a script that forgets `close` still exits."""
    done = subprocess.run(
        [sys.executable, "-c", NEVER_CLOSED], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "done 1" in done.stdout, done.stdout + done.stderr
