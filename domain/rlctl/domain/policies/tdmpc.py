"""TD-MPC's settings: LeRobot's `TDMPCConfig`, field for field (FOWM's xArm defaults)."""

from __future__ import annotations

import attrs

from rlctl.domain.optimization import OptimizerSpec
from rlctl.domain.policies.config import PolicyConfig, norm_mapping, require


def _tdmpc_norms() -> dict[str, str]:
    return {"VISUAL": "IDENTITY", "STATE": "IDENTITY", "ENV": "IDENTITY", "ACTION": "MIN_MAX"}


@PolicyConfig.register("tdmpc")
@attrs.frozen(kw_only=True)
class TDMPCConfig(PolicyConfig):
    """TD-MPC (Hansen et al. 2022) with FOWM's changes (Feng et al. 2023), LeRobot's defaults.

    A task-oriented latent dynamics model (encoder, latent dynamics, reward, Q ensemble, V,
    policy) learnt from a dataset's transitions and rewards; at inference it plans with MPPI in
    the latent space (`use_mpc`), or acts with its policy head alone.
    """

    n_obs_steps: int = 1
    n_action_repeats: int = 2
    horizon: int = 5
    n_action_steps: int = 1
    normalization_mapping: dict[str, str] = attrs.field(
        factory=_tdmpc_norms, converter=norm_mapping
    )
    image_encoder_hidden_dim: int = 32
    state_encoder_hidden_dim: int = 256
    latent_dim: int = 50
    q_ensemble_size: int = 5
    mlp_dim: int = 512
    discount: float = 0.9
    use_mpc: bool = True
    cem_iterations: int = 6
    max_std: float = 2.0
    min_std: float = 0.05
    n_gaussian_samples: int = 512
    n_pi_samples: int = 51
    uncertainty_regularizer_coeff: float = 1.0
    n_elites: int = 50
    elite_weighting_temperature: float = 0.5
    gaussian_mean_momentum: float = 0.1
    max_random_shift_ratio: float = 0.0476
    reward_coeff: float = 0.5
    expectile_weight: float = 0.9
    value_coeff: float = 0.1
    consistency_coeff: float = 20.0
    advantage_scaling: float = 3.0
    pi_coeff: float = 0.5
    temporal_decay_coeff: float = 0.5
    target_model_momentum: float = 0.995
    optimizer_lr: float = 3e-4

    def __attrs_post_init__(self) -> None:
        require(
            self.n_gaussian_samples > 0,
            f"MPPI needs Gaussian samples, got n_gaussian_samples={self.n_gaussian_samples}",
            "n_gaussian_samples",
        )
        require(
            self.normalization_mapping.get("ACTION") == "MIN_MAX",
            "TD-MPC assumes every action dimension in [-1, 1] (its policy is a tanh, its "
            "planner clamps): actions must be normalised MIN_MAX",
            "normalization_mapping",
            hint="leave normalization_mapping's ACTION at MIN_MAX",
        )
        require(self.n_obs_steps == 1, "TD-MPC reads one observation step", "n_obs_steps")
        require(self.horizon >= 1, "horizon must be at least 1", "horizon")
        require(
            0 < self.n_elites <= self.n_gaussian_samples + self.n_pi_samples,
            f"n_elites ({self.n_elites}) must be positive and at most the samples planned "
            f"(n_gaussian_samples + n_pi_samples = "
            f"{self.n_gaussian_samples + self.n_pi_samples})",
            "n_elites",
        )
        require(
            self.q_ensemble_size >= 1 and self.n_action_repeats >= 1,
            "q_ensemble_size and n_action_repeats must be at least 1",
            "q_ensemble_size",
        )
        if self.n_action_steps > 1:
            require(
                self.n_action_repeats == 1,
                "with n_action_steps > 1, n_action_repeats must be 1",
                "n_action_repeats",
                hint="set --policy.n_action_repeats=1",
            )
            require(
                self.use_mpc,
                "n_action_steps > 1 executes a planned trajectory: use_mpc must be true",
                "use_mpc",
            )
            require(
                self.n_action_steps <= self.horizon,
                f"n_action_steps ({self.n_action_steps}) cannot exceed horizon ({self.horizon})",
                "n_action_steps",
            )
        images = self.image_features
        require(
            len(images) <= 1,
            f"TD-MPC reads at most one camera, got {', '.join(images)}",
            "input_features",
            hint="keep one camera with --rename_map or a dataset of one camera",
        )
        for key, feature in images.items():
            require(
                feature.shape[-2] == feature.shape[-1],
                f"TD-MPC's random-shift augmentation needs square images; {key} is "
                f"{list(feature.shape)}",
                "input_features",
            )

    def optimizer_preset(self) -> OptimizerSpec:
        return OptimizerSpec(type="adam", lr=self.optimizer_lr)

    @property
    def observation_delta_indices(self) -> list[int]:
        return list(range(self.horizon + 1))

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.horizon))

    @property
    def reward_delta_indices(self) -> list[int]:
        return list(range(self.horizon))


attrs.resolve_types(TDMPCConfig)
