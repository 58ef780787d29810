"""`PushTDrawnOnce` returns gym-pusht's own pictures, bit for bit, for less work."""

from __future__ import annotations

import numpy as np
import pygame
import pytest
from gym_pusht.envs.pusht import PushTEnv

from rlctl.adapters.sim.config import SimTask
from rlctl.adapters.sim.envs.pusht import PushtEnv
from rlctl.adapters.sim.envs.pusht_render import PushTDrawnOnce, resized_rgb
from rlctl.adapters.training.lerobot_config import _env as lerobot_env_section

KWARGS = {"render_mode": "rgb_array", "visualization_width": 384, "visualization_height": 384}


def _same(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _same(a[key], b[key])
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize(
    ("obs_type", "seed"), [("pixels_agent_pos", 0), ("pixels_agent_pos", 7), ("pixels", 3)]
)
def test_observations_and_video_frames_match_gym_pusht_over_an_episode(obs_type, seed) -> None:
    ours, theirs = (cls(obs_type=obs_type, **KWARGS) for cls in (PushTDrawnOnce, PushTEnv))
    actions = np.random.default_rng(seed).uniform(0, 512, size=(80, 2)).astype(np.float32)
    _same(ours.reset(seed=seed)[0], theirs.reset(seed=seed)[0])
    _same(ours.render(), theirs.render())  # before any action: no marker
    for step, action in enumerate(actions):
        mine, reference = ours.step(action), theirs.step(action)
        _same(mine[0], reference[0])
        # gym-pusht's coverage moves in the last bit with how often the scene was drawn before
        # (two plain PushTEnvs differ alike when only one renders); that is all that may differ.
        assert mine[1] == pytest.approx(reference[1], rel=1e-12, abs=1e-15)
        assert mine[2:4] == reference[2:4]
        if step % 3 != 2:  # some steps are not filmed: the next one must not reuse a picture
            frame = ours.render()
            _same(frame, theirs.render())
            _same(ours.render(), frame)
    state = [100.0, 200.0, 300.0, 250.0, 1.0]
    reset = {"reset_to_state": state}
    _same(ours.reset(seed=1, options=reset)[0], theirs.reset(seed=1, options=reset)[0])
    _same(ours.render(), theirs.render())


def test_a_pose_changed_outside_a_step_is_drawn_afresh() -> None:
    ours, theirs = (cls(obs_type="pixels", **KWARGS) for cls in (PushTDrawnOnce, PushTEnv))
    ours.reset(seed=2)
    theirs.reset(seed=2)
    ours.render()
    for env in (ours, theirs):
        env.agent.position = (120.0, 80.0)
    _same(ours.render(), theirs.render())


def test_surfaces_that_are_not_32_bit_rows_are_copied_the_original_way() -> None:
    rgb = np.random.default_rng(0).integers(0, 256, size=(40, 60, 3), dtype=np.uint8)
    for depth in (32, 24):
        surface = pygame.Surface((60, 40), depth=depth)
        pygame.surfarray.blit_array(surface, rgb.transpose(1, 0, 2))
        if depth == 24:
            assert resized_rgb(surface, 30, 20) is None
        else:
            import cv2

            expected = cv2.resize(
                np.transpose(pygame.surfarray.array3d(surface), (1, 0, 2)), (30, 20)
            )
            _same(resized_rgb(surface, 30, 20), expected)


def test_the_pusht_config_builds_the_drop_in_unless_told_not_to() -> None:
    task = SimTask("pusht", 0, "PushT-v0")
    env = PushtEnv().env_factory(task)()
    assert type(env.unwrapped) is PushTDrawnOnce
    assert env.spec.max_episode_steps == 300
    plain = PushtEnv(fast_render=False).env_factory(task)()
    assert type(plain.unwrapped) is PushTEnv


def test_lerobot_config_files_leave_out_the_rlctl_only_setting() -> None:
    section = lerobot_env_section(PushtEnv())
    assert "fast_render" not in section
    assert section["type"] == "pusht" and section["episode_length"] == 300
