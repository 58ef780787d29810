"""Processor pipelines: ordered, saveable Transition -> Transition steps (see DESIGN.md §3).

Importing this package registers the built-in steps; adapters add theirs with `register_step`.
"""

from rlctl.domain.processors.batch import from_transition, to_transition
from rlctl.domain.processors.pipeline import ProcessorPipeline, state_key
from rlctl.domain.processors.registry import (
    STEP_REGISTRY,
    StepRegistry,
    register_step,
    step_class,
)
from rlctl.domain.processors.serialization import converter
from rlctl.domain.processors.step import NoConfig, ProcessorStep, Step
from rlctl.domain.processors.steps import (
    AbsoluteActions,
    AddBatchDimension,
    Clip,
    ClipConfig,
    ClipRange,
    NormalizedFeature,
    Normalizer,
    NormalizerConfig,
    NormMode,
    RelativeActions,
    RelativeActionsConfig,
    RenameConfig,
    RenameObservations,
    Unnormalizer,
    joint_mask,
    pair_absolute_with_relative,
    to_absolute_actions,
    to_relative_actions,
)

__all__ = [
    "STEP_REGISTRY",
    "AbsoluteActions",
    "AddBatchDimension",
    "Clip",
    "ClipConfig",
    "ClipRange",
    "NoConfig",
    "NormMode",
    "NormalizedFeature",
    "Normalizer",
    "NormalizerConfig",
    "ProcessorPipeline",
    "ProcessorStep",
    "RelativeActions",
    "RelativeActionsConfig",
    "RenameConfig",
    "RenameObservations",
    "Step",
    "StepRegistry",
    "Unnormalizer",
    "converter",
    "from_transition",
    "joint_mask",
    "pair_absolute_with_relative",
    "register_step",
    "state_key",
    "step_class",
    "to_absolute_actions",
    "to_relative_actions",
    "to_transition",
]
