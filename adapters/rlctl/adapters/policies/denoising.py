"""What Diffusion Policy and the multi-task DiT share, written once.

Both read the last `n_obs_steps` observations (`(B, steps, ...)` histories; a single frame gets
the step axis when one step is all they read), resize and crop their cameras as torchvision's
`Resize` / `RandomCrop` / `CenterCrop` do (one random offset for the whole batch while
training), embed the diffusion step as sines then cosines, and, with a DDPM or DDIM scheduler
(`schedulers`), noise a clean action trajectory at a random step to regress the noise (or the
trajectory), and sample one back from noise step by step. The loss may leave out the padded
steps past an episode's end (`do_mask_loss_for_padding`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.schedulers import NoiseScheduler, make_scheduler
from rlctl.domain.errors import InvalidInput
from rlctl.domain.policies import ACTION, OBS_STATE

# A denoiser's prediction for the trajectory x_t at steps t (B,).
Denoiser = Callable[[Tensor, Tensor], Tensor]


def with_time_axis(
    batch: Mapping[str, Any], keys: Iterable[str], image_keys: Iterable[str], n_obs_steps: int
) -> dict[str, Any]:
    """Single-frame inputs `(B, ...)` get the observation-step axis `(B, 1, ...)` when the
    policy reads one step."""
    out = dict(batch)
    if n_obs_steps == 1:
        images = set(image_keys)
        for key in keys:
            rank = 4 if key in images else 2
            if key in out and out[key].ndim == rank:
                out[key] = out[key].unsqueeze(1)
    return out


def check_steps(batch: Mapping[str, Any], n_obs_steps: int) -> int:
    """The batch's observation steps, which must be the policy's `n_obs_steps`."""
    state = batch.get(OBS_STATE)
    if state is None:
        raise InvalidInput(
            "the batch has no robot state", where=OBS_STATE, hint="the policy reads the state"
        )
    n_steps = int(state.shape[1]) if state.ndim >= 3 else 0
    if n_steps != n_obs_steps:
        raise InvalidInput(
            f"the policy reads {n_obs_steps} observation steps, got "
            + (f"{n_steps}" if state.ndim >= 3 else f"a state of shape {tuple(state.shape)}"),
            where=OBS_STATE,
            hint="stack the last n_obs_steps observations on axis 1: (batch, steps, ...)",
        )
    return n_steps


def resize_images(x: Tensor, size: tuple[int, int]) -> Tensor:
    """torchvision's `resize(x, size, antialias=True)` on a `(B, C, H, W)` tensor: bilinear with
    antialiasing, computed in float32 (or float64), and a no-op at the size already."""
    if tuple(x.shape[-2:]) == tuple(size):
        return x
    dtype = x.dtype
    y = x if dtype in (torch.float32, torch.float64) else x.to(torch.float32)
    y = F.interpolate(y, size=list(size), mode="bilinear", align_corners=False, antialias=True)
    if dtype == y.dtype:
        return y
    return (y if dtype.is_floating_point else y.round()).to(dtype)


def crop_images(x: Tensor, shape: tuple[int, int], *, random: bool) -> Tensor:
    """A `shape` crop of `(..., H, W)`: at one random offset for the whole batch (`random`),
    else the centre (torchvision's offsets: int(round(...)), ties to even)."""
    height, width = x.shape[-2:]
    crop_h, crop_w = shape
    if (height, width) == (crop_h, crop_w):
        return x  # torchvision draws no offset then
    if random:
        top = int(torch.randint(0, height - crop_h + 1, (1,)))
        left = int(torch.randint(0, width - crop_w + 1, (1,)))
    else:
        top = round((height - crop_h) / 2.0)
        left = round((width - crop_w) / 2.0)
    return x[..., top : top + crop_h, left : left + crop_w]


class SinusoidalStepEmbedding(nn.Module):
    """The diffusion step (or flow time) as a sine/cosine vector (sines first, then cosines)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, steps: Tensor) -> Tensor:
        half = self.dim // 2
        scale = math.log(10000) / (half - 1)
        frequencies = torch.exp(torch.arange(half, device=steps.device) * -scale)
        angles = steps.unsqueeze(-1) * frequencies.unsqueeze(0)
        return torch.cat((angles.sin(), angles.cos()), dim=-1)


def noise_scheduler(config: Any) -> NoiseScheduler:
    """The DDPM or DDIM scheduler a config's LeRobot fields describe (`noise_scheduler_type`,
    `num_train_timesteps`, `beta_*`, `clip_sample*`, `prediction_type`)."""
    return make_scheduler(
        config.noise_scheduler_type,
        num_train_timesteps=config.num_train_timesteps,
        beta_start=config.beta_start,
        beta_end=config.beta_end,
        beta_schedule=config.beta_schedule,
        clip_sample=config.clip_sample,
        clip_sample_range=config.clip_sample_range,
        prediction_type=config.prediction_type,
    )


def initial_noise(
    shape: tuple[int, ...],
    like: Tensor,
    noise: Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The trajectory sampling starts from, in `like`'s dtype and device: `noise` (checked to
    be `shape`) or a fresh draw (from `generator` where it lives, then moved)."""
    if noise is None:
        device = generator.device if generator is not None else like.device
        sample = torch.randn(shape, generator=generator, dtype=like.dtype, device=device)
        return sample.to(like.device)
    if tuple(noise.shape) != shape:
        raise InvalidInput(
            f"the initial noise must have shape {shape} (batch, horizon, action_dim), "
            f"got {tuple(noise.shape)}",
            where="noise",
        )
    return noise.to(device=like.device, dtype=like.dtype)


