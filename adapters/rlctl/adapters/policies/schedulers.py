"""DDPM and DDIM noise schedulers, the math of Hugging Face diffusers as LeRobot configures it.

LeRobot's Diffusion Policy builds `diffusers.DDPMScheduler` / `DDIMScheduler` with its config's
`num_train_timesteps`, `beta_*`, `clip_sample*` and `prediction_type`, leaving the rest at the
diffusers defaults: "leading" timestep spacing with no offset, DDIM's final alpha set to one, eta
zero (deterministic DDIM), DDPM's "fixed_small" variance. This module reproduces exactly that
(computing in float32 where diffusers does, so checkpoints sample the same actions) without
depending on diffusers.

Notation: `alpha_bar[t]` is the cumulative product of `1 - beta` up to step `t`; a sample at step
`t` is `sqrt(alpha_bar[t]) * x0 + sqrt(1 - alpha_bar[t]) * noise`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from rlctl.domain.errors import ConfigError

BETA_SCHEDULES = ("linear", "scaled_linear", "squaredcos_cap_v2")
PREDICTION_TYPES = ("epsilon", "sample", "v_prediction")


def make_betas(
    schedule: str, num_train_timesteps: int, beta_start: float, beta_end: float
) -> Tensor:
    """The noise variances beta_t, float32, as diffusers computes them."""
    if schedule == "linear":
        return torch.linspace(beta_start, beta_end, num_train_timesteps, dtype=torch.float32)
    if schedule == "scaled_linear":
        roots = torch.linspace(
            beta_start**0.5, beta_end**0.5, num_train_timesteps, dtype=torch.float32
        )
        return roots**2
    if schedule == "squaredcos_cap_v2":
        return _cosine_betas(num_train_timesteps)
    raise ConfigError(
        f"unknown beta_schedule {schedule!r}; known: {', '.join(BETA_SCHEDULES)}",
        where="policy.beta_schedule",
    )


def _cosine_betas(n: int, max_beta: float = 0.999) -> Tensor:
    # The "Glide" cosine schedule (Nichol & Dhariwal 2021): alpha_bar(t) = cos²((t + s)/(1 + s)·π/2)
    # with s = 0.008, discretised in float64 then stored as float32, capped to avoid beta = 1.
    def alpha_bar(t: float) -> float:
        return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

    betas = [min(1 - alpha_bar((i + 1) / n) / alpha_bar(i / n), max_beta) for i in range(n)]
    return torch.tensor(betas, dtype=torch.float32)


def leading_timesteps(num_train_timesteps: int, num_inference_steps: int) -> Tensor:
    """diffusers' "leading" spacing: 0, r, 2r, … with r = T // steps, in descending order."""
    if not 0 < num_inference_steps <= num_train_timesteps:
        raise ConfigError(
            f"num_inference_steps ({num_inference_steps}) must be in 1..{num_train_timesteps}",
            where="policy.num_inference_steps",
        )
    ratio = num_train_timesteps // num_inference_steps
    steps = (np.arange(0, num_inference_steps) * ratio).round()[::-1].copy().astype(np.int64)
    return torch.from_numpy(steps)


