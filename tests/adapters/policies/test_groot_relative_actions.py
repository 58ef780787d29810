"""GR00T N1.7's relative actions (`--policy.use_relative_actions=true`) at tiny size: the action
groups LeRobot derives from the action names, the pack step making a training chunk relative to
its state and normalising it per chunk step, the decode step undoing it on a whole chunk,
`select_action` refused, the RTC prefix unused, checkpoints round-tripping, and what is refused
in one message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="GR00T needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import LoadedPolicy, create_policy, load_policy_folder
from rlctl.adapters.policies.vla.groot_action_groups import (
    ActionGroup,
    action_groups,
    relative_assets,
    relative_eef_to_absolute,
)
from rlctl.adapters.policies.vla.groot_processors import (
    DecodeConfig,
    GrootActionDecode,
    GrootPackInputs,
)
from rlctl.application.relative_action_stats import per_step_relative_action_stats
from rlctl.domain.errors import ConfigError, InvalidInput, NotSupported
from rlctl.domain.features import typed_feature
from rlctl.domain.frames import Transition
from rlctl.domain.policies.groot import GrootConfig
from rlctl.domain.policies.rtc import CommittedActions, RTCConfig

NAMES = ["shoulder.pos", "elbow.pos", "wrist.pos", "gripper.pos"]
STATE, ACTION, HORIZON, STATS_HORIZON = 5, 4, 6, 10


def relative_config(tiny: Path, **overrides: Any) -> GrootConfig:
    settings: dict[str, Any] = {
        "base_model_path": str(tiny / "base"),
        "chunk_size": HORIZON,
        "n_action_steps": HORIZON,
        "max_state_dim": 16,
        "max_action_dim": 16,
        "use_bf16": False,
        "device": "cpu",
        "use_relative_actions": True,
        "relative_exclude_joints": ["gripper"],
        "action_feature_names": NAMES,
        **overrides,
    }
    return GrootConfig(
        input_features={
            "observation.state": typed_feature("STATE", (STATE,)),
            "observation.images.wrist": typed_feature("VISUAL", (3, 24, 32)),
            "observation.images.top": typed_feature("VISUAL", (3, 40, 56)),
        },
        output_features={"action": typed_feature("ACTION", (ACTION,))},
        **settings,
    )


def dataset(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two episodes (30 and 25 frames) of a slowly moving arm."""
    rng = np.random.default_rng(seed)
    episodes = np.repeat([0, 1], [30, 25])
    states = np.cumsum(rng.normal(scale=0.1, size=(55, STATE)), axis=0).astype(np.float32)
    actions = (states[:, :ACTION] + rng.normal(scale=0.2, size=(55, ACTION))).astype(np.float32)
    actions[:, 3] = rng.uniform(0, 1, size=55)  # the gripper, absolute
    return actions, states, episodes


def dataset_stats() -> dict[str, dict[str, Any]]:
    actions, states, episodes = dataset()
    relative = per_step_relative_action_stats(
        actions, states, episodes, horizon=STATS_HORIZON, names=NAMES, exclude_joints=["gripper"]
    )

    def absolute(values: np.ndarray) -> dict[str, np.ndarray]:
        return {
            "min": values.min(0),
            "max": values.max(0),
            "mean": values.mean(0),
            "std": values.std(0),
            "q01": np.quantile(values, 0.01, axis=0),
            "q99": np.quantile(values, 0.99, axis=0),
        }

    return {
        "observation.state": absolute(states),
        "action": absolute(actions),
        "relative_action": relative,
    }


def observation(rows: int = 2, seed: int = 1) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {
        "observation.state": rng.normal(scale=0.3, size=(rows, STATE)).astype(np.float32),
        "observation.images.top": rng.uniform(size=(rows, 3, 40, 56)).astype(np.float32),
        "observation.images.wrist": rng.uniform(size=(rows, 3, 24, 32)).astype(np.float32),
        "task": ["close the drawer", "open the drawer"][:rows],
    }


@pytest.fixture(scope="module")
def policy(tiny_groot_dir: Path) -> LoadedPolicy:
    torch.manual_seed(0)
    loaded = create_policy(relative_config(tiny_groot_dir), dataset_stats())
    with torch.no_grad():
        for param in loaded.model.parameters():
            param.copy_(torch.randn_like(param) * 0.05)
    return loaded


# -- statistics and groups ---------------------------------------------------------------------


