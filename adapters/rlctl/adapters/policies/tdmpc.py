"""TD-MPC (Hansen et al. 2022, "Temporal Difference Learning for Model Predictive Control") with
the changes of FOWM (Feng et al. 2023), compatible with LeRobot 0.6.1's weights.

A task-oriented latent dynamics model (TOLD), learnt offline from a dataset's transitions:

    z = encoder(observation)          mean of the camera, env-state and state encodings
    z' = dynamics(z, a)               r = reward(z, a)
    Q_1..Q_k(z, a)                    V(z)               a = pi(z) (tanh)

Training unrolls the dynamics over `horizon` steps from the first observation and sums, each
step weighted by temporal_decay_coeff^t: latent consistency with a slowly moving target encoder
(EMA, `target_model_momentum`), reward regression, Q towards r + discount * V(z'), V towards the
target's min over two Qs by expectile regression (IQL), and advantage-weighted regression of pi
on the dataset's actions. Padded steps (episode ends) count for nothing.

At inference, with `use_mpc`, MPPI plans in the latent space: trajectories sampled from a
Gaussian (warm-started from the previous plan) and from pi, each scored by its predicted rewards,
a terminal Q and an uncertainty penalty (the Q ensemble's spread); the Gaussian moves to the
elites' weighted mean and spread over `cem_iterations`; one elite is drawn. Without it, pi acts.
Actions stay in [-1, 1] (MIN_MAX normalised). Attribute names follow LeRobot's, so that its
`model.safetensors` (the model and its target) loads as it is.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl.domain.acting import ActionBuffer, ActionQueue
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.policies import ACTION, OBS_ENV_STATE, OBS_STATE
from rlctl.domain.policies.tdmpc import TDMPCConfig

REWARD = "next.reward"
LEROBOT_IMAGE_ALIAS = "observation.image"


class TDMPCPolicy(PolicyModel):
    config_class = TDMPCConfig
    config: TDMPCConfig

    def __init__(self, config: TDMPCConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        if not config.input_features.keys() & {OBS_STATE, OBS_ENV_STATE, *config.image_features}:
            raise ConfigError(
                "TD-MPC reads a camera, 'observation.state' or "
                "'observation.environment_state', and the inputs have none",
                where="policy.input_features",
            )
        self.image_key = next(iter(config.image_features), None)
        self.model = TDMPCTOLD(config)
        self.model_target = copy.deepcopy(self.model)
        for param in self.model_target.parameters():
            param.requires_grad = False
        # The previous plan's mean, shifted by a step to warm-start the next plan.
        self._prev_mean: Tensor | None = None

    # --- acting ---------------------------------------------------------------------------

    def reset(self) -> None:
        self._prev_mean = None

    def action_buffer(self) -> ActionBuffer:
        config = self.config
        return ActionQueue(max(config.n_action_steps, config.n_action_repeats))

    @torch.no_grad()
    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        """`(B, steps, action_dim)`: the plan's first action repeated `n_action_repeats` times,
        or its first `n_action_steps` actions. Sampling uses torch's global generator."""
        self.eval()
        z = self.model.encode(self._observation(batch))
        # (horizon, B, A) planned, or pi's one action.
        actions = self.plan(z) if self.config.use_mpc else self.model.pi(z).unsqueeze(0)
        actions = actions.clamp(-1, 1)
        if self.config.n_action_repeats > 1:
            return actions[0].unsqueeze(1).repeat(1, self.config.n_action_repeats, 1)
        return actions[: self.config.n_action_steps].transpose(0, 1)

    def _observation(self, batch: Batch) -> dict[str, Tensor]:
        out = {}
        for key in self.model._encoder.keys:
            if key not in batch:
                raise InvalidInput(f"the observation lacks {key}, which TD-MPC reads", where=key)
            out[key] = batch[key]
        return out

    @torch.no_grad()
    def plan(self, z: Tensor) -> Tensor:
        """MPPI from latent states `(B, latent_dim)` -> a trajectory `(horizon, B, action_dim)`.
        The random draws follow LeRobot's order, so a seeded generator plans alike in both."""
        config, model = self.config, self.model
        batch_size, action_dim = z.shape[0], config.action_dim
        pi_actions = torch.empty(
            config.horizon, config.n_pi_samples, batch_size, action_dim, device=z.device
        )
        if config.n_pi_samples > 0:
            pi_z = z.unsqueeze(0).repeat(config.n_pi_samples, 1, 1)
            for t in range(config.horizon):
                pi_actions[t] = model.pi(pi_z, config.min_std)
                pi_z = model.latent_dynamics(pi_z, pi_actions[t])

        z = z.unsqueeze(0).repeat(config.n_gaussian_samples + config.n_pi_samples, 1, 1)
        mean = torch.zeros(config.horizon, batch_size, action_dim, device=z.device)
        previous = self._prev_mean
        if previous is not None and previous.shape == mean.shape:
            mean[:-1] = previous[1:]
        std = config.max_std * torch.ones_like(mean)
        for _ in range(config.cem_iterations):
            noise = torch.randn(
                config.horizon, config.n_gaussian_samples, batch_size, action_dim, device=z.device
            )
            gaussian = (mean.unsqueeze(1) + std.unsqueeze(1) * noise).clamp(-1, 1)
            actions = torch.cat([gaussian, pi_actions], dim=1)
            value = self.estimate_value(z, actions).nan_to_num_(0)  # (samples, B)
            elite_idxs = torch.topk(value, config.n_elites, dim=0).indices
            elite_value = value.take_along_dim(elite_idxs, dim=0)  # (n_elites, B)
            elite_actions = actions.take_along_dim(elite_idxs[None, :, :, None], dim=1)
            score = torch.exp(
                config.elite_weighting_temperature * (elite_value - elite_value.max(0)[0])
            )
            score /= score.sum(0, keepdim=True)
            weights = score.unsqueeze(-1)
            elite_mean = (weights * elite_actions).sum(dim=1)  # (horizon, B, A)
            elite_std = (weights * (elite_actions - elite_mean.unsqueeze(1)) ** 2).sum(1).sqrt()
            momentum = config.gaussian_mean_momentum
            mean = momentum * mean + (1 - momentum) * elite_mean
            std = elite_std.clamp_(config.min_std, config.max_std)
        self._prev_mean = mean
        chosen = torch.multinomial(score.T, 1)[:, 0]  # one elite per batch item
        return elite_actions[:, chosen, torch.arange(batch_size)]

    @torch.no_grad()
    def estimate_value(self, z: Tensor, actions: Tensor) -> Tensor:
        """FOWM's eq. 4: discounted predicted rewards, a terminal value (the min of two random
        Qs), minus the Q ensemble's spread along the way. `actions` `(horizon, N, B, A)`."""
        config, model = self.config, self.model
        penalty = config.uncertainty_regularizer_coeff
        value: Tensor | float = 0.0
        discount = 1.0
        for t in range(actions.shape[0]):
            regularization: Tensor | float = 0.0
            if penalty > 0:
                regularization = -(penalty * model.Qs(z, actions[t]).std(0))
            z, reward = model.latent_dynamics_and_reward(z, actions[t])
            value = value + discount * (reward + regularization)
            discount *= config.discount
        terminal = model.Qs(z, model.pi(z, config.min_std))  # (ensemble, N, B)
        if config.q_ensemble_size > 2:
            pair = torch.randint(0, config.q_ensemble_size, size=(2,))
            value = value + discount * terminal[pair].min(dim=0)[0]
        else:
            value = value + discount * terminal.min(dim=0)[0]
        if penalty > 0:
            value = value - discount * penalty * terminal.std(0)
        assert isinstance(value, Tensor)
        return value

    # --- learning -------------------------------------------------------------------------

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        config, model = self.config, self.model
        if REWARD not in batch:
            raise InvalidInput(
                "TD-MPC learns from rewards: the batch has no 'next.reward'",
                where=REWARD,
                hint="train TD-MPC on a dataset that records next.reward",
            )
        # Time first: (T, B, ...).
        action = batch[ACTION].transpose(0, 1)
        reward = batch[REWARD].transpose(0, 1)
        if reward.ndim == 3:  # a (1,)-shaped reward feature: (T, B, 1)
            reward = reward.squeeze(-1)
        observations = {k: batch[k].transpose(0, 1) for k in model._encoder.keys}
        if self.image_key is not None and config.max_random_shift_ratio > 0:
            shifted = _per_image(
                lambda x: random_shifts(x, config.max_random_shift_ratio),
                observations[self.image_key],
            )
            # LeRobot 0.6.1 shifts a copy it names `observation.image` while its encoder reads
            # the camera's own key: only a camera named so is augmented (the draw happens
            # either way). Kept, so that training here follows LeRobot's step for step.
            if self.image_key == LEROBOT_IMAGE_ALIAS:
                observations[self.image_key] = shifted
        first = {k: v[0] for k, v in observations.items()}
        following = {k: v[1:] for k, v in observations.items()}
        horizon = action.shape[0]

        z_preds = [model.encode(first)]
        reward_preds = []
        for t in range(horizon):
            z_next, r = model.latent_dynamics_and_reward(z_preds[t], action[t])
            z_preds.append(z_next)
            reward_preds.append(r)
        z_all = torch.stack(z_preds)  # (T + 1, B, latent)
        reward_pred = torch.stack(reward_preds)
        q_preds = model.Qs(z_all[:-1], action)  # (ensemble, T, B)
        v_preds = model.V(z_all[:-1])
        with torch.no_grad():
            z_targets = self.model_target.encode(following)
            q_targets = reward + config.discount * model.V(model.encode(following))
            v_targets = self.model_target.Qs(z_all[:-1].detach(), action, return_min=True)

        decay = torch.pow(
            config.temporal_decay_coeff, torch.arange(horizon, device=action.device)
        ).unsqueeze(-1)
        pads = self._real_steps(batch, horizon)
        first_real, action_real = pads["first"], pads["action"]
        next_real, reward_real = pads["next"], pads["reward"]

        consistency = F.mse_loss(z_all[1:], z_targets, reduction="none").mean(-1)
        consistency_loss = (decay * consistency * first_real * action_real * next_real).sum(0)
        reward_error = F.mse_loss(reward_pred, reward, reduction="none")
        reward_loss = (decay * reward_error * reward_real * first_real * action_real).sum(0)
        q_error = F.mse_loss(q_preds, q_targets.expand_as(q_preds), reduction="none").sum(0)
        q_value_loss = (decay * q_error * first_real * action_real * reward_real * next_real).sum(0)
        diff = v_targets - v_preds
        expectile = (
            torch.where(diff > 0, config.expectile_weight, 1 - config.expectile_weight) * diff**2
        )
        v_value_loss = (decay * expectile * first_real * action_real).sum(0)

        z_fixed = z_all.detach()
        with torch.no_grad():
            advantage = self.model_target.Qs(z_fixed[:-1], action, return_min=True) - model.V(
                z_fixed[:-1]
            )
            weights = torch.clamp(torch.exp(advantage * config.advantage_scaling), max=100.0)
        action_error = F.mse_loss(model.pi(z_fixed[:-1]), action, reduction="none").sum(-1)
        pi_loss = (weights * action_error * decay * first_real * action_real).mean()

        consistency_loss, reward_loss = consistency_loss.mean(), reward_loss.mean()
        q_value_loss, v_value_loss = q_value_loss.mean(), v_value_loss.mean()
        loss = (
            config.consistency_coeff * consistency_loss
            + config.reward_coeff * reward_loss
            + config.value_coeff * q_value_loss
            + config.value_coeff * v_value_loss
            + config.pi_coeff * pi_loss
        )
        parts = {
            "Q": q_preds.mean().item(),
            "V": v_preds.mean().item(),
            "consistency_loss": consistency_loss.item(),
            "reward_loss": reward_loss.item(),
            "Q_value_loss": q_value_loss.item(),
            "V_value_loss": v_value_loss.item(),
            "pi_loss": pi_loss.item(),
            "sum_loss": loss.item() * config.horizon,
        }
        return loss, parts

    def _real_steps(self, batch: Batch, horizon: int) -> dict[str, Tensor]:
        """1 where a step is real, 0 where it pads past an episode's end: the first
        observation `(B,)`, the next ones, the actions and the rewards `(T, B)`."""

        def real(key: str, steps: int) -> Tensor:
            pad = batch.get(f"{key}_is_pad")
            if pad is None:
                return torch.ones(steps, batch[ACTION].shape[0], device=batch[ACTION].device)
            return (~pad.bool()).transpose(0, 1).float()

        # LeRobot reads the state's pad mask; every observation shares it.
        observed = next(
            k for k in (OBS_STATE, OBS_ENV_STATE, self.image_key) if k in self.model._encoder.keys
        )
        observation = real(observed, horizon + 1)
        return {
            "first": observation[0],
            "next": observation[1:],
            "action": real(ACTION, horizon),
            "reward": real(REWARD, horizon),
        }

    def after_optimizer_step(self) -> None:
        """The target model follows the model by an EMA step (LeRobot's `update`)."""
        momentum = self.config.target_model_momentum
        with torch.no_grad():
            for target, online in zip(
                self.model_target.parameters(), self.model.parameters(), strict=True
            ):
                target.mul_(momentum).add_(online.to(target.dtype), alpha=1 - momentum)


