"""An ordered list of steps that can be saved as plain data plus named arrays and rebuilt.

`to_data()` is LeRobot's `policy_preprocessor.json` without the state file names:
`{"name": ..., "steps": [{"registry_name": ..., "config": {...}}, ...]}`. `state()` holds each
stateful step's arrays under `step_{index}_{registry_name}`, the stem LeRobot uses for its
safetensors files (`{name}_step_3_normalizer_processor.safetensors`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.frames import Transition
from rlctl.domain.processors.batch import from_transition, to_transition
from rlctl.domain.processors.registry import STEP_REGISTRY, StepRegistry
from rlctl.domain.processors.serialization import structure_config, unstructure_config
from rlctl.domain.processors.step import ProcessorStep

__all__ = ["ProcessorPipeline", "from_transition", "state_key", "to_transition"]


def state_key(index: int, registry_name: str) -> str:
    return f"step_{index}_{registry_name}"


class ProcessorPipeline:
    def __init__(self, steps: Iterable[ProcessorStep] = (), name: str = "processor") -> None:
        self.steps: tuple[ProcessorStep, ...] = tuple(steps)
        self.name = name

    def __call__(self, transition: Transition) -> Transition:
        for step in self.steps:
            transition = step(transition)
        return transition

    def process_batch(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """Run on a flat LeRobot-style batch dict (`observation.state`, `action`, …)."""
        if not self.steps:  # a training step's whole pre-processing, for small models
            return dict(batch)
        return from_transition(self(to_transition(batch)))

    def transform_features(self, features: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]:
        out = dict(features)
        for step in self.steps:
            out = step.transform_features(out)
        return out

    def to_data(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "steps": [
                {"registry_name": _registry_name(step), "config": _config_data(step)}
                for step in self.steps
            ],
        }

    def state(self) -> dict[str, dict[str, np.ndarray]]:
        out: dict[str, dict[str, np.ndarray]] = {}
        for index, step in enumerate(self.steps):
            arrays = step.state_dict()
            if arrays:
                out[state_key(index, _registry_name(step))] = arrays
        return out

    @classmethod
    def from_data(
        cls,
        data: Mapping[str, Any],
        state: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        registry: StepRegistry = STEP_REGISTRY,
    ) -> ProcessorPipeline:
        """Rebuild through the registry; `state` is what `state()` returned (keys `step_i_name`)."""
        name, entries = _parse_data(data)
        state = dict(state or {})
        steps: list[ProcessorStep] = []
        for index, entry in enumerate(entries):
            where = f"{name}.steps[{index}]"
            registry_name = entry["registry_name"]
            step_cls = registry.lookup(registry_name, where=f"{where}.registry_name")
            config = structure_config(entry.get("config") or {}, step_cls.config_class, where)
            step = step_cls(config)
            arrays = state.pop(state_key(index, registry_name), None)
            if arrays is not None:
                step.load_state_dict(arrays)
            steps.append(step)
        if state:
            raise ConfigError(
                f"state for steps this pipeline does not have: {sorted(state)}",
                where=name,
                hint="state keys are step_<index>_<registry_name>, as returned by state()",
            )
        return cls(steps, name=name)

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[ProcessorStep]:
        return iter(self.steps)

    def __getitem__(self, index: int) -> ProcessorStep:
        return self.steps[index]

    def __repr__(self) -> str:
        inner = ", ".join(type(step).__name__ for step in self.steps)
        return f"ProcessorPipeline({self.name!r}, [{inner}])"


def _config_data(step: ProcessorStep) -> dict[str, Any]:
    # A step whose LeRobot counterpart takes fewer settings writes only those (`config_data`).
    written = getattr(step, "config_data", None)
    return written() if callable(written) else unstructure_config(step.config)


def _registry_name(step: ProcessorStep) -> str:
    name = getattr(step, "name", "")
    if not name:
        raise ConfigError(
            f"{type(step).__name__} has no registry name, so a saved pipeline could not rebuild it",
            hint="decorate the class with @register_step('<name>')",
        )
    return name


def _parse_data(data: Mapping[str, Any]) -> tuple[str, list[Mapping[str, Any]]]:
    if not isinstance(data, Mapping):
        raise ConfigError(f"a pipeline is a mapping with 'steps', got {type(data).__name__}")
    name = str(data.get("name", "processor"))
    entries = data.get("steps")
    if not isinstance(entries, list):
        raise ConfigError("a pipeline needs a list under 'steps'", where=name)
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or "registry_name" not in entry:
            raise ConfigError(
                "each step needs a 'registry_name' (and usually a 'config')",
                where=f"{name}.steps[{index}]",
            )
    return name, entries
