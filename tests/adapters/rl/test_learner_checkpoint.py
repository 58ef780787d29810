"""The learner's checkpoint in LeRobot 0.6.1's layout: the optimisers in
`training_state/<actor|critic|temperature|discrete_critic>/` (LeRobot's file names and keys), the
generators in `rng_state.safetensors`; a resumed learner goes on exactly (the generators
restored, no seeding needed); an earlier rlctl checkpoint (optimisers in `algorithm/`) still
resumes; a checkpoint that does not fit is refused clearly. With RLCTL_LEROBOT_PYTHON, LeRobot's
learner functions read rlctl's checkpoint and rlctl resumes LeRobot's."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from rlctl.adapters.policies.loaded_policy import create_policy
from rlctl.adapters.rl.trainer import TorchSACTrainer, TorchSACTrainerFactory, TrainerSettings
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
from rlctl.domain.rl.replay import RLTransition, TransitionBatch, stack
from rlctl.domain.rl.sac import SACSettings

SCRIPT = Path(__file__).with_name("lerobot_sac_checkpoint.py")
SMALL = SACSettings(critic_network_kwargs={"hidden_dims": [16]}, temperature_init=0.1)
STATS = {
    "observation.state": {"min": np.array([-1.0, -1.0]), "max": np.array([1.0, 1.0])},
    "action": {"min": np.array([-1.0]), "max": np.array([1.0])},
}


def config(**overrides: Any) -> GaussianActorConfig:
    return GaussianActorConfig(
        input_features={"observation.state": typed_feature("STATE", (2,))},
        output_features={"action": typed_feature("ACTION", (1,))},
        **{
            "latent_dim": 8,
            "state_encoder_hidden_dim": 8,
            "actor_network_kwargs": {"hidden_dims": [16]},
            **overrides,
        },
    )


def trainer(**overrides: Any) -> TorchSACTrainer:
    return TorchSACTrainer(create_policy(config(**overrides), STATS, device="cpu"), SMALL)


def batches(seed: int, gripper: bool = False) -> Iterator[TransitionBatch]:
    rng = np.random.default_rng(seed)
    while True:
        rows = []
        for _ in range(16):
            state = rng.uniform(-1, 1, 2).astype(np.float32)
            action = rng.uniform(-1, 1, 2 if gripper else 1).astype(np.float32)
            if gripper:
                action[-1] = rng.integers(0, 3)
            rows.append(
                RLTransition(
                    state={"observation.state": state},
                    action=action,
                    reward=float(-abs(action[0] - state[0])),
                    next_state={"observation.state": state},
                    done=True,
                    truncated=False,
                )
            )
        yield stack(rows)


def factory() -> TorchSACTrainerFactory:
    return TorchSACTrainerFactory(TrainerSettings(policy=config(), algorithm=SMALL, device="cpu"))


def test_saved_in_lerobots_layout_and_resumed_exactly(tmp_path: Path) -> None:
    torch.manual_seed(0)
    learner = trainer()
    source = batches(1)
    for _ in range(4):
        learner.update(source)
    learner.save(tmp_path, interaction_step=64)
    state = tmp_path / "training_state"
    for name in ("actor", "critic", "temperature"):
        tensors = load_file(str(state / name / "optimizer_state.safetensors"))
        assert {"state/0/exp_avg", "state/0/exp_avg_sq", "state/0/step"} <= set(tensors)
        groups = json.loads((state / name / "optimizer_param_groups.json").read_text())
        # torch's defaults, as LeRobot's optimisers are made (its loader compares them).
        assert groups[0]["foreach"] is None and groups[0]["fused"] is None
    assert not (state / "discrete_critic").exists()
    assert {"torch_rng_state", "np_rng_state_values", "py_rng_state"} <= set(
        load_file(str(state / "rng_state.safetensors"))
    )
    assert json.loads((state / "training_step.json").read_text()) == {
        "step": 4,
        "interaction_step": 64,
    }
    assert set(load_file(str(tmp_path / "algorithm" / "model.safetensors"))) >= {"log_alpha"}
    expected = learner.update(batches(2))  # the generators as saved: no seeding

    torch.manual_seed(123)  # anything: resuming restores the saved generators
    resumed, interaction = factory().resume(tmp_path)
    assert (resumed.optimization_step, interaction) == (4, 64)
    for name, optimizer in resumed.sac.optimizers.items():
        assert all(g["foreach"] for g in optimizer.param_groups), name
    again = resumed.update(batches(2))
    assert again.keys() == expected.keys()
    for key, value in expected.items():
        assert again[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


def legacy_checkpoint(learner: TorchSACTrainer, folder: Path) -> None:
    """The layout rlctl wrote before LeRobot's: the optimisers in `algorithm/`."""
    learner.save(folder, interaction_step=7)
    tensors, groups = {}, {"optimization_step": learner.optimization_step}
    for name, optimizer in learner.sac.optimizers.items():
        state = optimizer.state_dict()
        groups[name] = state["param_groups"]
        for index, values in state["state"].items():
            for key, value in values.items():
                tensors[f"{name}.{index}.{key}"] = value
    save_file(tensors, str(folder / "algorithm" / "optimizer_state.safetensors"))
    (folder / "algorithm" / "optimizer_param_groups.json").write_text(json.dumps(groups))
    for name in learner.sac.optimizers:
        shutil.rmtree(folder / "training_state" / name)
    (folder / "training_state" / "rng_state.safetensors").unlink()


