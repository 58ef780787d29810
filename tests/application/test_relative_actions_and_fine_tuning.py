"""Relative actions and fine-tuning, the rules without torch: the config fields and their
config.json form, the checks against a dataset's features, and the relative statistics."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.application.fine_tuning import check_pretrained, fine_tuned_config
from rlctl.application.relative_actions import (
    relative_action_statistics,
    relative_actions_config,
    with_relative_action_names,
)
from rlctl.domain.config import resolve, structure, unstructure
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec, typed_feature
from rlctl.domain.policies import (
    RELATIVE_ACTION_FIELDS,
    ACTConfig,
    MLPConfig,
    PolicyConfig,
    lerobot_config_data,
)
from rlctl.domain.policies.config import RLCTL_RUN_FIELDS

NAMES = ["shoulder_pan.pos", "elbow_flex.pos", "gripper.pos"]


def features(state_dim: int = 3, names=NAMES, camera: bool = False) -> dict[str, FeatureSpec]:
    out = {
        "observation.state": FeatureSpec("observation.state", "float32", (state_dim,)),
        "action": FeatureSpec("action", "float32", (3,), names=names),
    }
    if camera:
        out["observation.images.top"] = FeatureSpec(
            "observation.images.top", "video", (48, 64, 3), names=["height", "width", "channels"]
        )
    return out


# --- the config fields ---------------------------------------------------------------------


def test_the_command_line_spells_them_as_lerobot_does():
    config = resolve(
        PolicyConfig,
        {"type": "act"},
        overrides=[
            ("use_relative_actions", True),
            ("relative_exclude_joints", ["gripper"]),
        ],
    )
    assert config.use_relative_actions and config.relative_exclude_joints == ("gripper",)
    # A single word is one joint, not a string of letters.
    assert MLPConfig(relative_exclude_joints="gripper").relative_exclude_joints == ("gripper",)


def test_config_json_leaves_them_out_at_their_defaults():
    data = lerobot_config_data(ACTConfig())
    assert not set(RELATIVE_ACTION_FIELDS) & set(data)
    assert structure(data, PolicyConfig) == ACTConfig()


@given(
    use=st.booleans(),
    exclude=st.lists(st.sampled_from(["gripper", "wrist", "pan"]), max_size=2),
    names=st.none() | st.lists(st.text("abc_", min_size=1, max_size=6), max_size=4),
)
def test_config_json_writes_all_three_while_on_and_none_while_off(use, exclude, names):
    config = MLPConfig(
        use_relative_actions=use, relative_exclude_joints=exclude, action_feature_names=names
    )
    data = lerobot_config_data(config)
    written = set(RELATIVE_ACTION_FIELDS) & set(data)
    assert written == (set(RELATIVE_ACTION_FIELDS) if use else set())
    if use:
        assert structure(data, PolicyConfig) == config
    else:  # unused, they change nothing: the file is what LeRobot writes
        assert structure(data, PolicyConfig) == MLPConfig()
    # Everything else is written as it always was (rlctl's run settings never are).
    skipped = set(RELATIVE_ACTION_FIELDS) | set(RLCTL_RUN_FIELDS)
    others = {k: v for k, v in unstructure(config).items() if k not in skipped}
    assert {k: v for k, v in data.items() if k not in RELATIVE_ACTION_FIELDS} == others


# --- checked against the dataset ----------------------------------------------------------


def test_the_dataset_names_the_joints_and_the_processors_get_them():
    config = with_relative_action_names(
        MLPConfig(use_relative_actions=True, relative_exclude_joints=["GRIPPER"]), features()
    )
    assert config.action_feature_names == tuple(NAMES)
    steps = relative_actions_config(config)
    assert steps is not None and steps.action_names == tuple(NAMES)
    assert steps.exclude_joints == ("GRIPPER",)
    assert relative_actions_config(MLPConfig()) is None
    # Off: nothing is checked or filled.
    assert with_relative_action_names(MLPConfig(), {}) == MLPConfig()


@pytest.mark.parametrize(
    ("exclude", "dataset", "message", "hint"),
    [
        (["wrist"], features(), r"\['wrist'\] match no action dimension", "shoulder_pan.pos"),
        (["wrist"], features(names=None), "has no names", "drop"),
        (["gripper", "wirst"], features(), r"\['wirst'\] match no", "gripper.pos"),
        (["pos"], features(), "exclude every action dimension", "use_relative_actions=false"),
    ],
)
def test_excluded_joints_must_exist(exclude, dataset, message, hint):
    config = MLPConfig(use_relative_actions=True, relative_exclude_joints=exclude)
    with pytest.raises(ConfigError, match=message) as info:
        with_relative_action_names(config, dataset)
    assert info.value.where == "policy.relative_exclude_joints"
    assert hint in info.value.hint


def test_the_default_is_lerobots_gripper_as_recompute_stats_has_it():
    assert MLPConfig().relative_exclude_joints == ("gripper",)
    assert ACTConfig(use_relative_actions=True).relative_exclude_joints == ("gripper",)


@pytest.mark.parametrize("names", [["joint_0", "joint_1", "joint_2"], None])
def test_the_default_gripper_on_a_dataset_without_one_makes_every_dimension_relative(names):
    """LeRobot's mask: an excluded word that names no dimension excludes nothing."""
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        config = with_relative_action_names(
            MLPConfig(use_relative_actions=True), features(names=names)
        )
    assert config.relative_exclude_joints == ("gripper",)
    assert [entry["words"] for entry in logs if entry["log_level"] == "warning"] == [["gripper"]]
    steps = relative_actions_config(config)
    assert steps is not None
    state = np.array([[1.0, 2.0, 3.0]], np.float32)
    actions = np.array([[[2.0, 2.0, 5.0]]], np.float32)
    stats = relative_action_statistics(
        attrs.evolve(config, chunk_size=1, n_action_steps=1), actions[0], state, np.array([0])
    )
    np.testing.assert_allclose(stats["mean"], [1.0, 0.0, 2.0])  # every dimension relative
    # With a gripper among the names, it stays absolute; nothing is logged.
    with capture_logs() as logs:
        with_relative_action_names(MLPConfig(use_relative_actions=True), features())
    assert not [entry for entry in logs if entry["log_level"] == "warning"]


