"""Deploying a policy on a robot (`rlctl rollout`): what a user sets, and the arithmetic of it.

- The strategies (`--strategy.type=base|sentry|highlight|dagger|episodic`) and the inference
  engines (`--inference.type=sync|async|rtc`), with LeRobot 0.6.1's `rollout/configs.py` names
  and defaults where it has them.
- `DAggerPhases`: human-in-the-loop's state machine (autonomous → paused → correcting …).
- `RingBuffer`: the last N seconds of frames, bounded in memory too (the highlight strategy).
- `episode_seconds_for_video`: how long a continuous recording's episodes last, so that each
  video file has crossed its size target when the episode is saved (LeRobot's estimate).
- `INTERVENTION`: the column a human's corrections are tagged in (LeRobot's name and dtype).

Pure data and numpy; the loops live in the application (`use_cases/run_rollout.py`).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal

import attrs
import numpy as np

from rlctl.domain.config import Register, tagged_union
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies.rtc import RTCConfig

# LeRobot's DEFAULT_VIDEO_FILE_SIZE_IN_MB: a video file of a dataset grows to this size.
DEFAULT_VIDEO_FILE_SIZE_IN_MB = 200
# With no camera, an episode of a continuous recording lasts this long (LeRobot's fallback).
NO_VIDEO_EPISODE_S = 300.0

# LeRobot's DAgger tags a human's frames in this column: bool, shape (1,), no names.
INTERVENTION_KEY = "intervention"
INTERVENTION = FeatureSpec(INTERVENTION_KEY, "bool", (1,), None)


def _positive(what: str) -> Any:
    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value is not None and not value > 0:
            raise ConfigError(f"{attribute.name} must be positive, got {value!r}", where=what)

    return check


# --- strategies ------------------------------------------------------------------------------


@tagged_union
@attrs.frozen(kw_only=True)
class RolloutStrategyConfig:
    """How a rollout runs and what it records (`--strategy.type=...`)."""

    type_name: ClassVar[str]
    register: ClassVar[Register]
    # Whether the strategy records a dataset (every one but `base`).
    records: ClassVar[bool] = True


@RolloutStrategyConfig.register("base")
@attrs.frozen(kw_only=True)
class BaseStrategyConfig(RolloutStrategyConfig):
    """The policy acts until `--duration` or Esc; nothing is recorded."""

    records: ClassVar[bool] = False


@RolloutStrategyConfig.register("sentry")
@attrs.frozen(kw_only=True)
class SentryStrategyConfig(RolloutStrategyConfig):
    """The policy acts and every tick is recorded; the recording is cut into episodes whose
    videos have just crossed the file-size target, and uploaded every few episodes."""

    upload_every_n_episodes: int = attrs.field(default=5, validator=_positive("strategy"))
    # Each episode's video crosses this size (MB) when it is saved; unset: LeRobot's 200 MB.
    target_video_file_size_mb: int | None = attrs.field(
        default=None, validator=_positive("strategy.target_video_file_size_mb")
    )
    # rlctl: a fixed episode length (seconds) instead of the estimate from the cameras.
    episode_time_s: float | None = attrs.field(
        default=None, validator=_positive("strategy.episode_time_s")
    )


@RolloutStrategyConfig.register("highlight")
@attrs.frozen(kw_only=True)
class HighlightStrategyConfig(RolloutStrategyConfig):
    """The policy acts; the last `ring_buffer_seconds` are kept in memory. The save key stores
    them and records on until it is pressed again (one episode); the push key uploads."""

    ring_buffer_seconds: float = attrs.field(default=10.0, validator=_positive("strategy"))
    ring_buffer_max_memory_mb: int = attrs.field(default=1024, validator=_positive("strategy"))
    save_key: str = "s"
    push_key: str = "h"


@attrs.frozen(kw_only=True)
class DAggerKeyboardConfig:
    """DAgger's keys: a character (`c`) or a key name (`space`, `tab`, `enter`)."""

    pause_resume: str = "space"
    correction: str = "tab"
    upload: str = "enter"


@attrs.frozen(kw_only=True)
class DAggerPedalConfig:
    """DAgger's foot pedal: an input device and the evdev key code of each pedal."""

    device_path: str = "/dev/input/by-id/usb-PCsensor_FootSwitch-event-kbd"
    pause_resume: str = "KEY_A"
    correction: str = "KEY_B"
    upload: str = "KEY_C"


