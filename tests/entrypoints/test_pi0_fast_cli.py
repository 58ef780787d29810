"""π0-FAST from the command line at tiny sizes: `rlctl train-tokenizer` then `rlctl train
--policy.type=pi0_fast` on LeRobot's sim_video fixture, fine-tuning from the checkpoint
(`--policy.path`), `rlctl eval --env.type=libero` for a few steps, and `rlctl policy serve`
answering a chunk. PaliGemma's tokenizer is a tiny local folder (with reserved ids for the action
tokens) named by --policy.text_tokenizer_name."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

pytest.importorskip("transformers", reason="π0-FAST needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.policies.vla.fast import FASTTokenizer
from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
from rlctl.adapters.sim.envs import libero_setup
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.pi0_fast import PI0FastConfig
from rlctl.domain.remote_inference import ChunkRequest
from rlctl.entrypoints.cli.main import cli
from tests.adapters.remote.server_process import ServerProcess, free_port, write_token

TINY_TOKENIZER = Path(__file__).parents[1] / "adapters" / "policies" / "tiny_paligemma_tokenizer.py"
VLM = (
    "custom:width=32,depth=1,mlp_dim=64,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=1024,"
    "vision_width=32,vision_depth=1,vision_mlp_dim=64,vision_heads=2,patch_size=14"
)
PREPROCESSOR_ORDER = [
    "rename_observations_processor",
    "to_batch_processor",
    "relative_actions_processor",
    "normalizer_processor",
    "pi0_fast_prepare_state_tokenizer_processor_step",
    "tokenizer_processor",
    "action_tokenizer_processor",
    "device_processor",
]
TOKEN = "a-token-for-the-pi0-fast-serve-test-0123456789"


class VLAServer(ServerProcess):
    """A server that may take minutes to start: torch, transformers and the model to build, on
    a shared CPU."""

    def _wait_ready(self, timeout: float = 300.0) -> str:
        return super()._wait_ready(timeout)


@pytest.fixture(scope="module")
def text_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    write = runpy.run_path(str(TINY_TOKENIZER))["write_tiny_paligemma_tokenizer"]
    folder: Path = write(tmp_path_factory.mktemp("paligemma") / "tokenizer", 704)
    return folder


def tiny_settings(text_tokenizer: Path) -> list[str]:
    return [
        f"--policy.paligemma_variant={VLM}",
        "--policy.image_resolution=[28,28]",
        "--policy.tokenizer_max_length=32",
        "--policy.max_action_tokens=24",
        "--policy.max_decoding_steps=12",
        f"--policy.text_tokenizer_name={text_tokenizer}",
        # Two steps of training write no "Action:": decode whatever comes.
        "--policy.validate_action_token_prefix=false",
    ]


@pytest.mark.slow
def test_train_tokenizer_then_train_and_fine_tune_pi0_fast(
    fixtures_dir: Path, text_tokenizer: Path, tmp_path: Path
) -> None:
    dataset = f"--dataset.root={fixtures_dir / 'sim_video'}"
    fast = tmp_path / "fast"
    result = CliRunner().invoke(
        cli,
        [
            "train-tokenizer",
            dataset,
            "--action_horizon=4",
            "--encoded_dims=0:6",
            "--vocab_size=300",
            "--normalization_mode=MEAN_STD",  # π0-FAST's action normalisation
            f"--output_dir={fast}",
        ],
    )
    assert result.exit_code == 0, result.output
    common = [dataset, "--steps=2", "--batch_size=2", "--num_workers=0", "--save_freq=2"]
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--policy.type=pi0_fast",
            *tiny_settings(text_tokenizer),
            "--policy.chunk_size=4",
            "--policy.n_action_steps=4",
            f"--policy.action_tokenizer_name={fast}",
            f"--output_dir={out}",
            *common,
        ],
    )
    assert result.exit_code == 0, result.output
    checkpoint = out / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["type"] == "pi0_fast" and config["action_tokenizer_name"] == str(fast)
    steps = json.loads((checkpoint / "policy_preprocessor.json").read_text())["steps"]
    assert [s["registry_name"] for s in steps] == PREPROCESSOR_ORDER
    action_step = steps[PREPROCESSOR_ORDER.index("action_tokenizer_processor")]["config"]
    assert action_step["action_tokenizer_name"] == str(fast)
    assert action_step["max_action_tokens"] == 24

    policy = load_policy_folder(checkpoint)
    observation = {
        "observation.state": np.zeros((1, 6), np.float32),
        "observation.images.front": np.full((1, 3, 48, 64), 0.5, np.float32),
        "task": "push the t to the target",
    }
    assert policy.predict_chunk(observation).actions.shape == (1, 4, 6)

    tuned = tmp_path / "tuned"
    result = CliRunner().invoke(
        cli, ["train", f"--policy.path={checkpoint}", f"--output_dir={tuned}", *common]
    )
    assert result.exit_code == 0, result.output
    tuned_model = tuned / "checkpoints" / "last" / "pretrained_model"
    tuned_config = json.loads((tuned_model / "config.json").read_text())
    assert tuned_config["paligemma_variant"] == VLM and tuned_config["max_action_tokens"] == 24
    assert tuned_config["pretrained_path"] == str(checkpoint)
    before = load_file(checkpoint / "model.safetensors")
    after = load_file(tuned_model / "model.safetensors")
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[key], after[key]) for key in before)


@pytest.fixture
def libero_checkpoint(text_tokenizer: Path, tmp_path: Path) -> Path:
    """A tiny random π0-FAST for LIBERO's two cameras, 8-dim state and 7-dim actions."""
    rng = np.random.default_rng(0)
    fast = FASTTokenizer.fit(
        list(np.cumsum(rng.normal(size=(200, 4, 7)) * 0.3, axis=1)), scale=10.0, vocab_size=300
    ).save(tmp_path / "fast")
    torch.manual_seed(0)
    config = PI0FastConfig(
        input_features={
            "observation.images.image": typed_feature("VISUAL", (3, 64, 64)),
            "observation.images.image2": typed_feature("VISUAL", (3, 64, 64)),
            "observation.state": typed_feature("STATE", (8,)),
        },
        output_features={"action": typed_feature("ACTION", (7,))},
        paligemma_variant=VLM,
        image_resolution=(28, 28),
        chunk_size=4,
        n_action_steps=4,
        tokenizer_max_length=32,
        max_action_tokens=24,
        max_decoding_steps=12,
        text_tokenizer_name=str(text_tokenizer),
        action_tokenizer_name=str(fast),
        validate_action_token_prefix=False,
        device="cpu",
    )
    stats = {
        "observation.state": {"mean": np.zeros(8), "std": np.ones(8)},
        "action": {"mean": np.zeros(7), "std": np.full(7, 0.1)},
    }
    return create_policy(config, stats, device="cpu").save(tmp_path / "pi0_fast")


