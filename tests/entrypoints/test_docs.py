"""The docs: the CLI reference matches the commands, and the site builds with every link valid."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "docs" / "gen_cli_reference.py"


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_cli_reference", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator():
    return load_generator()


@pytest.fixture(scope="module")
def page():
    # A fresh interpreter: types other tests register in this process must not leak in.
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import runpy, sys; m = runpy.run_path(sys.argv[1]); sys.stdout.write(m['render']())",
            str(GENERATOR),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return proc.stdout


def test_cli_reference_is_up_to_date(generator, page):
    committed = generator.OUTPUT.read_text(encoding="utf-8")
    assert page == committed, (
        f"{generator.OUTPUT.relative_to(REPO)} is stale; run: {generator.REGENERATE}"
    )


# Types registered by plugins or tests, and the order modules were imported in, must not
# change the page.
STRAY_TYPES = f"""
import importlib.util, sys
import attrs
import rlctl.adapters.sim.envs.metaworld, rlctl.adapters.sim.envs.gym_generic
from rlctl.adapters.sim.config import EnvConfig

@EnvConfig.register("docs_stray_sim")
@attrs.frozen(kw_only=True)
class Stray(EnvConfig):
    pass

spec = importlib.util.spec_from_file_location("gen", {str(GENERATOR)!r})
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)
sys.exit(0 if gen.render() == gen.OUTPUT.read_text(encoding="utf-8") else 1)
"""


def test_cli_reference_ignores_stray_types_and_import_order():
    result = subprocess.run(
        [sys.executable, "-c", STRAY_TYPES], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


def test_cli_reference_covers_every_command(generator, page):
    import click

    from rlctl.entrypoints.cli.main import cli

    for command, ctx in generator.walk(cli, "rlctl"):
        assert f" {ctx.command_path}\n" in page, ctx.command_path
        if isinstance(command, click.Group):
            continue
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert f"`{param.opts[0]}`" in page, f"{ctx.command_path} {param.opts[0]}"


# A page's python examples run in order, in one namespace, in a fresh interpreter; an example
# that cannot run here says why just above its fence.
SKIP_EXAMPLE = "<!-- docs-test: skip ("
RUNNABLE_PAGES = ("docs/guides/embedding.md",)


def python_examples(page: Path) -> list[tuple[int, str, str | None]]:
    """(line, code, why it is skipped or None) of each ```python block of a markdown page."""
    lines = page.read_text(encoding="utf-8").splitlines()
    examples, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            before = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
            skipped = before.startswith(SKIP_EXAMPLE)
            why = before[len(SKIP_EXAMPLE) :].rstrip(") ->") if skipped else None
            end = lines.index("```", i + 1)
            examples.append((i + 1, "\n".join(lines[i + 1 : end]), why))
            i = end
        i += 1
    return examples


@pytest.mark.parametrize("name", RUNNABLE_PAGES)
def test_the_python_examples_of_a_page_run(name, tmp_path):
    examples = python_examples(REPO / name)
    runnable = [(line, code) for line, code, why in examples if why is None]
    assert runnable, f"{name} has no example that runs"
    assert all(why for _, _, why in examples if why is not None), "a skip must say why"
    script = "\n\n".join(f"# {name}:{line}\n{code}" for line, code in runnable)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_settings_tables_list_dotted_overrides_with_defaults(page):
    assert "| `--eval.n_episodes` | `50` |" in page
    assert "| `--policy.type` | `act` |" in page
    # Tagged unions link every kind to its own table of settings.
    assert "[`so101_follower`](#robot-so101_follower)" in page
    assert "#### robot: `so101_follower` {#robot-so101_follower}" in page


@pytest.mark.slow
def test_mkdocs_build_is_strict_and_clean(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (it is in the dev dependency group)")
    site = tmp_path / "site"
    result = subprocess.run(
        [mkdocs, "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (site / "reference" / "cli" / "index.html").is_file()
    assert (site / "examples" / "embedding_service" / "embedding_service.py").is_file()
