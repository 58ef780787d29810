"""RecordEpisodes with in-memory devices, writer and a manual clock: phases, controls, resume,
Ctrl-C, what is stored, and the timing it keeps."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlctl.adapters.memory.camera import SyntheticCamera, frame_number
from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedControls
from rlctl.adapters.memory.dataset_writer import InMemoryDatasetWriter
from rlctl.adapters.memory.progress import RecordingProgress
from rlctl.adapters.memory.robot import ScriptedRobot
from rlctl.adapters.memory.teleoperator import ScriptedTeleoperator
from rlctl.application.control_loop import LOOP_SWITCH_INTERVAL_S
from rlctl.application.ports.control import Control
from rlctl.application.use_cases.record_episodes import (
    DatasetTarget,
    RecordEpisodes,
    RecordSettings,
)
from rlctl.domain.errors import FeatureMismatch, HardwareError, InvalidInput

ROOT = Path("/memory/ds")
FPS = 10


def recorder(robot=None, controls=None, teleop=None, writer=None, clock=None, **kwargs):
    writer = writer or InMemoryDatasetWriter()
    clock = clock or ManualClock()
    robot = robot or ScriptedRobot()
    use_case = RecordEpisodes(
        writer,
        robot,
        clock,
        controls or ScriptedControls(),
        teleop=teleop or ScriptedTeleoperator(),
        **kwargs,
    )
    return use_case, writer, robot, clock


def record(use_case, resume=False, **settings):
    settings.setdefault("fps", FPS)
    settings.setdefault("episode_time_s", 1.0)
    settings.setdefault("reset_time_s", 0.5)
    settings.setdefault("single_task", "pick")
    return use_case(DatasetTarget(root=ROOT, resume=resume), RecordSettings(**settings))


def test_records_episodes_of_sent_actions_and_keeps_the_rate():
    robot = ScriptedRobot(max_relative_target=2.0)
    progress = RecordingProgress()
    use_case, writer, robot, _ = recorder(robot=robot, progress=progress)
    report = record(use_case, num_episodes=3, warmup_time_s=0.3)

    dataset = writer.datasets[ROOT]
    assert [e.length for e in dataset.episodes] == [10, 10, 10]
    assert report.saved_episodes == (0, 1, 2) and report.frames == 30
    assert dataset.robot_type == "scripted" and dataset.tasks == ["pick"]
    # Warm-up, three episodes and two resets (none after the last), one tick each 1/fps.
    assert report.timing.ticks == 3 + 30 + 5 + 5
    assert report.timing.p95_s == pytest.approx(1 / FPS) and report.timing.late_ticks == 0
    assert robot.resets == 3 and robot.disconnects == 1
    # The stored action is the one the robot sent (capped), not the one the teleop asked for.
    stored = np.stack([f.values["action"] for f in dataset.frames[0]])
    assert not np.allclose(stored, np.stack(robot.requested[3:13]))
    np.testing.assert_allclose(stored, np.stack(robot.sent[3:13]))
    # Each frame pairs the observation with the action taken after seeing it.
    states = np.stack([f.values["observation.state"] for f in dataset.frames[0]])
    np.testing.assert_allclose(states[1:], stored[:-1])
    assert [t.description for t in progress.tasks] == [
        "warm-up",
        "episode 0",
        "reset",
        "episode 1",
        "reset",
        "episode 2",
    ]


def test_a_slow_tick_borrows_from_the_sleep_and_is_not_late():
    clock = ManualClock()
    robot = ScriptedRobot(clock=clock, work_s=0.06)
    use_case, *_ = recorder(robot=robot, clock=clock)
    report = record(use_case, num_episodes=1)
    assert report.timing.p95_s == pytest.approx(0.1)
    assert clock.sleeps and all(s == pytest.approx(0.04) for s in clock.sleeps)


def test_ticks_later_than_a_period_restart_the_schedule():
    clock = ManualClock()
    robot = ScriptedRobot(clock=clock, work_s=0.25)
    use_case, *_ = recorder(robot=robot, clock=clock)
    report = record(use_case, num_episodes=1, reset_time_s=0)
    assert report.timing.late_ticks == 9
    assert report.timing.p50_s == pytest.approx(0.25)


def test_controls_next_rerecord_and_stop():
    # Polls: episode 0 has ten, NEXT at its 4th; its reset's first poll is 4.
    controls = ScriptedControls({3: {Control.NEXT}, 4 + 2: {Control.RERECORD}})
    use_case, writer, _, _ = recorder(controls=controls)
    report = record(use_case, num_episodes=2)
    assert report.rerecorded == 1
    assert [e.length for e in writer.datasets[ROOT].episodes] == [10, 10]
    assert controls.closed

    controls = ScriptedControls({5: {Control.STOP}})
    use_case, writer, *_ = recorder(controls=controls)
    report = record(use_case, num_episodes=3)
    assert report.stopped and report.saved_episodes == (0,)
    assert writer.datasets[ROOT].episodes[0].length == 5  # the episode under way is kept


def test_a_simulator_ending_the_episode_ends_it_early():
    robot = ScriptedRobot(episode_length=4, realtime=False)
    use_case, writer, robot, clock = recorder(robot=robot)
    report = record(use_case, num_episodes=2, reset_time_s=0)
    assert [e.length for e in writer.datasets[ROOT].episodes] == [4, 4]
    assert clock.sleeps == []  # a simulator is not paced
    assert report.timing.ticks == 8


def test_ctrl_c_keeps_finished_episodes_and_drops_the_one_under_way():
    # Observation 15 is in the reset after episode 0 (10 frames): episode 0 is finished.
    robot = ScriptedRobot(fail_at={15: KeyboardInterrupt()})
    use_case, writer, robot, _ = recorder(robot=robot)
    report = record(use_case, num_episodes=3)
    assert report.interrupted and report.saved_episodes == (0,)
    assert robot.disconnects == 1

    robot = ScriptedRobot(fail_at={20: KeyboardInterrupt()})  # in episode 1
    use_case, writer, robot, _ = recorder(robot=robot)
    report = record(use_case, num_episodes=3)
    assert report.saved_episodes == (0,) and writer.datasets[ROOT].total_frames == 10


def test_saves_and_the_closing_are_shielded_from_repeated_interrupts():
    from rlctl.adapters.memory.control import NoInterrupts

    interrupts = NoInterrupts()
    robot = ScriptedRobot(fail_at={15: KeyboardInterrupt()})  # in the reset after episode 0
    use_case, _, _, _ = recorder(robot=robot, interrupts=interrupts)
    report = record(use_case, num_episodes=3)
    assert report.interrupted and report.saved_episodes == (0,)
    # Each of episode 0's 10 frames handed to the writer, episode 0's save, then the
    # interrupted run's closing of the dataset.
    assert interrupts.saves == 10 + 2 and not interrupts.installed


def test_a_frame_is_handed_to_the_writer_whole_whatever_the_interrupts(monkeypatch):
    # The writer passes a frame to its video encoders: a Ctrl-C halfway would leave their
    # frame counts and the writer's apart, and the last save waiting forever.
    from rlctl.adapters.memory.control import NoInterrupts
    from rlctl.adapters.memory.dataset_writer import InMemoryWriteSession

    interrupts = NoInterrupts()
    added = InMemoryWriteSession.add_frame
    shielded = []

    def add_frame(self, frame):
        shielded.append(interrupts.shielding)
        added(self, frame)

    monkeypatch.setattr(InMemoryWriteSession, "add_frame", add_frame)
    use_case, writer, _, _ = recorder(interrupts=interrupts)
    record(use_case, num_episodes=2)
    assert len(shielded) == writer.datasets[ROOT].total_frames == 20 and all(shielded)


def test_a_device_failing_during_the_reset_keeps_the_finished_episode():
    robot = ScriptedRobot(fail_at={13: HardwareError("motor 3 is gone")})
    use_case, writer, robot, _ = recorder(robot=robot)
    with pytest.raises(HardwareError, match="motor 3"):
        record(use_case, num_episodes=3)
    assert len(writer.datasets[ROOT].episodes) == 1 and robot.disconnects == 1


def test_a_run_failing_before_its_first_episode_leaves_no_dataset():
    robot = ScriptedRobot(fail_at={3: HardwareError("the camera stopped")})
    use_case, writer, robot, _ = recorder(robot=robot)
    with pytest.raises(HardwareError, match="camera"):
        record(use_case, num_episodes=2)
    assert ROOT not in writer.datasets and robot.disconnects == 1
    # So the same command can run again.
    use_case, *_ = recorder(writer=writer)
    assert record(use_case, num_episodes=1).saved_episodes == (0,)


def test_a_resumed_run_that_fails_keeps_the_dataset():
    use_case, writer, *_ = recorder()
    record(use_case, num_episodes=1)
    use_case, *_ = recorder(robot=ScriptedRobot(fail_at={1: HardwareError("gone")}), writer=writer)
    with pytest.raises(HardwareError):
        record(use_case, resume=True, num_episodes=1)
    assert len(writer.datasets[ROOT].episodes) == 1


class InterpreterWatch(ScriptedTeleoperator):
    """Notes the interpreter's switch interval and frozen objects while the loop runs."""

    def __init__(self) -> None:
        super().__init__()
        self.switch_intervals: set[float] = set()
        self.frozen: set[int] = set()

    def get_action(self, observation):
        self.switch_intervals.add(sys.getswitchinterval())
        self.frozen.add(gc.get_freeze_count())
        return super().get_action(observation)


