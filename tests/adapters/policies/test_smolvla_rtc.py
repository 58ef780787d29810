"""Real-time chunking on SmolVLA: the arm jumps less where one chunk hands over to the next, a
policy that is not flow matching refuses to be asked, and (with RLCTL_LEROBOT_PYTHON) the guided
chunk is LeRobot 0.6.1's for the same checkpoint, inputs, noise, leftover and delay, both ways."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="SmolVLA needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import LoadedPolicy, create_policy, load_policy_folder
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import MLPConfig
from rlctl.domain.policies.rtc import CommittedActions, RTCConfig
from rlctl.domain.policies.smolvla import SmolVLAConfig

HERE = Path(__file__).parent
LEROBOT_SCRIPT = HERE / "lerobot_smolvla_rtc.py"
TINY_SMOLVLM_SCRIPT = HERE / "tiny_smolvlm.py"
TOLERANCE = 1e-4
STATE, ACTION, CHUNK = 4, 3, 8
CAMERA = "observation.images.top"


def tiny_policy(vlm: Path, rtc: RTCConfig | None, seed: int = 0) -> LoadedPolicy:
    config = SmolVLAConfig(
        input_features={
            "observation.state": typed_feature("STATE", (STATE,)),
            CAMERA: typed_feature("VISUAL", (3, 32, 32)),
        },
        output_features={"action": typed_feature("ACTION", (ACTION,))},
        vlm_model_name=str(vlm),
        num_vlm_layers=2,
        chunk_size=CHUNK,
        n_action_steps=5,
        max_state_dim=8,
        max_action_dim=6,
        num_steps=10,  # few steps with a large guidance weight overshoot (dt · weight > 1)
        resize_imgs_with_padding=(32, 32),
        tokenizer_max_length=8,
        rtc_config=rtc,
        device="cpu",
    )
    stats = {
        "observation.state": {"mean": np.zeros(STATE), "std": np.ones(STATE)},
        "action": {"mean": np.array([0.5, -0.5, 0.0]), "std": np.array([1.0, 2.0, 0.5])},
    }
    torch.manual_seed(seed)
    policy = create_policy(config, stats, device="cpu")
    with torch.no_grad():
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    return policy


def switch_jumps(policy: LoadedPolicy, ticks: int) -> list[float]:
    """At each tick where a new chunk takes over, how far its action lands from where the
    previous chunk was going (the jump a chunk boundary adds), while the observation drifts."""
    chunks: list[torch.Tensor] = []
    predict = policy.model.predict_guided_chunk

    def recorded(*args: Any, **kwargs: Any) -> torch.Tensor:
        chunks.append(predict(*args, **kwargs))
        return chunks[-1]

    policy.model.predict_guided_chunk = recorded  # type: ignore[method-assign]
    torch.manual_seed(123)  # the same noise draws for either run
    image = np.random.default_rng(0).uniform(size=(1, 3, 32, 32)).astype(np.float32)
    for t in range(ticks):
        observation = {
            "observation.state": np.full((1, STATE), 0.05 * t, np.float32),
            CAMERA: image,
            "task": ["stack the cubes"],
        }
        policy.select_action(observation)
    served = 5  # n_action_steps, and with RTC chunk_size - execution_horizon = 5 too
    return [
        float((new[0, 0] - old[0, served]).abs().max()) for old, new in itertools.pairwise(chunks)
    ]


@pytest.mark.slow
def test_real_time_chunking_shrinks_the_jump_between_chunks(tiny_smolvlm: Path) -> None:
    rtc = RTCConfig(execution_horizon=3, max_guidance_weight=10.0)
    guided = switch_jumps(tiny_policy(tiny_smolvlm, rtc), 21)
    free = switch_jumps(tiny_policy(tiny_smolvlm, None), 21)
    # The same model, weights and noise draws; only the guidance differs.
    assert len(guided) == len(free) == 4
    assert max(guided) < 0.1 * min(free), (guided, free)


@pytest.mark.slow
def test_committed_actions_change_a_smolvla_chunk_and_only_where_weighted(
    tiny_smolvlm: Path,
) -> None:
    policy = tiny_policy(tiny_smolvlm, None)
    rng = np.random.default_rng(1)
    observation = {
        "observation.state": rng.normal(size=(2, STATE)).astype(np.float32),
        CAMERA: rng.uniform(size=(2, 3, 32, 32)).astype(np.float32),
        "task": ["open", "close"],
    }
    noise = rng.normal(size=(2, CHUNK, 6)).astype(np.float32)
    free = policy.predict_chunk(observation, noise=noise).actions.numpy()
    leftover = free[:, :4] + 3.0
    committed = CommittedActions(
        actions=leftover, inference_delay=2, rtc=RTCConfig(execution_horizon=4)
    )
    chunk = policy.predict_chunk(observation, noise=noise, committed=committed).actions.numpy()
    assert (
        np.abs(chunk[:, :2] - leftover[:, :2]).mean()
        < 0.2 * np.abs(free[:, :2] - leftover[:, :2]).mean()
    )
    assert chunk.shape == free.shape


def test_a_policy_that_is_not_flow_matching_refuses_rtc() -> None:
    config = MLPConfig(
        input_features={"observation.state": typed_feature("STATE", (2,))},
        output_features={"action": typed_feature("ACTION", (2,))},
    )
    stats = {k: {"mean": np.zeros(2), "std": np.ones(2)} for k in ("observation.state", "action")}
    policy = create_policy(config, stats, device="cpu")
    with pytest.raises(ConfigError, match="cannot use real-time chunking"):
        LoadedPolicy(policy.model, policy.preprocessor, policy.postprocessor, rtc=RTCConfig())
    # Asked through the port, it ignores the committed actions.
    observation = {"observation.state": np.zeros((1, 2), np.float32)}
    committed = CommittedActions(actions=np.ones((1, 3, 2), np.float32))
    torch.manual_seed(0)
    plain = policy.predict_chunk(observation).actions
    torch.manual_seed(0)
    asked = policy.predict_chunk(observation, committed=committed).actions
    torch.testing.assert_close(plain, asked)


# --- against LeRobot 0.6.1 ------------------------------------------------------------------------

SPEC: dict[str, Any] = {
    "cameras": {"observation.images.top": [3, 48, 64]},
    "state_dim": 5,
    "action_dim": 4,
    "tasks": ["close the drawer", "push the t to the target"],
    "seed": 7,
    "config": {
        "num_vlm_layers": 4,
        "chunk_size": 8,
        "n_action_steps": 4,
        "num_steps": 4,
        "resize_imgs_with_padding": [64, 64],
        "max_action_dim": 12,
    },
}


@pytest.fixture(scope="module")
def lerobot_vlm(lerobot, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("smolvlm") / "vlm"
    lerobot(TINY_SMOLVLM_SCRIPT, folder, "--processor")
    return folder


def write_inputs(path: Path, delay: int, left: int) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    chunk, dims = SPEC["config"]["chunk_size"], SPEC["action_dim"]
    inputs: dict[str, Any] = {
        "observation.state": rng.normal(size=(2, SPEC["state_dim"])).astype(np.float32),
        "noise": rng.normal(size=(2, chunk, SPEC["config"]["max_action_dim"])).astype(np.float32),
        "leftover": rng.normal(size=(2, left, dims)).astype(np.float32),
        "delay": np.array(delay),
        "task": np.array(SPEC["tasks"]),
    }
    for key, shape in SPEC["cameras"].items():
        inputs[key] = rng.uniform(size=(2, *shape)).astype(np.float32)
    np.savez(path, **inputs)
    return inputs


def rlctl_guided(policy: LoadedPolicy, inputs: dict[str, Any]) -> np.ndarray:
    skip = ("task", "noise", "leftover", "delay")
    observation: dict[str, Any] = {k: v for k, v in inputs.items() if k not in skip}
    observation["task"] = [str(t) for t in inputs["task"]]
    assert policy.rtc is not None
    committed = CommittedActions(
        actions=inputs["leftover"], inference_delay=int(inputs["delay"]), rtc=policy.rtc
    )
    chunk = policy.predict_chunk(observation, noise=inputs["noise"], committed=committed)
    return chunk.actions.numpy()


@pytest.mark.lerobot
@pytest.mark.slow
@pytest.mark.parametrize(
    ("schedule", "delay", "left"), [("LINEAR", 2, 6), ("EXP", 0, 3), ("ONES", 3, 5)]
)
def test_the_guided_chunk_is_lerobots_both_ways(
    schedule: str, delay: int, left: int, lerobot, lerobot_vlm: Path, tmp_path: Path
) -> None:
    rtc = {
        "enabled": True,
        "prefix_attention_schedule": schedule,
        "execution_horizon": 4,
        "max_guidance_weight": 5.0,
        "debug": False,
        "debug_maxlen": 100,
    }
    spec = {**SPEC, "config": {**SPEC["config"], "rtc_config": rtc}}
    inputs_path = tmp_path / "inputs.npz"
    inputs = write_inputs(inputs_path, delay, left)

    # LeRobot's checkpoint, with its rtc_config, in rlctl.
    theirs = tmp_path / "lerobot_model"
    made = lerobot(
        LEROBOT_SCRIPT, "make", theirs, lerobot_vlm, json.dumps(spec), inputs_path, timeout=900
    )
    loaded = load_policy_folder(theirs)
    assert loaded.rtc == RTCConfig(**rtc)
    ours = rlctl_guided(loaded, inputs)
    expected = np.array(made["chunk"])
    assert ours.shape == expected.shape
    diff = float(np.abs(ours - expected).max())
    print(f"{schedule}: LeRobot checkpoint in rlctl, guided chunk max abs diff {diff:.3g}")
    assert diff <= TOLERANCE
    # The guidance mattered: without it the chunk is another one.
    plain = loaded.predict_chunk(
        {k: v for k, v in inputs.items() if k not in ("noise", "leftover", "delay")}
        | {"task": [str(t) for t in inputs["task"]]},
        noise=inputs["noise"],
    ).actions.numpy()
    assert float(np.abs(plain - expected).max()) > 10 * TOLERANCE

    # rlctl's save of it (config.json with rtc_config as LeRobot writes it), in LeRobot.
    folder = loaded.save(tmp_path / "rlctl_model")
    assert json.loads((folder / "config.json").read_text())["rtc_config"] == rtc
    predicted = np.array(lerobot(LEROBOT_SCRIPT, "predict", folder, inputs_path)["chunk"])
    assert float(np.abs(ours - predicted).max()) <= TOLERANCE
