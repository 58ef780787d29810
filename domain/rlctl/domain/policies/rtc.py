"""Real-time chunking (RTC): the next chunk generated consistent with the actions already committed.

A flow-matching policy (SmolVLA, π0, π0.5) predicts a whole chunk of actions from noise. Two
chunks predicted from nearby observations need not agree, so the arm jumps where one chunk hands
over to the next; and while a chunk is being computed the robot keeps executing the previous
one, so the first actions of the new chunk are already in the past when it arrives. RTC
(Black et al. 2025, "Real-Time Execution of Action Chunking Flow Policies") treats the new chunk
as an inpainting problem: at every denoising step the velocity is corrected towards the
previous chunk's leftover (the actions committed and not yet executed), fully on the first
`inference_delay` steps (executed while the model thinks), fading out over `execution_horizon`
steps, free after.

`RTCConfig` is LeRobot 0.6.1's, field for field (its `rtc_config` in a SmolVLA or π0
config.json); `CommittedActions` is what an acting loop hands a policy with an observation.
`prefix_weights` is the schedule's arithmetic, in numpy; the denoising wrapper that applies it
to a model's velocity lives in the VLA policy adapters, beside their flow-matching sampler.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from rlctl.domain.errors import ConfigError, InvalidInput

# LeRobot's RTCAttentionSchedule: how the guidance fades between the delay and the horizon.
SCHEDULES = ("ZEROS", "ONES", "LINEAR", "EXP")


def _schedule(value: Any) -> str:
    # LeRobot writes the enum's value ("LINEAR"); a command line may say "linear".
    text = str(getattr(value, "value", value)).upper()
    if text not in SCHEDULES:
        raise ConfigError(
            f"unknown prefix_attention_schedule {value!r}",
            where="rtc_config.prefix_attention_schedule",
            hint=f"choose one of {', '.join(SCHEDULES)}",
        )
    return text


@attrs.frozen(kw_only=True)
class RTCConfig:
    """LeRobot's `RTCConfig`: real-time chunking's settings, with its defaults."""

    enabled: bool = True
    # ZEROS: guide only the delayed steps; ONES: every step up to the horizon fully; LINEAR/EXP:
    # full on the delayed steps, then fading to zero at the horizon.
    prefix_attention_schedule: str = attrs.field(default="LINEAR", converter=_schedule)
    # The guidance weight's cap (it grows without bound as the noise level falls).
    max_guidance_weight: float = 10.0
    # How many steps of the previous chunk's leftover the new chunk is guided towards.
    execution_horizon: int = 10
    # LeRobot's debug tracker (kept so config.json round-trips; rlctl tracks nothing).
    debug: bool = False
    debug_maxlen: int = 100

    def __attrs_post_init__(self) -> None:
        if not self.max_guidance_weight > 0:
            raise ConfigError(
                f"max_guidance_weight must be positive, got {self.max_guidance_weight}",
                where="rtc_config.max_guidance_weight",
            )
        if self.execution_horizon < 1:
            raise ConfigError(
                f"execution_horizon must be at least 1, got {self.execution_horizon}",
                where="rtc_config.execution_horizon",
            )
        if self.debug_maxlen <= 0:
            raise ConfigError(
                f"debug_maxlen must be positive, got {self.debug_maxlen}",
                where="rtc_config.debug_maxlen",
            )


def optional_rtc_config(value: Any) -> RTCConfig | None:
    """A config's `rtc_config`: None, an `RTCConfig`, or its plain data (config.json)."""
    if value is None or isinstance(value, RTCConfig):
        return value
    if not isinstance(value, dict):
        raise ConfigError(
            f"rtc_config must be a mapping of RTC settings, got {value!r}", where="rtc_config"
        )
    known = {f.name for f in attrs.fields(RTCConfig)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise ConfigError(
            f"unknown rtc_config setting(s): {', '.join(unknown)}",
            where="rtc_config",
            hint=f"known: {', '.join(sorted(known))}",
        )
    return RTCConfig(**value)


@attrs.frozen(kw_only=True, eq=False)
class CommittedActions:
    """What an acting loop has committed to and not executed yet, sent with an observation.

    `actions` `(batch, steps, action_dim)` are raw actions (what the robot is sent), in tick
    order from the tick the observation was taken at: the previous chunk's leftover.
    `inference_delay` is how many of them the robot executes while the next chunk is computed;
    the next chunk's first `inference_delay` actions are then replaced by them, in effect.
    `rtc` says how strongly and how far the new chunk follows them.
    """

    actions: Any
    inference_delay: int = 0
    rtc: RTCConfig = attrs.field(factory=RTCConfig)

    def __attrs_post_init__(self) -> None:
        shape = getattr(self.actions, "shape", None)
        if shape is None or len(shape) != 3:
            raise InvalidInput(
                "committed actions must have shape (batch, steps, action_dim), got "
                f"{tuple(shape) if shape is not None else type(self.actions).__name__}",
                where="committed actions",
            )
        if self.inference_delay < 0:
            raise InvalidInput(
                f"inference_delay must be 0 or more ticks, got {self.inference_delay}",
                where="committed actions",
            )

    @property
    def steps(self) -> int:
        return int(self.actions.shape[1])


def prefix_weights(schedule: str, delay: int, horizon: int, total: int) -> np.ndarray:
    """How strongly each of a chunk's `total` steps is pulled towards the leftover (LeRobot's
    `get_prefix_weights`): 1 on the first `delay` steps, fading to 0 at `horizon`, 0 after."""
    start = min(delay, horizon)
    schedule = _schedule(schedule)
    if schedule == "ZEROS":
        weights = np.zeros(total, np.float32)
        weights[:start] = 1.0
        return weights
    if schedule == "ONES":
        weights = np.ones(total, np.float32)
        weights[horizon:] = 0.0
        return weights
    steps = total - max(total - horizon, 0) - start
    fade = (
        np.linspace(1.0, 0.0, steps + 2, dtype=np.float32)[1:-1]
        if horizon > start and steps > 0
        else np.zeros(0, np.float32)
    )
    if schedule == "EXP":
        fade = fade * np.expm1(fade) / np.float32(math.e - 1)
    ones = np.ones(min(start, total), np.float32) if start > 0 else np.zeros(0, np.float32)
    zeros = np.zeros(max(total - horizon, 0), np.float32)
    return np.concatenate([ones, fade, zeros]).astype(np.float32)
