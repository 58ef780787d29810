"""Soft actor-critic on a Gaussian actor: the critics, their targets, the temperature, the update.

LeRobot 0.6.1's `SACAlgorithm`, loss for loss: each step pulls `utd_ratio` batches, updates the
critic ensemble on each (TD targets from the target critics at the actor's next actions, the
entropy term with `use_backup_entropy`, `num_subsample_critics` drawn at random), the discrete
critic (double DQN, `discrete_penalty` added to its reward) when the policy has a gripper, then
every `policy_update_freq` steps the actor (`alpha * log_prob - min Q`) and the temperature, and
moves the targets by Polyak averaging. Gradients are clipped at `grad_clip_norm`.

Its tensors are saved under LeRobot's names (`critic_ensemble.critics.0.net.net.0.weight`,
`critic_target.…`, `discrete_critic_target.…`, `log_alpha`; the shared encoder's weights are the
policy's), in the `algorithm/` folder of a checkpoint as LeRobot saves it; its optimisers in
`training_state/<actor|critic|temperature|discrete_critic>/` as LeRobot's learner saves them, so
either tool resumes the other's checkpoint.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import structlog
import torch
import torch.nn.functional as F  # noqa: N812
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from rlctl.adapters.policies.gaussian_actor import (
    MLP,
    GaussianActorPolicy,
    ImageFeatures,
    ObservationEncoder,
    Observations,
    _uniform_or_orthogonal,
)
from rlctl.adapters.training.state_files import load_optimizer, save_optimizer
from rlctl.domain.errors import InvalidInput
from rlctl.domain.rl.sac import SACSettings

log = structlog.get_logger(__name__)

ALGORITHM_CONFIG = "config.json"
ALGORITHM_WEIGHTS = "model.safetensors"
# The optimisers' files (in `training_state/<name>/`; rlctl before 2026-12 kept them all in
# `algorithm/`, still read).
OPTIMIZER_STATE = "optimizer_state.safetensors"
OPTIMIZER_GROUPS = "optimizer_param_groups.json"


class CriticHead(nn.Module):
    def __init__(self, input_dim: int, hidden_dims: tuple[int, ...], **network: Any) -> None:
        super().__init__()
        self.net = MLP(input_dim, hidden_dims, **network)
        self.output_layer = nn.Linear(hidden_dims[-1], 1)
        _uniform_or_orthogonal(self.output_layer, None)

    def forward(self, x: Tensor) -> Tensor:
        return self.output_layer(self.net(x))  # type: ignore[no-any-return]


class CriticEnsemble(nn.Module):
    """Q-values of every critic, `(num_critics, batch)`."""

    def __init__(self, encoder: ObservationEncoder, heads: list[CriticHead]) -> None:
        super().__init__()
        self.encoder = encoder
        self.critics = nn.ModuleList(heads)

    def forward(
        self, observations: Observations, actions: Tensor, cache: ImageFeatures | None = None
    ) -> Tensor:
        inputs = torch.cat([self.encoder(observations, cache=cache), actions], dim=-1)
        return torch.stack([critic(inputs).squeeze(-1) for critic in self.critics], dim=0)


class SoftActorCritic:
    """The learner's half of SAC around a `GaussianActorPolicy` (which it trains in place)."""

    def __init__(self, policy: GaussianActorPolicy, settings: SACSettings) -> None:
        self.policy = policy
        self.settings = settings
        config = policy.config
        self.action_dim = config.action_dim
        self.discrete = config.num_discrete_actions is not None
        encoder = policy.encoder_critic
        network = settings.critic_network_kwargs

        def heads() -> list[CriticHead]:
            return [
                CriticHead(
                    encoder.output_dim + self.action_dim,
                    network.hidden_dims,
                    activate_final=network.activate_final,
                    final_activation=network.final_activation,
                )
                for _ in range(settings.num_critics)
            ]

        self.critic_ensemble = CriticEnsemble(encoder, heads())
        self.critic_target = CriticEnsemble(encoder, heads())
        self.critic_target.load_state_dict(self.critic_ensemble.state_dict())
        self.discrete_critic_target: nn.Module | None = None
        if self.discrete and policy.discrete_critic is not None:
            from rlctl.adapters.policies.gaussian_actor import DiscreteCritic

            # The target copies the policy's discrete critic, so it takes that critic's shape
            # (the policy's `discrete_critic_network_kwargs`; LeRobot copies them into the
            # algorithm's config, and sizing only the policy's critic must not break the copy).
            target = DiscreteCritic(
                encoder,
                encoder.output_dim,
                int(config.num_discrete_actions or 0),
                config.discrete_critic_network_kwargs,
            )
            target.load_state_dict(policy.discrete_critic.state_dict())
            self.discrete_critic_target = target
        device = policy.device
        self.critic_ensemble.to(device)
        self.critic_target.to(device)
        if self.discrete_critic_target is not None:
            self.discrete_critic_target.to(device)
        self.log_alpha = nn.Parameter(
            torch.tensor([math.log(settings.temperature_init)], device=device)
        )
        self.target_entropy = settings.entropy_target(self.action_dim, self.discrete)
        # foreach: one kernel per Adam operation over all parameters (torch's CPU default is a
        # Python loop over them); the same arithmetic, the same numbers.
        self.optimizers: dict[str, torch.optim.Optimizer] = {
            "actor": _adam(policy.actor_parameters(), settings.actor_lr),
            "critic": _adam(self.critic_ensemble.parameters(), settings.critic_lr),
            "temperature": _adam([self.log_alpha], settings.temperature_lr),
        }
        if self.discrete and policy.discrete_critic is not None:
            self.optimizers["discrete_critic"] = _adam(
                policy.discrete_critic.parameters(), settings.critic_lr
            )
        self.optimization_step = 0
        # Optimiser steps skipped for a non-finite loss or gradient, by optimiser.
        self.skipped_steps: dict[str, int] = {}
        # Parameter lists walked once (the modules never change shape; loading copies in place).
        self._clipped: dict[str, list[nn.Parameter]] = {
            "critic": list(self.critic_ensemble.parameters()),
            "actor": list(policy.actor.parameters()),
        }
        if policy.discrete_critic is not None:
            self._clipped["discrete_critic"] = list(policy.discrete_critic.parameters())
        pairs = [(self.critic_target, self.critic_ensemble)]
        if self.discrete_critic_target is not None and policy.discrete_critic is not None:
            pairs.append((self.discrete_critic_target, policy.discrete_critic))
        self._target_pairs: list[tuple[list[nn.Parameter], list[nn.Parameter]]] = []
        for target, source in pairs:
            targets, sources = list(target.parameters()), list(source.parameters())
            if len(targets) != len(sources):
                raise RuntimeError("a target network does not match its source")
            self._target_pairs.append((targets, sources))

    @property
    def temperature(self) -> float:
        return float(self.log_alpha.exp().item())

    # --- one learner step ------------------------------------------------------------------

    def update(self, batches: Iterator[Mapping[str, Any]]) -> dict[str, float]:
        """One step over `utd_ratio` batches (`state`, `action`, `reward`, `next_state`,
        `done`, `discrete_penalty`, tensors on the policy's device, observations normalised)."""
        if not self.policy.training:  # walking every module each step cost ~1 ms
            self.policy.train()
        s = self.settings
        for _ in range(s.utd_ratio - 1):
            batch = next(batches)
            self._step("critic", self._critic_loss(batch), self._clipped["critic"])
            if self.discrete:
                self._step_discrete(batch)
            self._update_targets()
        batch = next(batches)
        loss_critic, critic_norm = self._step(
            "critic", self._critic_loss(batch), self._clipped["critic"]
        )
        stats = {"loss_critic": loss_critic, "critic_grad_norm": critic_norm}
        if self.discrete:
            stats["loss_discrete_critic"], stats["discrete_critic_grad_norm"] = self._step_discrete(
                batch
            )
        if self.optimization_step % s.policy_update_freq == 0:
            for _ in range(s.policy_update_freq):
                loss_actor, actor_norm = self._step(
                    "actor", self._actor_loss(batch), self._clipped["actor"]
                )
                loss_temp, temp_norm = self._step(
                    "temperature", self._temperature_loss(batch), [self.log_alpha]
                )
            stats.update(
                loss_actor=loss_actor,
                loss_temperature=loss_temp,
                actor_grad_norm=actor_norm,
                temperature_grad_norm=temp_norm,
                temperature=self.temperature,
            )
        self._update_targets()
        self.optimization_step += 1
        return stats

    def _step(self, name: str, loss: Tensor, params: Any) -> tuple[float, float]:
        """One optimiser step, skipped (counted in `skipped_steps`, said) when the loss or the
        gradient's norm is not finite: a transition of absurd (finite) values must not turn the
        weights into NaN."""
        optimizer = self.optimizers[name]
        optimizer.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm=self.settings.grad_clip_norm)
        value, norm_value = float(loss.item()), float(norm.item())
        if not (math.isfinite(value) and math.isfinite(norm_value)):
            optimizer.zero_grad()
            self.skipped_steps[name] = self.skipped_steps.get(name, 0) + 1
            log.warning(
                "a non-finite loss or gradient: this optimiser step is skipped",
                optimizer=name,
                loss=value,
                grad_norm=norm_value,
                step=self.optimization_step,
                skipped=self.skipped_steps[name],
            )
            return value, norm_value
        optimizer.step()
        return value, norm_value

    def _step_discrete(self, batch: Mapping[str, Any]) -> tuple[float, float]:
        assert self.policy.discrete_critic is not None
        return self._step(
            "discrete_critic",
            self._discrete_critic_loss(batch),
            self._clipped["discrete_critic"],
        )

    def _critic_loss(self, batch: Mapping[str, Any]) -> Tensor:
        s = self.settings
        with torch.no_grad():
            next_actions, next_log_probs, _ = self.policy.actor(batch["next_state"])
            q_targets = self.critic_target(batch["next_state"], next_actions)
            if s.num_subsample_critics is not None:
                indices = torch.randperm(s.num_critics)[: s.num_subsample_critics]
                q_targets = q_targets[indices]
            min_q, _ = q_targets.min(dim=0)
            if s.use_backup_entropy:
                min_q = min_q - self.temperature * next_log_probs
            td_target = batch["reward"] + (1 - batch["done"]) * s.discount * min_q
        actions = batch["action"]
        if self.discrete:
            actions = actions[:, :-1]  # the critics judge the continuous part
        q_preds = self.critic_ensemble(batch["state"], actions)
        target = td_target.unsqueeze(0).expand_as(q_preds)
        return F.mse_loss(q_preds, target, reduction="none").mean(dim=1).sum()

    def _discrete_critic_loss(self, batch: Mapping[str, Any]) -> Tensor:
        critic = self.policy.discrete_critic
        target_critic = self.discrete_critic_target
        assert critic is not None and target_critic is not None
        chosen = torch.round(batch["action"][:, -1:]).long()
        with torch.no_grad():
            best_next = torch.argmax(critic(batch["next_state"]), dim=-1, keepdim=True)
            next_q = torch.gather(target_critic(batch["next_state"]), 1, best_next).squeeze(-1)
            rewards = batch["reward"] + batch.get("discrete_penalty", 0.0)
            target = rewards + (1 - batch["done"]) * self.settings.discount * next_q
        predicted = torch.gather(critic(batch["state"]), 1, chosen).squeeze(-1)
        return F.mse_loss(predicted, target)

    def _actor_loss(self, batch: Mapping[str, Any]) -> Tensor:
        actions, log_probs, _ = self.policy.actor(batch["state"])
        min_q = self.critic_ensemble(batch["state"], actions).min(dim=0)[0]
        return ((self.temperature * log_probs) - min_q).mean()

    def _temperature_loss(self, batch: Mapping[str, Any]) -> Tensor:
        with torch.no_grad():
            _, log_probs, _ = self.policy.actor(batch["state"])
        return (-self.log_alpha.exp() * (log_probs + self.target_entropy)).mean()

    def _update_targets(self) -> None:
        tau = self.settings.critic_target_update_weight
        with torch.no_grad():
            for target_params, source_params in self._target_pairs:
                targets = [t.data for t in target_params]
                sources = [p.data for p in source_params]
                # LeRobot's `p * tau + t * (1 - tau)`, the same float operations, as three
                # foreach kernels instead of three per parameter (the shared encoder is in both
                # lists: `moved` is computed before `t` is scaled, as LeRobot's right-hand side).
                moved = torch._foreach_mul(sources, tau)
                torch._foreach_mul_(targets, 1.0 - tau)
                torch._foreach_add_(targets, moved)

    # --- what travels to the actors, what a checkpoint holds -------------------------------

    def weights(self) -> dict[str, np.ndarray]:
        """The actor's (and the discrete critic's) weights, for the actors: LeRobot's
        `get_weights` (`policy.*`, `discrete_critic.*`) as float32 arrays."""
        out = {f"policy.{k}": _numpy(v) for k, v in self.policy.actor.state_dict().items()}
        if self.policy.discrete_critic is not None:
            for k, v in self.policy.discrete_critic.state_dict().items():
                out[f"discrete_critic.{k}"] = _numpy(v)
        return out

    def state_dict(self) -> dict[str, Tensor]:
        bundle: dict[str, Tensor] = {}
        modules: list[tuple[str, nn.Module | None]] = [
            ("critic_ensemble", self.critic_ensemble),
            ("critic_target", self.critic_target),
            ("discrete_critic_target", self.discrete_critic_target),
        ]
        for prefix, module in modules:
            if module is None:
                continue
            for k, v in module.state_dict().items():
                if not k.startswith("encoder."):
                    bundle[f"{prefix}.{k}"] = v.detach().cpu().contiguous()
        bundle["log_alpha"] = self.log_alpha.detach().cpu().contiguous()
        return bundle

    def save(self, folder: Path, settings_data: Mapping[str, Any]) -> None:
        """`algorithm/` as LeRobot's `SACAlgorithm.save_pretrained` writes it: config.json,
        model.safetensors (the critics, targets, temperature)."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ALGORITHM_CONFIG).write_text(
            json.dumps({"type": "sac", **settings_data}, indent=4) + "\n", encoding="utf-8"
        )
        save_file(self.state_dict(), str(folder / ALGORITHM_WEIGHTS))

    def save_optimizers(self, folder: Path) -> None:
        """The optimisers into `training_state/` as LeRobot's learner saves its dict of them:
        one folder each (`actor/`, `critic/`, `temperature/`, `discrete_critic/`) holding
        `optimizer_state.safetensors` and `optimizer_param_groups.json`."""
        for name, optimizer in self.optimizers.items():
            (folder / name).mkdir(parents=True, exist_ok=True)
            save_optimizer(optimizer, folder / name)

    def load(self, folder: Path) -> None:
        """The critics, targets and temperature from `algorithm/` (LeRobot's or ours)."""
        try:
            state = load_file(str(folder / ALGORITHM_WEIGHTS))
        except (OSError, SafetensorError, ValueError) as err:
            raise InvalidInput(
                f"cannot read the learner's state: {err}",
                where=str(folder / ALGORITHM_WEIGHTS),
                hint="the checkpoint is incomplete; start over without --resume",
            ) from err
        for prefix, module in (
            ("critic_ensemble.", self.critic_ensemble),
            ("critic_target.", self.critic_target),
            ("discrete_critic_target.", self.discrete_critic_target),
        ):
            if module is None:
                continue
            part = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
            expected = module.state_dict()
            wanted = {k for k in expected if not k.startswith("encoder.")}
            if set(part) != wanted or any(
                tuple(v.shape) != tuple(expected[k].shape) for k, v in part.items()
            ):
                raise InvalidInput(
                    f"the saved {prefix.rstrip('.')} does not fit the policy's critics",
                    where=str(folder / ALGORITHM_WEIGHTS),
                    hint="resume with the settings the run started with",
                )
            module.load_state_dict(part, strict=False)
        if "log_alpha" in state:
            with torch.no_grad():
                self.log_alpha.data.copy_(state["log_alpha"].to(self.log_alpha.device))

    def load_optimizers(self, folder: Path) -> None:
        """The optimisers from `training_state/` (LeRobot's layout, `save_optimizers`)."""
        for name, optimizer in self.optimizers.items():
            where = folder / name
            if not (where / OPTIMIZER_STATE).is_file():
                raise InvalidInput(
                    f"the checkpoint has no state for the {name} optimiser",
                    where=str(where / OPTIMIZER_STATE),
                    hint="the checkpoint is incomplete (or of a policy without a "
                    f"{name.replace('_', ' ')}); resume from another one",
                )
            try:
                load_optimizer(optimizer, where)
            except ValueError as err:  # torch: the groups' sizes differ
                raise InvalidInput(
                    f"the saved {name} optimiser does not fit this policy: {err}",
                    where=str(where),
                    hint="resume with the settings the run started with",
                ) from err
            self._check_optimizer(name, optimizer, where)

    def load_legacy_optimizers(self, folder: Path) -> int:
        """The optimisers as rlctl saved them before it wrote LeRobot's layout (all in
        `algorithm/`); returns the step they were saved at."""
        try:
            optimizer_tensors = load_file(str(folder / OPTIMIZER_STATE))
            groups = json.loads((folder / OPTIMIZER_GROUPS).read_text(encoding="utf-8"))
        except (OSError, SafetensorError, ValueError) as err:
            raise InvalidInput(
                f"cannot read the learner's optimisers: {err}",
                where=str(folder),
                hint="the checkpoint is incomplete; start over without --resume",
            ) from err
        for name, optimizer in self.optimizers.items():
            if name not in groups:
                continue
            per_param: dict[int, dict[str, Tensor]] = {}
            for key, value in optimizer_tensors.items():
                owner, index, field = key.split(".", 2)
                if owner == name:
                    per_param.setdefault(int(index), {})[field] = value
            optimizer.load_state_dict({"state": per_param, "param_groups": groups[name]})
            for group in optimizer.param_groups:
                group["foreach"] = True
            self._check_optimizer(name, optimizer, folder)
        return int(groups.get("optimization_step", 0))

    @staticmethod
    def _check_optimizer(name: str, optimizer: torch.optim.Optimizer, where: Path) -> None:
        """Each moment the shape of its parameter (torch's `load_state_dict` checks only the
        counts: a mismatch would fail later, inside a step)."""
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                for key, value in optimizer.state.get(parameter, {}).items():
                    if value.ndim and tuple(value.shape) != tuple(parameter.shape):
                        raise InvalidInput(
                            f"the saved {name} optimiser's {key} has shape "
                            f"{tuple(value.shape)} where this policy's parameter has "
                            f"{tuple(parameter.shape)}",
                            where=str(where),
                            hint="resume with the settings the run started with",
                        )


def _adam(params: Any, lr: float) -> torch.optim.Adam:
    return torch.optim.Adam(params, lr=lr, foreach=True)


def load_actor_weights(policy: GaussianActorPolicy, weights: Mapping[str, np.ndarray]) -> None:
    """The learner's `weights()` into an actor's policy (LeRobot's `load_weights`)."""
    actor = {k[len("policy.") :]: v for k, v in weights.items() if k.startswith("policy.")}
    expected = policy.actor.state_dict()
    if set(actor) != set(expected):
        raise InvalidInput(
            "the learner's parameters do not fit this actor's policy",
            where="parameters",
            hint="the actor and the learner must run the same policy config",
        )
    for key, value in actor.items():
        if tuple(value.shape) != tuple(expected[key].shape):
            raise InvalidInput(
                f"the learner's parameters do not fit this actor's policy: {key} has shape "
                f"{tuple(value.shape)}, this policy's {tuple(expected[key].shape)}",
                where="parameters",
                hint="the actor and the learner must run the same policy config",
            )
    device = policy.device
    policy.actor.load_state_dict({k: torch.from_numpy(v).to(device) for k, v in actor.items()})
    if policy.discrete_critic is not None:
        prefix = "discrete_critic."
        part = {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
        if part:
            policy.discrete_critic.load_state_dict(
                {k: torch.from_numpy(v).to(device) for k, v in part.items()}
            )


def _numpy(value: Tensor) -> np.ndarray:
    return value.detach().to("cpu", torch.float32).contiguous().numpy()