def test_the_interpreter_keeps_its_pauses_out_of_the_loop_while_recording():
    before = sys.getswitchinterval()
    teleop = InterpreterWatch()
    use_case, *_ = recorder(teleop=teleop, owns_process=True)  # as `rlctl record`
    record(use_case, num_episodes=1)
    # Other threads yield the lock within 1 ms; what existed before is out of the collector's way.
    assert teleop.switch_intervals == {min(before, LOOP_SWITCH_INTERVAL_S)}
    # Frozen once before the loop: frozen objects freed during it leave the count (it may fall a
    # little), but it is never frozen again per tick (it would grow) nor thawed.
    assert min(teleop.frozen) > 1000 and max(teleop.frozen) - min(teleop.frozen) < 1000
    assert sys.getswitchinterval() == before and gc.get_freeze_count() == 0


def test_an_embedded_recording_leaves_the_interpreter_as_it_is():
    before = sys.getswitchinterval()
    teleop = InterpreterWatch()
    use_case, *_ = recorder(teleop=teleop)
    record(use_case, num_episodes=1)
    assert teleop.switch_intervals == {before} and teleop.frozen == {0}


def test_resume_appends_and_refuses_another_robot_or_rate():
    use_case, writer, *_ = recorder()
    record(use_case, num_episodes=2)
    use_case, *_ = recorder(writer=writer)
    report = record(use_case, resume=True, num_episodes=1)
    assert report.saved_episodes == (2,) and report.total_episodes == 3

    use_case, *_ = recorder(writer=writer)
    with pytest.raises(InvalidInput, match="recorded at 10 fps"):
        record(use_case, resume=True, num_episodes=1, fps=30)
    other = ScriptedRobot(joints=("a", "b"))
    use_case, *_ = recorder(
        robot=other, teleop=ScriptedTeleoperator(joints=("a", "b")), writer=writer
    )
    with pytest.raises(FeatureMismatch, match=r"observation\.state"):
        record(use_case, resume=True, num_episodes=1)
    assert len(writer.datasets[ROOT].episodes) == 3


