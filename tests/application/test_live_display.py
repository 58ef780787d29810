"""The loops show every tick on the live display port (`--display_data=true`), through the
container with in-memory adapters; a stored episode replays to it frame by frame."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dependency_injector import providers

from rlctl.adapters.memory.camera import SyntheticCamera
from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.live_display import RecordedDisplay
from rlctl.adapters.memory.progress import SilentProgress
from rlctl.adapters.memory.robot import ScriptedRobot
from rlctl.adapters.memory.simulator import FakeSimulation
from rlctl.adapters.memory.teleoperator import ScriptedTeleoperator
from rlctl.adapters.memory.video import InMemoryVideos
from rlctl.adapters.sim.random_policy import RandomPolicy
from rlctl.application.use_cases.record_episodes import DatasetTarget, RecordSettings
from rlctl.domain.errors import InvalidInput
from rlctl.domain.eval_settings import EvalSettings
from rlctl.entrypoints.container import Container, build_container
from rlctl.entrypoints.settings import AppSettings, DatasetSettings

ROOT = Path("/memory/display")


def container_with(display: RecordedDisplay) -> Container:
    container = build_container(AppSettings(dataset=DatasetSettings(store="memory")))
    container.live_display.override(providers.Object(display))
    container.clock.override(providers.Object(ManualClock()))
    container.progress.override(providers.Object(SilentProgress()))
    return container


def test_record_shows_every_tick_of_every_phase_with_the_action_sent() -> None:
    display = RecordedDisplay()
    container = container_with(display)
    robot = ScriptedRobot(
        cameras={"front": SyntheticCamera(32, 24, threaded=False)}, max_relative_target=2.0
    )
    report = container.record_episodes(robot=robot, teleop=ScriptedTeleoperator())(
        DatasetTarget(root=ROOT),
        RecordSettings(fps=10, num_episodes=2, episode_time_s=1.0, reset_time_s=0.3),
    )
    assert report.frames == 20
    # Two episodes and one reset between them: every tick shown, stored or not.
    assert [f.step for f in display.frames] == list(range(23))
    assert display.closed == 1 and not display.is_open
    name, fps, keys, paced = display.opened[0]
    assert (name, fps, paced) == ("record", 10, True)
    assert set(keys) == {"observation.state", "observation.images.front", "action"}
    # The action shown is the one sent (capped by the robot), beside the observation it followed.
    np.testing.assert_allclose(np.stack([f.action for f in display.frames]), np.stack(robot.sent))
    assert display.frames[5].observation["observation.images.front"].shape == (24, 32, 3)


def test_teleoperate_shows_each_tick_and_closes_the_display() -> None:
    display = RecordedDisplay()
    container = container_with(display)
    robot = ScriptedRobot(realtime=False)
    report = container.teleoperate_robot(robot=robot, teleop=ScriptedTeleoperator())(
        fps=50, duration_s=0.2
    )
    assert report.ticks == 10 and len(display.frames) == 10
    assert display.opened[0][0] == "teleoperate" and display.opened[0][3] is False
    np.testing.assert_allclose(display.frames[-1].action, robot.sent[-1])
    assert display.closed == 1


def test_eval_shows_the_first_env_under_the_policy_keys_and_waits_for_the_display() -> None:
    display = RecordedDisplay()
    container = container_with(display)
    sim = FakeSimulation(max_episode_steps=6)
    policy = RandomPolicy([-1, -1], [1, 1], seed=0, chunk_size=3, n_action_steps=2)
    use_case = container.evaluate_policy(sim, policy, video_encoder=InMemoryVideos())
    use_case(EvalSettings(n_episodes=4, batch_size=2, use_async_envs=False))

    name, fps, keys, paced = display.opened[0]
    assert name == "eval_fake" and fps == sim.fps and paced is False
    assert set(keys) == {"observation.state", "action"}
    # Two batches; env 0 of each until its episode ends (at most six steps each).
    assert 2 <= len(display.frames) <= 12
    assert [f.step for f in display.frames] == list(range(len(display.frames)))
    frame = display.frames[0]
    assert frame.observation["observation.state"].shape == (2,)
    assert frame.action is not None and frame.action.shape == (2,)
    assert display.closed == 1


def test_a_stored_episode_replays_to_the_display_frame_by_frame() -> None:
    display = RecordedDisplay()
    container = container_with(display)
    robot = ScriptedRobot(cameras={"front": SyntheticCamera(16, 12, threaded=False)})
    writer = container.dataset_writer()
    container.record_episodes(robot=robot, teleop=ScriptedTeleoperator())(
        DatasetTarget(root=ROOT, video=False),
        RecordSettings(fps=10, num_episodes=2, episode_time_s=0.5, reset_time_s=0),
    )
    container.meta_reader().add(str(ROOT), writer.datasets[ROOT].meta())
    recorded = writer.datasets[ROOT].frames[1]
    replay = RecordedDisplay()
    shown = container.display_episode(display=replay)(str(ROOT), 1)

    assert shown.frames == 5 and shown.cameras == ("observation.images.front",)
    assert replay.opened[0][0] == "display_episode_1" and replay.closed == 1
    assert [f.step for f in replay.frames] == list(range(5))
    for frame, stored in zip(replay.frames, recorded, strict=True):
        np.testing.assert_allclose(frame.action, stored.values["action"])
        np.testing.assert_allclose(
            frame.observation["observation.state"], stored.values["observation.state"]
        )
        assert frame.observation["observation.images.front"][:4] == b"\x89PNG"


def test_a_missing_episode_fails_before_the_display_opens() -> None:
    display = RecordedDisplay()
    container = container_with(display)
    writer = container.dataset_writer()
    container.record_episodes(robot=ScriptedRobot(), teleop=ScriptedTeleoperator())(
        DatasetTarget(root=ROOT), RecordSettings(fps=10, num_episodes=1, episode_time_s=0.2)
    )
    container.meta_reader().add(str(ROOT), writer.datasets[ROOT].meta())
    replay = RecordedDisplay()
    with pytest.raises(InvalidInput, match="episode 3 does not exist"):
        container.display_episode(display=replay)(str(ROOT), 3)
    assert replay.opened == [] and replay.closed == 0
