"""PlanTraining: what a run trains with is decided once, in the application, from in-memory
adapters: the dataset and the pretrained checkpoint resolved once per process (the main one
first), the policy completed from the dataset, relative-action statistics computed by the main
process and shared, the optimiser preset chosen."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.dataset_store import InMemoryDatasetStore
from rlctl.adapters.memory.dataset_tools import InMemoryStatsAccess
from rlctl.adapters.memory.policy import InMemoryPolicyLoader, ScriptedPolicy
from rlctl.adapters.memory.training import ScriptedProcesses, ScriptedTrainingBackend
from rlctl.application.ports.training import CheckpointRef
from rlctl.application.use_cases.train_plan import PlanTraining
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import ConfigError, NotSupported
from rlctl.domain.features import features_from_info
from rlctl.domain.policies import ACTConfig, MLPConfig
from rlctl.domain.train_settings import DatasetSource, TrainSettings

NAMES = ["shoulder", "elbow", "gripper"]
FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [3], "names": NAMES},
    "action": {"dtype": "float32", "shape": [3], "names": NAMES},
    "observation.images.top": {
        "dtype": "video",
        "shape": [48, 64, 3],
        "names": ["height", "width", "channels"],
    },
}
META = DatasetMeta(
    codebase_version="v3.0",
    fps=10,
    features=features_from_info(FEATURES),
    total_episodes=2,
    total_frames=12,
    tasks=(),
    episodes=(),
)
REPO = "alice/cubes"
PULLED = "cache/alice/cubes"


class Resolver:
    """Records what it is asked to resolve; a repo id becomes `to`."""

    def __init__(self, to: str) -> None:
        self.to = to
        self.calls: list[tuple[str, dict]] = []

    def __call__(self, location, **options) -> Path:
        self.calls.append((str(location), options))
        return Path(self.to)


def columns(episodes: int = 2, length: int = 6):
    rng = np.random.default_rng(0)
    return {
        PULLED: {
            e: {
                "action": rng.standard_normal((length, 3)).astype(np.float32),
                "observation.state": rng.standard_normal((length, 3)).astype(np.float32),
            }
            for e in range(episodes)
        }
    }


@pytest.fixture
def world():
    store = InMemoryDatasetStore({PULLED: META, "data/local": META})
    pretrained = ScriptedPolicy(3)
    loader = InMemoryPolicyLoader({"ckpt/act": pretrained})
    datasets, policies = Resolver(PULLED), Resolver("ckpt/act")
    plan = PlanTraining(
        resolve_dataset=datasets,
        streams=store,
        meta_reader=store,
        resolve_policy=policies,
        policies=loader,
        columns=InMemoryStatsAccess(columns()),
    )
    return plan, datasets, policies, pretrained


def settings(**overrides) -> TrainSettings:
    fields = dict(dataset=DatasetSource(repo_id=REPO), policy=MLPConfig(), output_dir="runs/a")
    return TrainSettings(**{**fields, **overrides})


def test_a_repo_id_is_resolved_once_and_the_policy_completed_from_the_dataset(world):
    plan, datasets, _, _ = world
    processes = ScriptedTrainingBackend().join(settings())

    made = plan(settings(), None, processes)

    assert datasets.calls == [(REPO, {"revision": None, "episodes": None})]
    assert made.dataset_root == Path(PULLED) and made.dataset is META
    # The MLP never looks at cameras: they are left out, so never decoded.
    assert set(made.settings.policy.input_features) == {"observation.state"}
    assert set(made.settings.policy.output_features) == {"action"}
    assert made.settings.policy.device == "cpu"
    assert made.optimizer.type == "adamw" and made.scheduler is None  # the MLP preset
    assert made.pretrained is None and made.action_stats is None and made.resume is None


def test_a_local_root_is_taken_as_it_is(world):
    plan, datasets, _, _ = world
    local = settings(dataset=DatasetSource(root="data/local"))
    made = plan(local, None, ScriptedTrainingBackend().join(local))
    assert made.dataset_root == Path("data/local") and datasets.calls == []


def test_under_several_processes_the_main_one_pulls_before_the_others(world):
    plan, datasets, _, _ = world
    backend = ScriptedTrainingBackend()
    main = ScriptedProcesses(backend, rank=0, size=2)
    plan(settings(), None, main)
    assert len(datasets.calls) == 1 and backend.record.barriers == 1

    other = ScriptedProcesses(backend, rank=1, size=2)
    plan(settings(), None, other)
    # The other rank waited at the barrier first, then found the main one's copy.
    assert len(datasets.calls) == 2 and backend.record.barriers == 2


def test_relative_action_statistics_are_computed_by_the_main_process_and_shared(world):
    plan, _, _, _ = world
    relative = settings(policy=MLPConfig(use_relative_actions=True, chunk_size=3, n_action_steps=3))
    backend = ScriptedTrainingBackend()

    made = plan(relative, None, ScriptedProcesses(backend, rank=0, size=2))
    assert list(made.settings.policy.action_feature_names) == NAMES
    assert set(made.action_stats) >= {"mean", "std", "min", "max"}

    shared = {"mean": [0.0] * 3}
    other = plan(relative, None, ScriptedProcesses(backend, rank=1, size=2, shared=shared))
    assert other.action_stats == shared  # not computed again off the main process


def test_relative_actions_refuse_streaming(world):
    plan, _, _, _ = world
    streamed = settings(
        dataset=DatasetSource(repo_id=PULLED, streaming=True),
        policy=MLPConfig(use_relative_actions=True, chunk_size=3, n_action_steps=3),
    )
    with pytest.raises(NotSupported, match="streaming does not read ahead"):
        plan(streamed, None, ScriptedTrainingBackend().join(streamed))


def test_a_pretrained_checkpoint_is_resolved_once_and_checked(world):
    plan, _, policies, pretrained = world
    fine = settings(
        policy=attrs_evolve(pretrained.config, pretrained_path="bob/act", pretrained_revision="v1")
    )
    made = plan(fine, None, ScriptedTrainingBackend().join(fine))
    assert policies.calls == [("bob/act", {"revision": "v1"})]
    assert made.pretrained == Path("ckpt/act")

    other_type = settings(policy=ACTConfig(pretrained_path="bob/act"))
    with pytest.raises(ConfigError, match="the pretrained policy is"):
        plan(other_type, None, ScriptedTrainingBackend().join(other_type))


def test_a_resumed_run_trains_what_train_policy_read_from_the_checkpoint(world):
    plan, _, policies, _ = world
    resumed = settings(policy=MLPConfig(hidden_dims=(8,)))
    made = plan(
        resumed,
        CheckpointRef("runs/a/checkpoints/000004", 4),
        ScriptedTrainingBackend().join(resumed),
    )
    assert made.resume == CheckpointRef("runs/a/checkpoints/000004", 4)
    assert made.settings.policy == resumed.policy  # not completed again
    assert policies.calls == [] and made.action_stats is None


def attrs_evolve(config, **changes):
    import attrs

    return attrs.evolve(config, **changes)
