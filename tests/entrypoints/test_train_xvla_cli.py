"""`rlctl train --policy.type=xvla` as a user types it, on LeRobot's sim_video fixture at tiny
sizes (a tiny Florence-2 config given on the command line, a tiny BART-style tokenizer folder);
then fine-tuning from the checkpoint with the vision encoder frozen (--policy.path
--policy.freeze_vision_encoder); then `rlctl eval --env.type=libero` of a tiny ee6d X-VLA, which
reads LIBERO through X-VLA's own env processors (a 20-value state, 7-value actions), locally and
served by `rlctl policy serve`; and `rlctl eval --env.type=metaworld` of a tiny `auto` X-VLA
(Meta-World's corner camera, 4-value state and actions: the env's own processors)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

pytest.importorskip("transformers", reason="X-VLA needs transformers")

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.sim.envs import libero_setup
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.xvla import XVLAConfig
from rlctl.entrypoints.cli.main import cli
from tests.adapters.remote.server_process import ServerProcess, write_token

TINY = runpy.run_path(str(Path(__file__).parents[1] / "adapters" / "policies" / "tiny_xvla.py"))
VISION = "model.vlm.vision_tower."
TRANSFORMER = "model.transformer."
TOKEN = "a-token-for-the-xvla-serve-test-0123456789"
SIZES = [
    "--policy.hidden_size=16",
    "--policy.depth=1",
    "--policy.num_heads=2",
    "--policy.num_domains=2",
    "--policy.len_soft_prompts=2",
    "--policy.max_len_seq=96",
    "--policy.tokenizer_max_length=8",
]
NEEDS_LIBERO = pytest.mark.skipif(
    libero_setup.libero_root() is None or libero_setup.installed_assets() is None,
    reason="hf-libero or LIBERO's assets are not installed (uv sync --extra libero)",
)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder: Path = TINY["write_tiny_bart_tokenizer"](tmp_path_factory.mktemp("bart") / "tok")
    return folder


class SlowStartServer(ServerProcess):
    """`rlctl policy serve` given longer to start: it imports transformers for X-VLA."""

    def _wait_ready(self, timeout: float = 240.0) -> str:
        return super()._wait_ready(timeout)


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


@pytest.mark.slow
def test_train_then_fine_tune_xvla_from_the_command_line(
    fixtures_dir: Path, tokenizer: Path, tmp_path: Path
) -> None:
    common = [
        f"--dataset.root={fixtures_dir / 'sim_video'}",
        "--steps=2",
        "--batch_size=2",
        "--num_workers=0",
        "--log_freq=1",
        "--save_freq=2",
    ]
    out = tmp_path / "run"
    code, output = run(
        "train",
        "--policy.type=xvla",
        f"--policy.florence_config={json.dumps(TINY['tiny_florence']())}",
        f"--policy.tokenizer_name={tokenizer}",
        *SIZES,
        "--policy.chunk_size=4",
        "--policy.n_action_steps=4",
        "--policy.num_denoising_steps=2",
        "--policy.action_mode=auto",
        "--policy.max_action_dim=8",
        "--policy.resize_imgs_with_padding=[32,32]",
        f"--output_dir={out}",
        *common,
    )
    assert code == 0, output
    checkpoint = out / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["type"] == "xvla" and config["florence_config"] == TINY["tiny_florence"]()
    assert config["action_mode"] == "auto" and config["resize_imgs_with_padding"] == [32, 32]
    steps = json.loads((checkpoint / "policy_preprocessor.json").read_text())["steps"]
    assert [s["registry_name"] for s in steps][2:6] == [
        "tokenizer_processor",
        "xvla_image_to_float",
        "xvla_imagenet_normalize",
        "xvla_add_domain_id",
    ]
    policy = load_policy_folder(checkpoint)
    observation = {
        "observation.state": np.zeros((1, 6), np.float32),
        "observation.images.front": np.full((1, 3, 48, 64), 0.5, np.float32),
        "task": "push the t to the target",
    }
    assert policy.predict_chunk(observation).actions.shape == (1, 4, 6)

    # Fine-tune it with the vision encoder frozen.
    tuned = tmp_path / "tuned"
    code, output = run(
        "train",
        f"--policy.path={checkpoint}",
        "--policy.freeze_vision_encoder=true",
        f"--output_dir={tuned}",
        *common,
    )
    assert code == 0, output
    tuned_model = tuned / "checkpoints" / "last" / "pretrained_model"
    tuned_config = json.loads((tuned_model / "config.json").read_text())
    assert tuned_config["freeze_vision_encoder"] is True and tuned_config["chunk_size"] == 4
    assert tuned_config["pretrained_path"] == str(checkpoint)
    before = load_file(checkpoint / "model.safetensors")
    after = load_file(tuned_model / "model.safetensors")
    assert before.keys() == after.keys()
    moved = {key for key in before if not torch.equal(before[key], after[key])}
    assert not {key for key in moved if key.startswith(VISION)}
    assert {key for key in moved if key.startswith(TRANSFORMER)}


def tiny_libero_xvla(folder: Path, tokenizer: Path) -> Path:
    """An ee6d X-VLA reading what X-VLA's LIBERO env processors give: the two cameras and the
    20-value state."""
    torch.manual_seed(0)
    camera = typed_feature("VISUAL", (3, 64, 64))
    config = XVLAConfig(
        input_features={
            "observation.images.image": camera,
            "observation.images.image2": camera,
            "observation.state": typed_feature("STATE", (20,)),
        },
        output_features={"action": typed_feature("ACTION", (20,))},
        florence_config=TINY["tiny_florence"](),
        tokenizer_name=str(tokenizer),
        tokenizer_max_length=8,
        hidden_size=16,
        depth=1,
        num_heads=2,
        num_domains=2,
        len_soft_prompts=2,
        max_len_seq=96,
        chunk_size=4,
        n_action_steps=4,
        num_denoising_steps=2,
        resize_imgs_with_padding=(32, 32),
        device="cpu",
    )
    return create_policy(config).save(folder)


def libero_eval(out: Path, *policy: str) -> tuple[int, str, dict[str, Any]]:
    code, output = run(
        "eval",
        "--env.type=libero",
        "--env.task=libero_object",
        "--env.task_ids=[0]",
        "--env.observation_height=64",
        "--env.observation_width=64",
        *policy,
        "--eval.n_episodes=1",
        "--eval.max_episode_steps=3",
        "--eval.batch_size=1",
        "--eval.use_async_envs=false",
        "--eval.max_episodes_rendered=0",
        f"--output_dir={out}",
        "--progress=silent",
    )
    info = json.loads((out / "eval_info.json").read_text()) if code == 0 else {}
    return code, output, info


@pytest.mark.slow
@NEEDS_LIBERO
def test_xvla_evaluates_on_libero_locally_and_served(
    tokenizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)  # rendering offscreen, as on a server
    checkpoint = tiny_libero_xvla(tmp_path / "xvla", tokenizer)
    code, output, info = libero_eval(tmp_path / "local", f"--policy.path={checkpoint}")
    assert code == 0, output
    [episode] = info["per_episode"]
    assert episode["length"] == 3

    token = write_token(tmp_path / "token", TOKEN)
    server = SlowStartServer(
        tmp_path / "server.log",
        f"--policy.path={checkpoint}",
        "--port=0",
        f"--token-file={token}",
    )
    try:
        code, output, info = libero_eval(
            tmp_path / "served",
            f"--policy.server={server.address}",
            f"--policy.token_file={token}",
            "--policy.connect_timeout_s=30",
        )
    finally:
        server.stop()
    assert code == 0, output
    assert info["per_episode"][0]["length"] == 3


@pytest.mark.slow
def test_xvla_evaluates_on_metaworld(tokenizer: Path, tmp_path: Path) -> None:
    pytest.importorskip("metaworld", reason="needs the metaworld extra")
    torch.manual_seed(0)
    config = XVLAConfig(
        input_features={
            "observation.image": typed_feature("VISUAL", (3, 32, 32)),
            "observation.state": typed_feature("STATE", (4,)),
        },
        output_features={"action": typed_feature("ACTION", (4,))},
        florence_config=TINY["tiny_florence"](),
        tokenizer_name=str(tokenizer),
        tokenizer_max_length=8,
        hidden_size=16,
        depth=1,
        num_heads=2,
        num_domains=2,
        len_soft_prompts=2,
        max_len_seq=96,
        chunk_size=4,
        n_action_steps=4,
        num_denoising_steps=2,
        action_mode="auto",
        max_action_dim=8,
        device="cpu",
    )
    stats = {
        "observation.state": {"mean": np.zeros(4), "std": np.ones(4)},
        "action": {"mean": np.zeros(4), "std": np.ones(4)},
    }
    checkpoint = create_policy(config, stats).save(tmp_path / "xvla")
    out = tmp_path / "eval"
    code, output = run(
        "eval",
        "--env.type=metaworld",
        "--env.task=reach-v3",
        "--env.observation_height=32",
        "--env.observation_width=32",
        "--env.episode_length=6",
        f"--policy.path={checkpoint}",
        "--eval.n_episodes=1",
        "--eval.batch_size=1",
        "--eval.use_async_envs=false",
        "--eval.max_episodes_rendered=0",
        f"--output_dir={out}",
        "--progress=silent",
    )
    assert code == 0, output
    info = json.loads((out / "eval_info.json").read_text())
    [episode] = info["per_episode"]
    # Six steps: one chunk of four, then a second chunk for the last two.
    assert episode["length"] == 6
    assert np.isfinite(episode["sum_reward"])