def test_relative_actions_need_a_state_as_wide_as_the_action():
    config = MLPConfig(use_relative_actions=True)
    with pytest.raises(ConfigError, match="has 2 dimensions") as info:
        with_relative_action_names(config, features(state_dim=2))
    assert info.value.where == "policy.use_relative_actions"
    lacking = {"action": features()["action"]}
    with pytest.raises(ConfigError, match=r"lacks 'observation\.state'"):
        with_relative_action_names(config, lacking)


def test_relative_statistics_cover_every_chunk_of_the_policy_window():
    config = with_relative_action_names(
        MLPConfig(
            use_relative_actions=True,
            relative_exclude_joints=["gripper"],
            chunk_size=2,
            n_action_steps=2,
        ),
        features(),
    )
    actions = np.array([[1, 1, 5], [2, 2, 6], [3, 3, 7], [10, 10, 0], [11, 11, 1]], np.float32)
    states = np.array([[1, 0, 0], [2, 0, 0], [3, 0, 0], [9, 0, 0], [9, 0, 0]], np.float32)
    episodes = np.array([0, 0, 0, 1, 1])
    stats = relative_action_statistics(config, actions, states, episodes)
    # Chunks start at rows 0, 1 (episode 0) and 3 (episode 1); each minus its first state.
    chunks = np.array(
        [[0, 1, 5], [1, 2, 6], [0, 2, 6], [1, 3, 7], [1, 10, 0], [2, 11, 1]], np.float32
    )
    np.testing.assert_allclose(stats["mean"], chunks.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(stats["max"], chunks.max(axis=0))
    with pytest.raises(ConfigError, match="at least 4 frames") as info:
        relative_action_statistics(
            MLPConfig(use_relative_actions=True, chunk_size=4, n_action_steps=4),
            actions,
            states,
            episodes,
        )
    assert info.value.where == "policy.use_relative_actions"


# --- fine-tuning ---------------------------------------------------------------------------


def pretrained_mlp(state_dim: int = 3) -> MLPConfig:
    return MLPConfig(
        input_features={"observation.state": typed_feature("STATE", (state_dim,))},
        output_features={"action": typed_feature("ACTION", (3,))},
        hidden_dims=(8,),
    )


def test_a_config_built_in_code_takes_the_pretrained_features():
    pretrained = pretrained_mlp()
    tuned = fine_tuned_config(pretrained, MLPConfig(pretrained_path="ckpt"))
    assert tuned.input_features == pretrained.input_features
    assert tuned.output_features == pretrained.output_features
    # A config with features of its own (from the checkpoint's config.json) keeps them.
    own = MLPConfig(output_features={"action": typed_feature("ACTION", (3,))})
    assert fine_tuned_config(pretrained, own) is own


def test_the_pretrained_policy_must_be_of_the_trained_type():
    with pytest.raises(ConfigError, match="pretrained policy is 'mlp' but the run trains 'act'"):
        check_pretrained(pretrained_mlp(), ACTConfig(), features(), where="ckpt/config.json")


def test_the_dataset_must_provide_the_pretrained_features():
    check_pretrained(pretrained_mlp(), MLPConfig(), features(camera=True), where="c")
    with pytest.raises(ConfigError) as info:
        check_pretrained(pretrained_mlp(state_dim=4), MLPConfig(), features(), where="c")
    assert "observation.state is [4] in the policy, [3] here" in info.value.message
    assert info.value.where == "c" and "same state, action and camera" in info.value.hint
    with_camera = with_inputs(
        pretrained_mlp(), {"observation.images.top": typed_feature("VISUAL", (3, 96, 96))}
    )
    # Another image size is fine (encoders take any size); a missing camera is not.
    check_pretrained(with_camera, MLPConfig(), features(camera=True), where="c")
    with pytest.raises(ConfigError, match=r"observation\.images\.top is missing"):
        check_pretrained(with_camera, MLPConfig(), features(), where="c")


def with_inputs(config: MLPConfig, extra: dict[str, FeatureSpec]) -> MLPConfig:
    return config.with_features({**config.input_features, **extra}, config.output_features)
