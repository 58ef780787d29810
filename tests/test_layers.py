"""The hexagon's import rule (DESIGN.md §1) is a test: a violation fails the suite."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_CHECKER = REPO_ROOT.parent / "shared" / "tools" / "check_layers.py"
LAYERS = ("domain", "application", "adapters", "entrypoints")


def test_import_linter_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run(
        [str(lint), "--no-cache"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken" not in proc.stdout.lower() or " 0 broken" in proc.stdout.lower()


def test_shared_layer_checker_agrees():
    if not SHARED_CHECKER.is_file():
        pytest.skip(f"{SHARED_CHECKER} not present")
    proc = subprocess.run(
        [sys.executable, str(SHARED_CHECKER), str(REPO_ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_rlctl_init_anywhere():
    # `rlctl` is a namespace shared by four distributions; an __init__.py would shadow the rest.
    for layer in LAYERS:
        assert not (REPO_ROOT / layer / "rlctl" / "__init__.py").exists(), layer


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


@pytest.mark.parametrize("layer", LAYERS)
def test_each_distribution_holds_only_its_layer(layer):
    packages = {p.name for p in (REPO_ROOT / layer / "rlctl").iterdir() if p.is_dir()}
    packages.discard("__pycache__")
    expected = {"entrypoints", "api"} if layer == "entrypoints" else {layer}
    assert packages == expected


def test_only_entrypoints_use_the_facade():
    for layer in ("domain", "application", "adapters"):
        for path in (REPO_ROOT / layer).rglob("*.py"):
            assert not any(m.startswith("rlctl.api") for m in _imports(path)), path


@pytest.mark.parametrize("layer", ["domain", "application"])
def test_the_inner_layers_name_no_outer_module(layer):
    """Not by import (the contracts above) and not by name either: a `"rlctl.adapters.x:Class"`
    string in a config is an import the contracts cannot see. What serves a domain type is found
    by the outer layers (entry points, the container), never named from inside; comments and
    docstrings are held to it too, so the check needs no parser to be sure."""
    files = [REPO_ROOT / layer / "pyproject.toml", *(REPO_ROOT / layer / "rlctl").rglob("*.py")]
    for path in files:
        text = path.read_text(encoding="utf-8")
        for outer in ("rlctl.adapters", "rlctl.entrypoints", "rlctl/adapters", "rlctl/entrypoints"):
            assert outer not in text, f"{path.relative_to(REPO_ROOT)} names {outer}"


def test_the_composition_contracts_are_declared():
    """Only the container composes (DESIGN.md §6): the contracts that say so stay in place."""
    import tomllib

    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = {c["name"]: c for c in config["tool"]["importlinter"]["contracts"]}
    adapters = contracts["No adapter imports a use case"]
    assert adapters["source_modules"] == ["rlctl.adapters"]
    assert adapters["forbidden_modules"] == ["rlctl.application.use_cases"]
    assert not adapters.get("ignore_imports") and not adapters.get("allow_indirect_imports")
    cli = contracts["The CLI imports no adapter"]
    assert cli["source_modules"] == ["rlctl.entrypoints.cli"]
    assert cli["forbidden_modules"] == ["rlctl.adapters"]
    # The one exception: the parts' config classes, through `rlctl.entrypoints.parts` only.
    assert cli.get("ignore_imports") == ["rlctl.entrypoints.parts -> rlctl.adapters.**"]
    assert not cli.get("allow_indirect_imports")


def test_the_facade_and_the_cli_name_adapters_only_through_the_container():
    """`rlctl.api` and the CLI import no adapter module, not even inside a function: they ask a
    container provider (the container names adapters by import path, `lazy(...)`)."""
    entrypoints = REPO_ROOT / "entrypoints" / "rlctl"
    paths = [
        *(entrypoints / "entrypoints" / "cli").rglob("*.py"),
        *(entrypoints / "api").rglob("*.py"),
    ]
    for path in paths:
        assert not any(m.startswith("rlctl.adapters") for m in _imports(path)), path
