"""The cattrs converter that turns step configs into plain JSON-able data and back.

Enums are written by name in upper case (`"STATE"`, `"MEAN_STD"`), tuples as lists, so a config
unstructures to exactly what LeRobot writes in `policy_preprocessor.json`. Adapters whose step
configs need more hooks register them on `converter`.
"""

from __future__ import annotations

from typing import Any

import cattrs

from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureKind

converter = cattrs.Converter(unstruct_collection_overrides={tuple: list})


def parse_feature_kind(value: Any) -> FeatureKind:
    """A FeatureKind from its name in any case ("STATE" as LeRobot writes it, or "state")."""
    if isinstance(value, FeatureKind):
        return value
    text = str(value)
    if text.upper() in FeatureKind.__members__:
        return FeatureKind[text.upper()]
    known = ", ".join(FeatureKind.__members__)
    raise ConfigError(f"unknown feature type {value!r}; known types: {known}")


converter.register_unstructure_hook(FeatureKind, lambda kind: kind.name)
converter.register_structure_hook(FeatureKind, lambda value, _: parse_feature_kind(value))


def unstructure_config(config: Any) -> dict[str, Any]:
    data: dict[str, Any] = converter.unstructure(config)
    return data


def structure_config(data: Any, config_class: type, where: str) -> Any:
    """Build `config_class` from plain data; any failure becomes one ConfigError at `where`."""
    try:
        return converter.structure(data, config_class)
    except cattrs.BaseValidationError as err:
        details = "; ".join(cattrs.transform_error(err, path=where))
        raise ConfigError(f"invalid {config_class.__name__}: {details}", where=where) from err
    except (ConfigError, TypeError, ValueError, KeyError) as err:
        raise ConfigError(f"invalid {config_class.__name__}: {err}", where=where) from err
