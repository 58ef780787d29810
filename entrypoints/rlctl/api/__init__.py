"""The embedding facade: what a service or notebook calls instead of the CLI.

Everything goes through the container, so an embedder can override any port with its own
adapter: `c = rlctl.api.container(); c.meta_reader.override(providers.Object(mine))`.
"""

from __future__ import annotations

from typing import Any

from rlctl.entrypoints.container import Container, build_container
from rlctl.entrypoints.settings import AppSettings, DatasetSettings

__all__ = ["AppSettings", "Container", "DatasetSettings", "container", "inspect_dataset"]


def container(settings: AppSettings | None = None) -> Container:
    """A fresh composition root; override its providers to swap adapters."""
    return build_container(settings)


def inspect_dataset(root: str, *, using: Container | None = None) -> Any:
    """Summarise a dataset (fps, features, episodes, frames, tasks, robot type, size)."""
    return (using or build_container()).inspect_dataset()(str(root))