@RolloutStrategyConfig.register("dagger")
@attrs.frozen(kw_only=True)
class DAggerStrategyConfig(RolloutStrategyConfig):
    """Human in the loop (DAgger, RaC): pause the policy, correct with the teleoperator,
    resume. Corrections are tagged `intervention=True`; with `record_autonomous=false` only
    corrections are recorded, one episode each."""

    # Corrections to collect (corrections-only); unset: --dataset.num_episodes.
    num_episodes: int | None = attrs.field(default=None, validator=_positive("strategy"))
    record_autonomous: bool = False
    upload_every_n_episodes: int = attrs.field(default=5, validator=_positive("strategy"))
    target_video_file_size_mb: int | None = attrs.field(
        default=None, validator=_positive("strategy.target_video_file_size_mb")
    )
    # rlctl: a fixed episode length with record_autonomous (else estimated from the cameras).
    episode_time_s: float | None = attrs.field(
        default=None, validator=_positive("strategy.episode_time_s")
    )
    # Bring the leader to the follower (actuated leader) or the follower to the leader at
    # hand-over; off for clutch-style teleoperators that re-reference on engage.
    smooth_handover: bool = True
    input_device: Literal["keyboard", "pedal"] = "keyboard"
    keyboard: DAggerKeyboardConfig = attrs.field(factory=DAggerKeyboardConfig)
    pedal: DAggerPedalConfig = attrs.field(factory=DAggerPedalConfig)


@RolloutStrategyConfig.register("episodic")
@attrs.frozen(kw_only=True)
class EpisodicStrategyConfig(RolloutStrategyConfig):
    """`rlctl record` with the policy acting: `--dataset.num_episodes` episodes of
    `--dataset.episode_time_s`, each followed by a reset phase (the teleoperator drives, or the
    arm goes back to where it started)."""

    # Without a teleoperator: the arm goes back to its starting position for each reset.
    reset_to_initial_position: bool = True
    # An actuated leader is brought to the follower at a reset; false: the follower to it.
    smooth_leader_to_follower_handover: bool = True
    smooth_handover: bool = True


# --- inference ---------------------------------------------------------------------------------


@tagged_union
@attrs.frozen(kw_only=True)
class InferenceConfig:
    """Where the model runs relative to the control loop (`--inference.type=...`)."""

    type_name: ClassVar[str]
    register: ClassVar[Register]
    # Whether the loop acts from a queue a worker fills (the tick never waits for the model).
    asynchronous: ClassVar[bool] = True

    def asks_at(self) -> int | None:
        """Queued actions at or below which the next chunk is asked for (None: the policy
        settings' `chunk_size_threshold`, a fraction of a chunk)."""
        return None


@InferenceConfig.register("sync")
@attrs.frozen(kw_only=True)
class SyncInferenceConfig(InferenceConfig):
    """The model runs in the loop's tick: a tick that needs a chunk waits for it."""

    asynchronous: ClassVar[bool] = False


@InferenceConfig.register("async")
@attrs.frozen(kw_only=True)
class AsyncInferenceConfig(InferenceConfig):
    """The model computes the next chunk in a worker while the loop acts from the queue;
    arriving chunks merge with what is queued by `--policy.aggregate` (as from a server)."""

    # Ask for the next chunk when at most this many actions are queued; unset:
    # --policy.chunk_size_threshold (a fraction of a chunk).
    queue_threshold: int | None = attrs.field(
        default=None, validator=_positive("inference.queue_threshold")
    )

    def asks_at(self) -> int | None:
        return self.queue_threshold


@InferenceConfig.register("rtc")
@attrs.frozen(kw_only=True)
class RTCInferenceConfig(InferenceConfig):
    """Real-time chunking in a worker: each chunk is generated to follow the actions still
    queued, allowing for the measured inference delay (flow-matching policies: smolvla, pi0,
    pi05)."""

    rtc: RTCConfig = attrs.field(factory=RTCConfig)
    # Ask for the next chunk when at most this many actions are queued (LeRobot's default).
    queue_threshold: int = attrs.field(default=30, validator=_positive("inference"))

    def asks_at(self) -> int | None:
        return self.queue_threshold


# --- DAgger's phases ---------------------------------------------------------------------------


class DAggerPhase(enum.StrEnum):
    AUTONOMOUS = "autonomous"  # the policy drives
    PAUSED = "paused"  # the arm holds; the leader has been brought to it
    CORRECTING = "correcting"  # a person drives; frames are tagged as interventions


