"""HIL-SERL's actor and learner as use cases over in-memory ports: transitions stream with their
interventions tagged, the actor holds and reconnects when the learner goes away, the learner
mixes, publishes, checkpoints, and resumes from its last checkpoint and replay."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import attrs
import numpy as np
import pytest

from rlctl.adapters.clock.system import SystemClock
from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.reinforcement import (
    ConstantActingPolicy,
    ConstantActingPolicyFactory,
    CountingTrainer,
    CountingTrainerFactory,
    InMemoryLearnerWire,
    InMemoryReplayStore,
    LineInteraction,
    ScriptedIntervention,
)
from rlctl.adapters.rl.reward import EnvReward, NoIntervention
from rlctl.application.ports.reinforcement import (
    ActorHello,
    InteractionStep,
    LearnerBusy,
    LearnerDescription,
    Pushed,
)
from rlctl.application.use_cases.rl_act import ActSettings, ActWithPolicy, check_act_settings
from rlctl.application.use_cases.rl_learn import LearnSettings, LearnWithSAC, _absorb
from rlctl.domain.errors import ConfigError, HardwareError, InvalidInput
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
from rlctl.domain.rl.replay import Replay, ReplayBuffer, RLTransition, TransitionBatch, stack


def description() -> LearnerDescription:
    config = GaussianActorConfig(
        input_features={"observation.state": typed_feature("STATE", (1,))},
        output_features={"action": typed_feature("ACTION", (1,))},
    )
    return LearnerDescription(config, {})


def fake_learner(wire: InMemoryLearnerWire) -> None:
    wire.endpoint.start(lambda hello: description(), lambda batch: None)


def actor(
    wire: InMemoryLearnerWire,
    world: LineInteraction,
    intervention: ScriptedIntervention | None = None,
    clock: ManualClock | None = None,
    policy: ConstantActingPolicy | None = None,
) -> ActWithPolicy:
    return ActWithPolicy(
        wire.link,
        ConstantActingPolicyFactory(policy or ConstantActingPolicy(0.5)),
        world,
        EnvReward(),
        intervention or NoIntervention(),
        clock or ManualClock(),
    )


def test_transitions_stream_with_interventions_tagged_and_executed() -> None:
    wire = InMemoryLearnerWire()
    fake_learner(wire)
    world = LineInteraction(length=5, start=1.25)
    result = actor(wire, world, ScriptedIntervention({1, 2}, action=-1.0))(ActSettings(episodes=3))
    assert (result.steps, result.episodes, result.interventions) == (15, 3, 6)
    batches = [p.batch for p in wire.link.pushed if p.batch is not None]
    reports = [p.report for p in wire.link.pushed if p.report is not None]
    assert len(batches) == 3 and len(reports) == 3
    first = batches[0]
    np.testing.assert_array_equal(first.is_intervention, [False, True, True, False, False])
    # What was executed (the person's action) is what the learner learns from.
    np.testing.assert_array_equal(first.action[:, 0], [0.5, -1.0, -1.0, 0.5, 0.5])
    np.testing.assert_allclose(
        first.state["observation.state"][:, 0], [1.25, 1.75, 0.75, -0.25, 0.25]
    )
    np.testing.assert_allclose(
        first.next_state["observation.state"][:, 0], [1.75, 0.75, -0.25, 0.25, 0.75]
    )
    assert first.truncated[-1] == 1 and not first.done.any()
    assert reports[0]["Intervention rate"] == pytest.approx(0.4)
    assert reports[-1]["Interaction step"] == 15
    assert world.closed


def test_new_parameters_are_loaded_at_episode_ends() -> None:
    wire = InMemoryLearnerWire()
    fake_learner(wire)
    policy = ConstantActingPolicy(0.0)
    wire.endpoint.publish(3, {"policy.w": np.ones(1, dtype=np.float32)})
    result = actor(wire, LineInteraction(length=2), policy=policy)(ActSettings(episodes=2))
    assert result.parameters_version == 3
    assert len(policy.loaded) == 1  # once: the version did not change afterwards


def test_an_actor_that_loses_the_learner_holds_and_reconnects_without_losing_data() -> None:
    wire = InMemoryLearnerWire()
    fake_learner(wire)
    clock = ManualClock()
    world = LineInteraction(length=4)
    use_case = actor(wire, world, clock=clock)
    wire.down = True
    clock.on_time(3.0, lambda: setattr(wire, "down", False))
    result = use_case(ActSettings(episodes=2, retry_s=0.5))
    assert result.reconnections == 1
    assert world.holds >= 5  # held every retry while away
    pushed = sum(len(p.batch) for p in wire.link.pushed if p.batch is not None)
    assert pushed == 8


def test_an_actor_gives_up_after_the_reconnect_timeout_with_the_arm_held() -> None:
    wire = InMemoryLearnerWire()
    fake_learner(wire)
    wire.down = True
    world = LineInteraction()
    with pytest.raises(HardwareError, match="unreachable") as err:
        actor(wire, world)(ActSettings(episodes=1, reconnect_timeout_s=5, retry_s=1))
    assert "rlctl rl learn" in (err.value.hint or "")
    assert world.holds >= 4


def test_an_actor_done_with_its_budget_does_not_wait_on_a_finished_learner() -> None:
    wire = InMemoryLearnerWire()
    fake_learner(wire)
    world = LineInteraction(length=3)
    original = wire.link.push

    def push_then_finish(batch, report):  # type: ignore[no-untyped-def]
        version = original(batch, report)
        if len(wire.link.pushed) == 2:
            wire.down = True  # the learner has both episodes and stops
        return version

    wire.link.push = push_then_finish  # type: ignore[method-assign]
    # Were the last episode's push followed by a fetch, the actor would hold until its timeout.
    result = actor(wire, world)(ActSettings(episodes=2, reconnect_timeout_s=5, retry_s=1))
    assert (result.steps, result.episodes, result.reconnections) == (6, 2, 0)
    assert world.holds == 0
    assert sum(len(p.batch) for p in wire.link.pushed if p.batch is not None) == 6


def test_an_actor_needs_a_budget() -> None:
    with pytest.raises(ConfigError, match="budget"):
        actor(InMemoryLearnerWire(), LineInteraction())(ActSettings())


def run_learner(use_case: LearnWithSAC, settings: LearnSettings) -> tuple[threading.Thread, list]:
    out: list = []

    def run() -> None:
        out.append(use_case(settings))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def demonstration(n: int) -> RLTransition:
    return RLTransition(
        state={"observation.state": np.array([100.0 + n], dtype=np.float32)},
        action=np.array([0.0], dtype=np.float32),
        reward=1.0,
        next_state={"observation.state": np.array([100.0 + n], dtype=np.float32)},
        done=True,
        truncated=True,
    )


def test_learner_trains_publishes_checkpoints_and_resumes(tmp_path: Path) -> None:
    wire = InMemoryLearnerWire()
    trainers = CountingTrainerFactory()
    store = InMemoryReplayStore()
    demos = stack([demonstration(i) for i in range(4)])
    learner = LearnWithSAC(wire.endpoint, trainers, store, SystemClock(), demos)
    settings = LearnSettings(
        output_dir=tmp_path,
        batch_size=8,
        online_step_before_learning=10,
        save_freq=5,
        steps=20,
        push_every_s=0.0,
        max_seconds=30,
    )
    thread, out = run_learner(learner, settings)
    wait_for(lambda: wire.endpoint.describe is not None)
    result = actor(wire, LineInteraction(length=5, start=1.25), ScriptedIntervention({0}))(
        ActSettings(episodes=3)
    )
    assert result.steps == 15
    thread.join(timeout=30)
    assert not thread.is_alive()
    learned = out[0]
    assert learned.optimization_step == 20
    assert (learned.online_transitions, learned.offline_transitions) == (15, 4 + 3)
    assert learned.episodes == 3 and learned.interaction_step == 15
    assert wire.endpoint.version >= 1 and wire.endpoint.weights is not None
    # Batches mixed half and half once demonstrations are there.
    assert trainers.created[0].batches_seen[-1] == 8
    last = tmp_path / "checkpoints" / "last"
    assert last.resolve().name == "000020"
    assert wire.endpoint.stopped

    # A restart resumes from the last checkpoint and its replay, and goes on.
    wire2 = InMemoryLearnerWire()
    resumed = LearnWithSAC(wire2.endpoint, trainers, store, SystemClock(), demos)
    again = resumed(attrs.evolve(settings, resume=True, steps=26))
    assert again.optimization_step == 26
    assert again.online_transitions == 15 and again.interaction_step == 15


def test_a_new_run_refuses_an_output_folder_holding_one(tmp_path: Path) -> None:
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last").mkdir()
    learner = LearnWithSAC(
        InMemoryLearnerWire().endpoint,
        CountingTrainerFactory(),
        InMemoryReplayStore(),
        ManualClock(),
    )
    with pytest.raises(ConfigError, match="holds a run already") as err:
        learner(LearnSettings(output_dir=tmp_path))
    assert "--resume" in (err.value.hint or "")
    with pytest.raises(ConfigError, match="nothing to resume"):
        learner(LearnSettings(output_dir=tmp_path / "new", resume=True))


def test_learner_refuses_an_actor_whose_features_do_not_fit(tmp_path: Path) -> None:
    wire = InMemoryLearnerWire()
    learner = LearnWithSAC(
        wire.endpoint, CountingTrainerFactory(), InMemoryReplayStore(), ManualClock()
    )
    thread, _ = run_learner(learner, LearnSettings(output_dir=tmp_path, max_seconds=0.5))
    wait_for(lambda: wire.endpoint.describe is not None)
    first = LineInteraction().features
    wire.link.describe(ActorHello(first))
    other = {**first, "observation.state": typed_feature("STATE", (3,), "observation.state")}
    with pytest.raises(InvalidInput, match="shape"):
        wire.link.describe(ActorHello(other))
    wide = stack(
        [
            RLTransition(
                state={"observation.state": np.zeros(1, np.float32)},
                action=np.zeros(2, np.float32),
                reward=0.0,
                next_state={"observation.state": np.zeros(1, np.float32)},
                done=False,
                truncated=False,
            )
        ]
    )
    with pytest.raises(InvalidInput, match="actions of shape"):
        wire.link.push(wide, None)
    thread.join(timeout=10)


class TeleoperatedLine(LineInteraction):
    """A robot whose own teleoperator (gym-hil's keyboard) takes over at tick 1: its step info
    says so and its executed action is the person's."""

    def step(self, action: np.ndarray) -> InteractionStep:
        if self.t == 1:
            result = super().step(np.array([-0.5], dtype=np.float32))
            return attrs.evolve(result, info={**result.info, "is_intervention": True})
        return super().step(action)


def test_an_intervention_the_robot_reports_is_tagged() -> None:
    wire = InMemoryLearnerWire()
    fake_learner(wire)
    result = actor(wire, TeleoperatedLine(length=3, start=2.0))(ActSettings(episodes=1))
    assert result.interventions == 1
    (pushed,) = [p.batch for p in wire.link.pushed if p.batch is not None]
    np.testing.assert_array_equal(pushed.is_intervention, [False, True, False])
    np.testing.assert_array_equal(pushed.action[:, 0], [0.5, -0.5, 0.5])


def test_a_busy_learner_is_asked_again_after_doubling_waits_and_gets_everything() -> None:
    wire = InMemoryLearnerWire()
    fake_learner(wire)
    clock = ManualClock()
    world = LineInteraction(length=3)
    original = wire.link.push
    refusals = iter(range(6))

    def busy_then_take(batch, report):  # type: ignore[no-untyped-def]
        if next(refusals, None) is not None:
            raise LearnerBusy("the learner's queue is full", where="memory")
        return original(batch, report)

    wire.link.push = busy_then_take  # type: ignore[method-assign]
    result = actor(wire, world, clock=clock)(
        ActSettings(episodes=1, retry_s=0.5, max_backoff_s=4.0)
    )
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]  # doubled, then capped
    assert world.holds == 6 and result.reconnections == 1
    assert sum(len(p.batch) for p in wire.link.pushed if p.batch is not None) == 3