class TDMPCTOLD(nn.Module):
    """Task-Oriented Latent Dynamics: encoder, dynamics, reward, pi, the Q ensemble and V."""

    def __init__(self, config: TDMPCConfig) -> None:
        super().__init__()
        latent, hidden, action = config.latent_dim, config.mlp_dim, config.action_dim
        self._encoder = TDMPCObservationEncoder(config)
        self._dynamics = nn.Sequential(
            *_norm_mish(latent + action, hidden),
            *_norm_mish(hidden, hidden),
            nn.Linear(hidden, latent),
            nn.LayerNorm(latent),
            nn.Sigmoid(),
        )
        self._reward = nn.Sequential(
            *_norm_mish(latent + action, hidden), *_norm_mish(hidden, hidden), nn.Linear(hidden, 1)
        )
        self._pi = nn.Sequential(
            *_norm_mish(latent, hidden), *_norm_mish(hidden, hidden), nn.Linear(hidden, action)
        )
        self._Qs = nn.ModuleList(
            [_value_head(latent + action, hidden) for _ in range(config.q_ensemble_size)]
        )
        self._V = _value_head(latent, hidden)
        self._init_weights()

    def _init_weights(self) -> None:
        """Orthogonal weights and zero biases everywhere (convolutions with ReLU's gain); the
        reward's and the Qs' last layers start at zero, so every value starts at zero."""

        def init(module: nn.Module) -> None:
            if isinstance(module, nn.Linear):
                nn.init.orthogonal_(module.weight.data)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Conv2d):
                nn.init.orthogonal_(module.weight.data, nn.init.calculate_gain("relu"))
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

        self.apply(init)
        for head in [self._reward, *self._Qs]:
            nn.init.zeros_(head[-1].weight)
            nn.init.zeros_(head[-1].bias)

    def encode(self, observation: dict[str, Tensor]) -> Tensor:
        return self._encoder(observation)

    def latent_dynamics_and_reward(self, z: Tensor, a: Tensor) -> tuple[Tensor, Tensor]:
        x = torch.cat([z, a], dim=-1)
        return self._dynamics(x), self._reward(x).squeeze(-1)

    def latent_dynamics(self, z: Tensor, a: Tensor) -> Tensor:
        return self._dynamics(torch.cat([z, a], dim=-1))

    def pi(self, z: Tensor, std: float = 0.0) -> Tensor:
        """The policy's action, with Gaussian exploration noise of `std` (not clamped here)."""
        action = torch.tanh(self._pi(z))
        if std > 0:
            action = action + torch.randn_like(action) * std
        return action

    def V(self, z: Tensor) -> Tensor:  # noqa: N802 (the paper's name)
        return self._V(z).squeeze(-1)

    def Qs(self, z: Tensor, a: Tensor, return_min: bool = False) -> Tensor:  # noqa: N802
        """Every Q `(ensemble, ...)`; with `return_min`, the min of two drawn at random (with
        replacement, numpy's generator: FOWM's appendix C, as LeRobot draws them)."""
        x = torch.cat([z, a], dim=-1)
        if not return_min:
            return torch.stack([q(x).squeeze(-1) for q in self._Qs], dim=0)
        heads = list(self._Qs)
        if len(heads) > 2:
            heads = [heads[i] for i in np.random.choice(len(heads), size=2)]
        return torch.stack([q(x).squeeze(-1) for q in heads], dim=0).min(dim=0)[0]


