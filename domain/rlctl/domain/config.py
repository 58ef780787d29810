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
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    BaseValidationError,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)

from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec, typed_feature_data
from rlctl.domain.yes_no import parse_bool as parse_bool  # re-exported: the one reading
from rlctl.domain.yes_no import shown as _shown

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


def _optional_union_base(tp: Any) -> type | None:
    """The tagged-union base of a field typed `Base` or `Base | None`."""
    return _union_base(_without_none(tp))


# --- values as a person writes them ----------------------------------------------------------
# A value from the command line or the environment is text unless it reads as JSON; a config
# file's values are YAML's or JSON's. Each scalar type reads what a person would mean by it and
# refuses the rest by name: no word turns into its opposite (`bool("no")` is True).


def _structure_bool(value: Any, _: type) -> bool:
    return parse_bool(value)


def _structure_int(value: Any, _: type) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    number: Any = value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text, 10)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                number = None
    if isinstance(number, float) and math.isfinite(number) and number.is_integer():
        return int(number)
    raise ConfigError(f"{_shown(value)} is not a whole number")


def _structure_float(value: Any, _: type) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise ConfigError(f"{_shown(value)} is not a number")


def _structure_str(value: Any, _: type) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    what = "a yes/no value" if isinstance(value, bool) else _shown(value)
    raise ConfigError(
        f"expected text, got {what}",
        hint="quote the text (--key='\"true\"' on a command line, 'true' in a YAML file)"
        if isinstance(value, bool)
        else "write the text itself",
    )


def _is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is typing.Literal


def _structure_literal(value: Any, tp: Any) -> Any:
    choices = typing.get_args(tp)
    for choice in choices:
        if value == choice and type(value) is type(choice):
            return choice
    if isinstance(value, str):  # another case, or a number written as text (a YAML key)
        matches = [c for c in choices if str(c).lower() == value.strip().lower()]
        if len(matches) == 1 and not isinstance(matches[0], bool):
            return matches[0]
    if {"yes", "no"} <= set(choices):  # a yes/no choice (`--reuse=true`) takes yes/no words
        try:
            return "yes" if parse_bool(value) else "no"
        except ConfigError:
            pass
    if isinstance(value, int | float) and not isinstance(value, bool):
        for choice in choices:
            if isinstance(choice, int | float) and not isinstance(choice, bool) and value == choice:
                return choice
    raise ConfigError(f"{_shown(value)} is not one of: " + ", ".join(str(c) for c in choices))


def split_list(text: str) -> list[str]:
    """`0,1`, `[0, 1]`, `[gripper]` or `a, 'b'` → the items as text (JSON already read its own)."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    items = [item.strip() for item in body.split(",")]
    return [
        item[1:-1] if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"" else item
        for item in items
        if item
    ]


def _is_sequence(tp: Any) -> bool:
    return typing.get_origin(tp) in (list, tuple, set, frozenset) or tp in (list, tuple)


def _without_none(tp: Any) -> Any:
    """`X | None` → X; anything else as it is."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return tp


def _default_of(field: attrs.Attribute[Any]) -> Any:
    default: Any = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return None if default.takes_self else default.factory()
    return default


def _with_union_defaults(
    data: Mapping[str, Any], fields: Iterable[attrs.Attribute[Any]]
) -> Mapping[str, Any]:
    out: dict[str, Any] | None = None
    for field in fields:
        given = data.get(field.name)
        if not isinstance(given, Mapping):
            continue
        default = _default_of(field)
        name = type_name_of(default) if default is not None else None
        if name is None or given.get(TYPE_FIELD, name) != name:
            continue
        out = dict(data) if out is None else out
        out[field.name] = merge_data(converter.unstructure(default), given)
    return data if out is None else out


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

    def class_hook(cls: type) -> Callable[[Any, type], Any]:
        """Structure an attrs class after reading its fields' data as a person means it:

        - a field holding a tagged union with a default member: data naming no type, or the
          default's own type, is laid over the default (`--robot.env.task=x` keeps `robot.env`'s
          default type and its other settings);
        - a list or tuple given as text (`--dataset.episodes=0,1`) is split at its commas.
        """
        inner: Callable[[Any, type], Any] = conv.gen_structure_attrs_fromdict(cls)
        fields = attrs.fields(cls)
        unions = [
            f
            for f in fields
            if f.default is not attrs.NOTHING and _optional_union_base(f.type) is not None
        ]
        sequences = {f.name for f in fields if _is_sequence(_without_none(f.type))}
        if not unions and not sequences:
            return inner

        def structure_read(data: Any, _: type) -> Any:
            if isinstance(data, Mapping):
                data = _with_union_defaults(data, unions)
                texts = [k for k in sequences if isinstance(data.get(k), str)]
                if texts:
                    data = {**data, **{k: split_list(data[k]) for k in texts}}
            return inner(data, cls)

        return structure_read

    conv.register_structure_hook_factory(attrs.has, class_hook)
    conv.register_structure_hook_func(lambda t: _union_base(t) is not None, structure_union)
    conv.register_structure_hook_func(_is_literal, _structure_literal)
    conv.register_structure_hook(bool, _structure_bool)
    conv.register_structure_hook(int, _structure_int)
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(str, _structure_str)
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