@pytest.mark.parametrize(
    ("name", "value"),
    [("max_backoff_s", 0.0), ("max_backoff_s", float("nan")), ("retry_s", -1.0),
     ("reconnect_timeout_s", float("inf"))],
)  # fmt: skip
def test_waits_that_would_hammer_or_never_end_are_refused_before_any_call(
    name: str, value: float
) -> None:
    wire = InMemoryLearnerWire()
    world = LineInteraction(length=3)
    with pytest.raises(ConfigError, match=f"{name} must be a positive number") as err:
        actor(wire, world)(ActSettings(episodes=1, **{name: value}))
    assert err.value.where == f"--{name}"
    assert not wire.link.pushed and world.holds == 0


def one_batch(state: np.ndarray, action: float = 0.5) -> TransitionBatch:
    return stack(
        [
            RLTransition(
                state={"observation.state": state},
                action=np.array([action], np.float32),
                reward=0.0,
                next_state={"observation.state": state},
                done=False,
                truncated=False,
            )
        ]
    )


def test_learner_refuses_pushes_of_other_shapes_dtypes_or_past_the_bounds(
    tmp_path: Path,
) -> None:
    wire = InMemoryLearnerWire()
    learner = LearnWithSAC(
        wire.endpoint, CountingTrainerFactory(), InMemoryReplayStore(), ManualClock()
    )
    thread, _ = run_learner(learner, LearnSettings(output_dir=tmp_path, max_seconds=0.5))
    wait_for(lambda: wire.endpoint.describe is not None)
    world = LineInteraction()
    wire.link.describe(ActorHello(world.features, *world.action_bounds()))
    wire.link.push(one_batch(np.zeros(1, np.float32)), None)  # an honest one
    with pytest.raises(InvalidInput, match="shape"):
        wire.link.push(one_batch(np.zeros(3, np.float32)), None)
    with pytest.raises(InvalidInput, match="float32"):
        wire.link.push(one_batch(np.zeros(1, np.uint8)), None)
    with pytest.raises(InvalidInput, match="outside the robot's bounds"):
        wire.link.push(one_batch(np.zeros(1, np.float32), action=1e30), None)
    # The hello's action is checked too: a robot acting with 2 values, the policy with 1.
    wide = {**world.features, "action": typed_feature("ACTION", (2,), "action")}
    with pytest.raises(InvalidInput, match="acts with shape"):
        wire.link.describe(ActorHello(wide))
    thread.join(timeout=10)


