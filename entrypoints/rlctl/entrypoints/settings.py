"""The application's own settings and how they are read: defaults ← file ← environment ← CLI."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import attrs

from rlctl.domain.config import merge_data, parse_value, resolve, set_dotted, unstructure
from rlctl.domain.errors import ConfigError
from rlctl.domain.run_layout import RUN_CONFIG_FILE

ENV_PREFIX = "RLCTL_"
RESOLVED_CONFIG_NAME = RUN_CONFIG_FILE


@attrs.frozen
class DatasetSettings:
    store: Literal["lerobot", "memory"] = "lerobot"
    video_backend: Literal["auto", "pyav", "torchcodec"] = "auto"


@attrs.frozen
class AppSettings:
    """What every command shares: which adapters serve the ports."""

    dataset: DatasetSettings = attrs.field(factory=DatasetSettings)
    progress: Literal["auto", "terminal", "silent"] = "auto"


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A YAML or JSON mapping; the message names the file and the line when it is malformed."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(
            f"cannot read the config file ({err.strerror})",
            where=str(file),
            hint="check the path given to --config",
        ) from err
    if file.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(
                f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}", where=str(file)
            ) from err
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise ConfigError(f"invalid YAML{at}", where=str(file)) from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"the config file must hold a mapping, not a {type(data).__name__}", where=str(file)
        )
    return data


def environment_layer(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`RLCTL_DATASET__VIDEO_BACKEND=pyav` → {"dataset": {"video_backend": "pyav"}}."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        dotted = name[len(ENV_PREFIX) :].lower().replace("__", ".")
        data = set_dotted(data, dotted, parse_value(raw))
    return data


def resolve_config[T](
    cls: type[T],
    *,
    config_file: str | os.PathLike[str] | None = None,
    overrides: Iterable[tuple[str, Any]] = (),
    environ: Mapping[str, str] | None = None,
    section: str | None = None,
) -> T:
    """Build `cls` from its defaults, a file, the environment and dotted overrides.

    With `section`, only the environment variables under that section apply (so a command's
    config does not trip over another command's variables).
    """
    overrides = list(overrides)
    layers: list[Mapping[str, Any]] = [unstructure(cls())]
    file = read_config_file(config_file) if config_file is not None else {}
    if config_file is not None:
        layers.append(file)
    env = environment_layer(environ)
    if section is not None:
        env = {k: v for k, v in env.items() if k == section}
    env = _only_known(env, cls)
    if env:
        layers.append(env)
    with naming_sources(overrides=overrides, env=env, file=file, config_file=config_file):
        return resolve(cls, merge_data({}, layers[0]), *layers[1:], overrides=overrides)


def _path_parts(dotted: str) -> list[str]:
    return [part for part in re.split(r"[.\[\]]", dotted) if part]


def _given_at(layer: Mapping[str, Any], parts: list[str]) -> int:
    """How many of `parts` lead to a value the layer gives (0: it gives none on this path)."""
    node: Any = layer
    for depth, part in enumerate(parts):
        if not isinstance(node, Mapping) or part not in node:
            return 0
        node = node[part]
        if not isinstance(node, Mapping):
            return depth + 1
    return len(parts)


def given_as(
    where: str,
    *,
    overrides: Iterable[tuple[str, Any]] = (),
    env: Mapping[str, Any] | None = None,
    file: Mapping[str, Any] | None = None,
    config_file: str | os.PathLike[str] | None = None,
) -> str:
    """A setting's dotted key as the user wrote it: `--dataset.push_to_hub` on the command
    line, `RLCTL_DATASET__PUSH_TO_HUB` in the environment, the key in its config file; the
    highest layer that gives the value wins, as when the layers are merged."""
    parts = _path_parts(where)
    if not parts:
        return where
    for key, _ in reversed(list(overrides)):
        given = _path_parts(key)
        if parts[: len(given)] == given:
            return f"--{key}" if len(given) == len(parts) else f"{where} (in --{key})"
    depth = _given_at(env or {}, parts)
    if depth:
        name = ENV_PREFIX + "__".join(parts[:depth]).upper()
        return name if depth == len(parts) else f"{where} (in {name})"
    if config_file is not None and _given_at(file or {}, parts):
        return f"{where} in {config_file}"
    return where


@contextmanager
def naming_sources(
    *,
    overrides: Iterable[tuple[str, Any]] = (),
    env: Mapping[str, Any] | None = None,
    file: Mapping[str, Any] | None = None,
    config_file: str | os.PathLike[str] | None = None,
) -> Iterator[None]:
    """Re-raise a config error about one setting under the name the user gave it (`given_as`)."""
    try:
        yield
    except ConfigError as error:
        if not error.where or error.where.startswith(("--", ENV_PREFIX)):
            raise
        renamed = given_as(
            error.where, overrides=overrides, env=env, file=file, config_file=config_file
        )
        if renamed == error.where:
            raise
        raise type(error)(error.message, where=renamed, hint=error.hint) from error


def _only_known(layer: Mapping[str, Any], cls: type) -> dict[str, Any]:
    names = {f.name for f in attrs.fields(cls)}
    return {k: v for k, v in layer.items() if k in names}


@attrs.frozen
class WrittenConfig:
    """What the output folder held before the run wrote its settings there: a refused run
    (one that wrote nothing else) takes back only what it wrote, never what was there."""

    config: Path
    had_config: bool
    entries: frozenset[str]
    created: Path | None  # the first folder on the way that the run created

    @classmethod
    def before(cls, out: Path) -> WrittenConfig:
        created = None
        for folder in (out, *out.parents):
            if folder.exists():
                break
            created = folder
        entries = frozenset(p.name for p in out.iterdir()) if out.is_dir() else frozenset()
        config = out / RESOLVED_CONFIG_NAME
        return cls(config, config.exists(), entries, created)

    def forget(self) -> None:
        out = self.config.parent
        if self.had_config or not out.is_dir():
            return
        if {p.name for p in out.iterdir()} - self.entries != {self.config.name}:
            return  # the run wrote more than its settings: they stay beside what it wrote
        self.config.unlink(missing_ok=True)
        if self.created is None:
            return
        folder = out
        while True:
            try:
                folder.rmdir()  # only while empty
            except OSError:
                return
            if folder == self.created:
                return
            folder = folder.parent


def write_resolved_config(config: Any, out_dir: str | os.PathLike[str]) -> Path:
    """Every run leaves the configuration it really used beside its outputs."""
    path = Path(out_dir) / RESOLVED_CONFIG_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(unstructure(config), indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
