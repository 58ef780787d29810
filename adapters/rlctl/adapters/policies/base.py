"""What every torch policy model offers, and the registry that finds a model by policy type.

A model works on *normalised* batches keyed like LeRobot's (`observation.state`,
`observation.images.<camera>`, `action`, `action_is_pad`); processors do the rest. Its state-dict
keys are LeRobot's, so a LeRobot `model.safetensors` loads as it is.

A policy config names the class that serves it (`ACTConfig.implementation`); `policy_class`
imports it on first use, so a new policy is one config class, one model module and one entry point.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor, nn

from rlctl.adapters.policies.acting import ActionBuffer
from rlctl.domain.action_chunk import ActionQueue
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureKind
from rlctl.domain.policies import PolicyConfig, known_policy_types

if TYPE_CHECKING:
    from rlctl.adapters.policies.vla.rtc import PrefixGuidance
    from rlctl.application.ports.simulation import Simulation

Batch = Mapping[str, Any]


class PolicyModel(nn.Module):
    """Base class: `forward` gives the training loss, `predict_chunk` the inference output.

    A model keeps nothing between control ticks: the observation history and the actions
    waiting to be executed live in `acting.ChunkedActing`, which the loaded policy drives.
    """

    config_class: ClassVar[type[PolicyConfig]] = PolicyConfig

    def __init__(self, config: PolicyConfig, *, load_backbone_weights: bool = True) -> None:
        # Every model takes `load_backbone_weights`: False when a checkpoint's weights follow,
        # so a pretrained backbone is not fetched for nothing. The base has no backbone.
        super().__init__()
        if not isinstance(config, self.config_class):
            raise ConfigError(
                f"{type(self).__name__} takes a {self.config_class.__name__}, "
                f"got {type(config).__name__}"
            )
        self.config = config

    @classmethod
    def for_simulation(
        cls, config: PolicyConfig, simulation: Simulation, *, seed: int | None = None
    ) -> Any:
        """A model learns from data: it is trained or loaded, never built for an env."""
        raise ConfigError(
            f"policy type {config.type_name!r} acts only once trained",
            where="policy.type",
            hint="give a checkpoint with --policy.path=DIR (train one with rlctl train), or "
            "choose a policy that needs no training: "
            + ", ".join(n for n, c in known_policy_types().items() if not c.trainable),
        )

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        """The training loss on a normalised batch, and its parts for logging."""
        raise NotImplementedError

    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        """Normalised actions `(batch, steps, action_dim)` for a normalised observation batch."""
        raise NotImplementedError

    def predict_guided_chunk(
        self, batch: Batch, guidance: PrefixGuidance | None, noise: Tensor | None = None
    ) -> Tensor:
        """`predict_chunk` following the previous chunk's leftover (real-time chunking): only
        flow-matching models whose config `supports_rtc` implement it."""
        raise ConfigError(
            f"policy type {self.config.type_name!r} cannot follow committed actions "
            "(real-time chunking needs a flow-matching policy such as smolvla)",
            where="policy.rtc_config",
            hint="drop --policy.rtc_config, or set its enabled to false",
        )

    @property
    def history_keys(self) -> list[str]:
        """The inputs stacked over the last `n_obs_steps` ticks when the policy reads a history."""
        return [
            key
            for key, feature in self.config.input_features.items()
            if feature.kind in (FeatureKind.STATE, FeatureKind.VISUAL, FeatureKind.ENV)
        ]

    @classmethod
    def preprocessor_steps(cls, config: Any) -> list[Any]:
        """Steps this policy adds to its pre-processor after batching (a tokenizer …)."""
        return []

    def action_buffer(self) -> ActionBuffer:
        """Where this policy's chunks wait between ticks (see `acting`)."""
        return ActionQueue(self.config.n_action_steps)

    def parameter_groups(self) -> list[dict[str, Any]]:
        """Parameter groups for the optimiser; policies with a separate backbone lr override it."""
        return [{"params": [p for p in self.parameters() if p.requires_grad]}]

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype


def policy_class(config: PolicyConfig) -> type[PolicyModel]:
    """The model class serving `config`'s type: its `implementation`, imported on first use."""
    cls = implementation_of(type(config))
    if not (isinstance(cls, type) and issubclass(cls, PolicyModel)):
        raise ConfigError(
            f"policy type {config.type_name!r} is not a trainable model "
            f"({type(config).implementation} is not a PolicyModel)",
            where="policy.type",
            hint=f"trainable types: {', '.join(trainable_policy_types())}",
        )
    return cls


def implementation_of(config_class: type[PolicyConfig]) -> Any:
    """What `config_class.implementation` (`"package.module:Name"`) names, imported."""
    target = config_class.implementation
    module_name, _, attr = target.partition(":")
    name = getattr(config_class, "type_name", config_class.__name__)
    if not module_name or not attr:
        raise ConfigError(
            f"policy type {name!r} names no implementation",
            hint=f"set {config_class.__name__}.implementation = 'package.module:Class'",
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(
            f"the implementation of policy type {name!r} cannot be imported: {err}",
            where=target,
            hint="install the package that provides it (see the policy's documentation)",
        ) from err
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(
            f"{module_name} has no {attr}, which policy type {name!r} names as its implementation",
            where=target,
        ) from None


def trainable_policy_types() -> list[str]:
    """The policy types that train (scripted ones do not), without importing any model."""
    return [name for name, cls in known_policy_types().items() if cls.trainable]


def build_policy(config: PolicyConfig) -> PolicyModel:
    """A freshly initialised model for `config`."""
    return policy_class(config)(config)
