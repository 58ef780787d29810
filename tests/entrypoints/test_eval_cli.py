"""`rlctl eval` as a user types it: policies that do not fit the env, the Meta-World expert."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rlctl.entrypoints.cli.main import cli


@pytest.fixture
def runner():
    return CliRunner()


@pytest.mark.slow
def test_a_policy_trained_on_another_robot_is_one_clear_message(runner, fixtures_dir, tmp_path):
    pytest.importorskip("gym_pusht")
    # LeRobot's tiny ACT reads a 6-joint state and a 48x64 front camera and writes 6 actions;
    # PushT observes a 2-D position and a 96x96 image and takes 2.
    result = runner.invoke(
        cli,
        [
            "eval",
            "--env.type=pusht",
            f"--policy.path={fixtures_dir / 'act_tiny'}",
            "--eval.n_episodes=1",
            "--eval.max_episodes_rendered=0",
            f"--output_dir={tmp_path}",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "RuntimeError" not in result.output
    first, *rest = result.output.strip().splitlines()
    assert "the policy does not fit this env" in first
    assert "observation.images.front (3, 48, 64), which the env does not provide" in first
    assert "observation.state as (6,), the env provides (2,)" in first
    assert "actions of shape (6,), the env takes (2,)" in first
    hint = " ".join(rest)
    assert "observation.image (3, 96, 96)" in hint and "--rename_map" in hint
    assert not (tmp_path / "eval_info.json").exists()


def test_the_metaworld_expert_asks_for_the_state_it_reads(runner, tmp_path):
    result = runner.invoke(
        cli,
        ["eval", "--env.type=pusht", "--policy.type=metaworld_expert", f"--output_dir={tmp_path}"],
    )
    assert result.exit_code == 1, result.output
    assert "--env.type=metaworld --env.obs_type=state" in result.output
