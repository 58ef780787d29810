"""One parameter walked from the command line to the adapter that reads it, through each layer
once: the CLI parses it, one container provider composes, the application resolves it (a Hub
repo id becomes a local folder) exactly once, and the adapter receives the local folder.

The container is built by the command as usual; only its Hub (an in-memory one holding a
dataset and a policy), the policy loader, the training backend and the simulation are swapped,
and the two resolvers are wrapped to count what they are asked.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from dependency_injector import providers

import rlctl.entrypoints.container as wiring
from rlctl.adapters.memory.hub import InMemoryHub
from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.adapters.memory.simulator import FakeSimulation
from rlctl.adapters.memory.training import ScriptedTrainingBackend
from rlctl.application.use_cases.push_dataset import PushDatasetRequest
from rlctl.application.use_cases.push_policy import PushPolicyRequest
from rlctl.entrypoints.cli.main import cli

DATASET, POLICY = "alice/sim", "alice/act"


class Counted:
    """Wraps a resolver (`ResolveDataset`, `ResolvePolicy`): every location asked, in order."""

    def __init__(self, resolve) -> None:
        self._resolve = resolve
        self.asked: list[str] = []
        self.answers: list[Path] = []

    def __call__(self, location, **options) -> Path:
        self.asked.append(str(location))
        answer = self._resolve(location, **options)
        self.answers.append(Path(answer))
        return answer


class ConstantPolicy:
    """Acts on the scripted robot (4 joints): the same action every tick."""

    def select_action(self, batch):
        return np.zeros((1, 4), dtype=np.float32)

    def reset(self):
        pass


class Loader:
    """The policy loader: records each location it loads from."""

    def __init__(self, policy) -> None:
        self.policy = policy
        self.loaded: list[str] = []

    def load(self, location, **options):
        self.loaded.append(str(location))
        return self.policy

    def read_config(self, location):
        return self.policy.config


@pytest.fixture
def walk(fixtures_dir: Path, tmp_path: Path, monkeypatch):
    """Every container the command builds gets the same Hub, fakes and counting resolvers."""
    hub = InMemoryHub(tmp_path / "hub")
    seen = {"backend": ScriptedTrainingBackend(), "simulation": FakeSimulation(action_dim=2)}
    build = wiring.build_container

    def with_fakes(*args, **kwargs):
        container = build(*args, **kwargs)
        container.hub.override(providers.Object(hub))
        for name in ("resolve_dataset", "resolve_policy"):
            counted = seen.setdefault(name, Counted(getattr(container, name)()))
            getattr(container, name).override(providers.Object(counted))
        container.training_backend.override(providers.Object(seen["backend"]))
        container.simulation.override(providers.Callable(lambda env: seen["simulation"]))
        if "loader" in seen:
            container.policy_loader.override(providers.Object(seen["loader"]))
        return container

    # What the Hub holds: LeRobot's sim_video dataset, and a checkpoint of stand-in weights.
    setup = build()
    setup.hub.override(providers.Object(hub))
    setup.push_dataset()(PushDatasetRequest(str(fixtures_dir / "sim_video"), DATASET))
    checkpoint = tmp_path / "act"
    shutil.copytree(fixtures_dir / "act_tiny", checkpoint)
    (checkpoint / "model.safetensors").write_bytes(b"stand-in weights")
    setup.push_policy()(PushPolicyRequest(str(checkpoint), POLICY))

    monkeypatch.setattr(wiring, "build_container", with_fakes)
    monkeypatch.chdir(tmp_path)
    return seen


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--progress=silent"])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.slow  # imports the dataset and Hub stacks (pyarrow, huggingface_hub) on first use
def test_train_a_dataset_repo_id_reaches_the_backend_as_its_local_folder_resolved_once(walk):
    walk["loader"] = Loader(ScriptedPolicy(2))  # not asked: the run starts from scratch
    run(
        "train",
        f"--dataset.repo_id={DATASET}",
        "--policy.type=mlp",
        "--steps=2",
        "--output_dir=run",
    )
    resolved = walk["resolve_dataset"]
    assert resolved.asked == [DATASET]  # once: by the use case, nowhere else
    (plan,) = walk["backend"].record.plans
    assert plan.dataset_root == resolved.answers[0] and plan.dataset_root.is_dir()
    assert plan.settings.dataset.repo_id == DATASET  # the settings keep what the user typed
    assert plan.dataset.total_episodes == 3  # read once, from that folder, by the use case
    assert walk["loader"].loaded == []


def test_eval_a_policy_repo_id_reaches_the_loader_as_its_local_folder_resolved_once(walk):
    walk["loader"] = Loader(ScriptedPolicy(2))
    run(
        "eval",
        f"--policy.path={POLICY}",
        "--eval.n_episodes=1",
        "--eval.batch_size=1",
        "--eval.max_episodes_rendered=0",
        "--output_dir=eval",
    )
    resolved = walk["resolve_policy"]
    assert resolved.asked == [POLICY]
    assert walk["loader"].loaded == [str(resolved.answers[0])]
    assert (resolved.answers[0] / "config.json").is_file()


def test_record_a_policy_repo_id_and_a_dataset_root_reach_their_adapters(walk, tmp_path):
    walk["loader"] = Loader(ConstantPolicy())
    output = run(
        "record",
        "--robot.type=scripted",
        f"--policy.path={POLICY}",
        "--dataset.root=recorded",
        "--dataset.single_task=pick",
        "--dataset.num_episodes=1",
        "--dataset.fps=10",
        "--dataset.episode_time_s=0.3",
        "--dataset.reset_time_s=0",
        "--controls=off",
    )
    resolved = walk["resolve_policy"]
    assert resolved.asked == [POLICY]
    assert walk["loader"].loaded == [str(resolved.answers[0])]
    # The dataset root is a folder: no resolver sees it; the writer creates it where given.
    assert walk.get("resolve_dataset") is None or walk["resolve_dataset"].asked == []
    assert (tmp_path / "recorded" / "meta" / "info.json").is_file()
    assert "recorded 1 episode(s)" in output
