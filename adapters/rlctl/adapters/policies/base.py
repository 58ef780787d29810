"""What every torch policy model offers, and the registry that finds a model by policy type.

A model works on *normalised* batches keyed like LeRobot's (`observation.state`,
`observation.images.<camera>`, `action`, `action_is_pad`); processors do the rest. Its state-dict
keys are LeRobot's, so a LeRobot `model.safetensors` loads as it is.

The model class serving a policy type is found through the `rlctl.policy_models` entry points
(`implementations`); `policy_class` imports it on first use, so a new policy is one config class,
one model module and two entry points.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import torch
from torch import Tensor, nn

from rlctl.adapters.policies.implementations import PolicyImplementation, implementation_of
from rlctl.domain.acting import ActionBuffer, ActionQueue
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureKind
from rlctl.domain.policies import PolicyConfig, known_policy_types

if TYPE_CHECKING:
    from rlctl.adapters.policies.vla.rtc import PrefixGuidance

Batch = Mapping[str, Any]
# The attribute a module whose arithmetic follows a config's dtype (not its weights') declares,
# False; `PolicyModel.compute_in_float32` sets it.
FLOAT32_COMPUTE = "float32_compute"


@attrs.frozen
class TrainingWindow:
    """What one training sample reads of its episode: the action offsets (None: the frame's own
    action) and how many frames of each episode's tail are never drawn (they cannot supply a
    whole window)."""

    action_indices: list[int] | None
    drop_n_last_frames: int = 0


def config_window(config: PolicyConfig) -> TrainingWindow:
    """The window `config` names: its `action_delta_indices` and `drop_n_last_frames`."""
    indices = config.action_delta_indices
    drop = getattr(config, "drop_n_last_frames", 0)
    return TrainingWindow(None if indices is None else list(indices), max(0, int(drop or 0)))


class PolicyModel(nn.Module, PolicyImplementation[Any]):
    """Base class: `forward` gives the training loss, `predict_chunk` the inference output.

    A model keeps nothing between control ticks: the observation history and the actions
    waiting to be executed live in `rlctl.domain.acting.ChunkedActing`, which the loaded policy
    drives. Its processor hooks (`preprocessor_steps`, `arrange_processors`) are
    `PolicyImplementation`'s.
    """

    # Trailing action dimensions the post-processor leaves alone (a discrete gripper command
    # chosen by index, as LeRobot's actor leaves SAC's): they are not unnormalised.
    unprocessed_action_tail: int = 0
    # Input features an observation may lack (the model fills them in): the checks of what a
    # policy is asked (`application.policy_checks`) let them be missing, not be wrong.
    optional_inputs: ClassVar[frozenset[str]] = frozenset()
    # The dtype a checkpoint stores each tensor in where it differs from the one the model
    # computes in (by state-dict name): filled by `compute_in_float32`, honoured when saving.
    checkpoint_dtypes: dict[str, torch.dtype]

    @classmethod
    def training_window(cls, config: PolicyConfig) -> TrainingWindow:
        """The window the trainer reads for `config`: its `action_delta_indices` and
        `drop_n_last_frames` (LeRobot's), unless the model, once loaded, trains on a shorter
        chunk than the config names (GR00T from a raw checkpoint): then only that chunk, so no
        frame is read to be thrown away."""
        return config_window(config)

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
        self.checkpoint_dtypes = {}

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

    def reset(self) -> None:
        """Forget what acting kept between chunks (TD-MPC's warm start); called at each
        episode's start. Most models keep nothing."""

    def after_optimizer_step(self) -> None:
        """Called by training after each applied optimiser step (LeRobot's `policy.update()`:
        TD-MPC's target network follows the model)."""

    @property
    def history_keys(self) -> list[str]:
        """The inputs stacked over the last `n_obs_steps` ticks when the policy reads a history."""
        return [
            key
            for key, feature in self.config.input_features.items()
            if feature.kind in (FeatureKind.STATE, FeatureKind.VISUAL, FeatureKind.ENV)
        ]

    def action_buffer(self) -> ActionBuffer:
        """Where this policy's chunks wait between ticks (see `acting`)."""
        return ActionQueue(self.config.n_action_steps)

    def parameter_groups(self) -> list[dict[str, Any]]:
        """Parameter groups for the optimiser; policies with a separate backbone lr override it."""
        return [{"params": [p for p in self.parameters() if p.requires_grad]}]

    def fsdp_units(self) -> list[nn.Module | tuple[nn.Module, ...]]:
        """The groups of parameters sharded training gathers together, each just before it
        runs (usually one per transformer layer; a tuple: modules that run as one, such as two
        experts' layers under joint attention). Empty: the whole model is one unit."""
        return []

    def enable_activation_checkpointing(self) -> None:
        """Recompute each wrap unit's activations in the backward pass instead of keeping them.
        Units whose `forward` is what runs are checkpointed here; a model that runs its layers
        another way overrides this."""
        from torch.distributed._composable import checkpoint

        for unit in self.fsdp_units():
            for module in unit if isinstance(unit, tuple) else (unit,):
                checkpoint(module)

    # --- the dtype it computes in (`vla.compute_dtype`) ----------------------------------------

    def computes_in_bfloat16(self) -> bool:
        """Whether the model computes in bfloat16 (bfloat16 weights; a model that casts under
        autocast says so itself)."""
        return any(p.dtype == torch.bfloat16 for p in self.parameters())

    def compute_in_float32(self) -> None:
        """Compute in float32 from now on: every bfloat16 parameter and buffer is upcast in place
        (a parameter stays the same object: frozen stays frozen, an optimiser built after sees
        float32). Submodules whose arithmetic follows a config's dtype rather than their
        weights' declare `float32_compute = False` and are told. The names and dtype of what was
        upcast are kept in `checkpoint_dtypes`, which saving writes them back in."""
        upcast = dict(getattr(self, "checkpoint_dtypes", {}))
        for prefix, module in self.named_modules(remove_duplicate=False):
            prefix = f"{prefix}." if prefix else ""
            for name, param in module.named_parameters(recurse=False, remove_duplicate=False):
                if param.dtype == torch.bfloat16 or upcast.get(prefix + name) == torch.bfloat16:
                    upcast[prefix + name] = torch.bfloat16
                    param.data = param.data.to(torch.float32)
            for name, buffer in module.named_buffers(recurse=False, remove_duplicate=False):
                if buffer.dtype == torch.bfloat16:
                    upcast[prefix + name] = torch.bfloat16
                    module._buffers[name] = buffer.to(torch.float32)
            if hasattr(module, FLOAT32_COMPUTE):
                setattr(module, FLOAT32_COMPUTE, True)
        self.checkpoint_dtypes = upcast

    @property
    def device(self) -> torch.device:
        """Where the model's (first) parameter lives."""
        return self._first_parameter().device

    @property
    def dtype(self) -> torch.dtype:
        return self._first_parameter().dtype

    def _first_parameter(self) -> nn.Parameter:
        """`next(self.parameters())`, found once: an actor asks for the device and dtype several
        times a step, and walking the modules cost more than its small networks. The parameter
        object is kept, so `.to()`/`.half()` (which move its data in place) show at once; the
        path to it is checked on each call (a dict lookup per level), so a parameter or module
        replaced since (`load_state_dict(assign=True)`, a conversion that makes new parameters,
        sharding, a hand-made swap) is found again."""
        cached = self.__dict__.get("_first_parameter_path")
        if cached is not None:
            links, name, parameter = cached
            parent: nn.Module = self
            for key, child in links:
                if parent._modules.get(key) is not child:
                    break
                parent = child
            else:
                if parent._parameters.get(name) is parameter:
                    return parameter  # type: ignore[no-any-return]
        for full_name, parameter in self.named_parameters():
            *path, name = full_name.split(".")
            links, module = [], self
            for key in path:
                module = module._modules[key]  # type: ignore[assignment]
                links.append((key, module))
            # Only children are held (never `self`): the cache makes no reference cycle.
            object.__setattr__(self, "_first_parameter_path", (tuple(links), name, parameter))
            return parameter
        raise ConfigError(f"{type(self).__name__} has no parameters", where="policy")


def policy_class(config: PolicyConfig) -> type[PolicyModel]:
    """The model class serving `config`'s type, imported on first use."""
    cls = implementation_of(type(config))
    if not issubclass(cls, PolicyModel):
        raise ConfigError(
            f"policy type {config.type_name!r} is not a trainable model "
            f"({cls.__module__}.{cls.__name__} is not a PolicyModel)",
            where="policy.type",
            hint=f"trainable types: {', '.join(trainable_policy_types())}",
        )
    return cls


def trainable_policy_types() -> list[str]:
    """The policy types that train (scripted ones do not), without importing any model."""
    return [name for name, cls in known_policy_types().items() if cls.trainable]


def build_policy(config: PolicyConfig) -> PolicyModel:
    """A freshly initialised model for `config`."""
    return policy_class(config)(config)
