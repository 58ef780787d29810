"""The acting engine's hand-over between the loop and its worker, where a request could be lost.

(Its behaviour with a slow model on the loop's clock: `test_rollout_timing.py`; holds, failures
and real-time chunking in a rollout: `test_run_rollout.py`.)
"""

from __future__ import annotations

import numpy as np

from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.application.acting_engine import AsyncActing, LocalChunks
from rlctl.application.use_cases.serve_policy import PolicyService
from rlctl.domain.remote_inference import RemotePolicySettings

DIM = 4
CHUNK = 10


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
        RemotePolicySettings(connect_timeout_s=5.0),
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
