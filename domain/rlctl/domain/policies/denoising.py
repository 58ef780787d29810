"""What the settings of Diffusion Policy and the multi-task DiT share, written once: both read the
last `n_obs_steps` observations and denoise a `horizon` of actions that starts at the oldest of
them, with DDPM or DDIM (`noise_scheduler_type`, `prediction_type`, `num_inference_steps`), and
train with LeRobot's Adam and diffusers' schedule (`optimizer_*`, `scheduler_*`)."""

from __future__ import annotations

from collections.abc import Iterable

from rlctl.domain.optimization import OptimizerSpec, SchedulerSpec
from rlctl.domain.policies.config import require


def float_pair(value: Iterable[float]) -> tuple[float, float]:
    first, second = (float(x) for x in value)
    return first, second


def denoising_norms() -> dict[str, str]:
    """Both policies' normalisation: images by mean and std, state and actions to [-1, 1]."""
    return {"VISUAL": "MEAN_STD", "STATE": "MIN_MAX", "ACTION": "MIN_MAX"}


class DenoisingSettings:
    """Mixed into a policy config (listed before `PolicyConfig`) whose attrs fields these are."""

    n_obs_steps: int
    horizon: int
    noise_scheduler_type: str
    prediction_type: str
    num_train_timesteps: int
    num_inference_steps: int | None
    optimizer_lr: float
    optimizer_betas: tuple[float, float]
    optimizer_eps: float
    optimizer_weight_decay: float
    scheduler_name: str
    scheduler_warmup_steps: int

    def check_noise_scheduler(self) -> None:
        """The scheduler's type and prediction, and inference steps within the trained ones."""
        require(
            self.noise_scheduler_type in ("DDPM", "DDIM"),
            f"noise_scheduler_type must be 'DDPM' or 'DDIM', got {self.noise_scheduler_type!r}",
            "noise_scheduler_type",
        )
        require(
            self.prediction_type in ("epsilon", "sample"),
            f"prediction_type must be 'epsilon' or 'sample', got {self.prediction_type!r}",
            "prediction_type",
        )
        steps = self.num_inference_steps
        require(
            steps is None or 0 < steps <= self.num_train_timesteps,
            f"num_inference_steps ({steps}) must be in 1..num_train_timesteps "
            f"({self.num_train_timesteps})",
            "num_inference_steps",
        )

    def optimizer_preset(self) -> OptimizerSpec:
        return OptimizerSpec(
            type="adam",
            lr=self.optimizer_lr,
            betas=self.optimizer_betas,
            eps=self.optimizer_eps,
            weight_decay=self.optimizer_weight_decay,
        )

    def scheduler_preset(self) -> SchedulerSpec:
        return SchedulerSpec(
            type="diffuser", name=self.scheduler_name, num_warmup_steps=self.scheduler_warmup_steps
        )

    @property
    def observation_delta_indices(self) -> list[int]:
        return list(range(1 - self.n_obs_steps, 1))

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(1 - self.n_obs_steps, 1 - self.n_obs_steps + self.horizon))
