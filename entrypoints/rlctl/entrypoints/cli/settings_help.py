"""`--help` for commands with settings: every dotted setting, its type, default and description.

Generated from the command's settings class (the attrs classes `config_options` resolves), so it
is never out of date. A section with a `type` (`--policy.type=act`, `--robot.type=...`) lists the
settings of the type given on the command line, else of its default, and names the other types:
`rlctl train --policy.type=diffusion --help` shows Diffusion Policy's fields. Descriptions are the
`# comments` written above each field. Only the config classes are read: no heavy import.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import click

from rlctl.domain.config import is_tagged_union, registered_types, type_name_of


@attrs.frozen
class SettingRow:
    key: str
    type: str
    default: str
    description: str


def field_comments(cls: type) -> dict[str, str]:
    """`# comment` lines written right above each field in the class bodies of `cls`'s MRO."""
    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not attrs.has(klass):
            continue
        try:
            lines, _ = inspect.getsourcelines(klass)
        except (OSError, TypeError):
            continue
        pending: list[str] = []
        body_indent: int | None = None
        for line in lines[1:]:
            stripped = line.strip()
            indent = len(line) - len(line.lstrip())
            if not stripped:
                pending = []
                continue
            if body_indent is None and not stripped.startswith(("@", '"""', "#")):
                body_indent = indent
            if stripped.startswith("#"):
                pending.append(stripped.lstrip("#").strip())
                continue
            match = re.match(r"(\w+)\s*:", stripped)
            if match and indent == (body_indent or indent) and pending:
                comments[match.group(1)] = " ".join(pending)
            pending = []
    return comments


def union_bases(field_type: Any) -> list[type]:
    """The tagged-union bases inside an annotation (`EnvConfig | None`, `dict[str, Camera…]`)."""
    found = [field_type] if is_tagged_union(field_type) else []
    for arg in typing.get_args(field_type):
        found += [b for b in union_bases(arg) if b not in found]
    return found


def union_base_of(cls: type) -> type | None:
    """The tagged-union base `cls` is registered under, if any."""
    for klass in cls.__mro__:
        if registered_types(klass) and cls in registered_types(klass).values():
            return klass
    return None


def all_types(base: type) -> dict[str, type]:
    """Every kind of `base` by name, plugins included when the base has a loader."""
    from rlctl.domain.plugins import plugin_kind

    kind = plugin_kind(base)
    if kind is not None:
        kind.known()
    return registered_types(base)


def type_names(base: type) -> list[str]:
    """Every kind of `base` by name, plugins included, importing none that is not imported yet."""
    from rlctl.domain.plugins import plugin_kind

    kind = plugin_kind(base)
    return kind.names() if kind is not None else list(registered_types(base))


def type_class(base: type, name: str) -> type | None:
    """The config class of type `name` of `base`, imported if it has to be; None if unknown."""
    from rlctl.domain.errors import ConfigError
    from rlctl.domain.plugins import plugin_kind

    kind = plugin_kind(base)
    if kind is None:
        return registered_types(base).get(name)
    try:
        return kind.config_class(name)
    except ConfigError:
        return None


