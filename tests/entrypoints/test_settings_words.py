"""Every yes/no setting of every command and every registered kind means what the user wrote.

`bool("no")` is True: a setting read by a plain converter turns `--dataset.push_to_hub=no` into
an upload. These tests walk the settings classes of every command (and, through the tagged
unions, every registered policy, env, robot, teleoperator and camera kind), find each yes/no
setting, and check that each usual spelling means its value and any other word is refused by
name — on the command line, in the environment and in YAML and JSON config files.
"""

from __future__ import annotations

import json
import random
import types
import typing
from collections.abc import Iterator
from typing import Any

import attrs
import click
import pytest
import yaml
from click.testing import CliRunner

from rlctl.domain.config import _REGISTRIES, is_tagged_union, registered_types, structure
from rlctl.domain.errors import ConfigError
from rlctl.entrypoints.cli.main import cli
from rlctl.entrypoints.cli.train_config import resolve_train_settings
from rlctl.entrypoints.settings import resolve_config

TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")
GARBAGE = ("ture", "flase", "maybe", "nope", "2", "-1", "0.5", "yess", "y", "n", "oui", "")


def spelled(word: str, rng: random.Random) -> str:
    """The word as someone types it: as it is, upper, capitalised or in a random mix of cases."""
    mixed = "".join(c.upper() if rng.random() < 0.5 else c for c in word)
    return rng.choice([word, word.upper(), word.capitalize(), mixed])


def command_settings() -> dict[str, type]:
    """Every command of the CLI whose settings come from a settings class."""
    found: dict[str, type] = {}

    def walk(group: click.Group, ctx: click.Context, prefix: str) -> None:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is None:
                continue
            path = f"{prefix} {name}".strip()
            if isinstance(command, click.Group):
                walk(command, click.Context(command, parent=ctx), path)
            cls = getattr(command.callback, "rlctl_config_class", None)
            if cls is not None:
                found[path] = cls

    walk(cli, click.Context(cli), "")
    return found


COMMANDS = command_settings()


