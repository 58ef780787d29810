"""`rlctl train --policy.path=CHECKPOINT --policy.<field>=VALUE` as a user types it: the
checkpoint's config.json first, then the user's settings against its type's fields (what
`--print-config` shows, and the errors). Only config.json is read before training starts, so a
folder holding only that file is a checkpoint here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlctl.domain.config import unstructure
from rlctl.domain.policies import PolicyConfig, SmolVLAConfig, lerobot_config_data
from rlctl.domain.policies.pi0 import PI0Config
from rlctl.domain.policies.pi05 import PI05Config
from rlctl.entrypoints.cli.main import cli
from rlctl.entrypoints.cli.train import TrainCommandSettings


def checkpoint(folder: Path, config: PolicyConfig, **extra: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = {**lerobot_config_data(config), **extra}
    (folder / "config.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def printed(*args: str) -> dict:
    result = CliRunner().invoke(cli, ["train", *args, "--print-config"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def refused(*args: str) -> str:
    result = CliRunner().invoke(cli, ["train", *args, "--print-config"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    return result.output


@pytest.fixture
def smolvla(tmp_path: Path) -> Path:
    # What a SmolVLA fine-tuned with the VLM unfrozen saved (LeRobot's defaults are the reverse).
    config = SmolVLAConfig(
        train_expert_only=False, freeze_vision_encoder=True, chunk_size=8, n_action_steps=8
    )
    return checkpoint(tmp_path / "smolvla", config, device="cuda")


def test_smolvla_fields_override_the_checkpoints_config(smolvla: Path) -> None:
    policy = printed(
        f"--policy.path={smolvla}",
        "--policy.train_expert_only=true",
        "--policy.freeze_vision_encoder=false",
        "--policy.n_action_steps=4",
    )["policy"]
    assert policy["type"] == "smolvla"
    assert policy["train_expert_only"] is True and policy["freeze_vision_encoder"] is False
    assert policy["n_action_steps"] == 4 and policy["chunk_size"] == 8  # 8: the checkpoint's
    assert policy["pretrained_path"] == str(smolvla)
    assert policy["device"] is None  # where it trained is not inherited


@pytest.mark.parametrize("config", [PI0Config(), PI05Config()], ids=["pi0", "pi05"])
def test_pi0_fields_override_the_checkpoints_config(tmp_path: Path, config: PolicyConfig) -> None:
    folder = checkpoint(tmp_path / "pi", config)
    policy = printed(
        f"--policy.pretrained_path={folder}",
        "--policy.train_expert_only=true",
        "--policy.freeze_vision_encoder=true",
    )["policy"]
    assert policy["type"] == config.type_name
    assert policy["train_expert_only"] is True and policy["freeze_vision_encoder"] is True
    assert policy["paligemma_variant"] == "gemma_2b"  # the checkpoint's, nothing rebuilt


def test_lerobots_spellings_of_the_path(smolvla: Path) -> None:
    """`--policy.path DIR` (space-separated), a training run's folder above pretrained_model,
    and a `--policy.type` that agrees with the checkpoint."""
    run = smolvla.parent / "run" / "checkpoints" / "last"
    run.mkdir(parents=True)
    smolvla.rename(run / "pretrained_model")
    policy = printed(
        "--policy.type=smolvla", "--policy.path", str(run), "--policy.train_expert_only=true"
    )["policy"]
    assert policy["type"] == "smolvla" and policy["train_expert_only"] is True
    assert policy["chunk_size"] == 8 and policy["pretrained_path"] == str(run)


def test_the_path_and_overrides_from_a_config_file_and_the_environment(
    smolvla: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "finetune.yaml"
    file.write_text(
        f"steps: 7\npolicy:\n  path: {smolvla}\n  freeze_vision_encoder: false\n", encoding="utf-8"
    )
    monkeypatch.setenv("RLCTL_POLICY__NUM_STEPS", "3")
    config = printed(f"--config={file}", "--policy.train_expert_only=true")
    policy = config["policy"]
    assert config["steps"] == 7 and policy["type"] == "smolvla"
    assert policy["freeze_vision_encoder"] is False and policy["train_expert_only"] is True
    assert policy["num_steps"] == 3 and policy["pretrained_path"] == str(smolvla)

    monkeypatch.delenv("RLCTL_POLICY__NUM_STEPS")
    monkeypatch.setenv("RLCTL_POLICY__PATH", str(smolvla))
    assert printed("--policy.num_vlm_layers=2")["policy"]["num_vlm_layers"] == 2


def test_an_unknown_key_names_the_checkpoints_type_and_its_fields(smolvla: Path) -> None:
    output = refused(f"--policy.path={smolvla}", "--policy.train_expert_olny=true")
    assert "is a policy of type 'smolvla', which has no setting policy.train_expert_olny" in output
    assert "did you mean policy.train_expert_only?" in output
    assert "smolvla's settings:" in output and "freeze_vision_encoder" in output
    assert "--policy.type=smolvla --help" in output


def test_an_act_only_key_is_refused_for_a_smolvla_checkpoint(smolvla: Path) -> None:
    output = refused(f"--policy.path={smolvla}", "--policy.kl_weight=5")
    assert "no setting policy.kl_weight" in output and "vlm_model_name" in output


def test_a_key_of_another_type_without_a_checkpoint_names_the_default_type() -> None:
    output = refused("--policy.train_expert_only=true")
    assert "the policy type 'act' has no setting policy.train_expert_only" in output
    assert "act's settings:" in output and "chunk_size" in output


def test_a_policy_type_other_than_the_checkpoints_is_refused(smolvla: Path) -> None:
    for args in (
        ["--policy.type=pi0", f"--policy.path={smolvla}"],
        [f"--policy.path={smolvla}", "--policy.type=pi0"],
    ):
        output = refused(*args)
        assert "policy.type=pi0 but the checkpoint at" in output
        assert "is of type 'smolvla'" in output and "--policy.type=smolvla" in output


def test_two_different_paths_are_refused(smolvla: Path, tmp_path: Path) -> None:
    output = refused(f"--policy.path={smolvla}", f"--policy.pretrained_path={tmp_path}")
    assert "policy.path and policy.pretrained_path name different checkpoints" in output
    # The same folder under both names is one checkpoint.
    same = printed(f"--policy.path={smolvla}", f"--policy.pretrained_path={smolvla}")
    assert same["policy"]["type"] == "smolvla"


def test_a_missing_checkpoint_folder_is_one_line(tmp_path: Path) -> None:
    output = refused(f"--policy.path={tmp_path / 'runs' / 'nothing' / 'here'}")
    assert "no policy checkpoint here" in output and "pretrained_model" in output


def test_a_bad_value_in_the_checkpoint_names_its_config_json(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path / "bad", SmolVLAConfig(), normalization_mapping={"STATE": "X"})
    output = refused(f"--policy.path={folder}")
    assert str(folder / "config.json") in output and "unknown normalisation mode" in output


def test_a_checkpoint_of_an_unknown_type_is_refused(tmp_path: Path) -> None:
    folder = checkpoint(tmp_path / "odd", SmolVLAConfig(), type="groot_n9")
    output = refused(f"--policy.path={folder}")
    assert "unknown policy type 'groot_n9'" in output and "smolvla" in output


def test_resume_applies_overrides_to_the_runs_saved_policy_type(smolvla: Path, tmp_path: Path):
    """A fine-tuned SmolVLA run resumes with its own settings; `--policy.<SmolVLA field>` is
    read against SmolVLA, and the checkpoint is not read again."""
    run = tmp_path / "run"
    run.mkdir()
    saved = TrainCommandSettings(
        policy=SmolVLAConfig(pretrained_path=str(smolvla), train_expert_only=False),
        steps=4,
        output_dir=str(run),
    )
    (run / "rlctl_config.json").write_text(json.dumps(unstructure(saved)), encoding="utf-8")
    (smolvla / "config.json").unlink()
    config = printed(f"--resume={run}", "--steps=9", "--policy.num_steps=3")
    assert config["steps"] == 9 and config["output_dir"] == str(run)
    policy = config["policy"]
    assert policy["type"] == "smolvla" and policy["num_steps"] == 3
    assert policy["train_expert_only"] is False and policy["pretrained_path"] == str(smolvla)


def test_help_lists_the_settings_of_the_checkpoints_type(smolvla: Path) -> None:
    result = CliRunner().invoke(cli, ["train", f"--policy.path={smolvla}", "--help"])
    assert result.exit_code == 0, result.output
    assert "Below: smolvla's settings." in " ".join(result.output.split())
    assert "--policy.train_expert_only" in result.output
    assert "--policy.kl_weight" not in result.output