def type_text(tp: Any) -> str:
    """An annotation as a user reads it: `int`, `str|null`, `auto|pyav|torchcodec`, `list` …"""
    if tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return "|".join(str(v) for v in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return "|".join(dict.fromkeys(type_text(a) for a in typing.get_args(tp)))
    if origin in (list, tuple, set, frozenset) or tp in (list, tuple):
        return "list"
    if origin in (dict, Mapping) or tp is dict:
        return "mapping"
    if isinstance(tp, type):
        if is_tagged_union(tp):
            return "section"
        return {"str": "str", "int": "int", "float": "float", "bool": "bool"}.get(
            tp.__name__, tp.__name__
        )
    return str(tp).replace("typing.", "")


def default_text(value: Any) -> str:
    import json

    from rlctl.domain.config import converter

    data = converter.unstructure(value)
    if isinstance(data, str):
        return data or '""'
    return json.dumps(data, default=str)


def _first_line(text: str) -> str:
    """The first sentence of a comment (one ending in '. ' before a capital letter)."""
    return re.split(r"(?<=\.) (?=[A-Z])", text, maxsplit=1)[0]


def setting_rows(
    cls: type,
    values: Mapping[str, Any] | None = None,
    prefix: str = "",
    chosen: Mapping[str, str] | None = None,
) -> Iterator[SettingRow]:
    """Every leaf setting of the attrs class `cls` (`values`: an instance's, as defaults).

    `chosen` maps a section's dotted key to the type named on the command line."""
    chosen = chosen or {}
    attrs.resolve_types(cls)
    comments = field_comments(cls)
    for field in attrs.fields(cls):
        key = f"{prefix}{field.name}"
        note = _first_line(comments.get(field.name, ""))
        if values is not None:
            value = values[field.name]
        elif field.default is attrs.NOTHING:
            value = None
        elif isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            value = None if field.default.takes_self else field.default.factory()
        else:
            value = field.default
        bases = union_bases(field.type)
        name = chosen.get(key)
        if bases and (name is not None or attrs.has(type(value))):
            yield from _typed_section(key, value, bases[0], name, note, chosen)
            continue
        if attrs.has(type(value)):
            yield from setting_rows(
                type(value), attrs.asdict(value, recurse=False), f"{key}.", chosen
            )
            continue
        if value is None and isinstance(field.type, type) and attrs.has(field.type):
            yield from setting_rows(field.type, None, f"{key}.", chosen)  # a required section
            continue
        if bases:
            kinds = ", ".join(type_names(bases[0]))
            yield SettingRow(f"{key}.type", "type", "null", f"One of: {kinds}. {note}".strip())
            continue
        yield SettingRow(key, type_text(field.type), default_text(value), note)


def _typed_section(
    key: str, value: Any, base: type, name: str | None, note: str, chosen: Mapping[str, str]
) -> Iterator[SettingRow]:
    current = name or type_name_of(value)
    cls = type_class(base, current) if current else None
    others = ", ".join(type_names(base))
    if cls is None:
        yield SettingRow(f"{key}.type", "type", str(current), f"Unknown type; one of: {others}.")
        return
    default = type_name_of(value)
    yield SettingRow(
        f"{key}.type",
        "type",
        str(default or "null"),
        f"One of: {others}. {note}".strip() + f" Below: {current}'s settings.",
    )
    same = value is not None and type(value) is cls
    values = attrs.asdict(value, recurse=False) if same else None
    yield from setting_rows(cls, values, f"{key}.", chosen)


def chosen_types(args: list[str]) -> dict[str, str]:
    """`--policy.type=act` and `--policy.type act` among raw arguments → {"policy": "act"};
    `--policy.path=DIR` (or `pretrained_path`) of a local checkpoint → the type it holds."""
    out: dict[str, str] = {}
    for i, arg in enumerate(args):
        for option in ("--policy.path", "--policy.pretrained_path"):
            if arg.startswith(option + "=") or (arg == option and i + 1 < len(args)):
                location = arg.partition("=")[2] if "=" in arg else args[i + 1]
                kind = _checkpoint_type(location)
                if kind is not None:
                    out.setdefault("policy", kind)
        if not arg.startswith("--") or (not arg.endswith(".type") and ".type=" not in arg):
            continue
        key, sep, value = arg[2:].partition("=")
        if not sep and i + 1 < len(args):
            value = args[i + 1]
        if key.endswith(".type") and value:
            out[key.removesuffix(".type")] = value
    return out


def _checkpoint_type(location: str) -> str | None:
    """The `type` in a local checkpoint folder's config.json (no Hub access for `--help`)."""
    import json
    from pathlib import Path

    from rlctl.domain.run_layout import POLICY_CONFIG_FILE, PRETRAINED_DIR

    folder = Path(location).expanduser()
    for config in (folder / POLICY_CONFIG_FILE, folder / PRETRAINED_DIR / POLICY_CONFIG_FILE):
        try:
            kind = json.loads(config.read_text(encoding="utf-8")).get("type")
        except (OSError, ValueError, AttributeError):
            continue
        return kind if isinstance(kind, str) else None
    return None


def write_settings(
    formatter: click.HelpFormatter, cls: type, args: list[str] | None = None
) -> None:
    """The settings of `cls`, grouped by top-level section, as click help sections."""
    try:
        instance = cls()
        values: Mapping[str, Any] | None = attrs.asdict(instance, recurse=False)
    except Exception:  # a settings class with required fields: its defaults only
        values = None
    groups: dict[str, list[tuple[str, str]]] = {}
    for row in setting_rows(cls, values, chosen=chosen_types(args or [])):
        section = row.key.split(".")[0] if "." in row.key else "general"
        term = f"--{row.key}"
        definition = f"{row.type} = {row.default}" + (
            f"  {row.description}" if row.description else ""
        )
        groups.setdefault(section, []).append((term, definition))
    heading = "Settings (--key=value, --config FILE, RLCTL_SECTION__KEY=value)"
    with formatter.section(heading):
        for section, rows in groups.items():
            formatter.write_text(f"{section}:")
            with formatter.indentation():
                formatter.write_dl(rows, col_max=38)