def _without_none(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return tp


def _is_bool(tp: Any) -> bool:
    return _without_none(tp) is bool


def _filler(tp: Any) -> Any:
    """A value for a required field, so that a kind with one (a port, an arm's section) can be
    built."""
    tp = _without_none(tp)
    if attrs.has(tp):
        attrs.resolve_types(tp)
        return {f.name: _filler(f.type) for f in attrs.fields(tp) if f.default is attrs.NOTHING}
    return {str: "/dev/null", int: 1, float: 1.0}.get(tp)


@attrs.frozen
class BoolSetting:
    """A yes/no setting reached from a command's settings: the dotted key, and the overrides
    (types, required fields) that make the sections above it exist."""

    key: str
    setup: tuple[tuple[str, Any], ...]
    optional: bool


def bool_settings(cls: type, prefix: str = "", setup=(), seen=()) -> Iterator[BoolSetting]:
    attrs.resolve_types(cls)
    required = tuple(
        (f"{prefix}{f.name}", _filler(f.type))
        for f in attrs.fields(cls)
        if f.default is attrs.NOTHING
    )
    setup = (*setup, *required)
    for field in attrs.fields(cls):
        key = f"{prefix}{field.name}"
        tp = _without_none(field.type)
        if _is_bool(field.type):
            yield BoolSetting(key, setup, tp is not field.type)
        elif is_tagged_union(tp):
            yield from union_settings(tp, key, setup, seen)
        elif typing.get_origin(tp) is dict and is_tagged_union(typing.get_args(tp)[1]):
            yield from union_settings(typing.get_args(tp)[1], f"{key}.one", setup, seen)
        elif attrs.has(tp) and tp not in seen:
            yield from bool_settings(tp, f"{key}.", setup, (*seen, tp))


def union_settings(base: type, key: str, setup, seen) -> Iterator[BoolSetting]:
    for name, member in registered_types(base).items():
        if member in seen:
            continue
        yield from bool_settings(
            member, f"{key}.", (*setup, (f"{key}.type", name)), (*seen, member)
        )


def resolve(command: str, overrides, environ=None, config_file=None):
    cls = COMMANDS[command]
    if command == "train":
        args = [f"--{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in overrides]
        return resolve_train_settings(cls, args, config_file, environ=environ or {})
    return resolve_config(cls, overrides=overrides, environ=environ or {}, config_file=config_file)


def value_at(config: Any, key: str) -> Any:
    node = config
    for part in key.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return node


def outcome(command: str, overrides) -> tuple[str, Any]:
    """What a command line resolves to: ("ok", config) or ("error", message)."""
    try:
        return "ok", resolve(command, overrides)
    except ConfigError as error:
        return "error", str(error)


def test_the_walk_finds_the_settings_it_must():
    assert {"record", "train", "eval", "teleoperate", "replay", "calibrate"} <= set(COMMANDS)
    keys = {s.key for s in bool_settings(COMMANDS["record"])}
    assert {
        "dataset.push_to_hub",
        "display_data",
        "resume",
        "robot.env.disable_env_checker",
    } <= keys
    assert "robot.cameras.one.loop" in keys
    train = {s.key for s in bool_settings(COMMANDS["train"])}
    assert {"save_checkpoint", "dataset.streaming", "policy.use_amp"} <= train


# Train's settings hold every policy kind's (about 90 yes/no settings): seconds, not a blink.
@pytest.mark.parametrize(
    "command",
    [pytest.param(c, marks=pytest.mark.slow) if c == "train" else c for c in sorted(COMMANDS)],
)
def test_every_yes_no_setting_reads_the_usual_words_and_refuses_others(command):
    rng = random.Random(f"rlctl-{command}")
    settings = list(bool_settings(COMMANDS[command]))
    assert settings or command not in ("record", "train", "eval")
    for setting in settings:
        setup = list(setting.setup)
        for truth, words in ((True, TRUE_WORDS), (False, FALSE_WORDS)):
            expected = outcome(command, [*setup, (setting.key, truth)])
            for word in rng.sample(words, 2):  # each setting two of them, all of them in all
                typed = spelled(word, rng)
                got = outcome(command, [*setup, (setting.key, typed)])
                assert got[0] == expected[0], (setting.key, typed, got, expected)
                if got[0] == "ok":
                    assert value_at(got[1], setting.key) is truth, (setting.key, typed)
                else:  # a check of the config refuses this value, whatever its spelling
                    assert got[1] == expected[1], (setting.key, typed)
        for word in [*rng.sample(GARBAGE, 2), "ture"]:
            with pytest.raises(ConfigError) as info:
                resolve(command, [*setup, (setting.key, word)])
            error = info.value
            assert error.where == f"--{setting.key}", (setting.key, word, str(error))
            shown = error.message.partition(" is not a yes/no value")[0]
            assert shown in (repr(word), word), str(error)
            assert "true or false" in error.message + (error.hint or "")


def settled(command: str, **sources: Any) -> tuple[str, Any]:
    try:
        return "ok", resolve(command, [], **sources)
    except ConfigError as error:
        return "error", error.message


def same_as(command: str, key: str, truth: bool, got: tuple[str, Any]) -> bool:
    """Whether `got` is what the real boolean gives (a value, or the same refusal by a check)."""
    expected = outcome(command, [(key, truth)])
    if got[0] != expected[0]:
        return False
    if got[0] == "ok":
        return value_at(got[1], key) is truth
    return expected[1].endswith(got[1])


@pytest.mark.parametrize("command", ["record", "train", "eval", "teleoperate"])
def test_yes_no_words_in_the_environment_and_config_files(command, tmp_path):
    settings = [s for s in bool_settings(COMMANDS[command]) if not s.setup]
    assert settings
    for setting in settings:
        name = "RLCTL_" + setting.key.upper().replace(".", "__")
        in_section = "." in setting.key  # the environment sets settings of sections only
        for word, truth in (("no", False), ("OFF", False), ("Yes", True), ("on", True)):
            if in_section:
                got = settled(command, environ={name: word})
                assert same_as(command, setting.key, truth, got), (name, word, got)
        data: dict[str, Any] = {}
        node = data
        parts = setting.key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        for suffix, dump in ((".yaml", yaml.safe_dump), (".json", json.dumps)):
            path = tmp_path / f"c{suffix}"
            for word, truth in (("no", False), (False, False), ("YES", True), (True, True)):
                node[parts[-1]] = word
                path.write_text(dump(data))
                got = settled(command, config_file=path)
                assert same_as(command, setting.key, truth, got), (path, word, got)
            node[parts[-1]] = "ture"
            path.write_text(dump(data))
            with pytest.raises(ConfigError, match="'ture' is not a yes/no value") as info:
                resolve(command, [], config_file=path)
            assert info.value.where == f"{setting.key} in {path}"
        if in_section:
            with pytest.raises(ConfigError, match="'nope' is not a yes/no value") as info:
                resolve(command, [], environ={name: "nope"})
            assert info.value.where == name


def test_yaml_spellings_of_yes_and_no_in_a_file(tmp_path):
    path = tmp_path / "record.yaml"
    for text, truth in (("no", False), ("NO", False), ("off", False), ("yes", True), ("On", True)):
        path.write_text(f"dataset:\n  push_to_hub: {text}\ndisplay_data: {text}\n")
        config = resolve("record", [], config_file=path)
        assert config.dataset.push_to_hub is truth and config.display_data is truth


@pytest.mark.parametrize("word", ["no", "No", "NO", "false", "FALSE", "off", "0"])
def test_push_to_hub_no_resolves_to_false_as_the_user_types_it(word):
    args = ["record", f"--dataset.push_to_hub={word}", "--print-config"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["dataset"]["push_to_hub"] is False


@pytest.mark.parametrize(
    "args",
    [
        ["record", "--dataset.push_to_hub=ture"],
        ["record", "--display_data=maybe"],
        ["train", "--save_checkpoint=nope"],
        ["eval", "--display_data=ture"],
    ],
)
def test_a_word_that_is_not_yes_or_no_is_one_clear_error(args):
    result = CliRunner().invoke(cli, [*args, "--print-config"])
    assert result.exit_code == 1
    key, _, word = args[1].partition("=")
    assert f"error: {key}: {word!r} is not a yes/no value; write true or false" in result.output
    assert "Traceback" not in result.output


def test_every_registered_kind_was_walked():
    """The walk above reaches every kind of every tagged union the commands hold."""
    reached: set[type] = set()

    def visit(cls: type, seen=()) -> None:
        attrs.resolve_types(cls)
        for field in attrs.fields(cls):
            tp = _without_none(field.type)
            if typing.get_origin(tp) is dict:
                tp = typing.get_args(tp)[1]
            if is_tagged_union(tp):
                for member in registered_types(tp).values():
                    if member not in seen:
                        reached.add(member)
                        visit(member, (*seen, member))
            elif attrs.has(tp) and tp not in seen:
                visit(tp, (*seen, tp))

    for cls in COMMANDS.values():
        visit(cls)
    # Motor buses are picked by the arm types, by name, not by a setting.
    from rlctl.entrypoints.parts import MotorBusConfig

    for base, members in _REGISTRIES.items():
        if base.__module__.startswith("rlctl.") and members and base is not MotorBusConfig:
            assert set(members.values()) <= reached, base.__name__


def built(base: type, data: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", structure(data, base)
    except ConfigError as error:
        return "error", str(error)


def test_each_registered_kinds_yes_no_fields_directly():
    """Structuring a kind's own settings (a saved config.json, a plugin's data) reads words."""
    checked = 0
    for base, members in _REGISTRIES.items():
        for name, member in members.items():
            attrs.resolve_types(member)
            required = {
                f.name: _filler(f.type) for f in attrs.fields(member) if f.default is attrs.NOTHING
            }
            for field in attrs.fields(member):
                if not _is_bool(field.type):
                    continue
                for word, truth in (("no", False), ("Off", False), ("YES", True), ("1", True)):
                    got = built(base, {"type": name, **required, field.name: word})
                    expected = built(base, {"type": name, **required, field.name: truth})
                    assert got == expected, (name, field.name, word)
                    if got[0] == "ok":
                        assert getattr(got[1], field.name) is truth
                with pytest.raises(ConfigError, match="'ture' is not a yes/no value"):
                    structure({"type": name, **required, field.name: "ture"}, base)
                checked += 1
    assert checked > 20
