"""Relative actions and fine-tuning with the torch backend, on LeRobot's sim_video fixture
(3 episodes, 75 frames, joints joint_0..joint_5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import attrs
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file

from rlctl.adapters.policies.checkpoint import read_config
from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.domain.errors import ConfigError, RlctlError
from rlctl.domain.frames import Transition
from rlctl.domain.train_settings import OptimizerOverrides

NAMES = [f"joint_{i}" for i in range(6)]


def relative_mlp(tiny, **overrides):
    fields = dict(use_relative_actions=True, relative_exclude_joints=("joint_5",))
    return tiny.mlp(**{**fields, **overrides})


def dataset_columns(root: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    table = pq.read_table(sorted((root / "data").rglob("*.parquet")))
    action = np.stack(table.column("action").to_numpy(zero_copy_only=False)).astype(np.float32)
    state = np.stack(table.column("observation.state").to_numpy(zero_copy_only=False))
    return action, state.astype(np.float32), table.column("episode_index").to_numpy()


def relative_by_hand(root: Path, chunk: int, relative_dims: int) -> np.ndarray:
    """Every in-episode chunk minus the state at its first frame, on the relative joints."""
    action, state, episode = dataset_columns(root)
    rows = []
    for start in range(len(action) - chunk + 1):
        if episode[start] != episode[start + chunk - 1]:
            continue
        part = action[start : start + chunk].copy()
        part[:, :relative_dims] -= state[start, :relative_dims]
        rows.append(part)
    return np.concatenate(rows)


def test_relative_actions_train_and_the_checkpoint_acts_in_absolute_terms(
    make_settings, train, tiny, sim_video
):
    report, _ = train(make_settings(policy=relative_mlp(tiny), steps=1, save_freq=1))
    folder = Path(report.last_checkpoint.location) / "pretrained_model"

    config = json.loads((folder / "config.json").read_text())
    assert config["use_relative_actions"] is True
    assert config["relative_exclude_joints"] == ["joint_5"]
    assert config["action_feature_names"] == NAMES

    policy = load_policy_folder(folder)
    assert [s.name for s in policy.preprocessor][-2:] == [
        "relative_actions_processor",
        "normalizer_processor",
    ]
    # The action statistics describe `action - state` over every chunk of 5 frames.
    expected = relative_by_hand(sim_video, chunk=5, relative_dims=5)
    stats = policy.preprocessor[-1].stats["action"]
    np.testing.assert_allclose(stats["mean"], expected.mean(axis=0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stats["std"], expected.std(axis=0), rtol=1e-3, atol=1e-5)

    state = torch.tensor([[0.3, -0.2, 0.1, 0.5, -0.4, 0.9], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]])
    observation = {"observation.state": state}
    chunk = policy.predict_chunk(observation).actions
    # By hand: the model's normalised output, unnormalised, plus the state on joints 0..4.
    with torch.no_grad():
        raw = policy.model.predict_chunk(policy.preprocessor.process_batch(observation))
    relative = policy.postprocessor[0](Transition(action=raw)).action
    assert chunk.shape == (2, 5, 6)
    torch.testing.assert_close(chunk[..., :5], relative[..., :5] + state[:, None, :5])
    torch.testing.assert_close(chunk[..., 5], relative[..., 5])
    # One step at a time gives the same absolute actions.
    policy.reset()
    torch.testing.assert_close(torch.from_numpy(policy.select_action(observation)), chunk[:, 0])


def test_without_relative_actions_config_json_has_no_such_keys(make_settings, train):
    report, _ = train(make_settings(steps=1, save_freq=1))
    folder = Path(report.last_checkpoint.location) / "pretrained_model"
    for name in ("config.json", "train_config.json"):
        data = json.loads((folder / name).read_text())
        policy = data if name == "config.json" else data["policy"]
        assert not {"use_relative_actions", "relative_exclude_joints"} & set(policy), name


def test_the_default_gripper_on_a_dataset_without_one_trains_every_joint_relative(
    make_settings, train, tiny, sim_video
):
    """LeRobot's default exclusion ("gripper") on joints joint_0..joint_5: nothing is excluded,
    as LeRobot's mask has it; the statistics are recompute-stats' and prediction adds the
    state back on every joint."""
    policy = tiny.mlp(use_relative_actions=True)
    assert policy.relative_exclude_joints == ("gripper",)
    report, _ = train(make_settings(policy=policy, steps=1, save_freq=1))
    folder = Path(report.last_checkpoint.location) / "pretrained_model"
    loaded = load_policy_folder(folder)
    expected = relative_by_hand(sim_video, chunk=5, relative_dims=6)
    stats = loaded.preprocessor[-1].stats["action"]
    np.testing.assert_allclose(stats["mean"], expected.mean(axis=0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stats["std"], expected.std(axis=0), rtol=1e-3, atol=1e-5)

    state = torch.tensor([[0.3, -0.2, 0.1, 0.5, -0.4, 0.9]])
    observation = {"observation.state": state}
    chunk = loaded.predict_chunk(observation).actions
    with torch.no_grad():
        raw = loaded.model.predict_chunk(loaded.preprocessor.process_batch(observation))
    relative = loaded.postprocessor[0](Transition(action=raw)).action
    torch.testing.assert_close(chunk, relative + state[:, None, :])


def test_an_excluded_joint_the_dataset_lacks_is_one_clear_error(make_settings, train, tiny):
    settings = make_settings(policy=relative_mlp(tiny, relative_exclude_joints=("wrist",)))
    with pytest.raises(ConfigError) as info:
        train(settings)
    assert "wrist" in info.value.message
    assert info.value.where == "policy.relative_exclude_joints"
    assert "joint_0" in info.value.hint


def _pretrained(make_settings, train, tiny, tmp_path: Path, **policy) -> Path:
    settings = make_settings(
        policy=tiny.mlp(**policy), steps=2, save_freq=2, output_dir=str(tmp_path / "first")
    )
    report, _ = train(settings)
    return Path(report.last_checkpoint.location) / "pretrained_model"


def test_fine_tuning_starts_from_the_pretrained_weights(make_settings, train, tiny, tmp_path):
    pretrained = _pretrained(make_settings, train, tiny, tmp_path)
    # At a vanishing learning rate the weights stay what they were loaded as.
    settings = make_settings(
        policy=tiny.mlp(pretrained_path=str(pretrained)),
        optimizer=OptimizerOverrides(lr=1e-12),
        steps=1,
        save_freq=1,
    )
    report, _ = train(settings)
    tuned = Path(report.last_checkpoint.location) / "pretrained_model"
    before = load_file(pretrained / "model.safetensors")
    after = load_file(tuned / "model.safetensors")
    assert set(before) == set(after)
    for key in before:
        torch.testing.assert_close(after[key], before[key], rtol=0, atol=1e-9)
    assert json.loads((tuned / "config.json").read_text())["pretrained_path"] == str(pretrained)


def test_fine_tuning_refuses_another_policy_type(make_settings, train, tiny, tmp_path):
    pretrained = _pretrained(make_settings, train, tiny, tmp_path)
    settings = make_settings(policy=tiny.act(pretrained_path=str(pretrained)))
    with pytest.raises(ConfigError) as info:
        train(settings)
    assert "'mlp'" in info.value.message and "'act'" in info.value.message
    assert info.value.where == str(pretrained / "config.json")
    assert "--policy.type=mlp" in info.value.hint


def test_fine_tuning_refuses_features_the_dataset_lacks(make_settings, train, tiny, tmp_path):
    pretrained = _pretrained(make_settings, train, tiny, tmp_path)
    edited = tmp_path / "edited"
    shutil.copytree(pretrained, edited)
    config = json.loads((edited / "config.json").read_text())
    config["input_features"]["observation.state"]["shape"] = [7]
    config["input_features"]["observation.environment_state"] = {"type": "ENV", "shape": [3]}
    (edited / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError) as info:
        train(make_settings(policy=tiny.mlp(pretrained_path=str(edited))))
    assert "observation.state is [7] in the policy, [6] here" in info.value.message
    assert "observation.environment_state is missing" in info.value.message


def test_a_missing_pretrained_checkpoint_is_named(make_settings, train, tiny, tmp_path):
    with pytest.raises(RlctlError) as info:
        train(make_settings(policy=tiny.mlp(pretrained_path=str(tmp_path / "nowhere"))))
    assert "nowhere" in str(info.value.where)


def test_a_relative_run_resumes_with_its_processors(make_settings, train, tiny):
    first, _ = train(make_settings(policy=relative_mlp(tiny), steps=1, save_freq=1))
    saved = load_policy_folder(first.last_checkpoint.location).preprocessor[-1].stats["action"]
    report, _ = train(
        make_settings(policy=relative_mlp(tiny), steps=2, resume=first.last_checkpoint.location)
    )
    assert (report.start_step, report.steps_done) == (1, 2)
    policy = load_policy_folder(report.last_checkpoint.location)
    assert policy.config.use_relative_actions and policy.config.action_feature_names == tuple(NAMES)
    assert policy.preprocessor[-2].name == "relative_actions_processor"
    np.testing.assert_array_equal(policy.preprocessor[-1].stats["action"]["mean"], saved["mean"])


@pytest.mark.slow
def test_fine_tuning_from_a_lerobot_checkpoint(make_settings, train, fixtures_dir):
    folder = fixtures_dir / "act_tiny"  # LeRobot's own pretrained_model folder
    config = attrs.evolve(
        read_config(folder), pretrained_path=str(folder), optimizer_lr_backbone=1e-12
    )
    settings = make_settings(
        policy=config, optimizer=OptimizerOverrides(lr=1e-12), steps=1, save_freq=1, batch_size=2
    )
    report, _ = train(settings)
    tuned = Path(report.last_checkpoint.location) / "pretrained_model"
    before = load_file(folder / "model.safetensors")
    after = load_file(tuned / "model.safetensors")
    assert set(before) <= set(after)
    for key in before:
        torch.testing.assert_close(after[key], before[key], rtol=0, atol=1e-6)
