"""Several actors on one learner, through the real gRPC transport (`GrpcLearnerEndpoint`,
`GrpcLearnerLink`, the learner's use case; a counting trainer stands in for SAC's maths): both
actors get parameters as the learner moves on, the transitions of both land in its replay, and
one actor dying takes nothing from the learner or the other. A full learner queue is refused
`RESOURCE_EXHAUSTED` (busy): the actor holds, backs off, sends again, and loses nothing.
Bounded: every thread is joined with a timeout, every call has a deadline, every wait is on a
condition with a timeout (no polling).

The learner's trainer here takes each step in a GIL-free millisecond, as SAC's tensor operations
release Python's interpreter lock: a trainer of pure Python at ~20,000 steps a second holds that
lock back to back, and once, in a loaded CI run, the surviving actor's thread did not get it back
for the whole 60 s the learner's loop ran (it went on 2 ms after that loop ended)."""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from rlctl.adapters.clock.system import SystemClock
from rlctl.adapters.memory.reinforcement import (
    ConstantActingPolicy,
    ConstantActingPolicyFactory,
    CountingTrainer,
    CountingTrainerFactory,
    InMemoryReplayStore,
    LineInteraction,
)
from rlctl.adapters.remote import rl_wire
from rlctl.adapters.remote.errors import BUSY, REFUSAL_KEY
from rlctl.adapters.remote.grpc_server import GrpcPolicyServer
from rlctl.adapters.remote.rl_grpc import SERVICE, GrpcLearnerEndpoint, GrpcLearnerLink
from rlctl.adapters.rl.reward import EnvReward, NoIntervention
from rlctl.application.ports.reinforcement import (
    ActorHello,
    InteractionStep,
    LearnerBusy,
    Pushed,
)
from rlctl.application.use_cases.rl_act import ActResult, ActSettings, ActWithPolicy
from rlctl.application.use_cases.rl_learn import LearnResult, LearnSettings, LearnWithSAC
from rlctl.domain.errors import HardwareError
from rlctl.domain.rl.replay import RLTransition, TransitionBatch, stack

TOKEN = "a-token-of-sixteen-chars"
JOIN_S = 60.0


