"""Policy processors: the torch device step, and LeRobot's default pair built from a config."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from rlctl.adapters.policies.checkpoint import read_config
from rlctl.adapters.policies.processors import (
    DeviceConfig,
    DeviceStep,
    make_pre_post_processors,
    write_pipeline,
)
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.frames import Transition
from rlctl.domain.policies import MLPConfig
from rlctl.domain.processors import ProcessorPipeline, RelativeActionsConfig


def test_device_step_turns_numpy_into_tensors_and_casts_floats() -> None:
    step = DeviceStep(DeviceConfig("cpu", float_dtype="float64"))
    out = step(
        Transition(
            observation={"observation.state": np.ones(3, np.float32), "note": "text"},
            action=torch.zeros(2),
            complementary_data={"index": np.array([4]), "task": ["pick"]},
        )
    )
    state = out.observation["observation.state"]
    assert isinstance(state, torch.Tensor) and state.dtype == torch.float64
    assert out.observation["note"] == "text" and out.complementary_data["task"] == ["pick"]
    assert out.complementary_data["index"].dtype == torch.int64  # integers keep their dtype
    assert out.action.dtype == torch.float64


def test_device_step_config_round_trips_through_the_registry() -> None:
    pipeline = ProcessorPipeline([DeviceStep(DeviceConfig("cpu", "bfloat16"))], name="p")
    data = pipeline.to_data()
    assert data["steps"] == [
        {
            "registry_name": "device_processor",
            "config": {"device": "cpu", "float_dtype": "bfloat16"},
        }
    ]
    rebuilt = ProcessorPipeline.from_data(data)
    assert isinstance(rebuilt[0], DeviceStep) and rebuilt[0].float_dtype == torch.bfloat16
    with pytest.raises(ConfigError, match="float_dtype"):
        DeviceConfig("cpu", float_dtype="int8")


@pytest.mark.parametrize("name", ["act_tiny", "diffusion_tiny"])
def test_default_pair_is_what_lerobot_writes(name: str, fixtures_dir: Path, tmp_path: Path) -> None:
    folder = fixtures_dir / name
    config = read_config(folder)
    flat = load_file(str(folder / "policy_preprocessor_step_3_normalizer_processor.safetensors"))
    stats: dict[str, dict[str, np.ndarray]] = {}
    for key, value in flat.items():
        feature, _, stat = key.rpartition(".")
        stats.setdefault(feature, {})[stat] = value
    pre, post = make_pre_post_processors(config, stats)
    for pipeline in (pre, post):
        write_pipeline(pipeline, tmp_path)
        file = f"{pipeline.name}.json"
        ours = json.loads((tmp_path / file).read_text())
        assert ours == json.loads((folder / file).read_text())
        for step in ours["steps"]:
            if "state_file" in step:
                theirs = load_file(str(folder / step["state_file"]))
                mine = load_file(str(tmp_path / step["state_file"]))
                # Same statistics; LeRobot's own files disagree on the shape of an image's `count`.
                assert set(mine) == set(theirs)
                for key, value in theirs.items():
                    np.testing.assert_array_equal(mine[key].ravel(), value.ravel())


def test_relative_actions_wrap_the_normalisation() -> None:
    config = MLPConfig(
        input_features={"observation.state": typed_feature("STATE", (2,))},
        output_features={"action": typed_feature("ACTION", (2,))},
        normalization_mapping={"STATE": "IDENTITY", "ACTION": "MEAN_STD"},
    )
    stats = {"action": {"mean": np.zeros(2), "std": np.full(2, 2.0)}}
    relative = RelativeActionsConfig(exclude_joints=("gripper",), action_names=("arm", "gripper"))
    pre, post = make_pre_post_processors(config, stats, relative_actions=relative)
    assert [s.name for s in pre][-2:] == ["relative_actions_processor", "normalizer_processor"]
    assert [s.name for s in post][:2] == ["unnormalizer_processor", "absolute_actions_processor"]
    state, action = torch.tensor([[1.0, 5.0]]), torch.tensor([[3.0, 7.0]])
    batch = pre.process_batch({"observation.state": state, "action": action})
    # The arm joint becomes relative (3 - 1), the gripper stays absolute; then / std.
    assert torch.allclose(batch["action"], torch.tensor([[1.0, 3.5]]))
    back = post(Transition(observation={"observation.state": state}, action=batch["action"]))
    assert torch.allclose(back.action, action)
