"""The multi-task DiT as a user types it, at tiny size on a tiny CLIP made offline: `rlctl train
--policy.type=multi_task_dit` on LeRobot's sim_video fixture, fine-tuning from `--policy.path`,
`rlctl eval` on Meta-World and LIBERO (the env's task text reaching CLIP's tokenizer), and the
checkpoint served by `rlctl policy serve` to a remote robot."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

pytest.importorskip("transformers", reason="the multi-task DiT needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.remote.remote_policy import GrpcPolicyConnector
from rlctl.adapters.sim.envs import libero_setup
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.multi_task_dit import MultiTaskDiTConfig
from rlctl.domain.remote_inference import RemotePolicySettings
from rlctl.entrypoints.cli.main import cli
from tests.adapters.remote.server_process import ServerProcess, write_token

TOKEN = "a-token-for-the-multi-task-dit-serve-test-0123456789"
TINY_CLIP = Path(__file__).parents[1] / "adapters" / "policies" / "tiny_clip.py"
TINY = [
    "--policy.hidden_dim=32",
    "--policy.num_layers=2",
    "--policy.num_heads=4",
    "--policy.timestep_embed_dim=16",
    "--policy.horizon=8",
    "--policy.n_action_steps=4",
    "--policy.num_train_timesteps=10",
    "--policy.tokenizer_max_length=16",
]


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder: Path = runpy.run_path(str(TINY_CLIP))["write_tiny_clip"](
        tmp_path_factory.mktemp("mtdit") / "tiny-clip"
    )
    return folder


def changed(before: Path, after: Path) -> set[str]:
    from safetensors.torch import load_file

    old, new = load_file(before / "model.safetensors"), load_file(after / "model.safetensors")
    assert old.keys() == new.keys()
    return {key for key in old if not torch.equal(old[key], new[key])}


@pytest.mark.slow
def test_train_then_fine_tune_from_the_command_line(fixtures_dir: Path, clip: Path, tmp_path):
    common = [
        f"--dataset.root={fixtures_dir / 'sim_video'}",
        "--steps=2",
        "--batch_size=2",
        "--num_workers=0",
        "--log_freq=1",
        "--save_freq=2",
    ]
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--policy.type=multi_task_dit",
            f"--policy.vision_encoder_name={clip}",
            f"--policy.text_encoder_name={clip}",
            # sim_video's 48x64 camera, resized to the tiny CLIP's 32x32 with a random crop.
            "--policy.image_resize_shape=[36,36]",
            "--policy.image_crop_shape=[32,32]",
            *TINY,
            f"--output_dir={out}",
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    checkpoint = out / "checkpoints" / "last" / "pretrained_model"
    steps = json.loads((checkpoint / "policy_preprocessor.json").read_text())["steps"]
    assert [s["registry_name"] for s in steps] == [
        "rename_observations_processor",
        "to_batch_processor",
        "tokenizer_processor",
        "device_processor",
        "normalizer_processor",
    ]
    assert steps[2]["config"]["tokenizer_name"] == str(clip)
    train_config = json.loads((checkpoint / "train_config.json").read_text())
    assert train_config["optimizer"]["type"] == "adam"
    assert train_config["optimizer"]["lr"] == 2e-5
    assert train_config["scheduler"]["type"] == "diffuser"
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["drop_n_last_frames"] == 8 - 4 - 2 + 1

    policy = load_policy_folder(checkpoint)
    observation = {
        "observation.state": np.zeros((1, 2, 6), np.float32),
        "observation.images.front": np.full((1, 2, 3, 48, 64), 0.5, np.float32),
        "task": "pick the cube",
    }
    assert policy.predict_chunk(observation).actions.shape == (1, 4, 6)

    # Fine-tune it as LeRobot users do: its config, settings on top (flow matching now).
    tuned = tmp_path / "tuned"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            f"--policy.path={checkpoint}",
            "--policy.objective=flow_matching",
            "--policy.num_integration_steps=3",
            f"--output_dir={tuned}",
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    tuned_model = tuned / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((tuned_model / "config.json").read_text())
    assert config["objective"] == "flow_matching" and config["hidden_dim"] == 32
    assert config["pretrained_path"] == str(checkpoint)
    moved = changed(checkpoint, tuned_model)
    assert not {key for key in moved if ".text_model." in key}  # CLIP's text tower is frozen
    assert {key for key in moved if key.startswith("noise_predictor.")}
    assert {key for key in moved if key.startswith("observation_encoder.vision_encoder.")}


def saved_policy(clip: Path, folder: Path, cameras: dict, state_dim: int, action_dim: int) -> Path:
    inputs = {"observation.state": typed_feature("STATE", (state_dim,))}
    inputs.update({key: typed_feature("VISUAL", (3, 32, 32)) for key in cameras})
    config = MultiTaskDiTConfig(
        input_features=inputs,
        output_features={"action": typed_feature("ACTION", (action_dim,))},
        vision_encoder_name=str(clip),
        text_encoder_name=str(clip),
        hidden_dim=32,
        num_layers=2,
        num_heads=4,
        timestep_embed_dim=16,
        horizon=8,
        n_action_steps=4,
        objective="flow_matching",
        num_integration_steps=2,
        image_crop_shape=None,
        tokenizer_max_length=24,
        device="cpu",
    )
    stats = {
        "observation.state": {"min": -np.ones(state_dim), "max": np.ones(state_dim)},
        "action": {"min": -np.ones(action_dim), "max": np.ones(action_dim)},
        **{
            key: {"mean": np.full((3, 1, 1), 0.5), "std": np.full((3, 1, 1), 0.25)}
            for key in cameras
        },
    }
    return create_policy(config, stats).save(folder)


@pytest.mark.slow
def test_eval_on_metaworld_with_real_time_chunking_and_served(clip: Path, tmp_path: Path):
    pytest.importorskip("metaworld", reason="Meta-World is not installed")
    checkpoint = saved_policy(clip, tmp_path / "model", ["observation.image"], 4, 4)
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            f"--policy.path={checkpoint}",
            "--policy.rtc_config.enabled=true",
            "--policy.rtc_config.execution_horizon=2",
            "--env.type=metaworld",
            "--env.task=reach-v3",
            "--env.observation_height=32",
            "--env.observation_width=32",
            "--env.episode_length=6",
            "--eval.n_episodes=1",
            "--eval.batch_size=1",
            "--eval.use_async_envs=false",
            "--eval.max_episodes_rendered=0",
            f"--output_dir={tmp_path / 'eval'}",
        ],
    )
    assert result.exit_code == 0, result.output
    info = json.loads((tmp_path / "eval" / "eval_info.json").read_text())
    assert info["overall"]["n_episodes"] == 1

    # Served by `rlctl policy serve` (a real process on loopback): the robot's side stacks the
    # two observation steps, the server predicts from them.
    token = write_token(tmp_path / "token", TOKEN)
    server = ServerProcess(
        tmp_path / "server.log",
        f"--policy.path={checkpoint}",
        "--port=0",
        f"--token-file={token}",
        ready_timeout=240,  # imports transformers and builds both CLIP towers first
    )
    try:
        settings = RemotePolicySettings(
            server=server.address, token_file=str(token), connect_timeout_s=60
        )
        policy = GrpcPolicyConnector().connect(settings, realtime=False)
        try:
            assert policy.config.n_obs_steps == 2 and policy.actions_per_chunk == 4
            for _ in range(5):
                action = policy.select_action(
                    {
                        "observation.state": np.zeros((1, 4), np.float32),
                        "observation.image": np.full((1, 3, 32, 32), 0.5, np.float32),
                        "task": ["reach the goal"],
                    }
                )
                assert action.shape == (1, 4) and np.isfinite(action).all()
        finally:
            policy.close()
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.skipif(
    libero_setup.libero_root() is None or libero_setup.installed_assets() is None,
    reason="hf-libero or LIBERO's assets are not installed (uv sync --extra libero)",
)
def test_eval_on_libero(clip: Path, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    cameras = ["observation.images.image", "observation.images.image2"]
    checkpoint = saved_policy(clip, tmp_path / "model", cameras, 8, 7)
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            f"--policy.path={checkpoint}",
            "--env.type=libero",
            "--env.task=libero_object",
            "--env.task_ids=[0]",
            "--env.observation_height=32",
            "--env.observation_width=32",
            "--eval.n_episodes=1",
            "--eval.max_episode_steps=3",
            "--eval.batch_size=1",
            "--eval.use_async_envs=false",
            "--eval.max_episodes_rendered=0",
            f"--output_dir={tmp_path / 'eval'}",
        ],
    )
    assert result.exit_code == 0, result.output
    [episode] = json.loads((tmp_path / "eval" / "eval_info.json").read_text())["per_episode"]
    assert episode["length"] == 3
    assert episode["task"] == "pick up the alphabet soup and place it in the basket"