def _norm_mish(in_dim: int, out_dim: int) -> list[nn.Module]:
    return [nn.Linear(in_dim, out_dim), nn.LayerNorm(out_dim), nn.Mish()]


def _value_head(in_dim: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(in_dim, hidden),
        nn.LayerNorm(hidden),
        nn.Tanh(),
        nn.Linear(hidden, hidden),
        nn.ELU(),
        nn.Linear(hidden, 1),
    )


class TDMPCObservationEncoder(nn.Module):
    """Each modality to a latent in (0, 1) (LayerNorm, sigmoid); their mean is the state."""

    def __init__(self, config: TDMPCConfig) -> None:
        super().__init__()
        latent, hidden = config.latent_dim, config.state_encoder_hidden_dim
        self.keys: list[str] = []
        if config.image_features:
            key, feature = next(iter(config.image_features.items()))
            width = config.image_encoder_hidden_dim
            layers: list[nn.Module] = []
            in_channels = feature.shape[0]
            for kernel in (7, 5, 3, 3):
                layers += [nn.Conv2d(in_channels, width, kernel, stride=2), nn.ReLU()]
                in_channels = width
            self.image_enc_layers = nn.Sequential(*layers)
            with torch.no_grad():
                out_shape = self.image_enc_layers(torch.zeros(1, *feature.shape)).shape[1:]
            self.image_enc_layers.extend(
                [
                    nn.Flatten(),
                    nn.Linear(int(np.prod(out_shape)), latent),
                    nn.LayerNorm(latent),
                    nn.Sigmoid(),
                ]
            )
            self.keys.append(key)
        if config.env_state_feature is not None:
            self.env_state_enc_layers = _vector_encoder(
                config.env_state_feature.shape[0], hidden, latent
            )
            self.keys.append(OBS_ENV_STATE)
        if config.robot_state_feature is not None:
            self.state_enc_layers = _vector_encoder(
                config.robot_state_feature.shape[0], hidden, latent
            )
            self.keys.append(OBS_STATE)

    def forward(self, observation: dict[str, Tensor]) -> Tensor:
        latents = []
        for key in self.keys:
            if key == OBS_STATE:
                latents.append(self.state_enc_layers(observation[key]))
            elif key == OBS_ENV_STATE:
                latents.append(self.env_state_enc_layers(observation[key]))
            else:
                latents.append(_per_image(self.image_enc_layers, observation[key]))
        return torch.stack(latents, dim=0).mean(0)


