"""Real-time chunking's guidance for any flow-matching sampler.

A flow-matching policy integrates a velocity `v = velocity(x_t, t)` from noise (`t = 1`) to
actions (`t = 0`) with Euler steps `x ← x + dt · v` (`dt < 0`); at each step its estimate of
the finished chunk is `x̂ = x_t - t · v`. `guided(velocity, guidance)` wraps the velocity so
that this estimate is pulled towards the previous chunk's leftover, weighted per step by the
prefix schedule (`rlctl.domain.policies.rtc.prefix_weights`) and over time by ΠGDM's weight
capped at `max_guidance_weight`:

    v' = v - w(t) · W ⊙ (leftover - x̂)

This is LeRobot 0.6.1's `RTCProcessor.denoise_step` to the letter. LeRobot computes the
correction with autograd, but its velocity is evaluated before `x_t` requires a gradient, so
the vector-Jacobian product it takes is that of the identity: the weighted error itself. Here
it is computed directly, without a backward pass (and the same chunks come out).

A sampler hooks it in with one line, `velocity = guided(velocity, guidance)`: `None` gives the
velocity back unchanged, so the plain path costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from rlctl.domain.policies.rtc import RTCConfig, prefix_weights

Velocity = Callable[[Tensor, Any], Tensor]


class PrefixGuidance:
    """One chunk's guidance: the leftover `(batch or 1, steps, dims)` in the model's action
    space (normalised; shorter than the chunk, or narrower than its padded action vector, is
    zero-padded as LeRobot pads it), the inference delay in ticks, and the RTC settings."""

    def __init__(self, leftover: Tensor, inference_delay: int, config: RTCConfig) -> None:
        if leftover.ndim == 2:
            leftover = leftover.unsqueeze(0)
        if leftover.ndim != 3:
            raise ValueError(f"leftover must be (batch, steps, dims), got {tuple(leftover.shape)}")
        self.leftover = leftover
        self.inference_delay = max(0, int(inference_delay))
        self.config = config
        # A leftover shorter than the horizon has nothing to follow past its end.
        self.execution_horizon = min(config.execution_horizon, int(leftover.shape[1]))
        self._prepared: tuple[Tensor, Tensor] | None = None

    def target(self, x_t: Tensor) -> tuple[Tensor, Tensor]:
        """The leftover padded to `x_t`'s shape, and the per-step weights `(1, steps, 1)`."""
        if self._prepared is None or self._prepared[0].shape != x_t.shape:
            batch, steps, dims = x_t.shape
            left = self.leftover.to(device=x_t.device, dtype=x_t.dtype)[:, :steps, :dims]
            padded = torch.zeros(
                (max(batch, left.shape[0]), steps, dims), dtype=x_t.dtype, device=x_t.device
            )
            padded[:, : left.shape[1], : left.shape[2]] = left
            weights = prefix_weights(
                self.config.prefix_attention_schedule,
                self.inference_delay,
                self.execution_horizon,
                steps,
            )
            weight_t = torch.from_numpy(weights).to(device=x_t.device, dtype=x_t.dtype)
            self._prepared = (padded, weight_t[None, :, None])
        return self._prepared


def guidance_weight(time: Tensor, max_weight: float) -> Tensor:
    """ΠGDM's weight at flow time `time` (τ = 1 - time), capped: LeRobot's arithmetic, whose
    `0 · ∞` at the last step's end becomes 0 and whose `∞` at pure noise becomes the cap."""
    cap = torch.as_tensor(max_weight, dtype=time.dtype, device=time.device)
    tau = 1 - time
    squared = (1 - tau) ** 2
    inv_r2 = (squared + tau**2) / squared
    c = torch.nan_to_num((1 - tau) / tau, posinf=max_weight)
    return torch.minimum(torch.nan_to_num(c * inv_r2, posinf=max_weight), cap)


def guided(velocity: Velocity, guidance: PrefixGuidance | None) -> Velocity:
    """`velocity(x_t, t)` corrected towards `guidance`'s leftover; `velocity` itself when None."""
    if guidance is None:
        return velocity

    def corrected(x_t: Tensor, t: Any) -> Tensor:
        v_t = velocity(x_t, t)
        time = torch.as_tensor(t, dtype=x_t.dtype, device=x_t.device)
        time = time.reshape(-1, 1, 1) if time.ndim else time
        target, weights = guidance.target(x_t)
        estimate = x_t - time * v_t
        error = (target - estimate) * weights
        return v_t - guidance_weight(time, guidance.config.max_guidance_weight) * error

    return corrected


def overlap_blend(
    noise: Tensor, guidance: PrefixGuidance, ramp_rate: float
) -> tuple[Tensor, Tensor] | None:
    """GR00T N1.7's own real-time chunking (LeRobot's `_prepare_n1_7_rtc_inputs` and the
    overlap in `get_action_with_features`): the sampler starts from the previous chunk's
    leftover instead of noise on the first `overlap` steps, and scales their velocity by a
    strength that is 0 on the `inference_delay` steps already committed (frozen), rises as
    `1 - exp(-ramp_rate · s)` over the steps between, and is 1 after the overlap.

    The leftover's trailing all-zero rows are padding (LeRobot's RTC engine pads with exact
    zeros), its last `horizon` rows are kept and its width fits the model's action vector; the
    overlap is at most `execution_horizon` steps, taken from the leftover's end. Returns the
    sampler's start and the strength (both like `noise`), or None when nothing overlaps."""
    batch, horizon, dims = noise.shape
    left = guidance.leftover.to(device=noise.device, dtype=noise.dtype)
    if left.shape[0] == 1 and batch > 1:
        left = left.expand(batch, -1, -1)
    elif left.shape[0] != batch:
        raise ValueError(
            f"the leftover has {left.shape[0]} rows, the batch {batch} (GR00T real-time chunking)"
        )
    valid = left.detach().abs().sum(dim=(0, 2)) > 0
    if not bool(valid.any()):
        return None
    left = left[:, : int(valid.nonzero()[-1].item()) + 1][:, -horizon:]
    if left.shape[2] >= dims:
        left = left[:, :, :dims]
    else:
        left = torch.cat([left, left.new_zeros(batch, left.shape[1], dims - left.shape[2])], 2)
    steps = int(left.shape[1])
    overlap = max(0, min(steps, guidance.config.execution_horizon))
    if overlap == 0:
        return None
    frozen = max(0, min(guidance.inference_delay, overlap))
    start = noise.clone()
    start[:, :overlap] = left[:, steps - overlap : steps]
    strength = torch.ones_like(noise)
    strength[:, :frozen] = 0.0
    t = torch.linspace(0.0, 1.0, overlap - frozen + 2, device=noise.device)
    ramp = 1 - torch.exp(-ramp_rate * t)
    ramp = ramp / ramp[-1].clamp_min(1e-8)
    strength[:, frozen:overlap] = ramp[1:-1][None, :, None].to(strength.dtype)
    return start, strength


def strengthened(velocity: Velocity, strength: Tensor | None) -> Velocity:
    """`velocity(x_t, t)` scaled per step and dimension by `strength` (`overlap_blend`'s);
    `velocity` itself when None."""
    if strength is None:
        return velocity

    def scaled(x_t: Tensor, t: Any) -> Tensor:
        return velocity(x_t, t) * strength

    return scaled