def test_per_step_statistics_are_lerobots_over_every_chunk_inside_an_episode() -> None:
    actions, states, episodes = dataset()
    stats = per_step_relative_action_stats(
        actions, states, episodes, horizon=STATS_HORIZON, names=NAMES, exclude_joints=["GRIP"]
    )
    # LeRobot's loop: every frame whose 10-frame window has no padding, step by step.
    chunks = []
    for start in range(len(actions)):
        end = start + STATS_HORIZON
        if end <= len(actions) and episodes[start] == episodes[end - 1]:
            chunk = actions[start:end].copy()
            chunk[:, :3] -= states[start, :3]
            chunks.append(chunk)
    stacked = np.stack(chunks)  # (chunks, step, dim)
    assert len(chunks) == (30 - 9) + (25 - 9)
    assert stats["count"].tolist() == [len(chunks)] * STATS_HORIZON
    for step in range(STATS_HORIZON):
        values = stacked[:, step]
        np.testing.assert_array_equal(stats["min"][step], values.min(0))
        np.testing.assert_array_equal(stats["max"][step], values.max(0))
        np.testing.assert_allclose(stats["mean"][step], values.mean(0), rtol=1e-6)
        np.testing.assert_allclose(stats["std"][step], values.std(0), rtol=1e-5)
        np.testing.assert_allclose(stats["q99"][step], np.quantile(values, 0.99, axis=0))
    assert stats["min"].shape == (STATS_HORIZON, ACTION) and stats["q01"].dtype == np.float32


def test_action_groups_follow_the_names_as_lerobot_cuts_them() -> None:
    assert action_groups(NAMES, 4, ["gripper"]) == [
        ActionGroup("single_arm", [0, 1, 2], True),
        ActionGroup("gripper", [3], False),
    ]
    assert action_groups(NAMES, 4, ["ELBOW"]) == [
        ActionGroup("single_arm", [0], True),
        ActionGroup("elbow", [1], False),
        ActionGroup("single_arm_2", [2, 3], True),
    ]
    assert action_groups(NAMES, 4, []) == [ActionGroup("single_arm", [0, 1, 2, 3], True)]
    with pytest.raises(ConfigError, match="name several"):
        action_groups(["left.gripper", "right.gripper", "x"], 3, ["gripper"])


def test_assets_hold_grouped_statistics_and_the_cameras_in_the_datasets_order() -> None:
    stats = dataset_stats()
    assets = relative_assets(
        action_names=NAMES,
        action_dim=ACTION,
        exclude_joints=["gripper"],
        stats=stats,
        chunk_size=HORIZON,
        camera_keys=["observation.images.wrist", "observation.images.top"],
    )
    assert assets.action_horizon == STATS_HORIZON and assets.valid_action_horizon == HORIZON
    assert assets.use_percentiles  # q01/q99 in every state group and absolute action group
    assert assets.video_modality_keys == ["wrist", "top"]
    action = assets.modality_config["action"]
    assert action["modality_keys"] == ["single_arm", "gripper"]
    assert [c["rep"] for c in action["action_configs"]] == ["RELATIVE", "ABSOLUTE"]
    relative = assets.raw_stats["relative_action"]["single_arm"]
    np.testing.assert_allclose(relative["min"], stats["relative_action"]["min"][:, :3])
    # Flat statistics: the state's percentiles as its min, the relative group per step.
    state = stats["observation.state"]
    np.testing.assert_allclose(assets.stats["observation.state"]["min"], state["q01"][:4], 1e-6)
    assert len(assets.stats["action"]["min"]) == STATS_HORIZON * 3 + 1
    without_quantiles = {k: {n: v for n, v in s.items() if n[0] != "q"} for k, s in stats.items()}
    assert not relative_assets(
        action_names=NAMES,
        action_dim=ACTION,
        exclude_joints=["gripper"],
        stats=without_quantiles,
        chunk_size=HORIZON,
        camera_keys=[],
    ).use_percentiles


