"""Push a LeRobot checkpoint with its model card, pull it back into the cache LeRobot loads from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.application.use_cases.pull_policy import PullPolicy, PullPolicyRequest
from rlctl.application.use_cases.push_policy import PushPolicy, PushPolicyRequest
from rlctl.domain.errors import InvalidInput
from rlctl.entrypoints.container import build_container

pytestmark = pytest.mark.timeout(60)

REPO = "alice/act_tiny"
EVAL_INFO = {"overall": {"pc_success": 62.5, "avg_sum_reward": 41.25, "n_episodes": 8}}


def resolve_policy(location) -> Path:
    """A folder or repo id to a local checkpoint, as the container composes `ResolvePolicy`."""
    return build_container().resolve_policy()(location)


@pytest.fixture
def checkpoint(fixtures_dir: Path, tmp_path: Path) -> Path:
    """LeRobot's act_tiny run folder, with stand-in weights (the real ones are 45 MB)."""
    run = tmp_path / "checkpoints" / "000004"
    folder = run / "pretrained_model"
    folder.mkdir(parents=True)
    for source in (fixtures_dir / "act_tiny").iterdir():
        if source.name != "model.safetensors":
            shutil.copy(source, folder / source.name)
            (folder / source.name).chmod(0o644)
    (folder / "model.safetensors").write_bytes(b"stand-in weights")
    (folder / "eval_info.json").write_text(json.dumps(EVAL_INFO))
    (folder / "training_state.log").write_text("not pushed")
    return run


def test_push_then_pull_a_checkpoint_into_the_hub_cache(fake_hub, hub_env, checkpoint):
    result = PushPolicy(HuggingFaceHub())(PushPolicyRequest(str(checkpoint), REPO, tags=("sim",)))

    remote = fake_hub.repo("model", REPO).commits[result.commit]
    assert "training_state.log" not in remote
    pulled = PullPolicy(HuggingFaceHub())(PullPolicyRequest(REPO))
    cache = hub_env / "hub" / "models--alice--act_tiny"
    assert pulled.root == cache / "snapshots" / result.commit
    assert (cache / "refs" / "main").read_text() == result.commit
    folder = checkpoint / "pretrained_model"
    for source in folder.iterdir():
        if source.suffix in (".json", ".safetensors"):
            assert (pulled.root / source.name).read_bytes() == source.read_bytes(), source.name
    assert resolve_policy(REPO) == pulled.root


def test_the_model_card_tells_config_dataset_training_and_metrics(fake_hub, hub_env, checkpoint):
    result = PushPolicy(HuggingFaceHub())(PushPolicyRequest(str(checkpoint), REPO, tags=("sim",)))

    card = fake_hub.repo("model", REPO).commits[result.commit]["README.md"].decode()
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["library_name"] == "lerobot"
    assert header["pipeline_tag"] == "robotics"
    assert header["tags"] == ["robotics", "lerobot", "act", "sim"]
    assert header["datasets"] == ["fixtures/sim_video"]
    assert header["license"] == "apache-2.0"
    assert "| Training steps | 4 |" in card
    assert "| Optimizer | adamw |" in card
    assert "| Success rate (%) | 62.5 |" in card
    assert "`observation.images.front`" in card


def test_a_folder_without_a_policy_config_is_refused(fake_hub, hub_env, tmp_path):
    with pytest.raises(InvalidInput, match="not a policy checkpoint"):
        PushPolicy(HuggingFaceHub())(PushPolicyRequest(str(tmp_path), REPO))

    assert fake_hub.requests == []


def test_a_local_checkpoint_resolves_without_the_hub(fake_hub, hub_env, checkpoint):
    assert resolve_policy(checkpoint) == checkpoint / "pretrained_model"
    assert fake_hub.requests == []