def test_refuses_a_teleop_for_other_joints_and_a_robot_with_no_driver():
    with pytest.raises(FeatureMismatch, match="names its actions"):
        recorder(teleop=ScriptedTeleoperator(joints=("x", "y", "z", "w")))
    with pytest.raises(InvalidInput, match="nothing would drive"):
        RecordEpisodes(InMemoryDatasetWriter(), ScriptedRobot(), ManualClock())


def test_cameras_are_stored_frame_by_frame():
    camera = SyntheticCamera(32, 24, threaded=False)
    robot = ScriptedRobot(cameras={"front": camera})
    use_case, writer, *_ = recorder(robot=robot)
    record(use_case, num_episodes=1)
    frames = writer.datasets[ROOT].frames[0]
    assert writer.datasets[ROOT].features["observation.images.front"].dtype == "video"
    assert [frame_number(f.values["observation.images.front"]) for f in frames] == list(range(10))


class ConstantPolicy:
    """A policy answering a batch of one with the same action, counting its resets."""

    def __init__(self, action):
        self.action = np.asarray(action, dtype=np.float32)
        self.batches = []
        self.resets = 0

    def select_action(self, batch):
        self.batches.append(batch)
        return self.action[None]

    def reset(self):
        self.resets += 1


def test_a_policy_drives_episodes_and_the_teleop_drives_resets():
    camera = SyntheticCamera(32, 24, threaded=False)
    robot = ScriptedRobot(cameras={"front": camera})
    policy = ConstantPolicy([1, 2, 3, 4])
    use_case, writer, robot, _ = recorder(robot=robot, policy=policy)
    record(use_case, num_episodes=2)
    assert policy.resets == 2 and len(policy.batches) == 20
    batch = policy.batches[0]
    assert batch["observation.images.front"].shape == (1, 3, 24, 32)
    assert batch["observation.images.front"].dtype == np.float32
    assert batch["task"] == ["pick"]
    stored = writer.datasets[ROOT].frames[1][-1].values["action"]
    np.testing.assert_allclose(stored, [1, 2, 3, 4])
    assert len(robot.sent) == 25  # 20 policy ticks and 5 teleop ticks in the reset


