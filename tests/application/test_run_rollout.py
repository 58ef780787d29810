"""RunRollout with in-memory devices, writer, scripted keys and a manual clock: every strategy,
what is stored (the action sent, the intervention tag), hand-overs, uploads, holds, and Ctrl-C."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import NoInterrupts, ScriptedRolloutControls
from rlctl.adapters.memory.dataset_writer import InMemoryDatasetWriter
from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.adapters.memory.robot import ScriptedRobot
from rlctl.adapters.memory.teleoperator import ScriptedLeaderArm, ScriptedTeleoperator
from rlctl.application.acting_engine import AsyncActing, LocalChunks
from rlctl.application.ports.control import RolloutEvent
from rlctl.application.use_cases.record_episodes import DatasetTarget
from rlctl.application.use_cases.run_rollout import RolloutSettings, RunRollout
from rlctl.application.use_cases.serve_policy import PolicyService
from rlctl.domain.errors import ConfigError, HardwareError
from rlctl.domain.policies.rtc import RTCConfig
from rlctl.domain.remote_inference import RemotePolicySettings
from rlctl.domain.rollout import (
    BaseStrategyConfig,
    DAggerStrategyConfig,
    EpisodicStrategyConfig,
    HighlightStrategyConfig,
    SentryStrategyConfig,
)

ROOT = Path("/memory/rollout")
FPS = 10
E = RolloutEvent
DIM = 4


def counting_policy(value: float = 1.0, chunk: int = 5) -> ScriptedPolicy:
    """Chunks of `value, value + 1, ...` per step: where one chunk hands over shows."""

    def chunker(batch):
        steps = np.arange(chunk, dtype=np.float32)[None, :, None] + value
        return np.repeat(steps, DIM, axis=2)

    return ScriptedPolicy(DIM, chunk_size=chunk, chunker=chunker)


def rollout(
    strategy,
    *,
    keys=None,
    policy=None,
    teleop=None,
    robot=None,
    writer=None,
    record=True,
    upload=None,
    interrupts=None,
    **settings,
):
    writer = writer if writer is not None else InMemoryDatasetWriter()
    robot = robot or ScriptedRobot()
    controls = ScriptedRolloutControls(keys or {})
    use_case = RunRollout(
        robot,
        ManualClock(),
        policy=policy or counting_policy(),
        teleop=teleop,
        writer=writer,
        controls=controls,
        upload=upload,
        interrupts=interrupts,
    )
    settings.setdefault("fps", FPS)
    settings.setdefault("task", "pick")
    target = DatasetTarget(root=ROOT) if record else None
    report = use_case(strategy, RolloutSettings(**settings), target)
    return report, writer, robot, controls


def actions(writer, episode):
    return np.stack([f.values["action"] for f in writer.datasets[ROOT].frames[episode]])


def test_base_acts_for_the_duration_records_nothing_and_goes_back_to_the_start():
    report, writer, robot, controls = rollout(BaseStrategyConfig(), record=False, duration_s=2)
    assert report.ticks == report.policy_ticks + 30  # 20 ticks acting, 3 s back to the start
    assert report.policy_ticks == 20 and report.held_ticks == 0
    assert ROOT not in writer.datasets and controls.closed
    # The policy's chunks reached the arm (1..5 each chunk), and it ended where it started.
    assert [float(a[0]) for a in robot.sent[:6]] == [1, 2, 3, 4, 5, 1]
    assert np.allclose(robot.sent[-1], 0.0)
    assert report.timing.ticks == report.ticks and report.timing.late_ticks == 0


def test_base_refuses_a_dataset_and_recording_strategies_need_one():
    with pytest.raises(ConfigError, match="records nothing"):
        rollout(BaseStrategyConfig(), duration_s=1)
    with pytest.raises(ConfigError, match="records a dataset"):
        rollout(SentryStrategyConfig(), record=False, duration_s=1)
    with pytest.raises(ConfigError, match="needs a teleoperator"):
        rollout(DAggerStrategyConfig(), duration_s=1)


def test_sentry_records_every_tick_cut_into_episodes_and_uploads_every_n():
    uploads = []
    report, writer, robot, _ = rollout(
        SentryStrategyConfig(episode_time_s=1.0, upload_every_n_episodes=2),
        upload=lambda root: uploads.append(root),
        duration_s=4.5,
        return_to_initial_position=False,
    )
    dataset = writer.datasets[ROOT]
    # 45 ticks: episodes of 10 (one that ends while an upload is still running is saved when
    # the upload is over, a tick or two longer), and the ticks under way at the end kept too.
    lengths = [e.length for e in dataset.episodes]
    assert lengths[:2] == [10, 10] and sum(lengths) == 45 and len(lengths) == 5
    assert all(length >= 10 for length in lengths[:4])
    assert report.saved_episodes == (0, 1, 2, 3, 4) and report.frames == 45
    assert len(uploads) == 2 and report.uploads == 2
    # What is stored is what the robot was sent (after its guard), tick for tick.
    stored = np.concatenate([actions(writer, i) for i in range(5)])
    assert np.array_equal(stored, np.stack(robot.sent))
    assert dataset.frames[0][0].task == "pick"


def test_an_episode_ending_during_an_upload_is_saved_after_it_and_the_loop_goes_on():
    release = threading.Event()
    started = threading.Event()

    def slow_upload(root):
        started.set()
        assert release.wait(5)

    keys = {12: {E.UPLOAD}}
    clock_ticks = []

    class Robot(ScriptedRobot):
        def get_observation(self):
            clock_ticks.append(len(clock_ticks))
            if len(clock_ticks) == 25:  # the upload stays busy past the rotation at tick 20
                assert started.wait(5)
            if len(clock_ticks) == 32:
                release.set()
            return super().get_observation()

    report, writer, _, _ = rollout(
        SentryStrategyConfig(episode_time_s=1.0, upload_every_n_episodes=100),
        keys=keys,
        upload=slow_upload,
        robot=Robot(),
        duration_s=4,
        return_to_initial_position=False,
    )
    lengths = [e.length for e in writer.datasets[ROOT].episodes]
    # The second episode reached its 10 ticks at tick 20 with the upload busy: it is saved once
    # the upload is over (released at tick 31; its thread ends a moment later, before the end
    # or not), with every tick acted meanwhile; what follows is a third episode, if any.
    assert lengths[0] == 10 and lengths[1] >= 21 and sum(lengths) == 40
    assert len(lengths) in (2, 3)
    assert report.uploads == 1


def test_highlight_stores_the_last_seconds_on_save_and_records_until_save_again():
    strategy = HighlightStrategyConfig(ring_buffer_seconds=1.0)
    _report, writer, robot, _ = rollout(
        strategy,
        keys={25: {E.SAVE}, 30: {E.SAVE}, 50: {E.SAVE}},
        duration_s=6,
        return_to_initial_position=False,
    )
    dataset = writer.datasets[ROOT]
    # First save: the ring's 10 newest frames (ticks 15-24), then live until the next save.
    # The third press starts a second live episode, kept at the end (ticks 40-59 of 60).
    assert [e.length for e in dataset.episodes] == [15, 20]
    assert np.array_equal(actions(writer, 0), np.stack(robot.sent[15:30]))
    assert np.array_equal(actions(writer, 1)[-1], robot.sent[-1])


def test_the_ring_buffer_keeps_within_its_memory_bound():
    strategy = HighlightStrategyConfig(ring_buffer_seconds=100.0, ring_buffer_max_memory_mb=1)
    frame_bytes = DIM * 4 * 2 + len("pick")
    _report, writer, _, _ = rollout(
        strategy, keys={3000: {E.SAVE}}, duration_s=301, return_to_initial_position=False
    )
    stored = writer.datasets[ROOT].episodes[0].length
    assert stored - 10 <= (1 << 20) // frame_bytes  # the bound, then the 10 live ticks


def test_dagger_records_only_corrections_tagged_as_interventions():
    teleop = ScriptedTeleoperator(script=lambda t: [100.0 + t] * DIM)
    keys = {
        10: {E.CORRECTION},  # ignored: the policy drives, pause first
        12: {E.PAUSE_RESUME},
        15: {E.CORRECTION},  # a correction of 10 ticks
        25: {E.CORRECTION},
        27: {E.PAUSE_RESUME},
        40: {E.PAUSE_RESUME},
        42: {E.CORRECTION},  # a second correction, cut by the end of the rollout
    }
    report, writer, robot, _ = rollout(
        DAggerStrategyConfig(num_episodes=5, smooth_handover=False),
        keys=keys,
        teleop=teleop,
        duration_s=5,
        return_to_initial_position=False,
    )
    dataset = writer.datasets[ROOT]
    assert dataset.features["intervention"].dtype == "bool"
    assert dataset.features["intervention"].shape == (1,)
    assert [e.length for e in dataset.episodes] == [10, 8]
    tags = [f.values["intervention"] for ep in dataset.frames for f in ep]
    assert all(t.dtype == bool and t.shape == (1,) and bool(t[0]) for t in tags)
    # The correction's actions are the teleoperator's, as sent.
    first = actions(writer, 0)
    assert np.array_equal(first, np.stack(robot.sent[15:25])) and first[0, 0] >= 100
    assert report.interventions == ((15, 24), (42, 49))
    # While paused the arm held the last command.
    assert np.array_equal(robot.sent[13], robot.sent[12])


def test_dagger_with_record_autonomous_tags_every_frame():
    teleop = ScriptedTeleoperator(script=lambda t: [50.0] * DIM)
    keys = {5: {E.PAUSE_RESUME}, 6: {E.CORRECTION}, 12: {E.CORRECTION}, 13: {E.PAUSE_RESUME}}
    report, writer, _, _ = rollout(
        DAggerStrategyConfig(record_autonomous=True, episode_time_s=1.0, smooth_handover=False),
        keys=keys,
        teleop=teleop,
        duration_s=3,
        return_to_initial_position=False,
    )
    frames = [f for ep in writer.datasets[ROOT].frames for f in ep]
    tags = [bool(f.values["intervention"][0]) for f in frames]
    # Paused ticks (5 and 12) hold the arm and are not stored; the others are, tagged.
    assert len(frames) == 28 and tags.count(True) == 6
    assert report.human_ticks == 6 and report.policy_ticks == 22


def test_an_actuated_leader_is_brought_to_the_follower_before_a_person_takes_over():
    leader = ScriptedLeaderArm(script=lambda t: [0.5 * t] * DIM)
    keys = {8: {E.PAUSE_RESUME}, 9: {E.CORRECTION}, 20: {E.CORRECTION}, 21: {E.PAUSE_RESUME}}
    _report, writer, robot, _ = rollout(
        DAggerStrategyConfig(num_episodes=3),
        keys=keys,
        teleop=leader,
        duration_s=6,
        leader_handover_s=1.0,
        return_to_initial_position=False,
    )
    held = robot.sent[7]
    # The leader went to the follower's last command in even steps, torque on, then let go.
    assert np.allclose(leader.feedback[-1], held) and len(leader.feedback) == FPS
    steps = np.diff(np.stack([np.zeros(DIM), *leader.feedback]), axis=0)
    assert np.allclose(steps, steps[0])
    assert leader.torque_changes[:2] == [True, False]
    # The follower held meanwhile, and the correction started where the follower was.
    assert all(np.array_equal(a, held) for a in robot.sent[8:18])
    first_correction = actions(writer, 0)[0]
    assert np.abs(first_correction - held).max() <= 0.5 + 1e-6


def test_a_follower_slides_to_a_leader_that_cannot_be_driven():
    teleop = ScriptedTeleoperator(script=lambda t: [40.0] * DIM)
    keys = {8: {E.PAUSE_RESUME}, 9: {E.CORRECTION}}
    _report, _, robot, _ = rollout(
        DAggerStrategyConfig(num_episodes=3),
        keys=keys,
        teleop=teleop,
        duration_s=4,
        return_to_initial_position=False,
    )
    slide = np.stack(robot.sent[9:19])[:, 0]
    assert np.all(np.diff(slide) > 0) and slide[-1] == pytest.approx(40.0)
    assert np.abs(np.diff(slide)).max() < 5.0  # no jump to the leader


def test_episodic_records_episodes_with_resets_rerecord_and_stop():
    teleop = ScriptedTeleoperator()
    keys = {3: {E.NEXT}, 8: {E.RERECORD}, 27: {E.STOP}}
    report, writer, _, _ = rollout(
        EpisodicStrategyConfig(smooth_handover=False),
        keys=keys,
        teleop=teleop,
        num_episodes=3,
        episode_time_s=1.0,
        reset_time_s=0.5,
        return_to_initial_position=False,
    )
    lengths = [e.length for e in writer.datasets[ROOT].episodes]
    # Episode 0 ended by NEXT after 3 ticks; its reset cut by RERECORD drops it; then 10 kept;
    # STOP during the next episode keeps what was recorded of it.
    assert lengths == [10, 3] and report.stopped


def test_a_diverging_policy_never_moves_the_arm_and_the_nan_is_not_stored():
    def chunker(batch):
        return np.full((1, 5, DIM), np.nan, np.float32)

    _report, writer, robot, _ = rollout(
        SentryStrategyConfig(episode_time_s=10.0),
        policy=ScriptedPolicy(DIM, chunk_size=5, chunker=chunker),
        duration_s=1,
    )
    stored = actions(writer, 0)
    assert np.isfinite(stored).all() and np.allclose(stored, 0.0)
    assert robot.held >= 10


def test_ctrl_c_keeps_the_episode_under_way_and_lets_go_of_the_devices():
    robot = ScriptedRobot(fail_at={25: KeyboardInterrupt()})
    interrupts = NoInterrupts()
    report, writer, robot, controls = rollout(
        SentryStrategyConfig(episode_time_s=1.0),
        robot=robot,
        interrupts=interrupts,
        return_to_initial_position=False,
    )
    # Observation 1 is the starting position; ticks 2-24 are 23 frames: two episodes and 3.
    assert report.interrupted and [e.length for e in writer.datasets[ROOT].episodes] == [10, 10, 3]
    assert interrupts.saves >= 2 and not robot.is_connected and controls.closed


def test_a_crash_keeps_the_saved_episodes_and_the_one_under_way():
    robot = ScriptedRobot(fail_at={25: HardwareError("the bus went away", where="bus")})
    writer = InMemoryDatasetWriter()
    with pytest.raises(HardwareError, match="went away"):
        rollout(SentryStrategyConfig(episode_time_s=1.0), robot=robot, writer=writer)
    assert [e.length for e in writer.datasets[ROOT].episodes] == [10, 10, 3]
    assert not robot.is_connected


# --- the acting engine with a model in this process ----------------------------------------


class GatedPolicy(ScriptedPolicy):
    """A model that computes only when its gate is open: a slow model, without sleeping."""

    def __init__(self, *args, fail: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.gate.set()
        self.fail = fail

    def predict_chunk(self, observation, noise=None, *, committed=None):
        assert self.gate.wait(10)
        if self.fail:
            self.fail -= 1
            raise RuntimeError("CUDA out of memory")
        return super().predict_chunk(observation, noise, committed=committed)


def local_engine(policy, **settings):
    return AsyncActing(
        LocalChunks(PolicyService({"local": policy})),
        RemotePolicySettings(**settings),
        label="policy",
    )


def test_the_async_engine_holds_while_a_slow_model_computes_and_reports_it():
    model = GatedPolicy(DIM, chunk_size=10, chunker=lambda b: np.ones((1, 10, DIM), np.float32))
    engine = local_engine(model, chunk_size_threshold=0.5)
    batch = {"observation.state": np.zeros((1, DIM), np.float32), "task": ["pick"]}
    try:
        first = engine.select_action(batch)  # the first chunk is waited for: nothing to hold
        assert np.allclose(first, 1.0)
        model.gate.clear()  # the model is now slow
        actions = [engine.select_action(batch) for _ in range(20)]
        # The queue (9 more) ran out and the tick held the last command, without waiting.
        assert engine.held_ticks == 11 and engine.stalls == 1 and engine.last_tick_held
        assert all(np.allclose(a, 1.0) for a in actions)
        model.gate.set()
    finally:
        engine.close()


def test_a_failing_model_holds_then_stops_with_its_error():
    model = GatedPolicy(DIM, chunk_size=4, fail=0)
    engine = local_engine(model, chunk_size_threshold=0.5)
    batch = {"observation.state": np.zeros((1, DIM), np.float32), "task": [""]}
    try:
        engine.select_action(batch)
        model.fail = 10
        with pytest.raises(HardwareError, match=r"failed 3 chunks in a row.*CUDA out of memory"):
            for _ in range(200):
                engine.select_action(batch)
                threading.Event().wait(0.002)
        assert engine.held_ticks > 0 and engine.failures >= 3
    finally:
        engine.close()


def test_rtc_sends_the_model_the_actions_still_queued():
    model = GatedPolicy(DIM, chunk_size=10)
    engine = AsyncActing(
        LocalChunks(PolicyService({"local": model})),
        RemotePolicySettings(rtc_config=RTCConfig(execution_horizon=5)),
        label="policy",
        queue_threshold=4,
    )
    batch = {"observation.state": np.zeros((1, DIM), np.float32), "task": [""]}
    try:
        for _ in range(8):
            engine.select_action(batch)
            threading.Event().wait(0.005)
        followed = [c for c in model.committed if c is not None]
        assert followed and followed[0].actions.shape[-2] <= 5
    finally:
        engine.close()


def test_a_scene_that_ends_its_episode_is_set_again_and_sentry_cuts_the_episode_there():
    robot = ScriptedRobot(episode_length=7)
    policy = counting_policy()
    _report, writer, robot, _ = rollout(
        SentryStrategyConfig(episode_time_s=100.0),
        robot=robot,
        policy=policy,
        duration_s=2,
        return_to_initial_position=False,
    )
    # 20 ticks: the scene ends every 7 (reset at connection, then after each end).
    assert [e.length for e in writer.datasets[ROOT].episodes] == [7, 7, 6]
    assert robot.resets == 3
    # The policy started afresh with each scene: its chunks begin again at 1.
    assert [float(a[0]) for a in robot.sent[5:9]] == [1, 2, 1, 2]


def test_episodic_sets_the_scene_for_each_episode():
    robot = ScriptedRobot(episode_length=4)
    _report, writer, robot, _ = rollout(
        EpisodicStrategyConfig(),
        robot=robot,
        num_episodes=3,
        episode_time_s=1.0,
        reset_time_s=0.2,
        return_to_initial_position=False,
    )
    assert [e.length for e in writer.datasets[ROOT].episodes] == [4, 4, 4]
    assert robot.resets == 3


def test_a_policy_trained_on_another_robot_is_refused_before_anything_moves():
    from rlctl.domain.errors import FeatureMismatch
    from rlctl.domain.features import typed_feature

    policy = ScriptedPolicy(
        6,
        input_features={
            "observation.state": typed_feature("STATE", (6,)),
            "observation.images.front": typed_feature("VISUAL", (3, 96, 96)),
        },
    )
    robot = ScriptedRobot()
    with pytest.raises(FeatureMismatch) as info:
        rollout(BaseStrategyConfig(), policy=policy, robot=robot, record=False, duration_s=1)
    message = str(info.value.message)
    assert "observation.state as (6,), the robot gives (4,)" in message
    assert "camera observation.images.front" in message
    assert "actions of shape (6,), the robot takes (4,)" in message
    assert robot.connects == 0 and not robot.sent


def test_a_refused_rollout_lets_go_of_the_engine_and_the_keys():
    engine = local_engine(ScriptedPolicy(DIM))
    controls = ScriptedRolloutControls()
    use_case = RunRollout(ScriptedRobot(), ManualClock(), policy=engine, controls=controls)
    with pytest.raises(ConfigError, match="records a dataset"):
        use_case(SentryStrategyConfig(), RolloutSettings(fps=FPS))
    assert controls.closed and not engine._worker.is_alive()


def test_the_inference_setting_chooses_where_the_model_runs_local_or_remote():
    from rlctl.adapters.memory.policy import InMemoryPolicyLoader
    from rlctl.adapters.memory.policy_server import InProcessPolicyConnector, ScriptedChunkService
    from rlctl.application.use_cases.choose_policy import choose_acting_policy
    from rlctl.domain.rollout import AsyncInferenceConfig, RTCInferenceConfig, SyncInferenceConfig

    model = ScriptedPolicy(DIM)
    loader = InMemoryPolicyLoader({"ckpt": model})
    settings = RemotePolicySettings()
    # sync: the model itself, in the tick.
    assert (
        choose_acting_policy(loader, settings, path="ckpt", inference=SyncInferenceConfig())
        is model
    )
    # async: the acting engine over the model in this process, asking at 3 queued.
    engine = choose_acting_policy(
        loader, settings, path="ckpt", inference=AsyncInferenceConfig(queue_threshold=3)
    )
    try:
        assert isinstance(engine, AsyncActing) and engine._queue_threshold == 3
        assert engine.config.type_name == model.config.type_name
        assert loader.loads[-1]["rtc"] is None  # the engine does real-time chunking itself
    finally:
        engine.close()
    # the same engine over a server, with the same setting.
    remote = choose_acting_policy(
        loader,
        RemotePolicySettings(server="127.0.0.1:1"),
        path=None,
        connector=InProcessPolicyConnector(ScriptedChunkService()),
        inference=AsyncInferenceConfig(queue_threshold=4),
    )
    try:
        assert isinstance(remote, AsyncActing) and remote._queue_threshold == 4
    finally:
        remote.close()
    # rtc on a policy that cannot follow queued actions: refused, with what to do.
    with pytest.raises(ConfigError, match="flow-matching") as info:
        choose_acting_policy(loader, settings, path="ckpt", inference=RTCInferenceConfig())
    assert "--inference.type=async" in info.value.hint


def test_rtc_refused_for_a_served_policy_lets_go_of_its_connection():
    from rlctl.adapters.memory.policy import InMemoryPolicyLoader
    from rlctl.adapters.memory.policy_server import InProcessPolicyConnector, ScriptedChunkService
    from rlctl.application.use_cases.choose_policy import choose_acting_policy
    from rlctl.domain.rollout import RTCInferenceConfig

    before = sum(t.name == "acting-engine" for t in threading.enumerate())
    with pytest.raises(ConfigError, match="flow-matching"):
        choose_acting_policy(
            InMemoryPolicyLoader(),
            RemotePolicySettings(server="127.0.0.1:1"),
            path=None,
            connector=InProcessPolicyConnector(ScriptedChunkService()),
            inference=RTCInferenceConfig(),
        )
    assert sum(t.name == "acting-engine" for t in threading.enumerate()) <= before