def test_a_push_that_does_not_fit_the_replay_or_reports_odd_keys_never_ends_the_learner() -> None:
    replay = Replay(ReplayBuffer(8))
    replay.add(one_batch(np.zeros(1, np.float32)).transitions())
    pushes = [
        Pushed(one_batch(np.zeros(3, np.float32))),  # past the check, yet not storable
        Pushed(one_batch(np.ones(1, np.float32)), {"event": 1.0, "not an identifier": 2.0}),
    ]
    assert _absorb(pushes, replay) == (1, 1)
    assert len(replay.online) == 2


def test_non_finite_weights_are_never_published(tmp_path: Path) -> None:
    class Poisoned(CountingTrainer):
        def weights(self) -> dict[str, np.ndarray]:
            return {"policy.w": np.array([np.nan], np.float32)}

    wire = InMemoryLearnerWire()
    learner = LearnWithSAC(
        wire.endpoint, CountingTrainerFactory(), InMemoryReplayStore(), ManualClock()
    )
    learner._publish(Poisoned(description()))
    assert wire.endpoint.weights is None and wire.endpoint.version == 0


class NanRewardLine(LineInteraction):
    def step(self, action: np.ndarray) -> InteractionStep:
        result = super().step(action)
        return attrs.evolve(result, reward=float("nan")) if self.t == 3 else result


