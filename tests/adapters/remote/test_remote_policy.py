"""The robot's side of remote inference, on an in-memory server: queue, merge, deadline, hold."""

from __future__ import annotations

import time

import numpy as np
import pytest
from structlog.testing import capture_logs

from rlctl.adapters.memory.policy_server import InProcessPolicyConnector
from rlctl.adapters.memory.policy_server import ScriptedChunkService as TickService
from rlctl.adapters.remote.errors import ChunkUnusable
from rlctl.adapters.remote.remote_policy import RemotePolicy
from rlctl.domain.errors import HardwareError, InvalidInput
from rlctl.domain.remote_inference import RemotePolicySettings

OBSERVATION = {"observation.state": np.zeros((1, 2), np.float32), "task": ["stack"]}


def connect(service: TickService, realtime: bool = True, **settings: object) -> RemotePolicy:
    return InProcessPolicyConnector(service).connect(
        RemotePolicySettings(server="127.0.0.1:1", **settings),  # type: ignore[arg-type]
        realtime=realtime,
    )


def wait_until(condition: object, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < end, "timed out"
        time.sleep(0.002)


def test_chunks_flow_and_every_action_is_its_ticks_own() -> None:
    service = TickService(steps=10)
    policy = connect(service)
    assert policy.actions_per_chunk == 10 and type(policy.config).__name__ == "MLPConfig"
    previous = None
    for tick in range(40):
        action = policy.select_action(OBSERVATION)
        assert action.shape == (1, 2)
        # Fresh (its own tick's value) or held (the previous action): never another tick's.
        assert action[0, 0] == tick or (previous is not None and action[0, 0] == previous)
        previous = float(action[0, 0])
        time.sleep(0.003)
    assert policy.chunks_received >= 4
    # The next chunk was asked for at the threshold, with the task text passed through.
    assert [r.timestep for r in service.requests[:2]] == [0, 5]
    assert service.requests[0].task == ("stack",)
    policy.close()


def test_a_stalled_server_holds_the_last_action_then_acting_resumes_fresh() -> None:
    service = TickService(steps=10)
    policy = connect(service, chunk_deadline_s=5.0)
    actions = [float(policy.select_action(OBSERVATION)[0, 0]) for _ in range(6)]
    assert actions == [0, 1, 2, 3, 4, 5]  # tick 5 asked for the next chunk
    wait_until(lambda: policy.chunks_received == 2)
    service.gate.clear()  # the server stops answering
    stalled = [float(policy.select_action(OBSERVATION)[0, 0]) for _ in range(20)]
    fresh = [a for tick, a in enumerate(stalled, start=6) if a == tick]
    assert stalled[len(fresh) :] == [stalled[len(fresh) - 1]] * (20 - len(fresh))
    assert policy.stalls == 1 and policy.held_ticks == 20 - len(fresh)
    service.gate.set()
    # The chunk asked for at tick 10 arrives after tick 25: all of it is past, none of it acts.
    wait_until(lambda: policy.chunks_received == 3)
    assert float(policy.select_action(OBSERVATION)[0, 0]) == stalled[-1]  # tick 26 asks anew
    wait_until(lambda: policy.chunks_received == 4)
    after = [float(policy.select_action(OBSERVATION)[0, 0]) for _ in range(8)]
    assert after == list(range(27, 35))
    assert policy.stalls == 1
    policy.close()


def test_safe_action_while_stalled() -> None:
    service = TickService(steps=4)
    policy = connect(service, on_stall="safe_action", safe_action=(9.0, -9.0))
    policy.select_action(OBSERVATION)
    wait_until(lambda: policy.chunks_received >= 1)
    service.gate.clear()
    held = [policy.select_action(OBSERVATION) for _ in range(8)][-1]
    np.testing.assert_array_equal(held, [[9.0, -9.0]])
    service.gate.set()
    policy.close()


@pytest.mark.parametrize(("name", "merged"), [("latest_only", 10.0), ("average", 5.0)])
def test_an_arriving_chunk_merges_with_the_queue_as_configured(name: str, merged: float) -> None:
    service = TickService(steps=10)
    service.offsets = [0.0, 10.0]  # the second chunk says tick + 10
    # Ticks at no pace (microseconds apart): the delay is pinned, or the first chunk's wall
    # time would be a delay of many ticks and the second chunk asked at once, not at tick 5.
    policy = connect(service, aggregate=name, rtc_inference_delay=0)
    first = [float(policy.select_action(OBSERVATION)[0, 0]) for _ in range(6)]
    wait_until(lambda: policy.chunks_received == 2)
    # Ticks 6..9 were queued from the first chunk and come again in the second (asked at tick 5).
    overlap = [float(policy.select_action(OBSERVATION)[0, 0]) - t for t in range(6, 10)]
    after = [float(policy.select_action(OBSERVATION)[0, 0]) - t for t in range(10, 15)]
    assert first == [0, 1, 2, 3, 4, 5]
    assert overlap == [merged] * 4
    assert after == [10.0] * 5
    policy.close()


def test_a_simulation_waits_for_its_chunk_instead_of_holding() -> None:
    service = TickService(steps=3)
    policy = connect(service, realtime=False)
    actions = [float(policy.select_action(OBSERVATION)[0, 0]) for _ in range(30)]
    assert actions == list(range(30)) and policy.held_ticks == 0
    policy.reset()
    assert float(policy.select_action(OBSERVATION)[0, 0]) == 0.0
    policy.close()


def test_a_refusal_reaches_the_loop() -> None:
    class Refusing(TickService):
        def predict(self, request):  # type: ignore[no-untyped-def]
            raise InvalidInput("observation.state holds NaN or infinite values")

    policy = connect(Refusing(), realtime=False)
    with pytest.raises(InvalidInput, match="NaN"):
        policy.select_action(OBSERVATION)
    policy.close()


def test_no_server_before_the_first_chunk_is_an_error_not_a_guess() -> None:
    service = TickService()
    service.gate.clear()
    policy = connect(service, connect_timeout_s=0.2)
    with pytest.raises(HardwareError, match="no action from the policy server"):
        policy.select_action(OBSERVATION)
    service.gate.set()
    policy.close()


def test_a_chunk_with_nan_is_never_acted_on_the_robot_holds_and_the_log_says_it_once() -> None:
    service = TickService(steps=4)
    # Chunks 2 to 4 come back with NaN (a server that did not refuse them): none may act.
    service.offsets = [0.0, np.nan, np.nan, np.nan]
    policy = connect(service)
    actions: list[float] = []

    def tick() -> float:
        actions.append(float(policy.select_action(OBSERVATION)[0, 0]))
        time.sleep(0.004)
        return actions[-1]

    with capture_logs() as logs:
        while policy.chunks_unusable < 3 and len(actions) < 500:
            tick()
        held_at = len(actions)
        # Acting resumes, fresh, with the next usable chunk.
        while tick() != len(actions) - 1 and len(actions) < held_at + 500:
            pass
    policy.close()
    assert np.isfinite(actions).all()
    assert policy.chunks_unusable == 3 and policy.held_ticks > 0
    said = [e for e in logs if "chunk unusable" in e["event"]]
    assert len(said) == 1 and "NaN" in said[0]["reason"]
    # Every action is its own tick's (fresh) or the last one held: never a NaN chunk's.
    for at, action in enumerate(actions):
        assert action == at or action == actions[at - 1]
    assert actions[-1] == len(actions) - 1 and len(actions) < held_at + 500


def test_a_chunk_with_nan_stops_a_simulation_with_the_reason() -> None:
    service = TickService(steps=4)
    service.offsets = [np.nan, np.nan]
    policy = connect(service, realtime=False)
    with pytest.raises(ChunkUnusable, match="NaN or infinite actions"):
        policy.select_action(OBSERVATION)
    with pytest.raises(ChunkUnusable):
        policy.predict_chunk(OBSERVATION)
    policy.close()


def test_no_usable_first_chunk_is_an_error_saying_why() -> None:
    service = TickService(steps=4)
    # Every chunk: a fast host asks for over 10,000 of them in the 0.3 s.
    service.offset_after = np.nan
    policy = connect(service, connect_timeout_s=0.3)
    with pytest.raises(HardwareError, match="no action from the policy server") as raised:
        policy.select_action(OBSERVATION)
    assert "the last request: the chunk holds NaN or infinite actions" in raised.value.message
    policy.close()
