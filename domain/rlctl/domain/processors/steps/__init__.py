"""The built-in steps; importing this package registers them."""

from rlctl.domain.processors.steps.clip import Clip, ClipConfig, ClipRange
from rlctl.domain.processors.steps.normalize import (
    NormalizedFeature,
    Normalizer,
    NormalizerConfig,
    NormMode,
    Unnormalizer,
    normalize_array,
    unnormalize_array,
)
from rlctl.domain.processors.steps.relative_actions import (
    AbsoluteActions,
    RelativeActions,
    RelativeActionsConfig,
    joint_mask,
    pair_absolute_with_relative,
    to_absolute_actions,
    to_relative_actions,
)
from rlctl.domain.processors.steps.rename import RenameConfig, RenameObservations
from rlctl.domain.processors.steps.task_text import NewLineTask, TokenizerConfig
from rlctl.domain.processors.steps.to_batch import AddBatchDimension

__all__ = [
    "AbsoluteActions",
    "AddBatchDimension",
    "Clip",
    "ClipConfig",
    "ClipRange",
    "NewLineTask",
    "NormMode",
    "NormalizedFeature",
    "Normalizer",
    "NormalizerConfig",
    "RelativeActions",
    "RelativeActionsConfig",
    "RenameConfig",
    "RenameObservations",
    "TokenizerConfig",
    "Unnormalizer",
    "joint_mask",
    "normalize_array",
    "pair_absolute_with_relative",
    "to_absolute_actions",
    "to_relative_actions",
    "unnormalize_array",
]
