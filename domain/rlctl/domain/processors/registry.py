"""Registry name -> step class, so that a pipeline saved as data can be rebuilt.

The registry is open: adapters register their framework-bound steps (device moves, image
resizing, tokenisers) with the same decorator when their module is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from rlctl.domain.errors import ConfigError
from rlctl.domain.processors.step import ProcessorStep

StepClass = TypeVar("StepClass", bound=type[ProcessorStep])


class StepRegistry:
    """Names -> classes. A registry made with a `base` also finds the base's steps, so a test or
    an embedding service can add steps without touching the shared registry."""

    def __init__(self, base: StepRegistry | None = None) -> None:
        self._classes: dict[str, type[ProcessorStep]] = {}
        self._base = base

    def register(self, name: str) -> Callable[[StepClass], StepClass]:
        """Class decorator: file the class under `name` and set its `name` to it.

        A registry with a base may shadow the base's step of the same name (a test's stand-in, a
        service's own device step); two classes under one name in the same registry clash.
        """

        def decorate(cls: StepClass) -> StepClass:
            known = self._classes.get(name)
            if known is not None and not _same_definition(known, cls):
                raise ConfigError(
                    f"processor step name {name!r} is taken by "
                    f"{known.__module__}.{known.__qualname__}",
                    hint=f"choose another registry name for {cls.__module__}.{cls.__qualname__}",
                )
            cls.name = name
            self._classes[name] = cls
            return cls

        return decorate

    def lookup(self, name: str, *, where: str | None = None) -> type[ProcessorStep]:
        cls = self._find(name)
        if cls is None:
            raise ConfigError(
                f"unknown processor step {name!r}; known steps: {', '.join(self.names())}",
                where=where,
                hint="steps of adapters (device moves, image resizing) are registered when their "
                "adapter module is imported",
            )
        return cls

    def names(self) -> list[str]:
        inherited = self._base.names() if self._base is not None else []
        return sorted({*inherited, *self._classes})

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._find(name) is not None

    def _find(self, name: str) -> type[ProcessorStep] | None:
        cls = self._classes.get(name)
        if cls is None and self._base is not None:
            return self._base._find(name)
        return cls


def _same_definition(a: type, b: type) -> bool:
    # A module imported twice (reload, two import paths) redefines the same class; that is no clash.
    return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


STEP_REGISTRY = StepRegistry()


def register_step(name: str) -> Callable[[StepClass], StepClass]:
    """`@register_step("normalizer_processor")` files a step class in the shared registry."""
    return STEP_REGISTRY.register(name)


def step_class(name: str) -> type:
    return STEP_REGISTRY.lookup(name)
