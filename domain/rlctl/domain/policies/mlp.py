"""The MLP policy's settings: rlctl's own small state-only policy."""

from __future__ import annotations

import attrs

from rlctl.domain.optimization import OptimizerSpec
from rlctl.domain.policies.config import PolicyConfig, int_tuple, require


@PolicyConfig.register("mlp")
@attrs.frozen(kw_only=True)
class MLPConfig(PolicyConfig):
    """rlctl's small state-only policy: observation history -> a chunk of actions, one MLP.

    Meant for quick experiments and smoke tests (trains in seconds on a CPU); it reads the
    robot state and the environment state, never images.
    """

    reads_images = False

    chunk_size: int = 10
    n_action_steps: int = 10
    hidden_dims: tuple[int, ...] = attrs.field(default=(256, 256), converter=int_tuple)
    activation: str = "relu"
    dropout: float = 0.0
    optimizer_lr: float = 1e-3
    optimizer_weight_decay: float = 0.0

    def __attrs_post_init__(self) -> None:
        require(
            self.chunk_size >= 1,
            f"chunk_size must be at least 1, got {self.chunk_size}",
            "chunk_size",
        )
        require(
            all(dim >= 1 for dim in self.hidden_dims),
            f"hidden_dims must be sizes of at least 1, got {list(self.hidden_dims)}",
            "hidden_dims",
        )
        require(
            0.0 <= self.dropout <= 1.0,
            f"dropout must be between 0 and 1, got {self.dropout}",
            "dropout",
        )
        require(
            self.n_action_steps <= self.chunk_size,
            f"n_action_steps ({self.n_action_steps}) cannot exceed chunk_size ({self.chunk_size})",
            "n_action_steps",
        )
        require(
            self.activation in ("relu", "gelu", "tanh"),
            f"activation must be relu, gelu or tanh, got {self.activation!r}",
            "activation",
        )
        require(self.n_obs_steps >= 1, "n_obs_steps must be at least 1", "n_obs_steps")

    def optimizer_preset(self) -> OptimizerSpec:
        return OptimizerSpec(
            type="adamw", lr=self.optimizer_lr, weight_decay=self.optimizer_weight_decay
        )

    @property
    def observation_delta_indices(self) -> list[int] | None:
        return list(range(1 - self.n_obs_steps, 1)) if self.n_obs_steps > 1 else None

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))


attrs.resolve_types(MLPConfig)