class RecordingEndpoint(GrpcLearnerEndpoint):
    """The real endpoint; what the learner's loop takes from it is kept for the test to read,
    and each publication is told to whoever waits for one (`wait_for_version`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.taken: list[Pushed] = []
        self._published = threading.Condition()

    def take(self) -> list[Pushed]:
        out = super().take()
        self.taken.extend(out)
        return out

    def publish(self, version: int, weights: Mapping[str, np.ndarray]) -> None:
        super().publish(version, weights)
        with self._published:
            self._published.notify_all()

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    def wait_for_version(self, above: Callable[[], int], what: str) -> None:
        """Until a version newer than `above()` is published (bounded)."""
        with self._published:
            newer = self._published.wait_for(lambda: self.version > above(), timeout=JOIN_S)
        assert newer, f"{what}: no parameters newer than {above()} in {JOIN_S} s:\n{stacks()}"


class PacedTrainer(CountingTrainer):
    """The counting trainer, each step taking a millisecond out of the interpreter lock (what
    SAC's tensor operations do): the learner's loop leaves the other threads their turn."""

    def update(self, batches: Iterator[TransitionBatch]) -> dict[str, float]:
        time.sleep(0.001)
        return super().update(batches)


class PacedTrainerFactory(CountingTrainerFactory):
    def create(self, hello: ActorHello | None) -> CountingTrainer:
        counting = super().create(hello)
        paced = PacedTrainer(counting.description)
        self.created[-1] = paced
        return paced


class DyingLine(LineInteraction):
    """A robot whose bus is lost at its `dies_at`-th step: the actor's process ends there
    (`on_death` runs first)."""

    def __init__(self, dies_at: int, on_death: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dies_at = dies_at
        self.on_death = on_death
        self.steps = 0

    def step(self, action: np.ndarray) -> InteractionStep:
        self.steps += 1
        if self.steps == self.dies_at:
            self.on_death()
            raise RuntimeError("the motor bus is gone")
        return super().step(action)


class WaitingLine(LineInteraction):
    """A robot whose episodes start only once their wait has returned (`before`: episode
    number to a wait, bounded, that asserts what it waited for)."""

    def __init__(self, before: dict[int, Callable[[], None]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.before = before
        self.episodes = 0

    def reset(self) -> Any:
        self.episodes += 1
        wait = self.before.get(self.episodes)
        if wait is not None:
            wait()
        return super().reset()


def waited(event: threading.Event, what: str) -> None:
    assert event.wait(JOIN_S), f"{what}: not within {JOIN_S} s:\n{stacks()}"


def in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(target())
        except BaseException as err:  # the test reads it
            out.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def joined(thread: threading.Thread, out: list[Any]) -> Any:
    thread.join(timeout=JOIN_S)
    assert not thread.is_alive(), f"a thread did not finish in time:\n{stacks()}"
    return out[0]


def stacks() -> str:
    """Where every thread of this process is: what a wait that timed out says."""
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(
        f"--- {names.get(ident, ident)}\n{''.join(traceback.format_stack(frame))}"
        for ident, frame in sys._current_frames().items()
    )


def actor(
    address: str, world: LineInteraction, policy: ConstantActingPolicy, **settings: Any
) -> Callable[[], ActResult]:
    link = GrpcLearnerLink(address, token=TOKEN, timeout_s=10)
    use_case = ActWithPolicy(
        link,
        ConstantActingPolicyFactory(policy),
        world,
        EnvReward(),
        NoIntervention(),
        SystemClock(),
    )

    def run() -> ActResult:
        try:
            return use_case(ActSettings(retry_s=0.02, **settings))
        finally:
            link.close()

    return run


@pytest.fixture
def server() -> Iterator[GrpcPolicyServer]:
    server = GrpcPolicyServer(port=0, token=TOKEN, max_message_bytes=1 << 20)
    yield server
    server.stop()


def test_two_actors_feed_one_learner_and_one_dying_stops_neither(
    server: GrpcPolicyServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    endpoint = RecordingEndpoint(server)
    trainers = PacedTrainerFactory()
    store = InMemoryReplayStore()
    learner = LearnWithSAC(endpoint, trainers, store, SystemClock())
    stop = threading.Event()
    request.addfinalizer(stop.set)  # a failed test leaves no learner spinning behind it
    ready: list[str] = []
    listening = threading.Event()
    settings = LearnSettings(
        output_dir=tmp_path,
        batch_size=4,
        online_step_before_learning=4,
        push_every_s=0.02,
        save_freq=10**9,
        steps=10**9,
        # Past every wait of this test: a wait that times out shows every thread's stack while
        # the learner still runs.
        max_seconds=3 * JOIN_S,
        log_every=10**9,
    )

    def on_ready(address: str) -> None:
        ready.append(address)
        listening.set()

    learning, learned = in_thread(lambda: learner(settings, on_ready=on_ready, stop=stop))
    assert listening.wait(JOIN_S), learned
    address = ready[0]

    died = threading.Event()
    at_death: list[int] = []

    def on_death() -> None:
        at_death.append(endpoint.version)
        died.set()

    # Positions tell the actors' transitions apart: one starts at 10, the other at -10. The
    # survivor's third episode starts after the death, its fifth once the learner has published
    # parameters since.
    dying = DyingLine(dies_at=7, on_death=on_death, length=3, start=10.0)
    surviving = WaitingLine(
        {
            3: lambda: waited(died, "the other actor's death"),
            5: lambda: endpoint.wait_for_version(lambda: at_death[0], "after the death"),
        },
        length=3,
        start=-10.0,
    )
    dying_policy, surviving_policy = ConstantActingPolicy(0.5), ConstantActingPolicy(-0.5)
    a, a_out = in_thread(actor(address, dying, dying_policy, episodes=5))
    b, b_out = in_thread(actor(address, surviving, surviving_policy, episodes=6))

    failure = joined(a, a_out)
    assert isinstance(failure, RuntimeError) and "motor bus" in str(failure)
    survived = joined(b, b_out)
    assert isinstance(survived, ActResult), survived
    assert (survived.steps, survived.episodes) == (18, 6)
    # The learner went on after the death: it is still running, and the survivor got newer
    # parameters than the learner had published when the other actor died.
    assert learning.is_alive()
    stop.set()
    result = joined(learning, learned)
    assert isinstance(result, LearnResult), result
    assert len(trainers.created) == 1  # the second hello found the policy built

    versions = [float(w["policy.step"][0]) + 1 for w in surviving_policy.loaded]
    # How many versions an actor sees depends on the learner's pace; the last one is newer than
    # the death (its fifth episode waited for that).
    assert versions == sorted(versions) and len(versions) >= 1
    assert versions[-1] > at_death[0] >= 1
    assert survived.parameters_version > at_death[0]
    assert dying_policy.loaded, "the actor that died had parameters too"

    # Every transition pushed landed in the replay: the dying actor's two whole episodes (its
    # third was cut at the bus loss), all of the survivor's.
    batches = [p.batch for p in endpoint.taken if p.batch is not None]
    starts = np.concatenate([b.state["observation.state"][:, 0] for b in batches])
    from_dying = int((starts > 5).sum())
    from_surviving = int((starts < -5).sum())
    assert (from_dying, from_surviving) == (6, 18)
    assert result.online_transitions == 24 and result.interaction_step == 24
    # Stopped with transitions no checkpoint held: they were saved on the way out.
    assert result.checkpoint is not None
    assert len(store.saved[result.checkpoint / "replay"]["reward"]) == 24
    assert sum(1 for p in endpoint.taken if p.report is not None) == 2 + 6


def transitions(n: int) -> Any:
    return stack(
        [
            RLTransition(
                state={"observation.state": np.full(1, i, dtype=np.float32)},
                action=np.array([0.1], dtype=np.float32),
                reward=0.0,
                next_state={"observation.state": np.full(1, i + 1, dtype=np.float32)},
                done=False,
                truncated=i == n - 1,
            )
            for i in range(n)
        ]
    )


def started(endpoint: GrpcLearnerEndpoint) -> str:
    return endpoint.start(lambda hello: _description(), lambda batch: None)


def _description() -> Any:
    from rlctl.application.ports.reinforcement import LearnerDescription
    from rlctl.domain.features import typed_feature
    from rlctl.domain.policies.gaussian_actor import GaussianActorConfig

    config = GaussianActorConfig(
        input_features={"observation.state": typed_feature("STATE", (1,))},
        output_features={"action": typed_feature("ACTION", (1,))},
    )
    return LearnerDescription(config, {})


def test_a_full_queue_is_refused_resource_exhausted_and_busy(server: GrpcPolicyServer) -> None:
    endpoint = GrpcLearnerEndpoint(server, max_queued=1)
    address = started(endpoint)
    link = GrpcLearnerLink(address, token=TOKEN, timeout_s=5)
    link.describe(ActorHello(LineInteraction().features))
    link.push(transitions(2), None)
    with pytest.raises(LearnerBusy, match=r"RESOURCE_EXHAUSTED.*queue is full"):
        link.push(transitions(3), None)
    # On the wire: gRPC's RESOURCE_EXHAUSTED with the busy mark a client backs off on.
    channel = grpc.insecure_channel(address)
    push = channel.unary_unary(f"/{SERVICE}/PushTransitions")
    with pytest.raises(grpc.RpcError) as err:
        push(
            rl_wire.encode_push(transitions(3), None),
            timeout=5,
            metadata=(("authorization", f"Bearer {TOKEN}"),),
        )
    assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert dict(err.value.trailing_metadata() or ())[REFUSAL_KEY] == BUSY
    channel.close()
    # The refused pushes were not queued: only the first is there.
    (queued,) = endpoint.take()
    assert queued.batch is not None and len(queued.batch) == 2
    link.close()
    endpoint.stop()


def test_an_actor_refused_busy_backs_off_and_loses_nothing(server: GrpcPolicyServer) -> None:
    endpoint = GrpcLearnerEndpoint(server, max_queued=1)
    address = started(endpoint)
    world = LineInteraction(length=4)
    run = actor(address, world, ConstantActingPolicy(0.5), episodes=3, push_every=2)
    acting, acted = in_thread(run)
    # The learner's loop is late: nothing is taken until the actor has held a while.
    deadline = time.monotonic() + JOIN_S
    while world.holds < 3:
        assert time.monotonic() < deadline and acting.is_alive(), acted
        time.sleep(0.01)
    received: list[Pushed] = []
    while acting.is_alive() and time.monotonic() < deadline:
        received.extend(endpoint.take())
        time.sleep(0.05)
    result = joined(acting, acted)
    received.extend(endpoint.take())
    assert isinstance(result, ActResult), result
    assert result.reconnections >= 1
    pushed = sum(len(p.batch) for p in received if p.batch is not None)
    assert pushed == result.steps == 12
    assert sum(1 for p in received if p.report is not None) == 3
    endpoint.stop()


def test_an_actor_gives_up_on_a_learner_busy_too_long_and_says_what_is_lost(
    server: GrpcPolicyServer,
) -> None:
    endpoint = GrpcLearnerEndpoint(server, max_queued=1)
    address = started(endpoint)
    link = GrpcLearnerLink(address, token=TOKEN, timeout_s=5)
    link.push(transitions(1), None)  # the queue is full and nobody takes from it
    link.close()
    world = LineInteraction(length=3)
    run = actor(
        address, world, ConstantActingPolicy(0.5), episodes=1, reconnect_timeout_s=0.5,
        max_backoff_s=0.1,
    )  # fmt: skip
    acting, acted = in_thread(run)
    failure = joined(acting, acted)
    assert isinstance(failure, HardwareError), failure
    assert "busy" in failure.message and "3 transitions" in failure.message
    assert "not delivered" in failure.message
    assert world.holds >= 3
    endpoint.stop()


def stalled_calls(address: str, n: int) -> tuple[grpc.Channel, list[Any], threading.Event]:
    """`n` pushes from this host that send their headers and never their message: what an
    actor leaves behind when its link drops mid-send, or its process freezes."""
    channel = grpc.insecure_channel(address)
    push = channel.stream_unary(f"/{SERVICE}/PushTransitions")
    never = threading.Event()

    def no_message() -> Iterator[bytes]:
        never.wait(JOIN_S)
        yield b""

    metadata = (("authorization", f"Bearer {TOKEN}"),)
    calls = [push.future(no_message(), timeout=JOIN_S, metadata=metadata) for _ in range(n)]
    return channel, calls, never


def test_calls_stalled_before_their_message_free_their_slots_and_the_other_actors_go_on() -> None:
    # Both on 127.0.0.1: every actor of one robot computer shares its host's admission slots.
    server = GrpcPolicyServer(
        port=0, token=TOKEN, max_message_bytes=1 << 20, workers=8, message_timeout_s=0.5
    )
    endpoint = GrpcLearnerEndpoint(server)
    address = started(endpoint)
    channel, calls, never = stalled_calls(address, 4)
    try:
        deadline = time.monotonic() + JOIN_S
        while server.in_flight < 4:  # the four hold the host's slots (max_per_peer = 4)...
            assert time.monotonic() < deadline, server.in_flight
            time.sleep(0.01)
        # ... until their message is overdue: then they are cut off, and an actor of the same
        # host, refused busy meanwhile, delivers everything.
        world = LineInteraction(length=3)
        run = actor(
            address, world, ConstantActingPolicy(0.5), episodes=2, reconnect_timeout_s=20,
            max_backoff_s=0.1,
        )  # fmt: skip
        acting, acted = in_thread(run)
        received: list[Pushed] = []
        while acting.is_alive() and time.monotonic() < deadline:
            received.extend(endpoint.take())
            time.sleep(0.02)
        result = joined(acting, acted)
        received.extend(endpoint.take())
        assert isinstance(result, ActResult), result
        assert sum(len(p.batch) for p in received if p.batch is not None) == 6
        for call in calls:
            assert call.exception(timeout=JOIN_S).code() is grpc.StatusCode.CANCELLED
        assert server.in_flight == 0
    finally:
        never.set()
        channel.close()
        endpoint.stop()