@attrs.frozen
class Problem:
    """One thing wrong in a config: the setting (dotted), what, and what to do."""

    where: str
    message: str
    hint: str | None = None

    def line(self) -> str:
        prefix = f"{self.where}: " if self.where else ""
        return prefix + self.message + (f" ({self.hint})" if self.hint else "")


def _child_path(path: str, sub: BaseException) -> str:
    for note in getattr(sub, "__notes__", None) or []:
        if isinstance(note, AttributeValidationNote):
            return f"{path}.{note.name}" if path else note.name
        if isinstance(note, IterableValidationNote):
            index = note.index
            return f"{path}.{index}" if isinstance(index, str) else f"{path}[{index}]"
    return path


def _describe(err: BaseException, path: str = "") -> list[Problem]:
    """Flatten cattrs' nested validation errors into one problem per wrong setting."""
    if isinstance(err, ForbiddenExtraKeysError):
        return [Problem(path or "<root>", f"unknown key(s) {sorted(err.extra_fields)}")]
    if isinstance(err, BaseValidationError):
        return [p for sub in err.exceptions for p in _describe(sub, _child_path(path, sub))]
    if isinstance(err, ConfigError):
        # A config's own check knows the setting it is about; cattrs only knows the section.
        return [Problem(err.where or path, err.message, err.hint)]
    if isinstance(err, KeyError):
        # cattrs notes the missing field on the error too, so `path` may already end with it.
        name = str(err.args[0])
        named = path == name or path.endswith(f".{name}")
        key = path if named else (f"{path}.{name}" if path else name)
        return [Problem(key, "required but missing")]
    return [Problem(path or "<root>", str(err))]


def _leaves(err: BaseException) -> list[BaseException]:
    if isinstance(err, BaseValidationError):
        return [leaf for sub in err.exceptions for leaf in _leaves(sub)]
    return [err]


GENERIC_HINT = "check the key names and value types; --print-config shows the defaults"


def structure[T](data: Mapping[str, Any], cls: type[T]) -> T:
    """Build a config object from plain data; every problem becomes one ConfigError.

    One wrong setting gives an error whose `where` is the setting's dotted key (a caller that
    knows where the value came from may rename it, see `ConfigError.where`); several give one
    error listing them all."""
    try:
        return converter.structure(data, cls)
    except ConfigError:
        raise
    except (BaseValidationError, ClassValidationError) as err:
        problems = _describe(err)
        # The configs' own checks and the value readers carry their own hints.
        checks_only = all(isinstance(leaf, ConfigError) for leaf in _leaves(err))
        if len(problems) == 1:
            (only,) = problems
            raise ConfigError(
                only.message + (f" ({only.hint})" if only.hint else ""),
                where=only.where or None,
                hint=None if checks_only else GENERIC_HINT,
            ) from err
        raise ConfigError(
            "; ".join(p.line() for p in problems) if problems else str(err),
            hint=None if checks_only else GENERIC_HINT,
        ) from err
    except (TypeError, ValueError) as err:
        raise ConfigError(str(err)) from err


def structure_values[T](data: Mapping[Any, Any], value_type: type[T]) -> dict[str, T]:
    """`{name: value_type}` for a custom hook of a mapping field: each value structured, and
    an error names its key (`robot.cameras.front.fps`) as cattrs' own mappings do."""
    out: dict[str, T] = {}
    errors: list[Exception] = []
    for key, value in data.items():
        try:
            out[str(key)] = converter.structure(value, value_type)
        except Exception as error:
            error.add_note(
                IterableValidationNote(f"Structuring @ key {key!r}", str(key), value_type)
            )
            errors.append(error)
    if errors:
        raise IterableValidationError(f"While structuring {value_type.__name__}s", errors, dict)
    return out


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
    """Return a copy of `data` with `a.b.c` set to value, creating sections on the way.

    Only the sections on the way are copied; the rest is shared with `data` (neither is changed
    in place)."""
    parts = [p for p in dotted.split(".") if p]
    if not parts:
        raise ConfigError(f"empty override key {dotted!r}", hint="write --section.key=value")
    out = dict(data)
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
        child = dict(child)
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
