"""`dataset push | pull` and `policy push | pull` as typed, against the fake Hub.

Until the container serves the Hub use cases, the test wires them itself, the same way the
container is meant to (see `WIRING`); once wired there, the real container is used.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from dependency_injector import providers

from rlctl.entrypoints import container as container_module
from rlctl.entrypoints.cli.lazy_group import LazyGroup
from rlctl.entrypoints.cli.main import RlctlGroup
from rlctl.entrypoints.container import Container, lazy

pytestmark = pytest.mark.timeout(60)

USE_CASES = "rlctl.application.use_cases"


class WiredContainer(Container):
    hub = providers.Singleton(lazy("rlctl.adapters.hub.huggingface:HuggingFaceHub"))
    dataset_layout = providers.Singleton(lazy("rlctl.adapters.hub.layout:LeRobotLayout"))
    push_dataset = providers.Factory(
        lazy(f"{USE_CASES}.push_dataset:PushDataset"),
        hub=hub,
        meta_reader=Container.meta_reader,
        layout=dataset_layout,
    )
    pull_dataset = providers.Factory(
        lazy(f"{USE_CASES}.pull_dataset:PullDataset"),
        hub=hub,
        meta_reader=Container.meta_reader,
        layout=dataset_layout,
    )
    push_policy = providers.Factory(lazy(f"{USE_CASES}.push_policy:PushPolicy"), hub=hub)
    pull_policy = providers.Factory(lazy(f"{USE_CASES}.pull_policy:PullPolicy"), hub=hub)


@pytest.fixture(autouse=True)
def wired(monkeypatch):
    if hasattr(Container, "pull_dataset"):
        return
    original = container_module.build_container

    def build(settings=None):
        built = WiredContainer()
        built.config.from_dict(original(settings).config())
        return built

    monkeypatch.setattr(container_module, "build_container", build)


def group(module: str) -> LazyGroup:
    return RlctlGroup(
        name="rlctl",
        lazy_subcommands={"push": f"{module}:push", "pull": f"{module}:pull"},
    )


DATASET = "rlctl.entrypoints.cli.hub_dataset"
POLICY = "rlctl.entrypoints.cli.hub_policy"


def test_dataset_push_then_pull_some_episodes(fake_hub, hub_env, sim_video_copy):
    runner = CliRunner()

    pushed = runner.invoke(
        group(DATASET),
        ["push", str(sim_video_copy), "--repo-id", "alice/sim", "--tags", "a,b", "--json"],
    )

    assert pushed.exit_code == 0, pushed.output
    assert json.loads(pushed.stdout)["version_tag"] == "v3.0"
    pulled = runner.invoke(group(DATASET), ["pull", "alice/sim", "--episodes", "0-1", "--json"])
    assert pulled.exit_code == 0, pulled.output
    answer = json.loads(pulled.stdout)
    assert answer["episodes"] == [0, 1]
    assert (Path(answer["root"]) / "meta" / "info.json").is_file()


def test_dataset_pull_of_a_missing_repo_is_one_error_and_a_hint(fake_hub, hub_env):
    result = CliRunner().invoke(group(DATASET), ["pull", "alice/missing"])

    assert result.exit_code == 1
    assert "error: dataset alice/missing@v3.0: no dataset repo 'alice/missing'" in result.output
    assert "hint: " in result.output
    assert "Traceback" not in result.output


def test_policy_push_then_pull(fake_hub, hub_env, fixtures_dir, tmp_path):
    folder = tmp_path / "pretrained_model"
    folder.mkdir()
    for name in ("config.json", "train_config.json"):
        shutil.copy(fixtures_dir / "act_tiny" / name, folder / name)
    (folder / "model.safetensors").write_bytes(b"stand-in weights")
    runner = CliRunner()

    pushed = runner.invoke(group(POLICY), ["push", str(folder), "--repo-id", "alice/act"])
    pulled = runner.invoke(group(POLICY), ["pull", "alice/act", "--json"])

    assert pushed.exit_code == 0, pushed.output
    assert pushed.stdout.startswith("pushed 4 files to ")
    assert pulled.exit_code == 0, pulled.output
    root = Path(json.loads(pulled.stdout)["root"])
    assert (root / "model.safetensors").read_bytes() == b"stand-in weights"
