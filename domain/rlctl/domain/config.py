"""Configuration: frozen attrs classes, one cattrs converter, tagged unions by a `type` field.

A polymorphic section (policy, env, robot, camera, codec …) has a base class marked with
`@tagged_union`; each concrete config registers under a name with `@base.register("act")`.
Plain data with `{"type": "act", ...}` then structures into the right class, and a new kind is
added by writing one class — no factory to edit. Dotted overrides (`policy.chunk_size=50`) are
applied to plain data before structuring, so file, environment and command line compose.
"""

from __future__ import annotations

import copy
import json
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import attrs
import cattrs
from cattrs.errors import BaseValidationError, ClassValidationError, ForbiddenExtraKeysError

from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec, typed_feature_data

TYPE_FIELD = "type"

_REGISTRIES: dict[type, dict[str, type]] = {}


class Register(Protocol):
    """The `register(name)` class decorator `@tagged_union` gives a base. Declare it on the base,
    `register: ClassVar[Register]`, so that type checkers see `@Base.register("name")`."""

    def __call__[C](self, name: str, /) -> Callable[[type[C]], type[C]]: ...


def tagged_union[T](base: type[T]) -> type[T]:
    """Mark `base` as the root of a tagged union and give it a `register(name)` decorator."""
    _REGISTRIES.setdefault(base, {})

    def register(name: str) -> Callable[[type[T]], type[T]]:
        def decorate(cls: type[T]) -> type[T]:
            known = _REGISTRIES[base]
            if name in known and known[name] is not cls:
                raise ConfigError(
                    f"{base.__name__} type {name!r} is registered twice "
                    f"({known[name].__qualname__} and {cls.__qualname__})"
                )
            known[name] = cls
            cls.type_name = name  # type: ignore[attr-defined]
            return cls

        return decorate

    base.register = staticmethod(register)  # type: ignore[attr-defined]
    return base


def registered_types(base: type) -> dict[str, type]:
    """The names registered under a tagged-union base, in registration order."""
    return dict(_REGISTRIES.get(base, {}))


def is_tagged_union(cls: Any) -> bool:
    """Whether `cls` is the base of a tagged union (kinds may register later, from plugins)."""
    return isinstance(cls, type) and cls in _REGISTRIES


def type_name_of(obj: Any) -> str | None:
    for base, names in _REGISTRIES.items():
        if isinstance(obj, base):
            for name, cls in names.items():
                if type(obj) is cls:
                    return name
    return None


def _union_base(cls: Any) -> type | None:
    return cls if isinstance(cls, type) and cls in _REGISTRIES else None


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)

    def structure_union(data: Any, cls: type) -> Any:
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"expected a mapping with a '{TYPE_FIELD}' key for {cls.__name__}, got {data!r}"
            )
        known = _REGISTRIES[cls]
        name = data.get(TYPE_FIELD)
        if name is None:
            raise ConfigError(
                f"{cls.__name__} needs a '{TYPE_FIELD}'",
                hint=f"choose one of: {', '.join(known) or '(none registered)'}",
            )
        if name not in known:
            raise ConfigError(
                f"unknown {cls.__name__} type {name!r}",
                hint=f"known types: {', '.join(known) or '(none registered)'}",
            )
        body = {k: v for k, v in data.items() if k != TYPE_FIELD}
        return conv.structure(body, known[name])

    def unstructure_union(obj: Any) -> dict[str, Any]:
        # Field types are strings under `from __future__ import annotations` until resolved;
        # unresolved, nested configs would be left as objects.
        attrs.resolve_types(type(obj))
        data = conv.unstructure_attrs_asdict(obj)
        name = type_name_of(obj)
        return {TYPE_FIELD: name, **data} if name else data

    conv.register_structure_hook_func(lambda t: _union_base(t) is not None, structure_union)
    conv.register_unstructure_hook_func(
        lambda t: isinstance(t, type) and any(issubclass(t, b) for b in _REGISTRIES),
        unstructure_union,
    )
    conv.register_structure_hook(tuple, lambda v, _: tuple(v))
    # In configs a feature is `{"type": "STATE", "shape": [6]}`; the owning field's converter
    # (`typed_features`) builds the spec, because only it knows the feature's key.
    conv.register_structure_hook(FeatureSpec, lambda v, _: v)
    conv.register_unstructure_hook(FeatureSpec, typed_feature_data)
    return conv


converter = _make_converter()


def _describe(err: BaseException, path: str = "") -> list[str]:
    """Flatten cattrs' nested validation errors into 'where: what' lines."""
    if isinstance(err, ForbiddenExtraKeysError):
        return [f"{path or '<root>'}: unknown key(s) {sorted(err.extra_fields)}"]
    if isinstance(err, BaseValidationError):
        lines: list[str] = []
        for sub in err.exceptions:
            note = next(iter(getattr(sub, "__notes__", []) or []), "")
            name = note.split("@ attribute ")[-1].split(" ")[0] if "attribute" in note else ""
            if not name and hasattr(sub, "__notes__"):
                name = ""
            child = f"{path}.{name}" if path and name else (name or path)
            lines.extend(_describe(sub, child))
        return lines
    if isinstance(err, ConfigError):
        # A config's own check knows the setting it is about; cattrs only knows the section.
        where = err.where or path
        prefix = f"{where}: " if where else ""
        return [prefix + err.message + (f" ({err.hint})" if err.hint else "")]
    if isinstance(err, KeyError):
        key = f"{path}.{err.args[0]}" if path else str(err.args[0])
        return [f"{key}: required but missing"]
    return [f"{path or '<root>'}: {err}"]