# -- the processors ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_packed_training_chunk_decodes_back_to_the_absolute_actions(
    policy: LoadedPolicy,
) -> None:
    actions, states, _ = dataset()
    obs = observation()
    starts = [3, 31]
    chunk = torch.from_numpy(np.stack([actions[s : s + HORIZON] for s in starts]))
    obs["observation.state"] = states[starts]
    batch = policy.preprocessor.process_batch({**obs, "action": chunk})
    packed = batch["action"]
    assert packed.shape == (2, STATS_HORIZON, 16)  # the statistics' horizon, padded and masked
    assert batch["action_mask"][:, :HORIZON, :ACTION].all()
    assert (
        not batch["action_mask"][:, HORIZON:].any() and not batch["action_mask"][..., ACTION:].any()
    )
    assert packed.abs().max() <= 1.0
    # Relative to the state the chunk starts from, per step: the first step's spread is small.
    relative = chunk[..., :3] - torch.from_numpy(states[starts, None, :3])
    low = torch.tensor(
        policy.preprocessor[2].config.raw_stats["relative_action"]["single_arm"]["min"]
    )
    high = torch.tensor(
        policy.preprocessor[2].config.raw_stats["relative_action"]["single_arm"]["max"]
    )
    expected = (2 * (relative - low[:HORIZON]) / (high - low)[:HORIZON] - 1).clamp(-1, 1)
    torch.testing.assert_close(packed[:, :HORIZON, :3], expected)

    decoded = policy.postprocessor(
        Transition(observation=obs, action=packed[:, :HORIZON, :ACTION].clone())
    ).action
    inside = (expected.abs() < 1).all(-1)
    torch.testing.assert_close(decoded[..., :3][inside], chunk[..., :3][inside], atol=1e-5, rtol=0)
    torch.testing.assert_close(decoded[..., 3], chunk[..., 3], atol=1e-5, rtol=0)


@pytest.mark.slow
def test_a_predicted_chunk_is_the_models_relative_chunk_plus_the_state(
    policy: LoadedPolicy,
) -> None:
    obs = observation()
    noise = np.random.default_rng(4).normal(size=(2, 8, 16)).astype(np.float32)
    chunk = policy.predict_chunk(obs, noise=noise).actions
    assert chunk.shape == (2, HORIZON, ACTION)
    with torch.no_grad():
        normalised = policy.model.predict_chunk(
            policy._preprocess(obs), noise=torch.from_numpy(noise)
        )
    decode = policy.postprocessor[0]
    stats = decode.config.raw_stats
    low = np.array(stats["relative_action"]["single_arm"]["min"])[:HORIZON]
    high = np.array(stats["relative_action"]["single_arm"]["max"])[:HORIZON]
    arm = (np.clip(normalised[..., :3].numpy(), -1, 1) + 1) * 0.5 * (high - low) + low
    arm += obs["observation.state"][:, None, :3]
    np.testing.assert_allclose(chunk[..., :3].numpy(), arm, atol=1e-5)
    gripper = stats["action"]["gripper"]  # absolute, with the dataset's percentiles
    expected = (np.clip(normalised[..., 3].numpy(), -1, 1) + 1) * 0.5 * (
        gripper["q99"][0] - gripper["q01"][0]
    ) + gripper["q01"][0]
    np.testing.assert_allclose(chunk[..., 3].numpy(), expected, atol=1e-5)


@pytest.mark.slow
def test_one_action_at_a_time_is_refused_and_the_rtc_prefix_unused(policy: LoadedPolicy) -> None:
    obs = observation(rows=1)
    with pytest.raises(NotSupported, match="whole chunk at a time") as refused:
        policy.select_action(obs)
    assert "predict_chunk" in (refused.value.hint or "")
    noise = np.random.default_rng(5).normal(size=(1, 8, 16)).astype(np.float32)
    plain = policy.predict_chunk(obs, noise=noise).actions
    committed = CommittedActions(
        actions=np.ones((1, 4, ACTION), np.float32), inference_delay=1, rtc=RTCConfig(enabled=True)
    )
    guided = policy.predict_chunk(obs, noise=noise, committed=committed).actions
    torch.testing.assert_close(guided, plain)


def test_decoding_needs_the_state_it_was_predicted_from() -> None:
    config = DecodeConfig(
        env_action_dim=2,
        raw_stats={
            "state": {"single_arm": {"min": [0.0, 0.0]}},
            "action": {"single_arm": {"min": [0.0, 0.0], "max": [1.0, 1.0]}},
            "relative_action": {"single_arm": {"min": [[-1.0, -1.0]], "max": [[1.0, 1.0]]}},
        },
        modality_config={
            "state": {"modality_keys": ["single_arm"]},
            "action": {
                "modality_keys": ["single_arm"],
                "action_configs": [{"rep": "RELATIVE", "type": "NON_EEF"}],
                "delta_indices": [0],
            },
        },
        use_relative_action=True,
    )
    decode = GrootActionDecode(config)
    with pytest.raises(InvalidInput, match="given none"):
        decode(Transition(action=torch.zeros(1, 1, 2)))
    state = {"observation.state": np.array([2.0, 3.0])}
    out = decode(Transition(observation=state, action=torch.zeros(1, 1, 2)))
    # numpy's check, not torch.testing's (which imports sympy: seconds in the normal run)
    np.testing.assert_array_equal(out.action.numpy(), [[[2.0, 3.0]]])


