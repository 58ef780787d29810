"""One registry for every kind of part: policies, envs, robots, teleoperators, cameras, motor buses.

A kind is a tagged-union base (its members are config classes, `@Base.register("name")`) plus an
entry-point group. A package adds a part without editing rlctl by declaring an entry point in the
kind's group, named after the type, pointing at its config class (or at a module that registers
one when imported):

    [project.entry-points."rlctl.robots"]
    my_arm = "my_package.config:MyArmConfig"

| kind | base | group |
| --- | --- | --- |
| policy | `PolicyConfig` | `rlctl.policies` |
| env | `EnvConfig` | `rlctl.envs` |
| robot | `RobotConfig` | `rlctl.robots` |
| teleoperator | `TeleoperatorConfig` | `rlctl.teleoperators` |
| camera | `CameraConfig` | `rlctl.cameras` |
| motor bus | `MotorBusConfig` | `rlctl.motors` |

rlctl's own parts are declared the same way (in the domain's and the adapters' pyproject.toml)
and their modules are also imported directly (`builtin_modules`), so a source checkout without
installed metadata still knows them. Entry points are read once, the first time a config of the
kind is structured or its types are asked for, so plain imports stay cheap. A plugin that fails
to load does not hide the others: its error is kept, logged, and named when its type is asked
for (`--robot.type=my_arm`).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from rlctl.domain.config import converter, is_tagged_union, registered_types, structure
from rlctl.domain.errors import ConfigError, NotSupported

# The domain logs through the standard library; the CLI routes it to structlog.
log = logging.getLogger(__name__)

_KINDS: dict[type, PluginKind[Any]] = {}


class PluginKind[T]:
    """The parts of one kind: those built in, and those installed packages declare."""

    def __init__(
        self,
        base: type[T],
        group: str,
        builtin_modules: Sequence[str] = (),
        *,
        noun: str,
        where: str | None = None,
    ) -> None:
        """`base`: the tagged union; `group`: the entry-point group; `builtin_modules`: rlctl's
        own modules that register members when imported; `noun`: the kind as a person says it
        ("robot"); `where`: the setting an unknown type is reported at ("policy.type"; None: the
        place in the settings where it was found)."""
        if not is_tagged_union(base):
            raise TypeError(f"{base.__name__} is not a tagged union (@tagged_union)")
        if base in _KINDS:
            raise ConfigError(
                f"{base.__name__} has a plugin kind already ({_KINDS[base].group})",
                hint="create one PluginKind per base, beside the base",
            )
        self.base: type[T] = base
        self.group: str = group
        self.builtin_modules: tuple[str, ...] = tuple(builtin_modules)
        self.noun: str = noun
        self.where: str | None = where
        self._loaded = False
        self._errors: dict[str, str] = {}
        _KINDS[base] = self
        self._install_structure_hook()

    def __repr__(self) -> str:
        return f"PluginKind({self.base.__name__}, {self.group!r})"

    # What is known

    def load_plugins(self, *, reload: bool = False) -> dict[str, str]:
        """Import the group's entry points once (again with `reload`, for types installed since);
        return the failures by plugin name."""
        if self._loaded and not reload:
            return dict(self._errors)
        self._loaded = True
        for ep in _declared(self.group, fresh=reload):
            present = registered_types(self.base).get(ep.name)
            if present is not None and not reload and _declares(ep, present):
                continue  # built in, or loaded before: nothing to import
            try:
                self._register(ep)
            except Exception as error:
                self._errors[ep.name] = f"{ep.value}: {type(error).__name__}: {error}"
                log.warning("%s plugin %s failed to load: %s", self.noun, ep.name, error)
                continue
            self._errors.pop(ep.name, None)
        return dict(self._errors)

    def _register(self, ep: EntryPoint) -> None:
        target = ep.load()
        known = registered_types(self.base)
        if isinstance(target, ModuleType):
            if ep.name not in known:
                raise ConfigError(f"importing {target.__name__} registered no type {ep.name!r}")
            return
        if not (isinstance(target, type) and issubclass(target, self.base)):
            raise ConfigError(f"{ep.value} is not a {self.base.__name__}")
        if known.get(ep.name) is target:
            return
        if target in known.values():
            # Registered on import under another name: the entry point's name is the type.
            other = next(name for name, cls in known.items() if cls is target)
            raise ConfigError(f"{target.__qualname__} is registered as {other!r}, not {ep.name!r}")
        self.base.register(ep.name)(target)  # type: ignore[attr-defined]

    def load_builtins(self) -> None:
        """Import rlctl's own modules of this kind (they register their types)."""
        for module in self.builtin_modules:
            importlib.import_module(module)

    def known(self) -> dict[str, type[T]]:
        """Every type by name: built-in first, then plugins, in registration order."""
        self.load_builtins()
        self.load_plugins()
        return registered_types(self.base)

    def names(self) -> list[str]:
        """Every type's name, importing nothing that is not imported yet (for listings such as
        `--help`): the types registered so far, then those the entry points declare. Without
        installed metadata (a bare source tree), rlctl's own modules are imported instead."""
        declared = _declared(self.group)
        modules = {ep.value.partition(":")[0].strip() for ep in declared}
        if not set(self.builtin_modules) <= modules:
            self.load_builtins()
        names = list(registered_types(self.base))
        return names + [ep.name for ep in declared if ep.name not in names]

    @property
    def errors(self) -> dict[str, str]:
        """Plugins that failed to load, by name, with the reason."""
        return dict(self._errors)

    def config_class(self, name: str) -> type[T]:
        known = registered_types(self.base)
        if name in known:
            return known[name]
        for ep in _declared(self.group):
            if ep.name == name and name not in self._errors:
                try:  # only this type's module: start-up
                    self._register(ep)
                except Exception:
                    break  # kept and named by the full load below
                return registered_types(self.base)[name]
        known = self.known()
        if name in known:
            return known[name]
        raise self.unknown(name)

    def make(self, name: str, **fields: Any) -> T:
        """`kind.make("so101_follower", port="/dev/ttyACM0")`, checked like a config file."""
        self.config_class(name)
        return structure({"type": name, **fields}, self.base)

    def unknown(self, name: Any, *, where: str | None = None) -> ConfigError:
        known = self.known()
        hint = f"known {self.noun} types: {', '.join(known) or '(none)'}"
        if isinstance(name, str) and name in self._errors:
            hint = f"the plugin providing it failed to load ({self._errors[name]}); {hint}"
        else:
            hint += f"; a package adds one with an entry point in the group {self.group!r}"
        return ConfigError(
            f"unknown {self.noun} type {name!r}", where=where or self.where, hint=hint
        )

    # Structuring: `--robot.type=NAME` finds plugin types

    def _install_structure_hook(self) -> None:
        union_hook: Callable[[Any, type], Any] = converter.get_structure_hook(self.base)
        base = self.base

        def structure_member(data: Any, cls: type) -> Any:
            name = data.get("type") if isinstance(data, Mapping) else None
            if isinstance(name, str) and name not in self.known():
                raise self.unknown(name)
            return union_hook(data, cls)

        converter.register_structure_hook_func(lambda t: t is base, structure_member)


