"""X-VLA both ways with LeRobot 0.6.1 (run when RLCTL_LEROBOT_PYTHON names a Python with
lerobot==0.6.1 and transformers): a checkpoint LeRobot makes predicts in rlctl the chunk LeRobot
predicts for the same raw inputs, task text and initial noise, and a checkpoint rlctl saves
predicts in LeRobot what it predicts in rlctl. Both build the same tiny Florence-2 config and read
one tiny local BART-style tokenizer (tiny_xvla.py). LeRobot's X-VLA LIBERO env processors and
rlctl's give the same observations and actions for the same raw LIBERO observations."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="X-VLA needs transformers")

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.sim.envs.libero import LiberoEnv
from rlctl.adapters.sim.simulation import policy_env_processors
from rlctl.domain.env_observation import to_policy_observation
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.xvla import XVLAConfig

HERE = Path(__file__).parent
LEROBOT_SCRIPT = HERE / "lerobot_xvla.py"
TINY = runpy.run_path(str(HERE / "tiny_xvla.py"))
TOLERANCE = 1e-4
SIZES = {
    "hidden_size": 32,
    "depth": 2,
    "num_heads": 4,
    "num_domains": 3,
    "len_soft_prompts": 4,
    "max_len_seq": 96,
    "dim_time": 8,
}

SPECS: dict[str, dict[str, Any]] = {
    "ee6d, one camera, identity statistics": {
        "cameras": {"observation.images.image": [3, 32, 32]},
        "state_dim": 20,
        "action_dim": 20,
        "tasks": ["close the drawer", "push the t to the target"],
        "config": {"chunk_size": 4, "n_action_steps": 4, "num_denoising_steps": 3,
                   "tokenizer_max_length": 10},
    },
    "auto, two cameras resized, an empty one, long state, hetero projections": {
        "cameras": {"observation.images.top": [3, 32, 32], "observation.images.wrist": [3, 48, 40]},
        "state_dim": 14,
        "action_dim": 7,
        "tasks": ["put the bowl on the plate", ""],
        "config": {"chunk_size": 5, "n_action_steps": 2, "num_denoising_steps": 2,
                   "tokenizer_max_length": 8, "action_mode": "auto", "max_action_dim": 10,
                   "max_state_dim": 10, "empty_cameras": 1, "use_hetero_proj": True,
                   "resize_imgs_with_padding": [32, 32], "pad_language_to": "longest",
                   "normalization_mapping": {"VISUAL": "IDENTITY", "STATE": "MEAN_STD",
                                             "ACTION": "MEAN_STD"}},
    },
    "joint space, no soft prompts, min-max state": {
        "cameras": {"observation.images.front": [3, 40, 32]},
        "state_dim": 6,
        "action_dim": 14,
        "tasks": ["open the top drawer and put the bowl inside", "close the drawer"],
        "config": {"chunk_size": 3, "n_action_steps": 3, "num_denoising_steps": 4,
                   "tokenizer_max_length": 12, "action_mode": "joint", "len_soft_prompts": 0,
                   "normalization_mapping": {"VISUAL": "IDENTITY", "STATE": "MIN_MAX",
                                             "ACTION": "IDENTITY"}},
    },
}  # fmt: skip


def dim_action(config: dict[str, Any]) -> int:
    mode = config.get("action_mode", "ee6d")
    return {"ee6d": 20, "joint": 14}.get(mode, config.get("max_action_dim", 20))


def write_inputs(path: Path, spec: dict[str, Any], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    config = spec["config"]
    inputs: dict[str, Any] = {
        "observation.state": rng.normal(size=(2, spec["state_dim"])).astype(np.float32),
        "noise": rng.normal(size=(2, config["chunk_size"], dim_action(config))).astype(np.float32),
        "task": np.array(spec["tasks"]),
    }
    for key, shape in spec["cameras"].items():
        inputs[key] = rng.uniform(size=(2, *shape)).astype(np.float32)
    np.savez(path, **inputs)
    return inputs


def rlctl_chunk(policy: Any, inputs: dict[str, Any]) -> np.ndarray:
    observation = {k: v for k, v in inputs.items() if k not in ("task", "noise")}
    observation["task"] = [str(t) for t in inputs["task"]]
    return policy.predict_chunk(observation, noise=inputs["noise"]).actions.numpy()


def random_stats(spec: dict[str, Any], seed: int) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    stats = {}
    for key, dim in (("observation.state", spec["state_dim"]), ("action", spec["action_dim"])):
        low = rng.normal(size=dim) - 2
        stats[key] = {
            "mean": rng.normal(size=dim),
            "std": rng.uniform(0.5, 2, size=dim),
            "min": low,
            "max": low + rng.uniform(1, 4, size=dim),
        }
    return stats


@pytest.fixture(scope="module")
def tiny_bart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder: Path = TINY["write_tiny_bart_tokenizer"](tmp_path_factory.mktemp("bart") / "tok")
    return folder


@pytest.mark.lerobot
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_checkpoints_predict_the_same_chunks_in_both_tools(
    name: str, lerobot, tiny_bart: Path, tmp_path: Path
) -> None:
    spec = {**SPECS[name], "seed": 7}
    spec["config"] = {
        **SIZES,
        "florence_config": TINY["tiny_florence"](),
        "tokenizer_name": str(tiny_bart),
        **spec["config"],
    }
    inputs_path = tmp_path / "inputs.npz"
    inputs = write_inputs(inputs_path, spec, seed=3)

    # LeRobot's checkpoint, in rlctl, against LeRobot's prediction with that checkpoint (when
    # it reloads it: LeRobot saves its empty cameras as inputs and counts them again).
    theirs = tmp_path / "lerobot_model"
    made = np.array(lerobot(LEROBOT_SCRIPT, "make", theirs, json.dumps(spec), inputs_path)["chunk"])
    expected = np.array(lerobot(LEROBOT_SCRIPT, "predict", theirs, inputs_path)["chunk"])
    if not spec["config"].get("empty_cameras"):
        assert np.abs(made - expected).max() <= TOLERANCE
    loaded = load_policy_folder(theirs)
    ours = rlctl_chunk(loaded, inputs)
    assert ours.shape == expected.shape
    diff = float(np.abs(ours - expected).max())
    print(f"{name}: LeRobot checkpoint in rlctl, max abs diff {diff:.3g}")
    assert diff <= TOLERANCE

    # rlctl's checkpoint (its own random weights and statistics), in LeRobot.
    torch.manual_seed(11)
    config = XVLAConfig(
        input_features={
            "observation.state": typed_feature("STATE", (spec["state_dim"],)),
            **{k: typed_feature("VISUAL", tuple(s)) for k, s in spec["cameras"].items()},
        },
        output_features={"action": typed_feature("ACTION", (spec["action_dim"],))},
        device="cpu",
        **spec["config"],
    )
    policy = create_policy(config, random_stats(spec, seed=5))
    with torch.no_grad():
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    folder = policy.save(tmp_path / "rlctl_model")
    ours = rlctl_chunk(policy, inputs)
    predicted = np.array(lerobot(LEROBOT_SCRIPT, "predict", folder, inputs_path)["chunk"])
    diff = float(np.abs(ours - predicted).max())
    print(f"{name}: rlctl checkpoint in LeRobot, max abs diff {diff:.3g}")
    assert diff <= TOLERANCE


def libero_observation(rng: np.random.Generator, rows: int) -> dict[str, np.ndarray]:
    """Raw LIBERO observations as the env gives them (flattened with "/"), with rotations."""
    angles = rng.uniform(-np.pi, np.pi, size=(rows, 3))
    mats = []
    for a, b, c in angles:
        rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
        ry = np.array([[np.cos(b), 0, np.sin(b)], [0, 1, 0], [-np.sin(b), 0, np.cos(b)]])
        rx = np.array([[1, 0, 0], [0, np.cos(c), -np.sin(c)], [0, np.sin(c), np.cos(c)]])
        mats.append(rz @ ry @ rx)
    return {
        "pixels/image": rng.integers(0, 256, size=(rows, 24, 32, 3), dtype=np.uint8),
        "pixels/image2": rng.integers(0, 256, size=(rows, 24, 32, 3), dtype=np.uint8),
        "robot_state/eef/pos": rng.normal(size=(rows, 3)),
        "robot_state/eef/quat": rng.normal(size=(rows, 4)),
        "robot_state/eef/mat": np.stack(mats),
        "robot_state/gripper/qpos": rng.normal(size=(rows, 2)),
        "robot_state/gripper/qvel": rng.normal(size=(rows, 2)),
        "robot_state/joints/pos": rng.normal(size=(rows, 7)),
        "robot_state/joints/vel": rng.normal(size=(rows, 7)),
    }


@pytest.mark.lerobot
@pytest.mark.slow
def test_libero_env_processors_equal_lerobots(lerobot, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    raw = libero_observation(rng, rows=3)
    # [xyz, 6D rotation (two columns of random rotations, scaled), gripper, ...] for 20 values.
    actions = rng.normal(size=(3, 20)).astype(np.float32)
    actions[:, 3:9] = np.concatenate(
        [raw["robot_state/eef/mat"][:, :, 0] * 1.7, raw["robot_state/eef/mat"][:, :, 1] * 0.6],
        axis=1,
    )
    actions[1, 9] = 0.2
    path = tmp_path / "libero.npz"
    np.savez(path, **{k.removeprefix("robot_state/"): v for k, v in raw.items()}, action=actions)
    theirs = lerobot(LEROBOT_SCRIPT, "libero", path)

    env = LiberoEnv()
    found = policy_env_processors(XVLAConfig(), env.type)
    assert found is not None
    pre, post = found
    ours = pre.process_batch(to_policy_observation(raw, env.features_map))
    assert sorted(k for k in theirs if k != "action") == sorted(
        k for k in ours if k.startswith("observation.") or k == "domain_id"
    )
    for key in theirs:
        if key == "action":
            continue
        np.testing.assert_allclose(np.asarray(ours[key], np.float64), theirs[key], atol=1e-5)
    out = post.process_batch({"action": actions})["action"]
    np.testing.assert_allclose(out, theirs["action"], atol=1e-5)
    assert out.shape == (3, 7)