def test_relative_end_effector_poses_compose_onto_the_reference() -> None:
    identity = np.array([0.0, 0.0, 0.0, 1, 0, 0, 0, 1, 0], np.float32)
    reference = np.array([[1.0, 2.0, 3.0, 0, 1, 0, -1, 0, 0]], np.float32)  # 90° about z
    step = np.array([[[1.0, 0.0, 0.0, *identity[3:]]]], np.float32)
    out = relative_eef_to_absolute(np.concatenate([step, identity[None, None]], 1), reference)
    # The rows of the rotation are its 6D: x of the delta is -y of the reference frame.
    np.testing.assert_allclose(out[0, 0, :3], [1.0, 1.0, 3.0], atol=1e-6)
    np.testing.assert_allclose(out[0, 1], reference[0], atol=1e-6)


# -- checkpoints and refusals ------------------------------------------------------------------


@pytest.mark.slow
def test_the_checkpoint_round_trips_with_lerobots_steps_and_config(
    policy: LoadedPolicy, tmp_path: Path
) -> None:
    folder = policy.save(tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    assert config["use_relative_actions"] and config["relative_exclude_joints"] == ["gripper"]
    assert "action_feature_names" not in config  # LeRobot's GrootConfig has no such field
    pre = json.loads((folder / "policy_preprocessor.json").read_text())["steps"]
    post = json.loads((folder / "policy_postprocessor.json").read_text())["steps"]
    assert [s["registry_name"] for s in post] == ["groot_n1_7_action_decode_v1", "device_processor"]
    pack = pre[2]["config"]
    assert pack["modality_config"]["video"]["modality_keys"] == ["wrist", "top"]
    assert pack["action_horizon"] == STATS_HORIZON and pack["use_percentiles"] is True
    loaded = load_policy_folder(folder)
    noise = np.random.default_rng(6).normal(size=(2, 8, 16)).astype(np.float32)
    obs = observation()
    torch.testing.assert_close(
        loaded.predict_chunk(obs, noise=noise).actions,
        policy.predict_chunk(obs, noise=noise).actions,
    )


@pytest.mark.slow
def test_without_per_step_statistics_or_action_names_one_message(tiny_groot_dir: Path) -> None:
    stats = dataset_stats()
    del stats["relative_action"]
    with pytest.raises(ConfigError, match="relative_action") as missing:
        create_policy(relative_config(tiny_groot_dir), stats)
    assert missing.value.where == "policy.use_relative_actions"
    with pytest.raises(ConfigError, match="by their names"):
        create_policy(relative_config(tiny_groot_dir, action_feature_names=None), dataset_stats())
    with pytest.raises(ConfigError, match="exclude every action dimension"):
        create_policy(
            relative_config(tiny_groot_dir, relative_exclude_joints=["pos"]), dataset_stats()
        )


def test_a_raw_checkpoints_state_dropout_acts_only_while_training() -> None:
    """LeRobot's: `state_dropout_prob` zeroes a row's state on a training run's pipeline while
    gradients flow; a loaded pipeline, or one under no_grad, keeps every state."""
    from rlctl.adapters.policies.vla.groot_processors import PackConfig

    with pytest.raises(ConfigError, match="state_dropout_prob"):
        GrootPackInputs(PackConfig(state_dropout_prob=1.5))
    stats = {"observation.state": {"min": -np.ones(3), "max": np.ones(3)}}
    pack = GrootPackInputs(PackConfig(state_dropout_prob=1.0, max_state_dim=4), stats)
    batch = Transition(observation={"observation.state": torch.full((2, 3), 0.5)})
    kept = pack(batch).observation["state"]
    assert torch.equal(kept[:, 0, :3], torch.full((2, 3), 0.5))
    pack.training = True
    assert not pack(batch).observation["state"].any()
    with torch.no_grad():
        assert torch.equal(pack(batch).observation["state"], kept)


def test_a_raw_checkpoints_video_horizon_keeps_the_latest_frames_or_repeats_the_first() -> None:
    from rlctl.adapters.policies.vla.groot_processors import VIDEO, PackConfig

    frames = torch.arange(3, dtype=torch.uint8).view(1, 3, 1, 1, 1).expand(1, 3, 3, 2, 2)
    camera = {"observation.images.top": frames}
    short = GrootPackInputs(PackConfig(video_horizon=2))(Transition(observation=camera))
    assert short.observation[VIDEO][0][0, :, 0, 0, 0].tolist() == [1, 2]
    long = GrootPackInputs(PackConfig(video_horizon=5))(Transition(observation=camera))
    assert long.observation[VIDEO][0][0, :, 0, 0, 0].tolist() == [0, 0, 0, 1, 2]