def test_an_actor_drops_non_finite_transitions_and_goes_on_after_a_refused_push() -> None:
    wire = InMemoryLearnerWire()
    refused = iter([True])

    def check(batch: TransitionBatch) -> None:
        if next(refused, False):
            raise InvalidInput("refused for the test", where="transitions")

    wire.endpoint.start(lambda hello: description(), check)
    world = NanRewardLine(length=5)
    result = actor(wire, world)(ActSettings(episodes=3))
    assert result.episodes == 3 and result.non_finite == 3
    assert result.refused == 4  # the first episode's batch (its NaN transition dropped)
    sent = [p.batch for p in wire.link.pushed if p.batch is not None]
    assert [len(b) for b in sent] == [4, 4]
    assert all(np.isfinite(b.reward).all() for b in sent)


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("seed", -1, "--seed"),
        ("max_seconds", 0.0, "--max_seconds"),
        ("max_seconds", float("nan"), "--max_seconds"),
        ("offline_buffer_capacity", 0, "--policy.offline_buffer_capacity"),
        ("online_buffer_capacity", 0, "--policy.online_buffer_capacity"),
    ],
)
def test_wrong_learner_settings_are_one_clear_error_before_listening(
    tmp_path: Path, field: str, value: float, where: str
) -> None:
    wire = InMemoryLearnerWire()
    learner = LearnWithSAC(
        wire.endpoint, CountingTrainerFactory(), InMemoryReplayStore(), ManualClock()
    )
    settings = attrs.evolve(LearnSettings(output_dir=tmp_path), **{field: value})
    with pytest.raises(ConfigError) as err:
        learner(settings)
    assert err.value.where == where and err.value.hint
    assert wire.endpoint.describe is None  # nothing listened


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("fps", float("nan"), "--fps"),
        ("fps", 0.0, "--fps"),
        ("steps", 0, "--steps"),
        ("episodes", -2, "--episodes"),
        ("push_every", -1, "--push_every"),
    ],
)
def test_wrong_actor_settings_are_refused_before_any_call(
    field: str, value: float, where: str
) -> None:
    wire = InMemoryLearnerWire()
    world = LineInteraction()
    settings = attrs.evolve(ActSettings(episodes=1), **{field: value})
    with pytest.raises(ConfigError) as err:
        check_act_settings(settings)
    assert err.value.where == where
    with pytest.raises(ConfigError):
        actor(wire, world)(settings)
    assert not wire.link.pushed and world.t == 0


def test_a_resumed_replay_that_does_not_fit_the_policy_is_one_error(tmp_path: Path) -> None:
    trainers = CountingTrainerFactory()
    store = InMemoryReplayStore()
    folder = tmp_path / "checkpoints" / "000001"
    trainers.create(ActorHello(LineInteraction().features)).save(folder, 2)
    (tmp_path / "checkpoints" / "last").symlink_to("000001")
    wrong = ReplayBuffer(4)
    wrong.extend(stack([one_batch(np.zeros(3, np.float32)).transitions()[0]] * 2))
    store.saved[tmp_path / "checkpoints" / "last" / "replay"] = wrong.arrays()
    learner = LearnWithSAC(InMemoryLearnerWire().endpoint, trainers, store, ManualClock())
    with pytest.raises(InvalidInput, match="does not fit the resumed policy") as err:
        learner(LearnSettings(output_dir=tmp_path, resume=True, max_seconds=0.1))
    assert err.value.where is not None and err.value.where.endswith("replay")
    assert "earlier checkpoint" in (err.value.hint or "")
