"""What new users and LeRobot users type first, as they type it: each works, or says what to do."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest
from click.testing import CliRunner

from rlctl.adapters.robots.config import ScriptedRobotConfig, SimRobotConfig
from rlctl.adapters.sim.envs.metaworld import MetaworldEnv
from rlctl.adapters.teleop.config import MetaWorldExpertConfig
from rlctl.adapters.teleop.metaworld_expert import MetaWorldExpertTeleop
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.run_layout import RUN_CONFIG_FILE
from rlctl.entrypoints.cli.main import cli
from rlctl.entrypoints.cli.quickstart import fresh_output_dir
from rlctl.entrypoints.cli.train import TrainCommandSettings
from rlctl.entrypoints.cli.train_config import resolve_train_settings
from rlctl.entrypoints.settings import write_resolved_config


def printed(*args: str) -> dict:
    result = CliRunner().invoke(cli, [*args, "--print-config"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def refused(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    return result.output


# --- a section's default type ----------------------------------------------------------------


def test_a_sim_robots_env_fields_keep_its_default_env():
    config = printed("record", "--robot.type=sim", "--robot.env.task=reach-v3")
    env = config["robot"]["env"]
    assert env["type"] == "metaworld" and env["task"] == "reach-v3"
    assert env["obs_type"] == "state"  # the sim robot's default env, not Meta-World's own


def test_naming_the_default_env_type_changes_no_other_default():
    plain = printed("record", "--robot.type=sim")["robot"]
    named = printed("record", "--robot.type=sim", "--robot.env.type=metaworld")["robot"]
    assert named == plain
    assert plain["env"]["obs_type"] == "state"


def test_another_env_type_starts_from_its_own_defaults():
    env = printed("record", "--robot.type=sim", "--robot.env.type=pusht")["robot"]["env"]
    assert env["type"] == "pusht"
    assert "camera_name" not in env  # nothing of Meta-World's left over


def test_top_level_sections_keep_their_default_type_too():
    config = printed("eval", "--env.task=PushT-v0", "--env.type=pusht")
    assert config["env"]["type"] == "pusht"
    assert printed("eval", "--env.episode_length=7")["env"]["type"] == "pusht"


# --- the Meta-World expert follows the robot's task -----------------------------------------


def test_the_expert_takes_the_sim_robots_task_when_none_is_given():
    robot = SimRobotConfig()  # Meta-World push-v3, which shares its text with push-back-v3
    assert MetaWorldExpertConfig().paired_with(robot) == MetaWorldExpertConfig(task="push-v3")
    several = SimRobotConfig(env=MetaworldEnv(task="push-v3,reach-v3", obs_type="state"))
    assert MetaWorldExpertConfig().paired_with(several).task == "push-v3,reach-v3"


def test_a_task_given_to_the_expert_wins_and_other_robots_change_nothing():
    given = MetaWorldExpertConfig(task="push-back-v3")
    assert given.paired_with(SimRobotConfig()) is given
    assert MetaWorldExpertConfig().paired_with(ScriptedRobotConfig()) == MetaWorldExpertConfig()
    assert MetaWorldExpertConfig().paired_with(None) == MetaWorldExpertConfig()


def test_an_expert_that_cannot_tell_the_task_says_which_setting_names_it():
    class Undecided:
        def select_action(self, batch):
            raise InvalidInput("cannot tell which expert acts", where="metaworld expert")

    teleop = MetaWorldExpertTeleop(Undecided())  # type: ignore[arg-type]
    teleop.connect()
    with pytest.raises(InvalidInput) as info:
        teleop.get_action({"observation.environment_state": np.zeros(39), "task": "Push"})
    assert "--teleop.task=" in (info.value.hint or "")


@pytest.mark.slow
def test_recording_with_the_expert_and_every_default_works(tmp_path):
    root = tmp_path / "mw"
    result = CliRunner().invoke(
        cli,
        [
            "record",
            "--robot.type=sim",
            "--teleop.type=metaworld_expert",
            f"--dataset.root={root}",
            "--dataset.num_episodes=1",
            "--dataset.episode_time_s=0.2",
            "--dataset.reset_time_s=0",
            "--controls=off",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads((root / "meta/info.json").read_text())["total_episodes"] == 1


# --- quickstart twice -------------------------------------------------------------------------


def test_a_new_quickstart_goes_to_a_fresh_folder_and_leaves_the_old_one(tmp_path):
    out = tmp_path / "quickstart"
    assert fresh_output_dir(out) == out
    out.mkdir()
    assert fresh_output_dir(out) == out  # empty: used
    (out / "data").mkdir()
    assert fresh_output_dir(out) == tmp_path / "quickstart-2"
    (tmp_path / "quickstart-2").mkdir()
    (tmp_path / "quickstart-3").write_text("not a folder")
    assert fresh_output_dir(out) == tmp_path / "quickstart-4"


# --- LeRobot's habits -----------------------------------------------------------------------


def fake_run(tmp_path: Path) -> Path:
    """A training run's folder as `rlctl train` leaves it (no weights needed to resolve it)."""
    run = tmp_path / "run"
    step = run / "checkpoints" / "000004"
    (step / "pretrained_model").mkdir(parents=True)
    (step / "training_state").mkdir()
    (step / "pretrained_model" / "train_config.json").write_text("{}")
    (run / "checkpoints" / "last").symlink_to("000004")
    saved = TrainCommandSettings(steps=4, output_dir=str(run))
    write_resolved_config(saved, run)
    assert (run / RUN_CONFIG_FILE).is_file()
    return run


