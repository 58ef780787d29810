"""`--help` lists every setting of a command, generated from its settings classes."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from rlctl.entrypoints.cli.config_options import SettingsCommand
from rlctl.entrypoints.cli.main import cli


def help_of(*args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def setting(text: str, key: str) -> str:
    """The help of `--key`: its type, default and description, with the lines it wraps onto
    (a long list of types, e.g. with plugins' env types registered, wraps)."""
    match = re.search(
        rf"^\s*--{re.escape(key)}\s+(.*(?:\n(?!\s*--)(?!\S)\s+\S.*)*)", text, flags=re.MULTILINE
    )
    assert match, f"--{key} not listed"
    return " ".join(part.strip() for part in match.group(1).splitlines())


def settings_commands() -> list[list[str]]:
    found = []

    def walk(group: click.Group, path: list[str]) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):
                walk(command, [*path, name])
            elif isinstance(command, SettingsCommand):
                found.append([*path, name])

    walk(cli, [])
    return found


def test_the_commands_that_take_settings_are_found():
    commands = {" ".join(c) for c in settings_commands()}
    assert {"record", "train", "eval", "teleoperate", "replay", "calibrate"} <= commands
    assert {"dataset info", "dataset merge", "dataset recompute-stats"} <= commands


@pytest.mark.parametrize("command", settings_commands(), ids=" ".join)
def test_every_settings_command_lists_its_settings(command):
    text = help_of(*command)
    assert "Settings (--key=value" in text
    assert setting(text, "dataset.video_backend").startswith("auto|pyav|torchcodec = auto")


def test_record_help_lists_types_defaults_and_descriptions():
    text = help_of("record")
    assert setting(text, "dataset.fps").startswith("int = 30")
    assert setting(text, "robot.type").startswith("type = ")
    assert "so101_follower" in setting(text, "robot.type")
    assert setting(text, "resume").startswith("bool = false")


def test_the_type_on_the_command_line_picks_the_section_listed():
    act = help_of("train")
    assert setting(act, "policy.type").startswith("type = act")
    assert setting(act, "policy.chunk_size").startswith("int = 100")
    assert not re.search(r"^\s*--policy.horizon\s", act, flags=re.MULTILINE)
    diffusion = help_of("train", "--policy.type=diffusion")
    assert setting(diffusion, "policy.horizon").startswith("int = 64")
    assert "Below: diffusion's settings" in setting(diffusion, "policy.type")
    assert not re.search(r"^\s*--policy.chunk_size\s", diffusion, flags=re.MULTILINE)
    spaced = help_of("eval", "--env.type", "aloha")
    assert "Below: aloha's settings" in setting(spaced, "env.type")


def test_a_section_that_is_off_by_default_names_its_types():
    text = help_of("train")
    line = setting(text, "env.type")
    assert line.startswith("type = null") and "pusht" in line and "metaworld" in line
    chosen = help_of("train", "--env.type=pusht")
    assert setting(chosen, "env.obs_type").startswith("pixels_agent_pos|")