def denoise(
    scheduler: NoiseScheduler,
    num_inference_steps: int,
    sample: Tensor,
    denoiser: Denoiser,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The trajectory the scheduler's reverse steps make of `sample`, the noise."""
    scheduler.set_timesteps(num_inference_steps)
    for t in scheduler.timesteps:
        steps = torch.full((sample.shape[0],), int(t), dtype=torch.long, device=sample.device)
        sample = scheduler.step(denoiser(sample, steps), t, sample, generator=generator)
    return sample


def noising_loss(
    scheduler: NoiseScheduler, trajectory: Tensor, denoiser: Denoiser
) -> tuple[Tensor, Tensor]:
    """(prediction, target): the trajectory noised at random steps, and what the denoiser must
    recover of it (the noise, or the trajectory with prediction_type "sample")."""
    noise = torch.randn(trajectory.shape, device=trajectory.device, dtype=trajectory.dtype)
    timesteps = torch.randint(
        0, scheduler.num_train_timesteps, (trajectory.shape[0],), device=trajectory.device
    )
    noisy = scheduler.add_noise(trajectory, noise, timesteps)
    target = noise if scheduler.prediction_type == "epsilon" else trajectory
    return denoiser(noisy, timesteps), target


def check_horizon(trajectory: Tensor, horizon: int) -> None:
    if trajectory.shape[1] != horizon:
        raise InvalidInput(
            f"the action chunk must span the horizon ({horizon} steps), got {trajectory.shape[1]}",
            where=ACTION,
        )


def trajectory_loss(
    prediction: Tensor, target: Tensor, batch: Mapping[str, Any], mask_padding: bool
) -> Tensor:
    """The mean squared error, over the steps that are not padding with `mask_padding`."""
    loss = F.mse_loss(prediction, target, reduction="none")
    if not mask_padding:
        return loss.mean()
    if "action_is_pad" not in batch:
        raise InvalidInput(
            "do_mask_loss_for_padding needs 'action_is_pad' in the batch", where="batch"
        )
    valid = ~batch["action_is_pad"].bool().unsqueeze(-1)
    return (loss * valid).sum() / (valid.sum() * loss.shape[-1]).clamp_min(1)
