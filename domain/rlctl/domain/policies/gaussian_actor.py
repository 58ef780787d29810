"""The Gaussian actor's settings: LeRobot 0.6.1's `GaussianActorConfig`, field for field.

The policy side of HIL-SERL's soft actor-critic (SAC): an observation encoder (a small CNN per
camera with learned spatial embeddings, a linear layer per state vector) and a tanh-squashed
diagonal Gaussian over the continuous actions, plus, for a gripper, a discrete critic whose argmax
is the last action dimension. The critics, their targets and the temperature are the learner's
(`rlctl.domain.rl.sac.SACSettings`); this config only round-trips the fields LeRobot keeps here
for its actor/learner (`online_steps`, the buffer capacities, `actor_learner_config` …), which
`rlctl rl learn` reads as its defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureKind
from rlctl.domain.optimization import OptimizerSpec
from rlctl.domain.policies.config import (
    ACTION,
    OBS_STATE,
    PolicyConfig,
    int_tuple,
    norm_mapping,
    require,
)

OBS_IMAGE = "observation.image"
# LeRobot defaults `final_activation` to None and the hidden activation to SiLU.
DEFAULT_HIDDEN = (256, 256)


def _nested[T](cls: type[T], value: Any) -> T:
    """An instance of `cls`, given as one or as its fields in a mapping (config.json)."""
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"expected a mapping of {cls.__name__} settings, got {value!r}", where=cls.__name__
        )
    known = {f.name for f in attrs.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(map(str, value)) - known)
    if unknown:
        raise ConfigError(
            f"unknown {cls.__name__} setting(s): {', '.join(unknown)}",
            where=cls.__name__,
            hint=f"known: {', '.join(sorted(known))}",
        )
    return cls(**value)


@attrs.frozen(kw_only=True)
class ActorLearnerConfig:
    learner_host: str = "127.0.0.1"
    learner_port: int = 50051
    # Seconds between two parameter pushes from the learner to the actors.
    policy_parameters_push_frequency: int = 4
    queue_get_timeout: float = 2


@attrs.frozen(kw_only=True)
class ConcurrencyConfig:
    # LeRobot's threads/processes switches; rlctl's learner and actor are separate processes.
    actor: str = "threads"
    learner: str = "threads"
    multiprocessing_context: str | None = "spawn"


@attrs.frozen(kw_only=True)
class CriticNetworkConfig:
    hidden_dims: tuple[int, ...] = attrs.field(default=DEFAULT_HIDDEN, converter=int_tuple)
    activate_final: bool = True
    final_activation: str | None = None


@attrs.frozen(kw_only=True)
class ActorNetworkConfig:
    hidden_dims: tuple[int, ...] = attrs.field(default=DEFAULT_HIDDEN, converter=int_tuple)
    activate_final: bool = True


@attrs.frozen(kw_only=True)
class GaussianHeadConfig:
    """LeRobot's `PolicyConfig` (the Gaussian head's settings, `policy_kwargs`)."""

    use_tanh_squash: bool = True
    std_min: float = 1e-5
    std_max: float = 10.0
    init_final: float = 0.05


def _actor_learner(value: Any) -> ActorLearnerConfig:
    return _nested(ActorLearnerConfig, value)


def _concurrency(value: Any) -> ConcurrencyConfig:
    return _nested(ConcurrencyConfig, value)


def _actor_network(value: Any) -> ActorNetworkConfig:
    return _nested(ActorNetworkConfig, value)


def _head(value: Any) -> GaussianHeadConfig:
    return _nested(GaussianHeadConfig, value)


def critic_network(value: Any) -> CriticNetworkConfig:
    return _nested(CriticNetworkConfig, value)


def _sac_norms() -> dict[str, str]:
    return {"VISUAL": "MEAN_STD", "STATE": "MIN_MAX", "ENV": "MIN_MAX", "ACTION": "MIN_MAX"}


def _default_stats() -> dict[str, dict[str, list[float]]]:
    return {
        OBS_IMAGE: {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
        OBS_STATE: {"min": [0.0, 0.0], "max": [1.0, 1.0]},
        ACTION: {"min": [0.0, 0.0, 0.0], "max": [1.0, 1.0, 1.0]},
    }


def _stats(value: Any) -> dict[str, dict[str, list[float]]] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"dataset_stats must map features to statistics, got {value!r}",
            where="policy.dataset_stats",
        )
    out: dict[str, dict[str, list[float]]] = {}
    for key, stats in value.items():
        if not isinstance(stats, Mapping):
            raise ConfigError(
                f"dataset_stats[{key!r}] must map statistic names to lists of numbers",
                where="policy.dataset_stats",
            )
        out[str(key)] = {str(name): _floats(v, key, name) for name, v in stats.items()}
    return out


def _floats(value: Any, key: str, name: str) -> Any:
    """Numbers, or (nested) lists of them, as floats; anything else is refused."""
    if isinstance(value, (list, tuple)):
        return [_floats(v, key, name) for v in value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(
            f"dataset_stats[{key!r}][{name!r}] holds {value!r}, not a number",
            where="policy.dataset_stats",
        )
    return float(value)


def is_image_feature(key: str) -> bool:
    return key.startswith(OBS_IMAGE)


@PolicyConfig.register("gaussian_actor")
@attrs.frozen(kw_only=True)
class GaussianActorConfig(PolicyConfig):
    """SAC's actor (LeRobot's `gaussian_actor`): one action per observation, sampled from a
    tanh-squashed Gaussian; trained online by `rlctl rl learn`, not by `rlctl train`."""

    # One action per observation: LeRobot's config has no n_action_steps.
    lerobot_omits: ClassVar[tuple[str, ...]] = ("n_action_steps",)

    normalization_mapping: dict[str, str] = attrs.field(factory=_sac_norms, converter=norm_mapping)
    dataset_stats: dict[str, dict[str, list[float]]] | None = attrs.field(
        factory=_default_stats, converter=_stats
    )
    device: str | None = "cpu"
    storage_device: str = "cpu"
    # A pretrained vision encoder (LeRobot: "lerobot/resnet10"); None: the small default CNN.
    vision_encoder_name: str | None = None
    freeze_vision_encoder: bool = True
    image_encoder_hidden_dim: int = 32
    shared_encoder: bool = True
    # A discrete gripper action (the last action dimension), chosen by a discrete critic.
    num_discrete_actions: int | None = None
    image_embedding_pooling_dim: int = 8
    state_encoder_hidden_dim: int = 256
    latent_dim: int = 256
    online_steps: int = 1_000_000
    online_buffer_capacity: int = 100_000
    offline_buffer_capacity: int = 100_000
    async_prefetch: bool = False
    online_step_before_learning: int = 100
    actor_learner_config: ActorLearnerConfig = attrs.field(
        factory=ActorLearnerConfig, converter=_actor_learner
    )
    concurrency: ConcurrencyConfig = attrs.field(factory=ConcurrencyConfig, converter=_concurrency)
    actor_network_kwargs: ActorNetworkConfig = attrs.field(
        factory=ActorNetworkConfig, converter=_actor_network
    )
    policy_kwargs: GaussianHeadConfig = attrs.field(factory=GaussianHeadConfig, converter=_head)
    discrete_critic_network_kwargs: CriticNetworkConfig = attrs.field(
        factory=CriticNetworkConfig, converter=critic_network
    )

    def __attrs_post_init__(self) -> None:
        require(self.latent_dim >= 1, "latent_dim must be at least 1", "latent_dim")
        require(
            self.image_encoder_hidden_dim >= 1,
            "image_encoder_hidden_dim must be at least 1",
            "image_encoder_hidden_dim",
        )
        require(
            self.num_discrete_actions is None or self.num_discrete_actions >= 2,
            f"num_discrete_actions must be at least 2 (or null), got {self.num_discrete_actions}",
            "num_discrete_actions",
        )
        require(
            len(self.actor_network_kwargs.hidden_dims) >= 1,
            "the actor needs at least one hidden layer",
            "actor_network_kwargs.hidden_dims",
        )
        require(
            0 < self.policy_kwargs.std_min <= self.policy_kwargs.std_max,
            "policy_kwargs needs 0 < std_min <= std_max",
            "policy_kwargs",
        )

    def optimizer_preset(self) -> OptimizerSpec:
        # LeRobot's MultiAdam preset (actor, critic, temperature at 3e-4); the learner builds its
        # own three optimisers from the SAC settings.
        return OptimizerSpec(type="adam", lr=3e-4, weight_decay=0.0)

    @property
    def image_keys(self) -> list[str]:
        return [k for k in self.input_features if is_image_feature(k)]

    def validate_features(self) -> None:
        """LeRobot's check: a state or an image in, `action` out."""
        has_image = any(
            is_image_feature(k) and f.kind is FeatureKind.VISUAL
            for k, f in self.input_features.items()
        )
        if OBS_STATE not in self.input_features and not has_image:
            raise ConfigError(
                "the Gaussian actor reads 'observation.state' or an image "
                "('observation.image…'), and the inputs have neither",
                where="policy.input_features",
                hint="give the env's or dataset's features (a state vector or a camera)",
            )
        if ACTION not in self.output_features:
            raise ConfigError(
                "the Gaussian actor needs an 'action' output feature",
                where="policy.output_features",
            )


attrs.resolve_types(GaussianActorConfig)
