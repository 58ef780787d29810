"""How `rlctl train` reads its settings: a new run, a fine-tuned checkpoint, a resumed run.

The layers, lowest first: the settings classes' defaults ← `--config FILE` ← `RLCTL_SECTION__KEY`
← `--section.key=value`. Two settings change what lies under them:

- `--policy.path=DIR_OR_REPO` (LeRobot's spelling) or `--policy.pretrained_path=...`: the
  checkpoint's `config.json` lies over the defaults, so `--policy.<field>` may be any field of
  the checkpoint's policy type (SmolVLA's `train_expert_only`, π0's `freeze_vision_encoder` …),
  as with `lerobot-train --policy.path`. Only config.json is read here (of a Hub repo, that one
  file is pulled); the weights are read when training starts.
- `--resume=DIR`: the run's saved `rlctl_config.json` lies over the defaults instead. LeRobot's
  spelling, `--resume=true --config_path=RUN/checkpoints/last/pretrained_model/train_config.json`,
  names the same checkpoint; `--resume=true --output_dir=RUN` names the run.

The layers stay plain data until the end, so the policy section is checked once, against the
type it finally names, and an unknown key is one error listing that type's settings.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from rlctl.domain.config import (
    TYPE_FIELD,
    fields_of,
    merge_layers,
    parse_bool,
    parse_overrides,
    structure,
)
from rlctl.domain.errors import ConfigError
from rlctl.domain.run_layout import CHECKPOINTS_DIR, PRETRAINED_DIR, TRAINING_STATE_DIR

POLICY = "policy"
# LeRobot's `--policy.path`; rlctl's config field is `pretrained_path`.
PATH_ALIAS = "path"
PRETRAINED_PATH = "pretrained_path"
# A pretrained config's settings that describe where it ran, not what it is.
NOT_INHERITED = ("device", "pretrained_path", "pretrained_revision")
# LeRobot's `--config_path`: with `--resume=true`, the checkpoint's train_config.json.
CONFIG_PATH = "config_path"
RESUME = "resume"
RESUME_HINT = (
    "give the run's folder: --resume=outputs/train/NAME (or one checkpoint, "
    "NAME/checkpoints/005000); LeRobot's --resume=true "
    "--config_path=NAME/checkpoints/last/pretrained_model/train_config.json works too"
)


@attrs.frozen
class Sources:
    """What the user gave, each layer as plain data: file, environment, command line."""

    file: dict[str, Any]
    env: dict[str, Any]
    overrides: list[tuple[str, Any]]

    def merged(self, *below: Mapping[str, Any]) -> dict[str, Any]:
        return merge_layers(*below, self.file, self.env, overrides=self.overrides)

    def policy_setting(self, name: str) -> Any:
        """`policy.<name>` as the highest layer gives it, whatever `policy.type` says (merging
        drops a section's keys when a later layer names another type)."""
        for key, value in reversed(self.overrides):
            if key == f"{POLICY}.{name}":
                return value
        for layer in (self.env, self.file):
            section = layer.get(POLICY)
            if isinstance(section, dict) and name in section:
                return section[name]
        return None


def run_folder(location: str) -> Path:
    """The run a `--resume` location belongs to: itself, or the run above a checkpoint."""
    path = Path(location).expanduser()
    if path.name == PRETRAINED_DIR:
        path = path.parent
    if (path / TRAINING_STATE_DIR).is_dir():
        return path.parent.parent
    return path


def resolve_train_settings[T](
    cls: type[T],
    args: Iterable[str],
    config_file: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    container: Any = None,
) -> T:
    """`cls` (the train command's settings) from its sources; `container` pulls a Hub repo's
    config.json (the CLI's own when None)."""
    from rlctl.entrypoints.settings import naming_sources

    sources = read_sources(cls, args, config_file, environ)
    with naming_sources(
        overrides=sources.overrides, env=sources.env, file=sources.file, config_file=config_file
    ):
        defaults = _defaults(cls)
        data = sources.merged(defaults)
        resume = resume_location(data.get(RESUME), data.get(CONFIG_PATH), data.get("output_dir"))
        if resume is not None:
            return resumed_settings(cls, resume, sources, defaults)
        data.pop(RESUME, None)
        if data.get(CONFIG_PATH) is not None:
            raise ConfigError(
                "LeRobot's way to resume a run (with --resume=true); alone, rlctl does not read it",
                where=CONFIG_PATH,
                hint="to resume: --resume=RUN_DIR (or add --resume=true); to read settings from "
                "a file of rlctl's settings: --config FILE",
            )
        location = sources.policy_setting(PRETRAINED_PATH)
        if location:
            revision = sources.policy_setting("pretrained_revision")
            return pretrained_settings(cls, str(location), revision, sources, defaults, container)
        return settle(cls, data)


def _yes_no(value: Any) -> bool | None:
    try:
        return parse_bool(value)
    except ConfigError:
        return None


def resume_location(resume: Any, config_path: Any = None, output_dir: Any = None) -> str | None:
    """The run or checkpoint `--resume` names: a folder (rlctl's spelling), or — when it says
    yes, as LeRobot's does — the checkpoint of `--config_path` or the run of `--output_dir`.
    None: no resuming (`--resume=false` included)."""
    if resume is None or resume == "":
        return None
    answer = _yes_no(resume)
    if answer is None:
        if not isinstance(resume, str):
            raise ConfigError(
                f"{resume!r} is neither a run folder nor yes/no", where=RESUME, hint=RESUME_HINT
            )
        return resume
    if not answer:
        return None
    if config_path is not None:
        path = Path(str(config_path)).expanduser()
        checkpoint = path.parent if path.suffix == ".json" else path
        if (
            not (run_folder(str(checkpoint)) / CHECKPOINTS_DIR).is_dir()
            and not (checkpoint.parent / TRAINING_STATE_DIR).is_dir()
        ):
            raise ConfigError(
                "this is not a training run's checkpoint: nothing to resume",
                where=f"{CONFIG_PATH}={config_path}",
                hint=RESUME_HINT,
            )
        return str(checkpoint)
    if output_dir:
        return str(output_dir)
    raise ConfigError("true does not say which run to continue", where=RESUME, hint=RESUME_HINT)


def read_sources(
    cls: type, args: Iterable[str], config_file: str | None, environ: Mapping[str, str] | None
) -> Sources:
    from rlctl.entrypoints.settings import environment_layer, read_config_file

    file = read_config_file(config_file) if config_file else {}
    known = set(fields_of(cls))
    env = {k: v for k, v in environment_layer(environ).items() if k in known}
    return Sources(
        file=_path_alias_in_layer(file, f"the config file {config_file}"),
        env=_path_alias_in_layer(env, "the environment (RLCTL_POLICY__PATH)"),
        overrides=_path_alias_in_overrides(parse_overrides(args)),
    )


def pretrained_settings[T](
    cls: type[T],
    location: str,
    revision: str | None,
    sources: Sources,
    defaults: Mapping[str, Any],
    container: Any = None,
) -> T:
    """Fine-tuning: the checkpoint's policy config, then the user's settings on top."""
    folder = pretrained_config_folder(location, revision, container)
    pretrained = pretrained_policy_data(folder)
    kind = pretrained[TYPE_FIELD]
    named = _named_policy_type(sources)
    if named is not None and named != kind:
        raise ConfigError(
            f"policy.type={named} but the checkpoint at {location} is of type {kind!r}",
            where="policy.type",
            hint=f"drop --policy.type (the checkpoint's type is kept) or pass "
            f"--policy.type={kind}; to train a {named!r} policy from scratch, drop --policy.path",
        )
    data = sources.merged(defaults, {POLICY: pretrained})
    data[POLICY][PRETRAINED_PATH] = location  # as given, whichever spelling named it
    return settle(cls, data, checkpoint=location)


def resumed_settings[T](
    cls: type[T], resume: str, sources: Sources, defaults: Mapping[str, Any]
) -> T:
    """The run's saved settings, then the user's on top; the run's folder stays its output."""
    from rlctl.entrypoints.settings import RESOLVED_CONFIG_NAME, read_config_file

    run = run_folder(resume)
    saved = run / RESOLVED_CONFIG_NAME
    below = [defaults, read_config_file(saved)] if saved.is_file() else [defaults]
    data = sources.merged(*below)
    data.pop(CONFIG_PATH, None)
    data[RESUME] = resume
    if not any(key == "output_dir" for key, _ in sources.overrides) and (
        saved.is_file() or not data.get("output_dir")
    ):
        data["output_dir"] = str(run)
    return settle(cls, data)


def settle[T](cls: type[T], data: Mapping[str, Any], *, checkpoint: str | None = None) -> T:
    """Check the policy section's keys against its type, then structure everything."""
    policy = data.get(POLICY)
    if isinstance(policy, Mapping):
        check_policy_keys(policy, checkpoint)
    return structure(data, cls)


def check_policy_keys(policy: Mapping[str, Any], checkpoint: str | None = None) -> None:
    """One error for every `policy.*` key the policy's type does not have, with its settings."""
    from rlctl.domain.policies import known_policy_types

    kind = policy.get(TYPE_FIELD)
    cls = known_policy_types().get(kind) if isinstance(kind, str) else None
    if cls is None:
        return  # structuring names the unknown type and the known ones
    fields = fields_of(cls)
    unknown = sorted(set(policy) - {TYPE_FIELD, *fields})
    if not unknown:
        return
    guesses = [
        f"policy.{match}"
        for key in unknown
        for match in difflib.get_close_matches(key, fields, n=1, cutoff=0.7)
    ]
    named = ", ".join(f"policy.{key}" for key in unknown)
    what = (
        f"the checkpoint at {checkpoint} is a policy of type {kind!r}, which has no setting {named}"
        if checkpoint
        else f"the policy type {kind!r} has no setting {named}"
    )
    raise ConfigError(
        what + (f" (did you mean {', '.join(guesses)}?)" if guesses else ""),
        where=f"policy.{unknown[0]}",
        hint=f"{kind}'s settings: {', '.join(fields)} "
        f"(`rlctl train --policy.type={kind} --help` describes them)",
    )


def pretrained_config_folder(location: str, revision: str | None, container: Any = None) -> Path:
    """The folder holding the checkpoint's config.json: a local folder (or its
    `pretrained_model/`), or a Hub repo's config.json alone, pulled into the cache."""
    if container is None:
        from rlctl.entrypoints.container import build_container

        container = build_container()
    folder: Path = container.resolve_policy()(location, revision=revision, config_only=True)
    if not folder.is_dir():
        raise ConfigError(
            "no policy checkpoint here",
            where=f"policy.path={location}",
            hint="give a folder holding config.json and model.safetensors (for a training run: "
            "<output_dir>/checkpoints/last/pretrained_model) or a Hub repo id (user/name)",
        )
    return folder


def pretrained_policy_data(folder: Path) -> dict[str, Any]:
    """The checkpoint's policy config as plain data, checked, without what says where it ran."""
    from rlctl.domain.run_layout import POLICY_CONFIG_FILE
    from rlctl.entrypoints.container import Container

    data: dict[str, Any] = Container.policy_config_data()(folder)
    Container.policy_config_check()(data, folder / POLICY_CONFIG_FILE)  # a bad value names it
    return {k: v for k, v in data.items() if k not in NOT_INHERITED}


def _defaults(cls: type) -> dict[str, Any]:
    from rlctl.domain.config import unstructure

    return merge_layers(unstructure(cls()))


def _named_policy_type(sources: Sources) -> str | None:
    """The policy type the user named (file, environment or command line), if any."""
    policy = sources.merged().get(POLICY)
    kind = policy.get(TYPE_FIELD) if isinstance(policy, dict) else None
    return kind if isinstance(kind, str) else None


def _path_alias_in_overrides(overrides: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    given = {key: value for key, value in overrides if key in _PATH_KEYS}
    _refuse_two_paths(given, "the command line")
    alias = f"{POLICY}.{PATH_ALIAS}"
    return [
        (f"{POLICY}.{PRETRAINED_PATH}" if key == alias else key, value) for key, value in overrides
    ]


def _path_alias_in_layer(layer: dict[str, Any], where: str) -> dict[str, Any]:
    policy = layer.get(POLICY)
    if not isinstance(policy, dict) or PATH_ALIAS not in policy:
        return layer
    _refuse_two_paths({f"{POLICY}.{k}": v for k, v in policy.items()}, where)
    renamed = {PRETRAINED_PATH if k == PATH_ALIAS else k: v for k, v in policy.items()}
    return {**layer, POLICY: renamed}


_PATH_KEYS = (f"{POLICY}.{PATH_ALIAS}", f"{POLICY}.{PRETRAINED_PATH}")


def _refuse_two_paths(given: Mapping[str, Any], where: str) -> None:
    values = {str(given[key]) for key in _PATH_KEYS if key in given}
    if len(values) > 1:
        raise ConfigError(
            f"policy.path and policy.pretrained_path name different checkpoints in {where}: "
            + " and ".join(sorted(values)),
            where="policy.path",
            hint="give one of them (policy.path is LeRobot's name for policy.pretrained_path)",
        )