def reference(num_episodes, episode_ticks, reset_ticks, presses):
    """What LeRobot's record loop does with these key presses: saved lengths, re-records."""
    poll, saved, rerecorded = 0, [], 0

    def phase(n, record):
        nonlocal poll
        frames = 0
        for _ in range(n):
            pressed = presses.get(poll, set())
            poll += 1
            if pressed:
                return set(pressed), frames
            frames += record
        return set(), frames

    while len(saved) < num_episodes:
        pressed, frames = phase(episode_ticks, 1)
        last = len(saved) == num_episodes - 1
        if Control.STOP not in pressed and (not last or Control.RERECORD in pressed):
            pressed |= phase(reset_ticks, 0)[0]
        if Control.RERECORD in pressed:
            rerecorded += 1
            if Control.STOP in pressed:
                break
            continue
        if frames:
            saved.append(frames)
        if Control.STOP in pressed:
            break
    return saved, rerecorded


@settings(max_examples=40, deadline=None)
@given(
    num_episodes=st.integers(0, 4),
    episode_ticks=st.integers(1, 6),
    reset_ticks=st.integers(0, 4),
    presses=st.dictionaries(
        st.integers(0, 40), st.sets(st.sampled_from(list(Control)), min_size=1), max_size=6
    ),
)
def test_phases_and_controls_follow_lerobots_rules(
    num_episodes, episode_ticks, reset_ticks, presses
):
    controls = ScriptedControls(presses)
    use_case, writer, robot, _ = recorder(controls=controls)
    report = record(
        use_case,
        num_episodes=num_episodes,
        episode_time_s=episode_ticks / FPS,
        reset_time_s=reset_ticks / FPS,
    )
    saved, rerecorded = reference(num_episodes, episode_ticks, reset_ticks, presses)
    dataset = writer.datasets[ROOT]
    assert [e.length for e in dataset.episodes] == saved
    assert report.rerecorded == rerecorded
    assert report.stopped == any(
        Control.STOP in p for k, p in presses.items() if k < controls.polls
    )
    # Every stored action is one the robot sent, in the order it sent them.
    remaining = iter(tuple(a) for a in robot.sent)
    for episode in dataset.frames:
        for frame in episode:
            assert tuple(frame.values["action"]) in remaining


