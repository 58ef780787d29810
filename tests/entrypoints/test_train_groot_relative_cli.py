"""`rlctl train --policy.type=groot --policy.use_relative_actions=true` as a user types it, a few
steps at tiny size (tiny_groot.py) on a dataset whose episodes outlast GR00T's 40-step chunk
(relative_arm_dataset.py): the run computes the per-step relative statistics, the checkpoint
holds LeRobot's relative pack and decode steps and acts in absolute terms; a dataset with shorter
episodes is refused in one line before anything is built."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("transformers", reason="GR00T needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.domain.errors import NotSupported
from rlctl.entrypoints.cli.main import cli

POLICIES = Path(__file__).parents[1] / "adapters" / "policies"
RELATIVE = ["--policy.use_relative_actions=true", '--policy.relative_exclude_joints=["gripper"]']


def groot_args(tiny: Path, dataset: Path, out: Path) -> list[str]:
    return [
        "train",
        "--policy.type=groot",
        f"--policy.base_model_path={tiny / 'base'}",
        "--policy.chunk_size=8",
        "--policy.n_action_steps=8",
        "--policy.max_state_dim=16",
        "--policy.max_action_dim=16",
        "--policy.use_bf16=false",
        *RELATIVE,
        f"--dataset.root={dataset}",
        "--steps=2",
        "--batch_size=2",
        "--num_workers=0",
        "--log_freq=1",
        "--save_freq=2",
        f"--output_dir={out}",
    ]


@pytest.mark.slow
def test_train_groot_with_relative_actions_from_the_command_line(tmp_path: Path) -> None:
    tiny = runpy.run_path(str(POLICIES / "tiny_groot.py"))["write_tiny_groot"](tmp_path / "tiny")
    write = runpy.run_path(str(POLICIES / "relative_arm_dataset.py"))["write_arm_dataset"]
    dataset = write(tmp_path / "arm")
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, groot_args(tiny, dataset, out))
    assert result.exit_code == 0, result.output
    checkpoint = out / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["use_relative_actions"] and config["relative_exclude_joints"] == ["gripper"]
    pre = json.loads((checkpoint / "policy_preprocessor.json").read_text())["steps"]
    post = json.loads((checkpoint / "policy_postprocessor.json").read_text())["steps"]
    pack = pre[2]["config"]
    assert pack["modality_config"]["action"]["modality_keys"] == ["single_arm", "gripper"]
    relative = pack["raw_stats"]["relative_action"]["single_arm"]
    assert np.asarray(relative["min"]).shape == (40, 3) and relative["count"] == [14] * 40
    assert post[0]["registry_name"] == "groot_n1_7_action_decode_v1"

    policy = load_policy_folder(checkpoint)
    state = np.array([[0.1, -0.2, 0.3, 1.0, 0.5]], np.float32)
    observation = {
        "observation.state": state,
        "observation.images.front": np.full((1, 3, 32, 32), 0.5, np.float32),
        "task": "close the drawer",
    }
    chunk = policy.predict_chunk(observation).actions.numpy()
    assert chunk.shape == (1, 8, 4)
    # The arm's joints come back around the state (relative per-step ranges are small here).
    low = np.asarray(relative["min"])[:8] + state[:, None, :3]
    high = np.asarray(relative["max"])[:8] + state[:, None, :3]
    assert ((chunk[..., :3] >= low - 1e-5) & (chunk[..., :3] <= high + 1e-5)).all()
    with pytest.raises(NotSupported, match="whole chunk at a time"):
        policy.select_action(observation)


def test_episodes_shorter_than_the_chunk_are_one_line(fixtures_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = groot_args(tmp_path / "tiny", fixtures_dir / "sim_video", out)
    result = CliRunner().invoke(cli, [a for a in args if "relative_exclude" not in a])
    assert result.exit_code == 1
    assert "per step of 40-frame chunks" in result.output and "Traceback" not in result.output
    assert "more than 40 frames" in result.output
    # Refused before any model is built, and nothing of the run is left: the folder it made for
    # its settings is gone (its parent, which was there, stays).
    assert not out.exists() and tmp_path.is_dir()

    # A folder the user had keeps what it held; only the run's settings file goes.
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result = CliRunner().invoke(cli, [a for a in args if "relative_exclude" not in a])
    assert result.exit_code == 1 and "per step of 40-frame chunks" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
