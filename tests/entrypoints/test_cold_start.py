"""`rlctl --help` must stay light: no torch, no simulator, no video stack."""

import json
import subprocess
import sys

import pytest

HEAVY = [
    "torch",
    "torchvision",
    "torchcodec",
    "av",
    "gymnasium",
    "mujoco",
    "pyarrow",
    "cv2",
    "huggingface_hub",
    "datasets",
    "dependency_injector",
]

PROBE = """
import json, sys
from rlctl.entrypoints.cli.main import cli
try:
    cli({args!r}, prog_name="rlctl")
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["dataset", "--help"],
        ["dataset", "info", "--help"],
        ["dataset", "check", "--help"],
        ["dataset", "merge", "--help"],
        ["dataset", "split", "--help"],
        ["dataset", "delete-episodes", "--help"],
        ["dataset", "recompute-stats", "--help"],
        ["dataset", "convert", "--help"],
        ["eval", "--help"],
        ["train", "--help"],
        ["record", "--help"],
        ["teleoperate", "--help"],
        ["replay", "--help"],
        ["calibrate", "--help"],
        ["setup-motors", "--help"],
        ["find-port", "--help"],
        ["find-cameras", "--help"],
        ["--version"],
    ],
)
def test_help_imports_nothing_heavy(args):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args, heavy=HEAVY)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Usage" in proc.stdout or "rlctl" in proc.stdout, proc.stderr
    loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    assert loaded == [], f"`rlctl {' '.join(args)}` imported {loaded}"


def test_listed_help_matches_each_commands_own_help():
    import click

    from rlctl.entrypoints.cli.main import SUBCOMMAND_HELP, SUBCOMMANDS, cli

    assert set(SUBCOMMAND_HELP) == set(SUBCOMMANDS)
    ctx = click.Context(cli)
    for name, line in SUBCOMMAND_HELP.items():
        full = cli.get_command(ctx, name).get_short_help_str(limit=500)
        assert full.startswith(line.removesuffix("...")), name