def _leaves(err: BaseException) -> list[BaseException]:
    if isinstance(err, BaseValidationError):
        return [leaf for sub in err.exceptions for leaf in _leaves(sub)]
    return [err]


def structure[T](data: Mapping[str, Any], cls: type[T]) -> T:
    """Build a config object from plain data; every problem becomes one ConfigError."""
    try:
        return converter.structure(data, cls)
    except ConfigError:
        raise
    except (BaseValidationError, ClassValidationError) as err:
        lines = _describe(err)
        # The configs' own checks carry their hints in their lines.
        checks_only = all(isinstance(leaf, ConfigError) for leaf in _leaves(err))
        raise ConfigError(
            "; ".join(lines) if lines else str(err),
            hint=None
            if checks_only
            else "check the key names and value types; --print-config shows the defaults",
        ) from err
    except (TypeError, ValueError) as err:
        raise ConfigError(str(err)) from err


def unstructure(obj: Any) -> dict[str, Any]:
    data: dict[str, Any] = converter.unstructure(obj)
    return data


def parse_value(text: str) -> Any:
    """A command-line value: JSON when it parses (numbers, bools, lists, null), else the string."""
    lowered = text.strip()
    if lowered in {"true", "True"}:
        return True
    if lowered in {"false", "False"}:
        return False
    if lowered in {"none", "None", "null"}:
        return None
    try:
        return json.loads(lowered)
    except json.JSONDecodeError:
        return text


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """Return a copy of `data` with `a.b.c` set to value, creating sections on the way."""
    out = copy.deepcopy(data)
    parts = [p for p in dotted.split(".") if p]
    if not parts:
        raise ConfigError(f"empty override key {dotted!r}", hint="write --section.key=value")
    node = out
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = {}
        if not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            raise ConfigError(
                f"cannot set {dotted}: {where} is a value, not a section", where=where
            )
        node[part] = child
        node = child
    node[parts[-1]] = value
    return out


def parse_overrides(args: Iterable[str]) -> list[tuple[str, Any]]:
    """`--a.b=1` / `--a.b 1` / `a.b=1` → [("a.b", 1)]; anything else is a ConfigError."""
    items = list(args)
    out: list[tuple[str, Any]] = []
    i = 0
    while i < len(items):
        arg = items[i]
        key = arg[2:] if arg.startswith("--") else arg
        if "=" in key:
            name, _, raw = key.partition("=")
        elif arg.startswith("--") and i + 1 < len(items) and not items[i + 1].startswith("--"):
            name, raw = key, items[i + 1]
            i += 1
        else:
            raise ConfigError(
                f"cannot read the argument {arg!r}",
                hint="overrides look like --section.key=value (e.g. --policy.chunk_size=50)",
            )
        out.append((name.replace("-", "_") if name.count(".") == 0 else name, parse_value(raw)))
        i += 1
    return out


def merge_data(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge two plain mappings; `top` wins. A changed `type` replaces the whole section."""
    out = copy.deepcopy(dict(base))
    for key, value in top.items():
        current = out.get(key)
        if (
            isinstance(current, dict)
            and isinstance(value, Mapping)
            and value.get(TYPE_FIELD, current.get(TYPE_FIELD)) == current.get(TYPE_FIELD)
        ):
            out[key] = merge_data(current, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def resolve[T](
    cls: type[T],
    *layers: Mapping[str, Any],
    overrides: Iterable[tuple[str, Any]] = (),
) -> T:
    """Defaults of `cls`, then each layer (file, environment …), then dotted overrides."""
    return structure(merge_layers(*layers, overrides=overrides), cls)


def merge_layers(
    *layers: Mapping[str, Any], overrides: Iterable[tuple[str, Any]] = ()
) -> dict[str, Any]:
    """What `resolve` structures: the layers merged in order, then the dotted overrides, as plain
    data (a command may look at it, e.g. for a checkpoint to read, before it is checked)."""
    data: dict[str, Any] = {}
    for layer in layers:
        data = merge_data(data, layer)
    for dotted, value in overrides:
        data = _apply_override(data, dotted, value)
    return data


def _apply_override(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    # Setting `policy.type` changes the union member: drop the old member's keys so they are not
    # checked against the new class.
    parts = dotted.split(".")
    if parts[-1] == TYPE_FIELD and len(parts) > 1:
        section: Any = data
        for part in parts[:-1]:
            section = section.get(part, {}) if isinstance(section, dict) else {}
        if isinstance(section, dict) and section.get(TYPE_FIELD) not in (None, value):
            data = set_dotted(data, ".".join(parts[:-1]), {})
    return set_dotted(data, dotted, value)


def fields_of(cls: type) -> list[str]:
    return [f.name for f in attrs.fields(cls)] if attrs.has(cls) else []


def field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls) if attrs.has(cls) else {}
