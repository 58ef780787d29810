"""The DDPM/DDIM schedulers: diffusers' schedule and step math (checked against diffusers itself
when a LeRobot environment is at hand)."""

from __future__ import annotations

import math

import pytest
import torch

from rlctl.adapters.policies.schedulers import (
    DDIMScheduler,
    DDPMScheduler,
    leading_timesteps,
    make_scheduler,
)
from rlctl.domain.errors import ConfigError


def test_leading_timesteps() -> None:
    assert leading_timesteps(100, 4).tolist() == [75, 50, 25, 0]
    assert leading_timesteps(100, 3).tolist() == [66, 33, 0]
    assert leading_timesteps(10, 10).tolist() == list(range(9, -1, -1))
    with pytest.raises(ConfigError):
        leading_timesteps(10, 11)


def test_cosine_schedule_follows_alpha_bar() -> None:
    scheduler = DDIMScheduler(num_train_timesteps=100, beta_schedule="squaredcos_cap_v2")
    assert scheduler.alphas_cumprod.dtype == torch.float32

    def alpha_bar(t: float) -> float:
        return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

    for t in (0, 10, 50, 98):
        expected = alpha_bar((t + 1) / 100) / alpha_bar(0)
        assert scheduler.alphas_cumprod[t].item() == pytest.approx(expected, rel=1e-4)
    assert scheduler.betas.max().item() == pytest.approx(0.999)  # capped


def test_ddim_with_the_true_noise_recovers_the_clean_sample() -> None:
    torch.manual_seed(0)
    scheduler = DDIMScheduler(num_train_timesteps=100)
    scheduler.set_timesteps(5)
    clean = torch.rand(2, 8, 3) * 1.6 - 0.8  # inside the clip range
    noise = torch.randn_like(clean)
    start = int(scheduler.timesteps[0])
    sample = scheduler.add_noise(clean, noise, torch.full((2,), start))
    for t in scheduler.timesteps:
        # An oracle: the noise that takes the clean sample to the current one.
        alpha_bar = scheduler.alphas_cumprod[int(t)]
        eps = (sample - alpha_bar**0.5 * clean) / (1 - alpha_bar) ** 0.5
        sample = scheduler.step(eps, t, sample)
    assert torch.allclose(sample, clean, atol=1e-4)


def test_clipping_bounds_the_predicted_sample() -> None:
    scheduler = DDIMScheduler(num_train_timesteps=10, clip_sample_range=1.0)
    scheduler.set_timesteps(10)
    out = scheduler.step(torch.full((1, 2, 1), -50.0), 0, torch.zeros(1, 2, 1))
    assert torch.allclose(out, torch.ones(1, 2, 1))  # last step returns the clipped x0


def test_ddpm_last_step_adds_no_noise_and_seeds_reproduce() -> None:
    scheduler = DDPMScheduler(num_train_timesteps=50)
    scheduler.set_timesteps(50)
    sample, output = torch.randn(1, 4, 2), torch.randn(1, 4, 2)
    assert torch.equal(scheduler.step(output, 0, sample), scheduler.step(output, 0, sample))

    def noisy() -> torch.Tensor:
        return scheduler.step(output, 30, sample, generator=torch.Generator().manual_seed(3))

    assert torch.equal(noisy(), noisy())


def test_unknown_names_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="noise scheduler"):
        make_scheduler("PNDM")
    with pytest.raises(ConfigError, match="beta_schedule"):
        make_scheduler("DDIM", beta_schedule="cubic")


# diffusers' schedulers driven by a fixed fake model; the same loop runs in rlctl below.
DIFFUSERS_LOOP = """
import json, sys, torch
from diffusers import DDIMScheduler, DDPMScheduler
name, schedule, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
cls = {"DDIM": DDIMScheduler, "DDPM": DDPMScheduler}[name]
s = cls(num_train_timesteps=100, beta_start=0.0001, beta_end=0.02, beta_schedule=schedule,
        clip_sample=True, clip_sample_range=1.0, prediction_type="epsilon")
s.set_timesteps(steps)
g = torch.Generator().manual_seed(7)
x = torch.randn(2, 8, 3, generator=g)
for t in s.timesteps:
    x = s.step(0.3 * x + 0.01 * float(t), t, x, generator=g).prev_sample
print(json.dumps({"timesteps": s.timesteps.tolist(), "sample": x.flatten().tolist()}))
"""


def rlctl_loop(name: str, schedule: str, steps: int) -> dict:
    scheduler = make_scheduler(
        name, num_train_timesteps=100, beta_start=0.0001, beta_end=0.02, beta_schedule=schedule
    )
    scheduler.set_timesteps(steps)
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(2, 8, 3, generator=generator)
    for t in scheduler.timesteps:
        x = scheduler.step(0.3 * x + 0.01 * float(t), t, x, generator=generator)
    return {"timesteps": scheduler.timesteps.tolist(), "sample": x.flatten().tolist()}


@pytest.mark.slow
@pytest.mark.lerobot
@pytest.mark.parametrize(
    ("name", "schedule", "steps"),
    [("DDIM", "squaredcos_cap_v2", 10), ("DDPM", "squaredcos_cap_v2", 100), ("DDPM", "linear", 7)],
)
def test_matches_diffusers(lerobot, name: str, schedule: str, steps: int) -> None:
    theirs = lerobot("-c", DIFFUSERS_LOOP, name, schedule, steps)
    ours = rlctl_loop(name, schedule, steps)
    assert ours["timesteps"] == theirs["timesteps"]
    assert torch.allclose(torch.tensor(ours["sample"]), torch.tensor(theirs["sample"]), atol=1e-5)
