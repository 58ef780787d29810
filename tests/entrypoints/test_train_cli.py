"""`rlctl train` as a user types it, on a tiny MLP over LeRobot's sim_video fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.domain.frames import Transition
from rlctl.entrypoints.cli.main import cli
from rlctl.entrypoints.cli.train import TrainCommandSettings
from rlctl.entrypoints.cli.train_config import run_folder


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def runner():
    return CliRunner()


def train_args(sim_video: Path, out: Path, *extra: str) -> list[str]:
    return [
        "train",
        f"--dataset.root={sim_video}",
        "--policy.type=mlp",
        "--policy.chunk_size=5",
        "--policy.n_action_steps=5",
        "--policy.hidden_dims=[32,32]",
        "--steps=4",
        "--batch_size=4",
        "--num_workers=0",
        "--log_freq=1",
        "--save_freq=2",
        f"--output_dir={out}",
        *extra,
    ]


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_train_writes_config_metrics_and_loadable_checkpoints(runner, fixtures_dir, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(cli, train_args(fixtures_dir / "sim_video", out))
    assert result.exit_code == 0, result.output
    assert "trained steps 0..4 of 4" in result.output

    config = json.loads((out / "rlctl_config.json").read_text())
    assert config["policy"]["type"] == "mlp" and config["steps"] == 4
    assert config["job_name"] == "mlp"
    assert [m["step"] for m in metrics(out)] == [1, 2, 3, 4]
    assert {"loss", "lr", "grad_norm", "samples_per_s", "data_wait"} <= set(metrics(out)[0])
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["000002", "000004", "last"]

    policy = load_policy_folder(out / "checkpoints" / "last" / "pretrained_model")
    chunk = policy.predict_chunk({"observation.state": torch.zeros(1, 6)})
    assert chunk.actions.shape == (1, 5, 6)


def test_resume_continues_with_the_saved_settings(runner, fixtures_dir, tmp_path):
    out = tmp_path / "run"
    assert runner.invoke(cli, train_args(fixtures_dir / "sim_video", out)).exit_code == 0
    result = runner.invoke(cli, ["train", f"--resume={out}", "--steps=6"])
    assert result.exit_code == 0, result.output
    assert "trained steps 4..6 of 6" in result.output
    assert [m["step"] for m in metrics(out)] == [1, 2, 3, 4, 5, 6]
    saved = json.loads((out / "rlctl_config.json").read_text())
    assert saved["steps"] == 6 and saved["policy"]["hidden_dims"] == [32, 32]


def test_a_new_run_into_a_used_output_dir_is_refused(runner, fixtures_dir, tmp_path):
    out = tmp_path / "run"
    assert runner.invoke(cli, train_args(fixtures_dir / "sim_video", out)).exit_code == 0
    before = (out / "rlctl_config.json").read_text()
    result = runner.invoke(cli, train_args(fixtures_dir / "sim_video", out, "--steps=9"))
    assert result.exit_code == 1
    assert "already holds a training run" in result.output and "--resume" in result.output
    assert (out / "rlctl_config.json").read_text() == before  # the old run's settings survive


def test_missing_dataset_is_one_line_and_a_hint(runner, tmp_path):
    result = runner.invoke(cli, ["train", "--policy.type=mlp", f"--output_dir={tmp_path}/x"])
    assert result.exit_code == 1
    assert "no dataset given" in result.output and "--dataset.root" in result.output


def test_print_config_shows_the_policy_and_schedule(runner):
    result = runner.invoke(cli, ["train", "--policy.type=diffusion", "--print-config"])
    assert result.exit_code == 0
    config = json.loads(result.output)
    assert config["policy"]["type"] == "diffusion" and config["steps"] == 100_000
    assert config["dataset"]["image_transforms"]["tfs"]["affine"]["type"] == "RandomAffine"


def test_print_config_shows_a_fine_tuned_policys_config_under_the_command_line(
    runner, fixtures_dir
):
    pretrained = fixtures_dir / "act_tiny"
    args = [f"--policy.pretrained_path={pretrained}", "--policy.dropout=0.25", "--print-config"]
    result = runner.invoke(cli, ["train", *args])
    assert result.exit_code == 0, result.output
    policy = json.loads(result.output)["policy"]
    assert policy["type"] == "act" and policy["dim_model"] == 32 and policy["chunk_size"] == 5
    assert policy["dropout"] == 0.25 and policy["pretrained_path"] == str(pretrained)


def test_settings_structure_env_and_overrides():
    from rlctl.domain.config import parse_overrides, resolve, unstructure

    settings = resolve(
        TrainCommandSettings,
        unstructure(TrainCommandSettings()),
        overrides=parse_overrides(["--env.type=pusht", "--optimizer.lr=3e-4", "--eval_freq=5"]),
    )
    assert settings.env is not None and settings.env.type == "pusht"
    assert settings.optimizer.lr == 3e-4 and settings.eval_freq == 5


def test_run_folder_of_a_checkpoint(tmp_path):
    checkpoint = tmp_path / "run" / "checkpoints" / "000004"
    (checkpoint / "training_state").mkdir(parents=True)
    assert run_folder(str(checkpoint)) == tmp_path / "run"
    assert run_folder(str(checkpoint / "pretrained_model")) == tmp_path / "run"
    assert run_folder(str(tmp_path / "run")) == tmp_path / "run"


def test_the_evaluator_runs_evaluate_policy_in_the_configured_simulation():
    from dependency_injector import providers

    from rlctl.entrypoints.container import build_container

    calls = []
    container = build_container()
    container.evaluate_policy.override(
        providers.Factory(
            lambda simulation, policy: (
                lambda settings: calls.append(("evaluate", simulation, policy, settings))
            )
        )
    )
    evaluate = container.training_evaluator("sim")
    evaluate("policy", "eval settings")
    evaluate("policy 2", "eval settings")
    assert calls == [
        ("evaluate", "sim", "policy", "eval settings"),
        ("evaluate", "sim", "policy 2", "eval settings"),
    ]


RELATIVE = ["--policy.use_relative_actions=true", '--policy.relative_exclude_joints=["joint_5"]']


@pytest.mark.slow
def test_relative_actions_then_fine_tuning_as_a_user_types_them(runner, fixtures_dir, tmp_path):
    sim_video, out = fixtures_dir / "sim_video", tmp_path / "run"
    # --env.type without --eval_freq: nothing is evaluated, but the run records its simulator.
    args = train_args(sim_video, out, *RELATIVE, "--env.type=pusht", "--eval_freq=0")
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    pretrained = out / "checkpoints" / "last" / "pretrained_model"
    env = json.loads((pretrained / "train_config.json").read_text())["env"]
    assert env["type"] == "pusht" and env["fps"] == 10 and env["obs_type"] == "pixels_agent_pos"
    assert env["features"]["pixels"] == {"type": "VISUAL", "shape": [96, 96, 3]}

    # The checkpoint acts in absolute terms: the state plus its relative prediction.
    policy = load_policy_folder(pretrained)
    state = torch.tensor([[0.5, -0.5, 0.25, 1.0, -1.0, 2.0]])
    chunk = policy.predict_chunk({"observation.state": state}).actions
    with torch.no_grad():
        normalised = policy.model.predict_chunk(
            policy.preprocessor.process_batch({"observation.state": state})
        )
    relative = policy.postprocessor[0](Transition(action=normalised)).action
    torch.testing.assert_close(chunk[..., :5], relative[..., :5] + state[:, None, :5])
    torch.testing.assert_close(chunk[..., 5], relative[..., 5])

    # Fine-tune from it: its config (type, sizes, relative actions), these settings on top.
    tuned = tmp_path / "tuned"
    result = runner.invoke(
        cli,
        [
            "train",
            f"--dataset.root={sim_video}",
            f"--policy.pretrained_path={pretrained}",
            "--policy.optimizer_lr=5e-4",
            "--steps=2",
            "--batch_size=4",
            "--num_workers=0",
            f"--output_dir={tuned}",
        ],
    )
    assert result.exit_code == 0, result.output
    saved = json.loads((tuned / "rlctl_config.json").read_text())["policy"]
    assert saved["type"] == "mlp" and saved["hidden_dims"] == [32, 32]
    assert saved["use_relative_actions"] and saved["relative_exclude_joints"] == ["joint_5"]
    assert saved["optimizer_lr"] == 5e-4 and saved["pretrained_path"] == str(pretrained)
    config = json.loads((tuned / "checkpoints/last/pretrained_model/config.json").read_text())
    assert config["pretrained_path"] == str(pretrained) and config["use_relative_actions"]

    # Another policy type is one line, with what to do.
    result = runner.invoke(
        cli,
        [
            "train",
            f"--dataset.root={sim_video}",
            "--policy.type=act",
            f"--policy.pretrained_path={pretrained}",
            f"--output_dir={tmp_path / 'act'}",
        ],
    )
    assert result.exit_code == 1
    assert "policy.type=act but the checkpoint at" in result.output
    assert "is of type 'mlp'" in result.output
    assert "--policy.type=mlp" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "act").exists()  # refused before the run starts


def test_an_unknown_excluded_joint_is_one_line(runner, fixtures_dir, tmp_path):
    args = train_args(fixtures_dir / "sim_video", tmp_path / "run", RELATIVE[0])
    result = runner.invoke(cli, [*args, '--policy.relative_exclude_joints=["wrist"]'])
    assert result.exit_code == 1
    assert "relative_exclude_joints ['wrist'] match no action dimension" in result.output
    assert "joint_0" in result.output and "Traceback" not in result.output


def test_a_hub_repo_id_is_fine_tuned_from_with_the_command_line_on_top(tmp_path, monkeypatch):
    """`--policy.path=REPO_ID` reads the repo's config.json alone (through the container's policy
    resolver, an in-memory Hub here): its config is the base, the command line's settings win,
    and the weights are left for training to pull."""
    from dependency_injector import providers

    from rlctl.adapters.memory.hub import InMemoryHub
    from rlctl.application.use_cases.push_policy import PushPolicy, PushPolicyRequest
    from rlctl.domain.policies import MLPConfig, lerobot_config_data
    from rlctl.entrypoints.cli.train_config import resolve_train_settings
    from rlctl.entrypoints.container import build_container

    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "pushed"
    folder.mkdir()
    pushed = MLPConfig(hidden_dims=(7, 7), chunk_size=4, n_action_steps=2, device="cuda")
    (folder / "config.json").write_text(json.dumps(lerobot_config_data(pushed)))
    (folder / "model.safetensors").write_bytes(b"weights")
    hub = InMemoryHub(tmp_path / "hub")
    PushPolicy(hub)(PushPolicyRequest(str(folder), "alice/mlp"))
    container = build_container()
    container.hub.override(providers.Object(hub))

    args = ["--policy.path=alice/mlp", "--policy.dropout=0.25", "--steps=3"]
    tuned = resolve_train_settings(TrainCommandSettings, args, container=container, environ={})

    assert isinstance(tuned.policy, MLPConfig) and tuned.policy.hidden_dims == (7, 7)
    assert tuned.policy.dropout == 0.25 and tuned.steps == 3
    assert tuned.policy.pretrained_path == "alice/mlp"
    assert tuned.policy.device is None  # where it trained is not inherited
    assert [name for _, _, name in hub.fetched] == ["config.json"]  # no weights yet


def test_help_lists_the_registered_trainable_policy_types(runner):
    from rlctl.domain.policies import known_policy_types

    result = runner.invoke(cli, ["train", "--help"])
    assert result.exit_code == 0, result.output
    line = next(row for row in result.output.splitlines() if "TYPE: " in row)
    listed = line.split("TYPE: ")[1].strip().split("|")
    known = known_policy_types()
    assert sorted(listed) == sorted(name for name, cls in known.items() if cls.trainable)
    assert {"act", "diffusion", "mlp", "smolvla"} <= set(listed)
    assert "random" in known and "random" not in listed  # acts without learning


def test_a_nan_in_the_data_stops_training_with_one_message_and_keeps_the_checkpoints(
    runner, tmp_path
):
    from tests.adapters.training.points import points_dataset, set_action

    dataset = points_dataset(tmp_path / "points", episodes=1, length=6)
    set_action(dataset, 2, 1, float("nan"))  # drawn by the first batch (all six frames)
    out = tmp_path / "run"
    result = runner.invoke(
        cli,
        [
            "train", f"--dataset.root={dataset}", "--policy.type=mlp", "--policy.chunk_size=2",
            "--policy.n_action_steps=2", "--policy.hidden_dims=[8]", "--steps=5",
            "--batch_size=6", "--num_workers=0", "--save_freq=1", f"--output_dir={out}",
        ],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "error: " in result.output and "training stopped at step 1:" in result.output
    assert "the data holds NaN or inf in action" in result.output
    assert f"hint: find the damaged rows with `rlctl dataset check {dataset}`" in result.output
    assert "Traceback" not in result.output
    assert not (out / "checkpoints").exists()