@settings(max_examples=25, deadline=None)
@given(
    sessions=st.lists(
        st.tuples(st.integers(0, 3), st.one_of(st.none(), st.integers(1, 30))),
        min_size=1,
        max_size=4,
    )
)
def test_sessions_resumed_after_ctrl_c_keep_every_finished_episode(sessions):
    """Each session asks for n episodes and may be interrupted at some observation."""
    writer = InMemoryDatasetWriter()
    expected = 0
    for number, (n, interrupt_at) in enumerate(sessions):
        fail = {interrupt_at: KeyboardInterrupt()} if interrupt_at else {}
        use_case, *_ = recorder(robot=ScriptedRobot(fail_at=fail), writer=writer)
        report = record(use_case, resume=number > 0, num_episodes=n)
        # Episode k (10 ticks) and its reset (5 ticks, none after the last) end at tick 15k+10.
        finished = n if not interrupt_at else min(n, (interrupt_at - 1 + 5) // 15)
        if interrupt_at and interrupt_at > 15 * n - 5:
            finished = n
        assert report.saved_episodes == tuple(range(expected, expected + finished))
        expected += finished
        assert report.total_episodes == expected
    assert [e.index for e in writer.datasets[ROOT].episodes] == list(range(expected))
    assert all(e.length == 10 for e in writer.datasets[ROOT].episodes)


def test_the_container_wires_recording_to_the_configured_writer():
    from dependency_injector import providers

    from rlctl.entrypoints.container import build_container
    from rlctl.entrypoints.settings import AppSettings, DatasetSettings

    container = build_container(AppSettings(dataset=DatasetSettings(store="memory")))
    clock = ManualClock()
    container.clock.override(providers.Object(clock))
    container.progress.override(providers.Object(RecordingProgress()))
    use_case = container.record_episodes(robot=ScriptedRobot(), teleop=ScriptedTeleoperator())
    report = record(use_case, num_episodes=2)
    # 25 ticks in three phases (episode, reset, episode): 22 periods of 0.1 s.
    assert report.total_episodes == 2 and clock.now() == pytest.approx(2.2)
    assert container.dataset_writer().datasets[ROOT].total_frames == 20


class DivergingPolicy(ConstantPolicy):
    """Good actions, then NaN and absurd ones: what a diverged model or a corrupt observation
    gives."""

    def select_action(self, batch):
        self.batches.append(batch)
        n = len(self.batches)
        if n % 3 == 0:
            return np.full((1, self.action.size), np.nan, dtype=np.float32)
        if n % 5 == 0:
            return np.full((1, self.action.size), 1e30, dtype=np.float32)
        return self.action[None]


def test_a_diverging_policy_never_moves_the_robot_to_garbage_and_records_what_was_sent():
    limits = ([-100, -100, -100, 0], [100, 100, 100, 100])
    robot = ScriptedRobot(limits=limits, max_relative_target=30.0)
    use_case, writer, robot, _ = recorder(robot=robot, policy=DivergingPolicy([10, 20, 30, 40]))
    record(use_case, num_episodes=2)
    episodes = writer.datasets[ROOT].frames
    stored = np.stack([f.values["action"] for episode in episodes for f in episode])
    assert np.all(np.isfinite(stored))
    assert np.all(stored >= np.float32(limits[0])) and np.all(stored <= np.float32(limits[1]))
    assert robot.held > 0
    # What the dataset keeps is what the robot was sent, held ticks included (the teleop's 5
    # reset ticks come between the two episodes).
    sent = np.stack(robot.sent)
    np.testing.assert_array_equal(stored, np.concatenate([sent[:10], sent[15:25]]))
