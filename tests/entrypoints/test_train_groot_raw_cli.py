"""`rlctl train --policy.type=groot --policy.base_model_path=DIR` from one of NVIDIA's own N1.7
checkpoints (raw_groot.py: sharded weights under NVIDIA's key names, processor_config.json,
statistics.json, embodiment_id.json), as a user fine-tunes from `nvidia/GR00T-N1.7-3B`: the run
starts from the checkpoint's weights, trains with its embodiment's statistics and native
relative actions, and the saved checkpoint acts in absolute terms, one whole chunk at a time."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("transformers", reason="GR00T needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.entrypoints.cli.main import cli

POLICIES = Path(__file__).parents[1] / "adapters" / "policies"
RAW = runpy.run_path(str(POLICIES / "raw_groot.py"))


@pytest.mark.slow
def test_train_groot_from_a_raw_nvidia_checkpoint_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlctl.adapters.training import data

    asked: list[object] = []
    reader = data.LeRobotDatasetReader

    def recording_reader(*args: object, **kwargs: object) -> object:
        asked.append(kwargs.get("delta_timestamps"))
        return reader(*args, **kwargs)

    monkeypatch.setattr(data, "LeRobotDatasetReader", recording_reader)
    tiny = runpy.run_path(str(POLICIES / "tiny_groot.py"))["write_tiny_groot"](tmp_path / "tiny")
    raw = RAW["write_raw_groot"](tiny, tmp_path / "raw")
    dataset = runpy.run_path(str(POLICIES / "relative_arm_dataset.py"))["write_arm_dataset"](
        tmp_path / "arm"
    )
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--policy.type=groot",
            f"--policy.base_model_path={raw}",
            f"--policy.embodiment_tag={RAW['TAG']}",
            "--policy.chunk_size=8",
            "--policy.n_action_steps=8",
            "--policy.max_state_dim=16",
            "--policy.max_action_dim=16",
            "--policy.use_bf16=false",
            f"--dataset.root={dataset}",
            "--steps=2",
            "--batch_size=2",
            "--num_workers=0",
            "--log_freq=1",
            "--save_freq=2",
            f"--output_dir={out}",
        ],
    )
    assert result.exit_code == 0, result.output
    # chunk_size 8, the checkpoint's chunk for the embodiment 6: the trainer reads 6 actions.
    assert asked == [{"action": [i / 10 for i in range(RAW["HORIZON"])]}]
    checkpoint = out / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["base_model_path"] == str(raw) and config["embodiment_tag"] == RAW["TAG"]
    statistics = json.loads((raw / "statistics.json").read_text())[RAW["TAG"]]
    pre = json.loads((checkpoint / "policy_preprocessor.json").read_text())["steps"]
    post = json.loads((checkpoint / "policy_postprocessor.json").read_text())["steps"]
    pack = next(s for s in pre if s["registry_name"] == "groot_n1_7_pack_inputs_v1")["config"]
    assert pack["raw_stats"] == statistics and pack["embodiment_mapping"][RAW["TAG"]] == 5
    assert pack["valid_action_horizon"] == RAW["HORIZON"]
    decode = post[0]
    assert decode["registry_name"] == "groot_n1_7_action_decode_v1"
    assert decode["config"]["use_relative_action"]

    # The frozen backbone is the raw checkpoint's, as it was read (bfloat16 -> float32).
    from safetensors import safe_open

    key = "backbone.model.model.language_model.layers.1.mlp.up_proj.weight"
    shard = json.loads((raw / "model.safetensors.index.json").read_text())["weight_map"][key]
    with (
        safe_open(str(raw / shard), framework="pt") as given,
        safe_open(str(checkpoint / "model.safetensors"), framework="pt") as saved,
    ):
        assert (saved.get_tensor(f"_groot_model.{key}") == given.get_tensor(key).float()).all()

    policy = load_policy_folder(checkpoint)
    state = np.array([[0.1, -0.2, 0.3, 0.6, 0.5]], np.float32)
    observation = {
        "observation.state": state,
        "observation.images.front": np.full((1, 3, 32, 32), 0.5, np.float32),
        "task": "close the drawer",
    }
    chunk = policy.predict_chunk(observation).actions.numpy()
    assert chunk.shape == (1, RAW["HORIZON"], 4)
    relative = statistics["relative_action"]["arm"]
    low = np.asarray(relative["min"]) + state[:, None, :3]
    high = np.asarray(relative["max"]) + state[:, None, :3]
    assert ((chunk[..., :3] >= low - 1e-5) & (chunk[..., :3] <= high + 1e-5)).all()
