"""Flow matching as the VLA family trains and samples it (openpi's convention), and the switch of
its inference speed paths.

Training mixes a chunk of actions with noise at a time t in (0, 1], x_t = t · noise + (1 - t) ·
actions, and the model regresses the velocity noise - actions. Inference integrates that velocity
from noise (t = 1) to actions (t = 0) in Euler steps x ← x + dt · v (dt = -1 / steps), or in
Runge-Kutta steps (`rk4_integrate`, the multi-task DiT's option). The model
gives the velocity of one observation as a function `velocity(x_t, t)` (its prefix has run once,
each call runs the action expert over the cached keys and values); the sampler calls it step by
step, and real-time chunking wraps it (`rtc.guided`) without the sampler knowing.

`speed_paths` is the one switch of a model's inference speed paths: with it (the default)
`velocity_field` is the model's `fast_velocity_field`, which leaves out work no output depends on
and gives the same chunks up to float rounding; without it, `plain_velocity_field`, the
reference's arithmetic step for step. Each model's tests compare the two.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.vla.inputs import VLAInputs
from rlctl.adapters.policies.vla.rtc import PrefixGuidance, guided

# Velocity of the flow at (x_t, time): what the sampler integrates.
Velocity = Callable[[Tensor, Tensor], Tensor]


def beta_times(
    batch: int,
    device: torch.device,
    alpha: float = 1.5,
    beta: float = 1.0,
    scale: float = 0.999,
    offset: float = 0.001,
) -> Tensor:
    """Training times (B,): Beta(alpha, beta) · scale + offset, sampled on the CPU (openpi's)."""
    distribution = torch.distributions.Beta(
        torch.tensor(alpha, dtype=torch.float32), torch.tensor(beta, dtype=torch.float32)
    )
    time = distribution.sample((batch,)).to(device) * scale
    return (time + offset).to(torch.float32)


def time_embedding(time: Tensor, dimension: int, min_period: float, max_period: float) -> Tensor:
    """Sine-cosine embedding (B, dimension) of the flow-matching time (B,)."""
    if dimension % 2:
        raise ValueError(f"dimension ({dimension}) must be even")
    # float64 where the device has it (not on Apple's MPS), as LeRobot computes it.
    dtype = torch.float32 if time.device.type == "mps" else torch.float64
    fraction = torch.linspace(0.0, 1.0, dimension // 2, dtype=dtype, device=time.device)
    period = min_period * (max_period / min_period) ** fraction
    sin_input = (1.0 / period * 2 * math.pi)[None, :] * time[:, None]
    return torch.cat([torch.sin(sin_input), torch.cos(sin_input)], dim=1)


def euler_times(noise: Tensor, num_steps: int) -> list[Tensor]:
    """The times of `num_steps` Euler steps from 1 towards 0, each a float32 (B,) tensor."""
    dt = -1.0 / num_steps
    return [
        torch.tensor(1.0 + step * dt, dtype=torch.float32, device=noise.device).expand(
            noise.shape[0]
        )
        for step in range(num_steps)
    ]


def euler_integrate(
    velocity: Velocity, noise: Tensor, num_steps: int, times: list[Tensor] | None = None
) -> Tensor:
    """Integrate the flow from noise (t=1) to actions (t=0) in `num_steps` Euler steps; each
    step calls `velocity(x_t, time)` with `time` one of `times` (default `euler_times`), in
    order (openpi's loop)."""
    dt = -1.0 / num_steps
    x_t = noise
    for time in euler_times(noise, num_steps) if times is None else times:
        x_t = x_t + dt * velocity(x_t, time)
    return x_t


def rk4_integrate(velocity: Velocity, noise: Tensor, num_steps: int) -> Tensor:
    """Integrate the flow from noise (t=1) to actions (t=0) in `num_steps` classic Runge-Kutta
    steps, four calls of `velocity(x_t, time)` each (at the step's start, twice at its middle,
    at its end)."""
    dt = -1.0 / num_steps
    x_t = noise
    for time in euler_times(noise, num_steps):
        k1 = velocity(x_t, time)
        k2 = velocity(x_t + dt * k1 / 2, time + dt / 2)
        k3 = velocity(x_t + dt * k2 / 2, time + dt / 2)
        k4 = velocity(x_t + dt * k3, time + dt)
        x_t = x_t + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x_t


class FlowMatching(nn.Module):
    """A VLA's model: the training loss and the sampler around the velocity it predicts.

    A member says how many Euler steps it takes (`euler_steps`) and gives its velocity: over a
    whole [prefix, suffix] sequence in training (`training_velocity`), as a function of (x_t, t)
    over one observation at inference (`plain_velocity_field`, and `fast_velocity_field` where
    it has speed paths). Its config has the time embedding's `min_period` and `max_period`."""

    config: Any

    # The one switch of the inference speed paths (see the module's docstring). A class
    # attribute: set it on a loaded model (`policy.model.model.speed_paths = False`) for the
    # reference's arithmetic.
    speed_paths = True

    @property
    def euler_steps(self) -> int:
        raise NotImplementedError

    def sample_time(self, batch: int, device: torch.device) -> Tensor:
        """Training times: Beta(1.5, 1) scaled into [0.001, 1] unless the model says otherwise."""
        return beta_times(batch, device)

    def time_features(self, time: Tensor, dimension: int) -> Tensor:
        """The sine-cosine embedding (B, dimension) of the time, at the config's periods."""
        return time_embedding(time, dimension, self.config.min_period, self.config.max_period)

    def training_velocity(self, inputs: VLAInputs, x_t: Tensor, time: Tensor) -> Tensor:
        """The velocity (B, chunk, max_action_dim) at (x_t, time), prefix and suffix together."""
        raise NotImplementedError

    def plain_velocity_field(self, inputs: VLAInputs, times: list[Tensor]) -> Velocity:
        """`velocity(x_t, time)` over `inputs`, as the reference computes it; `times` are the
        sampler's (`euler_times`), which a field may prepare for."""
        raise NotImplementedError

    def fast_velocity_field(self, inputs: VLAInputs, times: list[Tensor]) -> Velocity:
        """`plain_velocity_field` on the speed paths (the same unless a model has some)."""
        return self.plain_velocity_field(inputs, times)

    def velocity_field(self, inputs: VLAInputs, times: list[Tensor]) -> Velocity:
        if self.speed_paths:
            return self.fast_velocity_field(inputs, times)
        return self.plain_velocity_field(inputs, times)

    def forward(
        self,
        inputs: VLAInputs,
        actions: Tensor,
        noise: Tensor | None = None,
        time: Tensor | None = None,
    ) -> Tensor:
        """Per-element squared error (B, chunk, max_action_dim) of the predicted velocity."""
        if noise is None:
            noise = torch.randn(actions.shape, dtype=torch.float32, device=actions.device)
        if time is None:
            time = self.sample_time(actions.shape[0], actions.device)
        t = time[:, None, None]
        x_t = t * noise + (1 - t) * actions
        target = noise - actions
        return F.mse_loss(target, self.training_velocity(inputs, x_t, time), reduction="none")

    @torch.no_grad()
    def sample_actions(
        self, inputs: VLAInputs, noise: Tensor, guidance: PrefixGuidance | None = None
    ) -> Tensor:
        """Integrate the velocity from `noise` (t=1) to actions (t=0); with `guidance`, towards
        the previous chunk's leftover (real-time chunking)."""
        steps = self.euler_steps
        times = euler_times(noise, steps)
        velocity = guided(self.velocity_field(inputs, times), guidance)
        return euler_integrate(velocity, noise, steps, times)
