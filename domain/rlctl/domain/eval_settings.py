"""What `--eval.*` and the evaluated policy's section set: episodes, batching, seeding, videos
(LeRobot's EvalConfig and seed), and which policy acts.

Pure data, so that reading the settings (`rlctl eval --help`) imports nothing but attrs.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from rlctl.domain.config import converter
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.policies.compute_dtype import ComputeDtype
from rlctl.domain.remote_inference import RemotePolicySettings
from rlctl.domain.yes_no import parse_bool

AUTO: Literal["auto"] = "auto"
# `true`, `false` (any yes/no word) or `auto`: decided for the run at hand.
AutoOrBool = bool | Literal["auto"]


def _structure_auto_or_bool(value: Any, _: Any) -> bool | Literal["auto"]:
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    try:
        return parse_bool(value)
    except ConfigError as error:
        raise ConfigError(
            error.message.replace("write true or false", "write true, false or auto")
        ) from error


converter.register_structure_hook_func(lambda t: t == AutoOrBool, _structure_auto_or_bool)


@attrs.frozen
class EvalPolicySettings(RemotePolicySettings):
    """Which policy acts: a saved one (`--policy.path`), one served by `rlctl policy serve`
    (`--policy.server=HOST:PORT`, with the remote settings it inherits), else a type that needs
    no training."""

    # A LeRobot `pretrained_model` folder, one rlctl saved, or a run's checkpoint.
    path: str | None = None
    # Without a path: a registered policy type that acts untrained (random, metaworld_expert …).
    type: str = "random"
    device: str | None = None
    # A bfloat16 policy computes in float32 where the device emulates bfloat16 (`auto`), in
    # its own dtypes (`keep`), or in float32 everywhere (`float32`): docs/guides/vla-policies.md.
    compute_dtype: ComputeDtype = "auto"


@attrs.frozen
class EvalSettings:
    """LeRobot's `--eval.*` options, plus the seed and where videos go."""

    n_episodes: int = 50
    # 0: chosen from a measurement (LeRobot: ~0.7 x cores); above n_episodes: clamped.
    batch_size: int = 0
    # None: chosen from a measurement; True/False force worker processes or in-process envs.
    use_async_envs: bool | None = None
    # The first episode's seed; episode i of each task uses seed + i. None: unseeded.
    seed: int | None = 1000
    max_episodes_rendered: int = 10
    videos_dir: str | None = None
    video_codec: str = "h264"
    # Cut episodes short (smoke tests, benchmarks); None keeps the env's own limit.
    max_episode_steps: int | None = None
    # Start the next task's envs while the current task runs (a suite of several tasks), so
    # that its workers are ready when it begins; this keeps two tasks' envs alive at once
    # (N + 1 with env.max_parallel_tasks=N). `auto`: off when the env renders on a GPU
    # (MUJOCO_GL=egl with an NVIDIA/CUDA device, or the env type says so), where every live
    # env holds a GL context on the GPU and LeRobot closes each task's envs before the next
    # task's start; on otherwise.
    prefetch_next_task: AutoOrBool = AUTO

    def __attrs_post_init__(self) -> None:
        if self.n_episodes < 1:
            raise InvalidInput(
                f"n_episodes must be at least 1, got {self.n_episodes}", where="eval.n_episodes"
            )
        if self.batch_size < 0:
            raise InvalidInput(
                f"batch_size must be 0 (auto) or positive, got {self.batch_size}",
                where="eval.batch_size",
            )
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise InvalidInput("max_episode_steps must be positive", where="eval.max_episode_steps")
        if self.prefetch_next_task not in (True, False, AUTO):
            raise InvalidInput(
                f"prefetch_next_task must be true, false or auto, got {self.prefetch_next_task!r}",
                where="eval.prefetch_next_task",
            )

    def prefetches(self, renders_on_gpu: bool) -> bool:
        """Whether to start the next task's envs ahead, for an env that renders on a GPU or not."""
        if self.prefetch_next_task == AUTO:
            return not renders_on_gpu
        return bool(self.prefetch_next_task)