def load_adapter(path: str, *, part: str, install: str | None = None) -> Any:
    """What a part's config names as its adapter (`"package.module:factory"`), imported only when
    the part is built, so that settings and `--help` never import a device's library.

    `part` says which part it is in errors ("robot toy"); `install` is the fix when the module
    or a library it imports is missing (default: install the package that provides it).
    """
    module, _, name = path.partition(":")
    if not module or not name:
        raise ConfigError(
            f"{part}: its adapter {path!r} is not 'package.module:name'",
            where=part,
            hint="the config class's `adapter` names the module and the factory in it",
        )
    try:
        loaded = importlib.import_module(module)
    except ImportError as error:
        missing = error.name or str(error)
        raise NotSupported(
            f"{part} cannot be built: {missing} is not installed (imported by {module})",
            where=part,
            hint=install or f"install the package that provides {missing}",
        ) from error
    try:
        return getattr(loaded, name)
    except AttributeError:
        raise ConfigError(
            f"{part}: its adapter module {module} has no {name!r}",
            where=part,
            hint="the config class's `adapter` names the module and the factory in it",
        ) from None


_ENTRY_POINTS: list[EntryPoint] | None = None


def _declared(group: str, *, fresh: bool = False) -> list[EntryPoint]:
    """The group's entry points; the installed metadata is read once per process (each scan of
    every installed distribution costs ~20 ms of start-up), again when `fresh`."""
    global _ENTRY_POINTS
    if _ENTRY_POINTS is None or fresh:
        _ENTRY_POINTS = list(entry_points())
    return [ep for ep in _ENTRY_POINTS if ep.group == group]


def _declares(ep: EntryPoint, cls: type) -> bool:
    """Whether `ep` names `cls` (or the module that registers it), read without importing."""
    module, _, attr = ep.value.partition(":")
    return module.strip() == cls.__module__ and attr.strip() in ("", cls.__qualname__)


def plugin_kind(base: type) -> PluginKind[Any] | None:
    """The kind whose base is `base`, if it has one."""
    return _KINDS.get(base)


def plugin_kinds() -> list[PluginKind[Any]]:
    """Every kind created so far (a kind is created when its base's module is imported)."""
    return list(_KINDS.values())