class NoiseScheduler:
    """What DDPM and DDIM share: the schedule, forward noising, and predicting x0."""

    def __init__(
        self,
        num_train_timesteps: int = 100,
        beta_start: float = 0.0001,
        beta_end: float = 0.02,
        beta_schedule: str = "squaredcos_cap_v2",
        clip_sample: bool = True,
        clip_sample_range: float = 1.0,
        prediction_type: str = "epsilon",
    ) -> None:
        if prediction_type not in PREDICTION_TYPES:
            raise ConfigError(
                f"unknown prediction_type {prediction_type!r}; "
                f"known: {', '.join(PREDICTION_TYPES)}",
                where="policy.prediction_type",
            )
        self.num_train_timesteps = num_train_timesteps
        self.clip_sample = clip_sample
        self.clip_sample_range = clip_sample_range
        self.prediction_type = prediction_type
        self.betas = make_betas(beta_schedule, num_train_timesteps, beta_start, beta_end)
        self.alphas = 1.0 - self.betas
        self.alphas_cumprod = torch.cumprod(self.alphas, dim=0)
        self.num_inference_steps = num_train_timesteps
        self.timesteps = torch.arange(num_train_timesteps - 1, -1, -1, dtype=torch.int64)

    def set_timesteps(self, num_inference_steps: int) -> None:
        self.num_inference_steps = num_inference_steps
        self.timesteps = leading_timesteps(self.num_train_timesteps, num_inference_steps)

    def add_noise(self, original: Tensor, noise: Tensor, timesteps: Tensor) -> Tensor:
        """Forward diffusion: noise clean samples `(B, ...)` to their steps `timesteps` `(B,)`."""
        alpha_bar = self.alphas_cumprod.to(device=original.device, dtype=original.dtype)
        alpha_bar = alpha_bar[timesteps.to(original.device)]
        shape = (-1,) + (1,) * (original.ndim - 1)
        signal = (alpha_bar**0.5).reshape(shape)
        spread = ((1 - alpha_bar) ** 0.5).reshape(shape)
        return signal * original + spread * noise

    def _alpha_bar(self, t: int) -> Tensor:
        # A step before the first one has alpha_bar = 1 (no noise at all).
        return self.alphas_cumprod[t] if t >= 0 else torch.tensor(1.0)

    def _predict_x0(self, model_output: Tensor, t: int, sample: Tensor) -> tuple[Tensor, Tensor]:
        """(x0, epsilon) implied by the model's output at step `t`; x0 clipped if configured."""
        alpha_bar = self.alphas_cumprod[t]
        beta_bar = 1 - alpha_bar
        if self.prediction_type == "epsilon":
            x0 = (sample - beta_bar**0.5 * model_output) / alpha_bar**0.5
            eps = model_output
        elif self.prediction_type == "sample":
            x0 = model_output
            eps = (sample - alpha_bar**0.5 * x0) / beta_bar**0.5
        else:  # v_prediction
            x0 = alpha_bar**0.5 * sample - beta_bar**0.5 * model_output
            eps = alpha_bar**0.5 * model_output + beta_bar**0.5 * sample
        if self.clip_sample:
            x0 = x0.clamp(-self.clip_sample_range, self.clip_sample_range)
        return x0, eps

    def step(
        self,
        model_output: Tensor,
        timestep: int | Tensor,
        sample: Tensor,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """One reverse step: the sample at the previous timestep."""
        raise NotImplementedError


def _randn_like(x: Tensor, generator: torch.Generator | None) -> Tensor:
    # Drawn where the generator lives, then moved: the same seed gives the same noise on any device.
    device = generator.device if generator is not None else x.device
    noise = torch.randn(x.shape, generator=generator, device=device, dtype=x.dtype)
    return noise.to(x.device)


class DDPMScheduler(NoiseScheduler):
    """Ho et al. 2020, ancestral sampling with the "fixed_small" posterior variance."""

    def _previous(self, t: int) -> int:
        if self.num_inference_steps == self.num_train_timesteps:
            return t - 1
        later = self.timesteps[self.timesteps < t]
        return int(later[0]) if len(later) else -1

    def step(
        self,
        model_output: Tensor,
        timestep: int | Tensor,
        sample: Tensor,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        t = int(timestep)
        prev_t = self._previous(t)
        alpha_bar = self.alphas_cumprod[t]
        alpha_bar_prev = self._alpha_bar(prev_t)
        beta_bar = 1 - alpha_bar
        beta_bar_prev = 1 - alpha_bar_prev
        alpha_t = alpha_bar / alpha_bar_prev
        beta_t = 1 - alpha_t

        x0, _ = self._predict_x0(model_output, t, sample)
        # Mean of q(x_{t-1} | x_t, x0), formula (7) of the DDPM paper.
        x0_coeff = alpha_bar_prev**0.5 * beta_t / beta_bar
        sample_coeff = alpha_t**0.5 * beta_bar_prev / beta_bar
        prev = x0_coeff * x0 + sample_coeff * sample
        if t > 0:
            variance = torch.clamp(beta_bar_prev / beta_bar * beta_t, min=1e-20)
            prev = prev + variance**0.5 * _randn_like(model_output, generator)
        return prev


class DDIMScheduler(NoiseScheduler):
    """Song et al. 2021, deterministic (eta = 0) unless `eta` is raised."""

    def __init__(self, *args, eta: float = 0.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.eta = eta

    def step(
        self,
        model_output: Tensor,
        timestep: int | Tensor,
        sample: Tensor,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        t = int(timestep)
        prev_t = t - self.num_train_timesteps // self.num_inference_steps
        alpha_bar = self.alphas_cumprod[t]
        alpha_bar_prev = self._alpha_bar(prev_t)

        x0, eps = self._predict_x0(model_output, t, sample)
        # sigma_t of formula (16) of the DDIM paper, scaled by eta.
        variance = (1 - alpha_bar_prev) / (1 - alpha_bar) * (1 - alpha_bar / alpha_bar_prev)
        std = self.eta * variance**0.5
        # Formula (12): jump to x0's neighbourhood at prev_t, pointing back along epsilon.
        direction = (1 - alpha_bar_prev - std**2) ** 0.5 * eps
        prev = alpha_bar_prev**0.5 * x0 + direction
        if self.eta > 0:
            prev = prev + std * _randn_like(model_output, generator)
        return prev


SCHEDULERS: dict[str, type[NoiseScheduler]] = {"DDPM": DDPMScheduler, "DDIM": DDIMScheduler}


def make_scheduler(name: str, **kwargs) -> NoiseScheduler:
    try:
        cls = SCHEDULERS[name]
    except KeyError:
        raise ConfigError(
            f"unknown noise scheduler {name!r}; known: {', '.join(SCHEDULERS)}",
            where="policy.noise_scheduler_type",
        ) from None
    return cls(**kwargs)
