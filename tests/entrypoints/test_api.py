"""The embedding facade on real files: open, write, inspect, load — and a fake swapped in."""

import numpy as np
import pytest
from dependency_injector import providers

import rlctl.api
from rlctl.adapters.memory.dataset_store import InMemoryDatasetStore
from rlctl.domain.errors import DatasetNotFound, FeatureMismatch


def test_open_dataset_returns_lerobot_items(fixtures_dir):
    ds = rlctl.api.open_dataset(
        fixtures_dir / "sim_images", delta_timestamps={"action": [0.0, 0.1, 0.2]}
    )
    item = ds[0]
    assert len(ds) == 27
    assert tuple(item["action"].shape) == (3, 6)
    assert item["action_is_pad"].tolist() == [False, False, False]
    assert tuple(item["observation.images.front"].shape) == (3, 48, 64)
    assert item["task"] == "pick the cube"


def test_create_then_reopen(tmp_path):
    features = {
        "observation.state": {"dtype": "float32", "shape": [2], "names": ["a", "b"]},
        "action": {"dtype": "float32", "shape": [2], "names": ["a", "b"]},
    }
    session = rlctl.api.create_dataset(tmp_path / "ds", fps=5, features=features)
    for i in range(4):
        v = np.full(2, i, dtype=np.float32)
        session.add_frame({"observation.state": v, "action": v, "task": "wave"})
    session.save_episode()
    with pytest.raises(FeatureMismatch, match="action"):
        session.add_frame(
            {
                "observation.state": np.zeros(2, np.float32),
                "action": np.zeros(3, np.float32),
                "task": "wave",
            }
        )
    session.finalize()
    summary = rlctl.api.inspect_dataset(tmp_path / "ds")
    assert summary.total_frames == 4 and summary.tasks == ("wave",)
    item = rlctl.api.open_dataset(tmp_path / "ds")[3]
    assert item["action"].tolist() == [3.0, 3.0]


def test_load_policy_predicts(fixtures_dir):
    policy = rlctl.api.load_policy(fixtures_dir / "act_tiny")
    ref = np.load(fixtures_dir / "act_tiny.reference.npz")
    frame = sorted({k.split("/")[0] for k in ref.files})[0]
    batch = {k.split("/", 2)[2]: ref[k] for k in ref.files if k.startswith(f"{frame}/input/")}
    chunk = policy.predict_chunk(batch)
    expected = ref[f"{frame}/output/action_chunk"]
    np.testing.assert_allclose(np.asarray(chunk.actions), expected, atol=1e-4)


def test_a_fake_store_swapped_in():
    store = InMemoryDatasetStore()
    c = rlctl.api.container(
        rlctl.api.AppSettings(dataset=rlctl.api.DatasetSettings(store="memory"))
    )
    c.meta_reader.override(providers.Object(store))
    with pytest.raises(DatasetNotFound):
        rlctl.api.inspect_dataset("mem-only/name", using=c)


def test_rollout_runs_a_policy_on_a_robot_and_records_with_the_guard(tmp_path):
    """`rlctl.api.rollout` as a service embeds it: a container with the policy swapped in, the
    scripted robot, a sentry recording; what it records passes the dataset check."""
    from rlctl.adapters.memory.policy import InMemoryPolicyLoader, ScriptedPolicy
    from rlctl.domain.errors import ConfigError

    calls = []

    def chunker(batch):
        calls.append(1)
        state = np.asarray(batch["observation.state"], dtype=np.float32)
        steps = np.arange(1, 9, dtype=np.float32)[None, :, None] * 0.05
        out = state[:, None, :] + steps
        if len(calls) == 2:
            out[:, 3, 0] = np.nan  # a chunk with a NaN never reaches the motors: held instead
        return out

    policy = ScriptedPolicy(3, chunk_size=8, chunker=chunker)

    c = rlctl.api.container(rlctl.api.AppSettings(progress="silent"))
    c.resolve_policy.override(providers.Object(lambda location: location))
    c.policy_loader.override(providers.Object(InMemoryPolicyLoader({"me/p": policy})))
    robot = {"type": "scripted", "joints": ["a", "b", "c"]}
    report = rlctl.api.rollout(
        robot,
        policy="me/p",
        strategy={"type": "sentry"},
        inference="async",
        dataset=tmp_path / "rollout_arm",
        task="wave",
        fps=20,
        duration_s=1.0,
        return_to_initial_position=False,
        using=c,
    )
    info = report.to_info()
    assert info["strategy"] == "sentry" and info["ticks"] == 20 and info["frames"] == 20
    assert len(calls) >= 3  # the refused chunk was asked for again
    assert rlctl.api.inspect_dataset(tmp_path / "rollout_arm", using=c).total_frames == 20
    actions = rlctl.api.open_dataset(tmp_path / "rollout_arm", using=c)
    assert all(np.isfinite(np.asarray(actions[i]["action"])).all() for i in range(20))
    with pytest.raises(ConfigError, match="no policy given"):
        rlctl.api.rollout(robot, using=c)
