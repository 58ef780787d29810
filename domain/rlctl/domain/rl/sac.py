"""The learner's soft actor-critic settings: LeRobot 0.6.1's `SACAlgorithmConfig`, field for field
(its `policy_config` aside: the policy's settings are the `gaussian_actor` config)."""

from __future__ import annotations

import attrs

from rlctl.domain.errors import ConfigError
from rlctl.domain.policies.gaussian_actor import CriticNetworkConfig, critic_network


@attrs.frozen(kw_only=True)
class SACSettings:
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    temperature_lr: float = 3e-4
    discount: float = 0.99
    # The entropy term in the critics' targets.
    use_backup_entropy: bool = True
    # Polyak rate of the target critics.
    critic_target_update_weight: float = 0.005
    num_critics: int = 2
    # Critics drawn at random for each target (high update-to-data ratios); None: all.
    num_subsample_critics: int | None = None
    critic_network_kwargs: CriticNetworkConfig = attrs.field(
        factory=CriticNetworkConfig, converter=critic_network
    )
    discrete_critic_network_kwargs: CriticNetworkConfig = attrs.field(
        factory=CriticNetworkConfig, converter=critic_network
    )
    temperature_init: float = 1.0
    # None: -|A|/2, |A| the action dimensions (+1 with a discrete gripper).
    target_entropy: float | None = None
    # Critic updates per learner step (update-to-data ratio).
    utd_ratio: int = 1
    policy_update_freq: int = 1
    grad_clip_norm: float = 40.0
    use_torch_compile: bool = False

    def __attrs_post_init__(self) -> None:
        checks = (
            (self.num_critics >= 1, "num_critics must be at least 1", "num_critics"),
            (self.utd_ratio >= 1, "utd_ratio must be at least 1", "utd_ratio"),
            (
                self.policy_update_freq >= 1,
                "policy_update_freq must be at least 1",
                "policy_update_freq",
            ),
            (0.0 <= self.discount <= 1.0, "discount must be in [0, 1]", "discount"),
            (
                0.0 < self.critic_target_update_weight <= 1.0,
                "critic_target_update_weight must be in (0, 1]",
                "critic_target_update_weight",
            ),
            (self.temperature_init > 0, "temperature_init must be positive", "temperature_init"),
            (
                self.num_subsample_critics is None
                or 1 <= self.num_subsample_critics <= self.num_critics,
                "num_subsample_critics must be between 1 and num_critics",
                "num_subsample_critics",
            ),
        )
        for ok, message, where in checks:
            if not ok:
                raise ConfigError(message, where=f"algorithm.{where}")

    def entropy_target(self, action_dim: int, discrete: bool) -> float:
        if self.target_entropy is not None:
            return self.target_entropy
        return -(action_dim + (1 if discrete else 0)) / 2