def test_an_earlier_rlctl_checkpoint_still_resumes(tmp_path: Path) -> None:
    torch.manual_seed(0)
    learner = trainer()
    source = batches(1)
    for _ in range(3):
        learner.update(source)
    legacy_checkpoint(learner, tmp_path)
    resumed, interaction = factory().resume(tmp_path)
    assert (resumed.optimization_step, interaction) == (3, 7)
    for name, optimizer in learner.sac.optimizers.items():
        saved, loaded = optimizer.state_dict()["state"], resumed.sac.optimizers[name].state_dict()
        for index, values in saved.items():
            for key, value in values.items():
                assert torch.equal(loaded["state"][index][key], value), (name, index, key)


def test_a_checkpoint_of_another_policy_is_refused_clearly(tmp_path: Path) -> None:
    torch.manual_seed(0)
    learner = trainer()
    learner.update(batches(1))
    learner.save(tmp_path, interaction_step=16)
    # The same networks' sizes, other optimiser moments: a hand-edited or mixed-up checkpoint.
    path = tmp_path / "training_state" / "actor" / "optimizer_state.safetensors"
    tensors = load_file(str(path))
    save_file({**tensors, "state/0/exp_avg": torch.zeros(3, 3)}, str(path))
    with pytest.raises(InvalidInput, match="actor optimiser's exp_avg has shape") as err:
        factory().resume(tmp_path)
    assert "settings the run started with" in (err.value.hint or "")

    save_file(tensors, str(path))
    shutil.rmtree(tmp_path / "training_state" / "critic")
    with pytest.raises(InvalidInput, match="no state for the critic optimiser"):
        factory().resume(tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_lerobot_and_rlctl_resume_each_others_learner(lerobot: Any, tmp_path: Path) -> None:
    # LeRobot's learner trains a few steps and checkpoints; rlctl resumes it.
    theirs = tmp_path / "lerobot"
    written = lerobot(SCRIPT, "write", theirs)
    resumed, interaction = TorchSACTrainerFactory(
        TrainerSettings(policy=config(), algorithm=SMALL, device="cpu")
    ).resume(theirs)
    assert (resumed.optimization_step, interaction) == (written["step"], 96)
    same_moments(summary(resumed), written["optimizers"])
    assert float(resumed.sac.log_alpha.item()) == pytest.approx(written["log_alpha"], rel=1e-6)
    resumed.update(batches(3))  # its state fits: a step runs

    # rlctl's checkpoint: LeRobot's learner functions read it and go on training.
    ours = tmp_path / "rlctl"
    resumed.save(ours, interaction_step=112)
    read = lerobot(SCRIPT, "read", ours)
    assert read["step"] == resumed.optimization_step and read["interaction_step"] == 112
    same_moments(read["optimizers"], summary(resumed))
    assert read["log_alpha"] == pytest.approx(float(resumed.sac.log_alpha.item()), rel=1e-6)
    assert read["stepped"]


def same_moments(got: dict[str, list[float]], expected: dict[str, list[float]]) -> None:
    assert got.keys() == expected.keys()
    for name, values in expected.items():
        np.testing.assert_allclose(got[name], values, rtol=1e-6, atol=1e-9, err_msg=name)


def summary(learner: TorchSACTrainer) -> dict[str, list[float]]:
    """Per optimiser, per parameter: the sum of its first moment (what the script prints)."""
    out = {}
    for name, optimizer in learner.sac.optimizers.items():
        state = optimizer.state_dict()["state"]
        out[name] = [float(state[i]["exp_avg"].double().sum()) for i in sorted(state)]
    return out


def test_a_negative_step_in_the_training_state_is_refused(tmp_path: Path) -> None:
    learner = trainer()
    learner.update(batches(1))
    learner.save(tmp_path, interaction_step=16)
    step_file = tmp_path / "training_state" / "training_step.json"
    step_file.write_text(json.dumps({"step": 1, "interaction_step": -5}))
    with pytest.raises(InvalidInput, match="negative") as err:
        factory().resume(tmp_path)
    assert err.value.where == str(step_file)