def _vector_encoder(in_dim: int, hidden: int, latent: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(in_dim, hidden),
        nn.ELU(),
        nn.Linear(hidden, latent),
        nn.LayerNorm(latent),
        nn.Sigmoid(),
    )


def _per_image(fn: Callable[[Tensor], Tensor], images: Tensor) -> Tensor:
    """`fn` over `(..., C, H, W)` images, the leading axes flattened and restored."""
    lead = images.shape[:-3]
    out = fn(images.reshape(-1, *images.shape[-3:]))
    return out.reshape(*lead, *out.shape[1:])


def random_shifts(x: Tensor, max_random_shift_ratio: float) -> Tensor:
    """DrQ-v2's augmentation: each square image shifted by up to `ratio * size` pixels (edges
    replicated), by bilinear sampling from a padded copy."""
    batch, _, size, _ = x.shape
    pad = round(max_random_shift_ratio * size)
    x = F.pad(x, (pad, pad, pad, pad), "replicate")
    eps = 1.0 / (size + 2 * pad)
    line = torch.linspace(-1.0 + eps, 1.0 - eps, size + 2 * pad, device=x.device)[:size]
    line = line.view(1, size, 1).expand(size, size, 1)
    base = torch.cat([line, line.transpose(1, 0)], dim=2).unsqueeze(0).expand(batch, -1, -1, -1)
    # Drawn as floats, as LeRobot draws them (the same generator state gives the same shifts).
    shift = torch.randint(
        0, 2 * pad + 1, size=(batch, 1, 1, 2), device=x.device, dtype=torch.float32
    )
    shift *= 2.0 / (size + 2 * pad)
    return F.grid_sample(x, base + shift, padding_mode="zeros", align_corners=False)