@pytest.mark.slow
@pytest.mark.skipif(
    libero_setup.libero_root() is None or libero_setup.installed_assets() is None,
    reason="hf-libero or LIBERO's assets are not installed (uv sync --extra libero)",
)
def test_pi0_fast_evaluates_on_libero(
    libero_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            f"--policy.path={libero_checkpoint}",
            "--env.type=libero",
            "--env.task=libero_object",
            "--env.task_ids=[0]",
            "--env.observation_height=64",
            "--env.observation_width=64",
            "--eval.n_episodes=1",
            "--eval.max_episode_steps=6",
            "--eval.batch_size=1",
            "--eval.use_async_envs=false",
            "--eval.max_episodes_rendered=0",
            f"--output_dir={tmp_path / 'eval'}",
        ],
    )
    assert result.exit_code == 0, result.output
    info = json.loads((tmp_path / "eval" / "eval_info.json").read_text())
    [episode] = info["per_episode"]
    assert episode["length"] == 6  # two chunks of 4 actions decoded from tokens, then cut
    assert episode["task"] == "pick up the alphabet soup and place it in the basket"


@pytest.mark.slow
def test_pi0_fast_serves_chunks_over_the_wire(libero_checkpoint: Path, tmp_path: Path) -> None:
    token = write_token(tmp_path / "token", TOKEN)
    port = free_port()
    server = VLAServer(
        tmp_path / "server.log",
        f"--policy.path={libero_checkpoint}",
        f"--port={port}",
        f"--token-file={token}",
    )
    try:
        client = GrpcPolicyClient(f"127.0.0.1:{port}", token=TOKEN)
        rng = np.random.default_rng(1)
        observation = {
            "observation.state": rng.normal(size=(2, 8)).astype(np.float32),
            "observation.images.image": rng.uniform(size=(2, 3, 64, 64)).astype(np.float32),
            "observation.images.image2": rng.uniform(size=(2, 3, 64, 64)).astype(np.float32),
        }
        request = ChunkRequest(observation=observation, task=("open the drawer", ""))
        reply = client.predict(request, timeout=60)
        client.close()
    finally:
        server.stop()
    local = load_policy_folder(libero_checkpoint).predict_chunk(
        {**observation, "task": ["open the drawer", ""]}
    )
    assert reply.actions.shape == (2, 4, 7)
    np.testing.assert_allclose(reply.actions, local.actions.numpy(), atol=1e-5)
