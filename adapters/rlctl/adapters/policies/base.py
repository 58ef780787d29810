"""What every torch policy model offers, and the registry that finds a model by policy type.

A model works on *normalised* batches keyed like LeRobot's (`observation.state`,
`observation.images.<camera>`, `action`, `action_is_pad`); processors do the rest. Its state-dict
keys are LeRobot's, so a LeRobot `model.safetensors` loads as it is.

A policy type maps to its model class through `register_policy`; `policy_class("act")` imports
`rlctl.adapters.policies.act` on first use, so a new policy is one config class and one module.
"""

from __future__ import annotations

import importlib
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from rlctl.application.policy_configs import PolicyConfig
from rlctl.domain.action_chunk import ActionChunk, ActionQueue
from rlctl.domain.config import registered_types
from rlctl.domain.errors import ConfigError

Batch = Mapping[str, Any]


class PolicyModel(nn.Module):
    """Base class: `forward` gives the training loss, `predict_chunk` the inference output."""

    config_class: ClassVar[type[PolicyConfig]] = PolicyConfig

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        if not isinstance(config, self.config_class):
            raise ConfigError(
                f"{type(self).__name__} takes a {self.config_class.__name__}, "
                f"got {type(config).__name__}"
            )
        self.config = config
        self._action_queue = ActionQueue(max(1, getattr(config, "n_action_steps", 1)))

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        """The training loss on a normalised batch, and its parts for logging."""
        raise NotImplementedError

    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        """Normalised actions `(batch, steps, action_dim)` for a normalised observation batch."""
        raise NotImplementedError

    @torch.no_grad()
    def select_action(self, batch: Batch) -> Tensor:
        """One normalised action `(batch, action_dim)`: the next one of the current chunk."""
        self.eval()
        if self._action_queue.needs_chunk():
            self._action_queue.push(ActionChunk(self.predict_chunk(batch)))
        return self._action_queue.pop()

    def reads_observation(self) -> bool:
        """Whether the next `select_action` looks at its observation: only when a new chunk is
        due. Policies that keep an observation history, or ensemble every tick, say always."""
        return self._action_queue.needs_chunk()

    def next_queued_action(self) -> Tensor:
        """The next action of the current chunk, when `reads_observation()` is false."""
        return self._action_queue.pop()

    def reset(self) -> None:
        """Forget the actions and observations kept between ticks (a new episode starts)."""
        self._action_queue.reset()

    def parameter_groups(self) -> list[dict[str, Any]]:
        """Parameter groups for the optimiser; policies with a separate backbone lr override it."""
        return [{"params": [p for p in self.parameters() if p.requires_grad]}]

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype


class ObservationHistory:
    """The last `n_steps` observations per key, for policies that read a history.

    The first observation of an episode fills the whole history, as LeRobot's `populate_queues`
    does, so a policy can act from the first tick.
    """

    def __init__(self, n_steps: int, keys: list[str]) -> None:
        self.n_steps = n_steps
        self.keys = keys
        self._queues: dict[str, deque[Tensor]] = {k: deque(maxlen=n_steps) for k in keys}

    def push(self, batch: Batch) -> dict[str, Tensor]:
        """Add one observation `(batch, ...)` per key; return each history `(batch, n, ...)`."""
        for key in self.keys:
            queue = self._queues[key]
            value = batch[key]
            while len(queue) < self.n_steps - 1:
                queue.append(value)
            queue.append(value)
        return {key: torch.stack(list(self._queues[key]), dim=1) for key in self.keys}

    def reset(self) -> None:
        for queue in self._queues.values():
            queue.clear()


_MODELS: dict[str, type[PolicyModel]] = {}


def register_policy(name: str) -> Callable[[type[PolicyModel]], type[PolicyModel]]:
    """Class decorator: the model class that serves policy type `name`."""

    def decorate(cls: type[PolicyModel]) -> type[PolicyModel]:
        _MODELS[name] = cls
        return cls

    return decorate


def policy_class(name: str) -> type[PolicyModel]:
    """The model class for a policy type, importing `rlctl.adapters.policies.<name>` if needed."""
    if name not in _MODELS:
        try:
            importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{__package__}.{name}":
                raise
    if name not in _MODELS:
        known = sorted(set(_MODELS) | set(registered_types(PolicyConfig)))
        raise ConfigError(
            f"no model implements policy type {name!r}",
            hint=f"known policy types: {', '.join(known)}",
        )
    return _MODELS[name]


def build_policy(config: PolicyConfig) -> PolicyModel:
    """A freshly initialised model for `config`."""
    return policy_class(config.type_name)(config)
