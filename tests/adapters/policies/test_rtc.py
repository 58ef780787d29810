"""Real-time chunking's guidance: LeRobot's formula (its autograd form, transcribed here) on a
velocity that depends on `x_t`, the guidance weight's ends, and an Euler sampler pulled onto the
leftover where the schedule says so."""

from __future__ import annotations

import math

import pytest
import torch

from rlctl.adapters.policies.vla.rtc import PrefixGuidance, guidance_weight, guided
from rlctl.domain.policies.rtc import RTCConfig, prefix_weights

STEPS, DIMS = 12, 4


def field(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(DIMS + 1, 16), torch.nn.Tanh(), torch.nn.Linear(16, DIMS)
    )


def velocity_of(net: torch.nn.Module):  # type: ignore[no-untyped-def]
    def velocity(x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        time = t.reshape(-1, 1, 1).expand(x_t.shape[0], x_t.shape[1], 1)
        return net(torch.cat([x_t, time], dim=-1))

    return velocity


def lerobots_step(velocity, x_t, leftover, delay, time, config):  # type: ignore[no-untyped-def]
    """LeRobot 0.6.1's `RTCProcessor.denoise_step`, as it computes it (autograd included)."""
    tau = 1 - time
    x_t = x_t.clone().detach()
    horizon = min(config.execution_horizon, leftover.shape[1])
    batch, steps, dims = x_t.shape
    padded = torch.zeros(batch, steps, dims)
    padded[:, : leftover.shape[1], : leftover.shape[2]] = leftover
    weights = torch.from_numpy(
        prefix_weights(config.prefix_attention_schedule, delay, horizon, steps)
    )[None, :, None]
    with torch.enable_grad():
        v_t = velocity(x_t, torch.full((batch,), time))
        x_t.requires_grad_(True)
        x1_t = x_t - time * v_t
        err = (padded - x1_t) * weights
        correction = torch.autograd.grad(x1_t, x_t, err.clone().detach())[0]
    cap = torch.as_tensor(config.max_guidance_weight)
    tau_t = torch.as_tensor(tau)
    inv_r2 = ((1 - tau_t) ** 2 + tau_t**2) / (1 - tau_t) ** 2
    c = torch.nan_to_num((1 - tau_t) / tau_t, posinf=cap)
    weight = torch.minimum(torch.nan_to_num(c * inv_r2, posinf=cap), cap)
    return v_t - weight * correction


def test_none_leaves_the_velocity_alone() -> None:
    velocity = velocity_of(field())
    assert guided(velocity, None) is velocity


@pytest.mark.parametrize("schedule", ["ZEROS", "ONES", "LINEAR", "EXP"])
@pytest.mark.parametrize(("delay", "left"), [(0, 8), (3, 8), (5, 4), (2, 12)])
def test_matches_lerobots_denoise_step(schedule: str, delay: int, left: int) -> None:
    config = RTCConfig(prefix_attention_schedule=schedule, execution_horizon=6)
    velocity = velocity_of(field())
    gen = torch.Generator().manual_seed(delay * 31 + left)
    leftover = torch.randn(2, left, DIMS - 1, generator=gen)  # narrower: zero-padded
    guidance = PrefixGuidance(leftover, delay, config)
    x_t = torch.randn(2, STEPS, DIMS, generator=gen)
    for time in (1.0, 0.7, 0.3, 0.1):
        ours = guided(velocity, guidance)(x_t, torch.full((2,), time))
        theirs = lerobots_step(velocity, x_t, leftover, delay, time, config)
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_the_weight_is_capped_at_pure_noise_and_falls_to_zero_at_the_end() -> None:
    times = torch.tensor([1.0, 0.9, 0.5, 0.1, 0.0])
    weights = guidance_weight(times, 10.0)
    assert weights[0] == 10.0 and weights[-1] == 0.0
    tau = 0.5
    assert math.isclose(float(weights[2]), (0.5 / tau) * (0.25 + 0.25) / 0.25, rel_tol=1e-6)
    assert (weights >= 0).all() and (weights <= 10).all()


def euler(velocity, noise: torch.Tensor, steps: int = 10) -> torch.Tensor:  # type: ignore[no-untyped-def]
    x_t, dt = noise, -1.0 / steps
    for i in range(steps):
        x_t = x_t + dt * velocity(x_t, torch.full((noise.shape[0],), 1.0 + i * dt))
    return x_t


def test_a_guided_chunk_follows_the_leftover_where_weighted_and_is_free_past_the_horizon() -> None:
    velocity = velocity_of(field(3))
    noise = torch.randn(1, STEPS, DIMS, generator=torch.Generator().manual_seed(5))
    free = euler(velocity, noise)
    leftover = free[:, :8] + 1.5  # a plan the free chunk disagrees with
    config = RTCConfig(execution_horizon=6, prefix_attention_schedule="LINEAR")
    chunk = euler(guided(velocity, PrefixGuidance(leftover, 3, config)), noise)
    before = (free[0, :3] - leftover[0, :3]).abs().mean()
    after = (chunk[0, :3] - leftover[0, :3]).abs().mean()
    assert after < 0.2 * before
    # Past the horizon nothing is pulled: the steps move only through the model's own field.
    assert (chunk[0, 6:] - free[0, 6:]).abs().mean() < (chunk[0, :3] - free[0, :3]).abs().mean()