class DAggerEvent(enum.StrEnum):
    PAUSE_RESUME = "pause_resume"
    CORRECTION = "correction"


_TRANSITIONS: dict[tuple[DAggerPhase, DAggerEvent], DAggerPhase] = {
    (DAggerPhase.AUTONOMOUS, DAggerEvent.PAUSE_RESUME): DAggerPhase.PAUSED,
    (DAggerPhase.PAUSED, DAggerEvent.PAUSE_RESUME): DAggerPhase.AUTONOMOUS,
    (DAggerPhase.PAUSED, DAggerEvent.CORRECTION): DAggerPhase.CORRECTING,
    (DAggerPhase.CORRECTING, DAggerEvent.CORRECTION): DAggerPhase.PAUSED,
}


def dagger_next(phase: DAggerPhase, event: DAggerEvent) -> DAggerPhase | None:
    """The phase `event` leads to from `phase`, or None when it means nothing there (a
    correction cannot start while the policy drives: pause first)."""
    return _TRANSITIONS.get((phase, event))


# --- the highlight ring buffer -----------------------------------------------------------------


def frame_bytes(frame: Mapping[str, Any]) -> int:
    """What a frame holds in memory, roughly (arrays by their bytes, text by its length)."""
    total = 0
    for value in frame.values():
        if isinstance(value, np.ndarray) or hasattr(value, "nbytes"):
            total += int(value.nbytes)
        elif isinstance(value, str | bytes):
            total += len(value)
        else:
            total += 8
    return max(total, 1)


class RingBuffer:
    """The newest frames, at most `max_seconds * fps` of them and `max_memory_mb` in all: the
    oldest go first when either bound is reached. One thread only (the control loop's)."""

    def __init__(self, max_seconds: float, fps: float, max_memory_mb: float) -> None:
        self.max_frames = max(1, int(max_seconds * fps))
        self.max_bytes = int(max_memory_mb * 1024 * 1024)
        self._frames: deque[tuple[Mapping[str, Any], int]] = deque()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._frames)

    def append(self, frame: Mapping[str, Any]) -> None:
        size = frame_bytes(frame)
        while self._frames and (
            len(self._frames) >= self.max_frames or self.bytes + size > self.max_bytes
        ):
            _, dropped = self._frames.popleft()
            self.bytes -= dropped
        self._frames.append((frame, size))
        self.bytes += size

    def drain(self) -> list[Mapping[str, Any]]:
        """Every frame, oldest first; the buffer is empty after."""
        frames = [frame for frame, _ in self._frames]
        self.clear()
        return frames

    def clear(self) -> None:
        self._frames.clear()
        self.bytes = 0


# --- episode length of a continuous recording --------------------------------------------------

# Bits per pixel of robot footage at LeRobot's streaming quality, on the low side: the estimate
# errs long, so a video file has surely crossed its target when its episode is saved.
CONSERVATIVE_BITS_PER_PIXEL = 0.1


def episode_seconds_for_video(
    features: Iterable[FeatureSpec], fps: float, target_size_mb: float | None = None
) -> float:
    """How long an episode of a continuous recording lasts so that the video of its smallest
    camera has crossed `target_size_mb` (LeRobot's `estimate_max_episode_seconds`): each upload
    then sends whole video files. Without a video camera: `NO_VIDEO_EPISODE_S`."""
    target = DEFAULT_VIDEO_FILE_SIZE_IN_MB if target_size_mb is None else target_size_mb
    pixels = [int(f.shape[0]) * int(f.shape[1]) for f in features if f.is_video]
    if not pixels:
        return NO_VIDEO_EPISODE_S
    bytes_per_second = min(pixels) * CONSERVATIVE_BITS_PER_PIXEL * fps / 8
    if bytes_per_second <= 0:
        return NO_VIDEO_EPISODE_S
    return target * 1024 * 1024 / bytes_per_second


def smooth_path(start: np.ndarray, end: np.ndarray, steps: int) -> list[np.ndarray]:
    """`steps` points from just after `start` to `end`, evenly spaced (a hand-over, a return
    to the starting position): each step moves `(end - start) / steps`."""
    start = np.asarray(start, dtype=np.float32)
    end = np.asarray(end, dtype=np.float32)
    steps = max(1, int(steps))
    return [start + (end - start) * (k / steps) for k in range(1, steps + 1)]
