"""Soft actor-critic on the Gaussian actor: it learns a one-step task, its weights travel to an
actor's policy, and a saved learner resumes exactly where it stopped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rlctl.adapters.policies.base import build_policy
from rlctl.adapters.policies.gaussian_actor import GaussianActorPolicy
from rlctl.adapters.rl.sac import SoftActorCritic, load_actor_weights
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
from rlctl.domain.rl.sac import SACSettings


def policy(**overrides: Any) -> GaussianActorPolicy:
    config = GaussianActorConfig(
        input_features={"observation.state": typed_feature("STATE", (2,))},
        output_features={"action": typed_feature("ACTION", (1,))},
        **{"latent_dim": 16, "actor_network_kwargs": {"hidden_dims": [32]}, **overrides},
    )
    model = build_policy(config)
    assert isinstance(model, GaussianActorPolicy)
    return model


SMALL = SACSettings(
    critic_network_kwargs={"hidden_dims": [32]},
    discount=0.0,
    temperature_init=0.05,
    actor_lr=1e-3,
    critic_lr=1e-3,
)


def bandit(rng: np.random.Generator, n: int = 64) -> dict[str, Any]:
    """One-step episodes: the reward is highest when the action equals the state's sign."""
    state = rng.uniform(-1, 1, size=(n, 2)).astype(np.float32)
    action = rng.uniform(-1, 1, size=(n, 1)).astype(np.float32)
    reward = -np.abs(action[:, 0] - np.sign(state[:, 0]) * 0.8)
    tensors = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))  # noqa: E731
    return {
        "state": {"observation.state": tensors(state)},
        "next_state": {"observation.state": tensors(state)},
        "action": tensors(action),
        "reward": tensors(reward),
        "done": torch.ones(n),
        "discrete_penalty": torch.zeros(n),
    }


def batches(seed: int) -> Iterator[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    while True:
        yield bandit(rng)


@pytest.mark.slow
def test_sac_learns_a_one_step_task() -> None:
    torch.manual_seed(0)
    model = policy()
    sac = SoftActorCritic(model, SMALL)
    source = batches(1)
    first = sac.update(source)
    for _ in range(120):
        last = sac.update(source)
    assert last["loss_critic"] < first["loss_critic"]
    assert set(last) >= {"loss_actor", "loss_temperature", "temperature", "critic_grad_norm"}
    with torch.no_grad():
        states = torch.tensor([[0.7, 0.0], [-0.7, 0.0]])
        _, _, means = model.actor({"observation.state": states})
    assert torch.tanh(means[0, 0]) > 0.3 and torch.tanh(means[1, 0]) < -0.3
    assert sac.optimization_step == 121


def test_weights_travel_to_an_actor_policy() -> None:
    torch.manual_seed(0)
    learner = SoftActorCritic(policy(num_discrete_actions=3), SMALL)
    actor = policy(num_discrete_actions=3)
    load_actor_weights(actor, learner.weights())
    for key, value in learner.policy.actor.state_dict().items():
        torch.testing.assert_close(actor.actor.state_dict()[key], value)
    assert learner.policy.discrete_critic is not None and actor.discrete_critic is not None
    for key, value in learner.policy.discrete_critic.state_dict().items():
        torch.testing.assert_close(actor.discrete_critic.state_dict()[key], value)
    with pytest.raises(InvalidInput, match="do not fit"):
        load_actor_weights(policy(latent_dim=8), learner.weights())


def test_a_saved_learner_resumes_exactly(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = policy()
    sac = SoftActorCritic(model, SMALL)
    source = batches(2)
    for _ in range(5):
        sac.update(source)
    sac.save(tmp_path / "algorithm", {})
    sac.save_optimizers(tmp_path / "training_state")
    policy_state = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(9)
    expected = sac.update(batches(3))

    restored_model = policy()
    restored_model.load_state_dict(policy_state)
    restored = SoftActorCritic(restored_model, SMALL)
    restored.load(tmp_path / "algorithm")
    restored.load_optimizers(tmp_path / "training_state")
    restored.optimization_step = 5
    torch.manual_seed(9)
    again = restored.update(batches(3))
    for key, value in expected.items():
        assert again[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


def test_target_update_is_lerobots_formula_parameter_by_parameter() -> None:
    torch.manual_seed(0)
    sac = SoftActorCritic(policy(num_discrete_actions=3), SMALL)
    with torch.no_grad():
        for module in (sac.critic_ensemble, sac.policy.discrete_critic):
            assert module is not None
            for p in module.parameters():
                p.add_(torch.randn_like(p))
    tau = SMALL.critic_target_update_weight
    pairs = [
        (sac.critic_target, sac.critic_ensemble),
        (sac.discrete_critic_target, sac.policy.discrete_critic),
    ]
    expected = [
        [(p * tau + t * (1.0 - tau)) for t, p in zip(tgt.parameters(), src.parameters())]
        for tgt, src in pairs
    ]
    sac._update_targets()
    for (target, _), values in zip(pairs, expected, strict=True):
        moved = list(target.parameters())
        assert len(moved) == len(values)
        assert all(torch.equal(a, b) for a, b in zip(moved, values, strict=True))


def test_foreach_adam_updates_as_torchs_default_adam() -> None:
    def trained(default_adam: bool) -> dict[str, torch.Tensor]:
        torch.manual_seed(0)
        sac = SoftActorCritic(policy(num_discrete_actions=3), SMALL)
        if default_adam:
            sac.optimizers = {
                name: torch.optim.Adam(o.param_groups[0]["params"], lr=o.param_groups[0]["lr"])
                for name, o in sac.optimizers.items()
            }
        source = batches(2)

        def with_gripper() -> Iterator[dict[str, Any]]:
            for batch in source:
                gripper = torch.remainder(torch.arange(len(batch["reward"])), 3).float()[:, None]
                yield {**batch, "action": torch.cat([batch["action"], gripper], dim=-1)}

        stream = with_gripper()
        for _ in range(3):
            sac.update(stream)
        return {**sac.state_dict(), **sac.policy.state_dict()}

    ours, default = trained(False), trained(True)
    assert ours.keys() == default.keys()
    assert all(torch.equal(ours[k], default[k]) for k in ours)


def test_a_non_finite_loss_skips_the_step_and_leaves_the_weights_finite() -> None:
    torch.manual_seed(0)
    sac = SoftActorCritic(policy(), SMALL)
    before = sac.weights()
    absurd = bandit(np.random.default_rng(0))
    absurd["reward"] = torch.full_like(absurd["reward"], 3e38)  # its square: infinity

    def forever() -> Iterator[dict[str, Any]]:
        while True:
            yield absurd

    stats = sac.update(forever())
    assert not np.isfinite(stats["loss_critic"])
    assert sac.skipped_steps.get("critic", 0) >= 1
    after = sac.weights()
    assert all(np.isfinite(v).all() for v in after.values())
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value)  # nothing stepped on infinity