def train_settings(*args: str) -> TrainCommandSettings:
    return resolve_train_settings(TrainCommandSettings, list(args), environ={})


def test_lerobots_resume_with_config_path_resumes_that_run(tmp_path):
    run = fake_run(tmp_path)
    config_path = run / "checkpoints/last/pretrained_model/train_config.json"
    settings = train_settings("--resume=true", f"--config_path={config_path}", "--steps=8")
    assert settings.resume == str(config_path.parent)
    assert settings.output_dir == str(run) and settings.steps == 8


def test_resume_true_with_the_run_as_output_dir_resumes_it(tmp_path):
    run = fake_run(tmp_path)
    settings = train_settings("--resume=yes", f"--output_dir={run}")
    assert settings.resume == str(run) and settings.output_dir == str(run)


@pytest.mark.parametrize("word", ["false", "no", "off", "0"])
def test_resume_false_resumes_nothing(word):
    assert train_settings(f"--resume={word}", "--dataset.root=x").resume is None


def test_resume_true_alone_says_what_it_needs():
    output = refused("train", "--resume=true", "--dataset.root=x")
    assert "does not say which run" in output
    assert "--resume=outputs/train/NAME" in output and "--config_path" in output


def test_a_config_path_that_is_no_run_says_so(tmp_path):
    stray = tmp_path / "train_config.json"
    stray.write_text("{}")
    with pytest.raises(ConfigError, match="not a training run's checkpoint") as info:
        train_settings("--resume=true", f"--config_path={stray}")
    assert "--resume=" in (info.value.hint or "")
    with pytest.raises(ConfigError, match="LeRobot's way to resume"):
        train_settings(f"--config_path={stray}", "--dataset.root=x")


@pytest.mark.parametrize("text", ["0,1", "[0,1]", "[0, 1]"])
def test_dataset_episodes_as_lerobot_users_write_them(text):
    config = printed("train", "--dataset.root=x", f"--dataset.episodes={text}")
    assert config["dataset"]["episodes"] == [0, 1]


def test_a_bad_episode_list_names_the_item():
    output = refused("train", "--dataset.root=x", "--dataset.episodes=0,one", "--print-config")
    assert "dataset.episodes[1] (in --dataset.episodes): 'one' is not a whole number" in output


HUB_POLICY_COMMANDS = {
    "eval": ["eval", "--policy.path=lerobot/diffusion_pusht", "--output_dir={tmp}/eval"],
    "record": [
        "record",
        "--robot.type=scripted",
        "--policy.path=lerobot/diffusion_pusht",
        "--dataset.root={tmp}/ds",
        "--controls=off",
    ],
    "serve": ["policy", "serve", "--policy.path=lerobot/diffusion_pusht", "--port=0"],
}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(HUB_POLICY_COMMANDS))
@pytest.mark.parametrize("offline", ["0", "1"])
def test_a_hub_policy_not_pulled_yet_says_how_to_pull_it(tmp_path, offline, command):
    env = {
        **os.environ,
        "HF_ENDPOINT": "http://127.0.0.1:9",  # nothing listens: the Hub is out of reach
        "HF_HUB_OFFLINE": offline,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
        "HF_HUB_ETAG_TIMEOUT": "2",
        "HF_HUB_DOWNLOAD_TIMEOUT": "2",
    }
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from rlctl.entrypoints.cli.main import main; main()",
            *(arg.format(tmp=tmp_path) for arg in HUB_POLICY_COMMANDS[command]),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "rlctl policy pull lerobot/diffusion_pusht" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_run_folder_names_its_last_checkpoint(tmp_path):
    from rlctl.application.use_cases.pull_policy import ResolvePolicy

    run = tmp_path / "run"
    folder = run / "checkpoints" / "000010" / "pretrained_model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (run / "checkpoints" / "last").symlink_to("000010")
    resolve = ResolvePolicy(pull=None)  # type: ignore[arg-type]  # local folders need no Hub
    assert resolve(run) == run / "checkpoints" / "last" / "pretrained_model"
    assert resolve(folder.parent) == folder and resolve(folder) == folder
    with pytest.raises(InvalidInput, match="not a policy checkpoint"):
        resolve(tmp_path)


@pytest.mark.slow
def test_a_run_folder_stands_for_its_last_checkpoint(tmp_path, fixtures_dir):
    import rlctl.api

    run = tmp_path / "run"
    step = run / "checkpoints" / "000010"
    step.mkdir(parents=True)
    shutil.copytree(fixtures_dir / "act_tiny", step / "pretrained_model")
    (run / "checkpoints" / "last").symlink_to("000010")
    from_run = rlctl.api.load_policy(run, device="cpu")
    from_folder = rlctl.api.load_policy(step / "pretrained_model", device="cpu")
    assert attrs.asdict(from_run.config) == attrs.asdict(from_folder.config)


@pytest.mark.parametrize(
    ("value", "on"), [("no", False), ("OFF", False), ("", False), ("yes", True)]
)
def test_rlctl_debug_no_means_no(value, on):
    from rlctl.entrypoints.cli.main import _switched_on

    assert _switched_on(value) is on
