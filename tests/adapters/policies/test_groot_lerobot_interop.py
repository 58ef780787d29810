"""GR00T N1.7 checkpoints both ways with LeRobot 0.6.1 (run when RLCTL_LEROBOT_PYTHON names a
Python with lerobot[groot]==0.6.1): a checkpoint LeRobot makes predicts in rlctl the chunk LeRobot
predicts for the same raw inputs, task text and initial noise (with and without rlctl's speed
paths), and a checkpoint rlctl saves predicts in LeRobot what it predicts in rlctl, real-time
chunking included. Both build on one tiny base model and Qwen3-VL backbone (tiny_groot.py); the
harness (lerobot_groot.py) gives the base model LeRobot's random weights, which rlctl then
starts from."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="GR00T needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.policies.vla.rtc import PrefixGuidance
from rlctl.domain.features import typed_feature
from rlctl.domain.frames import Transition
from rlctl.domain.policies.groot import GrootConfig
from rlctl.domain.policies.rtc import RTCConfig

HERE = Path(__file__).parent
LEROBOT_SCRIPT = HERE / "lerobot_groot.py"
TINY_SCRIPT = HERE / "tiny_groot.py"
TOLERANCE = 1e-4
# bfloat16 autocast rounds differently from one kernel order to the next.
BF16_TOLERANCE = 5e-2
HORIZON = 8

SPECS: dict[str, dict[str, Any]] = {
    "two cameras": {
        "cameras": {"observation.images.top": [3, 40, 56], "observation.images.wrist": [3, 40, 56]},
        "state_dim": 5,
        "action_dim": 3,
        "tasks": ["close the drawer", "Push the T to the target!"],
        "config": {"chunk_size": 8, "n_action_steps": 8},
    },
    "one camera, short steps, an empty task": {
        "cameras": {"observation.images.front": [3, 48, 64]},
        "state_dim": 14,
        "action_dim": 7,
        "tasks": ["put the bowl on the plate", ""],
        "config": {"chunk_size": 8, "n_action_steps": 5, "num_inference_timesteps": 3},
    },
    "bfloat16 autocast": {
        "cameras": {"observation.images.top": [3, 32, 32]},
        "state_dim": 4,
        "action_dim": 4,
        "tasks": ["open the top drawer of the cabinet", "close the drawer"],
        "config": {"chunk_size": 8, "n_action_steps": 8, "use_bf16": True},
    },
}  # fmt: skip
BASE = {"max_state_dim": 16, "max_action_dim": 16, "use_bf16": False}


def write_inputs(path: Path, spec: dict[str, Any], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    inputs: dict[str, Any] = {
        "observation.state": rng.normal(size=(2, spec["state_dim"])).astype(np.float32),
        "noise": rng.normal(size=(2, HORIZON, 16)).astype(np.float32),
        "task": np.array(spec["tasks"]),
    }
    for key, shape in spec["cameras"].items():
        inputs[key] = rng.uniform(size=(2, *shape)).astype(np.float32)
    np.savez(path, **inputs)
    return inputs


def observation(inputs: dict[str, Any]) -> dict[str, Any]:
    raw = {k: v for k, v in inputs.items() if k not in ("task", "noise")}
    raw["task"] = [str(t) for t in inputs["task"]]
    return raw


def tolerance(spec: dict[str, Any]) -> float:
    return BF16_TOLERANCE if spec["config"].get("use_bf16") else TOLERANCE


@pytest.mark.lerobot
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_checkpoints_predict_the_same_chunks_in_both_tools(
    name: str, lerobot, tiny_groot: Path, tmp_path: Path
) -> None:
    tiny = runpy.run_path(str(TINY_SCRIPT))["write_tiny_groot"](tmp_path / "tiny")
    spec = {**SPECS[name], "seed": 7}
    spec["config"] = {**BASE, **spec["config"]}
    inputs_path = tmp_path / "inputs.npz"
    inputs = write_inputs(inputs_path, spec, seed=3)

    # LeRobot's checkpoint, in rlctl.
    theirs = tmp_path / "lerobot_model"
    made = lerobot(LEROBOT_SCRIPT, "make", theirs, tiny, json.dumps(spec), inputs_path)
    loaded = load_policy_folder(theirs, compute_dtype="keep")
    expected = np.array(made["chunk"])
    steps = min(spec["config"]["chunk_size"], spec["config"]["n_action_steps"])
    ours = loaded.predict_chunk(observation(inputs), noise=inputs["noise"]).actions.numpy()
    assert ours.shape == expected.shape == (2, steps, spec["action_dim"])
    diff = float(np.abs(ours - expected).max())
    print(f"{name}: LeRobot checkpoint in rlctl, max abs diff {diff:.3g}")
    assert diff <= tolerance(spec)
    # Without its speed paths, rlctl runs LeRobot's arithmetic step for step.
    loaded.model.model.speed_paths = False
    loaded.model._groot_model.backbone.speed_paths = False
    plain = loaded.predict_chunk(observation(inputs), noise=inputs["noise"]).actions.numpy()
    diff = float(np.abs(plain - expected).max())
    print(f"{name}: the same without speed paths, max abs diff {diff:.3g}")
    assert diff <= tolerance(spec)

    # rlctl's checkpoint (started from the base model's weights, then randomised), in LeRobot.
    torch.manual_seed(11)
    config = GrootConfig(
        compute_dtype="keep",  # LeRobot's bfloat16 arithmetic, whatever this CPU
        input_features={
            "observation.state": typed_feature("STATE", (spec["state_dim"],)),
            **{k: typed_feature("VISUAL", tuple(s)) for k, s in spec["cameras"].items()},
        },
        output_features={"action": typed_feature("ACTION", (spec["action_dim"],))},
        device="cpu",
        base_model_path=str(tiny / "base"),
        **spec["config"],
    )
    rng = np.random.default_rng(5)
    stats = {
        key: {"min": rng.normal(size=dim) - 2, "max": rng.normal(size=dim) + 2}
        for key, dim in (("observation.state", spec["state_dim"]), ("action", spec["action_dim"]))
    }
    policy = create_policy(config, stats)
    with torch.no_grad():
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.05)
    folder = policy.save(tmp_path / "rlctl_model")
    ours = policy.predict_chunk(observation(inputs), noise=inputs["noise"]).actions.numpy()
    predicted = np.array(lerobot(LEROBOT_SCRIPT, "predict", folder, tiny, inputs_path)["chunk"])
    diff = float(np.abs(ours - predicted).max())
    print(f"{name}: rlctl checkpoint in LeRobot, max abs diff {diff:.3g}")
    assert diff <= tolerance(spec)

    # Real-time chunking: the previous chunk's leftover (in the model's space), 2 ticks late.
    leftover = np.random.default_rng(9).uniform(-0.5, 0.5, size=(5, spec["action_dim"]))
    rtc = {"leftover": leftover.tolist(), "delay": 2, "execution_horizon": 4}
    batch = policy._preprocess(observation(inputs))
    guidance = PrefixGuidance(
        torch.tensor(leftover, dtype=torch.float32), 2, RTCConfig(enabled=True, execution_horizon=4)
    )
    noise = torch.from_numpy(inputs["noise"])
    guided = policy.model.predict_guided_chunk(batch, guidance, noise=noise)
    ours = policy.postprocessor(Transition(action=guided)).action.numpy()
    theirs_rtc = lerobot(LEROBOT_SCRIPT, "predict", folder, tiny, inputs_path, json.dumps(rtc))
    diff = float(np.abs(ours - np.array(theirs_rtc["chunk"])).max())
    print(f"{name}: real-time chunking in both, max abs diff {diff:.3g}")
    assert diff <= tolerance(spec)
