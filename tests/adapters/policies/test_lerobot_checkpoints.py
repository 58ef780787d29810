"""LeRobot 0.6.1's checkpoints load in rlctl and predict LeRobot's chunks; rlctl saves them back
in the same layout (and, when a LeRobot environment is at hand, LeRobot loads what rlctl saved)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from rlctl.adapters.policies.loaded_policy import LoadedPolicy, load_policy_folder

TOLERANCE = 1e-4
CHECKPOINTS = ["act_tiny", "diffusion_tiny"]
LEROBOT_SCRIPT = Path(__file__).with_name("lerobot_predict.py")


def reference_frames(arrays: np.lib.npyio.NpzFile) -> list[int]:
    return sorted({int(key.split("/")[0]) for key in arrays.files})


def inputs_of(arrays: np.lib.npyio.NpzFile, j: int) -> dict[str, np.ndarray]:
    prefix = f"{j}/input/"
    return {k[len(prefix) :]: arrays[k] for k in arrays.files if k.startswith(prefix)}


def predict_all(policy: LoadedPolicy, arrays: np.lib.npyio.NpzFile) -> dict[int, np.ndarray]:
    out = {}
    for j in reference_frames(arrays):
        noise = arrays[f"{j}/noise"] if f"{j}/noise" in arrays.files else None
        out[j] = policy.predict_chunk(inputs_of(arrays, j), noise=noise).actions.numpy()
    return out


@pytest.fixture(scope="module")
def loaded(fixtures_dir: Path):
    """Each fixture checkpoint loaded once per module; `reset()` before use."""
    cache: dict[str, LoadedPolicy] = {}

    def get(name: str) -> LoadedPolicy:
        if name not in cache:
            cache[name] = load_policy_folder(fixtures_dir / name, device="cpu")
        cache[name].reset()
        return cache[name]

    return get


@pytest.fixture(params=CHECKPOINTS)
def checkpoint(request, loaded, fixtures_dir: Path) -> tuple[str, Path, LoadedPolicy]:
    name = request.param
    return name, fixtures_dir / name, loaded(name)


def test_predicts_lerobots_chunks(checkpoint, fixtures_dir: Path) -> None:
    name, _, policy = checkpoint
    arrays = np.load(fixtures_dir / f"{name}.reference.npz")
    predictions = predict_all(policy, arrays)
    assert predictions
    for j, chunk in predictions.items():
        expected = arrays[f"{j}/output/action_chunk"]
        assert chunk.shape == expected.shape
        np.testing.assert_allclose(chunk, expected, atol=TOLERANCE, rtol=0)


def test_reference_shapes(checkpoint) -> None:
    name, _, policy = checkpoint
    config = policy.config
    steps = config.chunk_size if name == "act_tiny" else config.n_action_steps
    assert (steps, config.action_dim) == ((5, 6) if name == "act_tiny" else (4, 6))
    assert set(policy.input_features) == {"observation.state", "observation.images.front"}
    assert policy.output_features["action"].shape == (6,)


@pytest.mark.slow
def test_saved_checkpoint_matches_lerobots_and_predicts_the_same(
    checkpoint, fixtures_dir: Path, tmp_path: Path
) -> None:
    name, folder, policy = checkpoint
    saved = policy.save(tmp_path / "saved")
    for file in ("config.json", "policy_preprocessor.json", "policy_postprocessor.json"):
        assert json.loads((saved / file).read_text()) == json.loads((folder / file).read_text())
    for state_file in folder.glob("policy_*processor_step_*.safetensors"):
        ours, theirs = load_file(str(saved / state_file.name)), load_file(str(state_file))
        assert set(ours) == set(theirs)
        for key, value in theirs.items():
            np.testing.assert_array_equal(ours[key], value)
    ours, theirs = (load_file(str(f / "model.safetensors")) for f in (saved, folder))
    assert set(ours) == set(theirs)
    assert all(np.array_equal(ours[k], theirs[k]) for k in theirs)

    arrays = np.load(fixtures_dir / f"{name}.reference.npz")
    reloaded = load_policy_folder(saved, device="cpu")
    before, after = predict_all(policy, arrays), predict_all(reloaded, arrays)
    assert all(np.array_equal(before[j], after[j]) for j in before)


def test_unbatched_observation_gets_a_batch_axis(loaded, fixtures_dir: Path) -> None:
    policy = loaded("act_tiny")
    arrays = np.load(fixtures_dir / "act_tiny.reference.npz")
    single = {k: v[0] for k, v in inputs_of(arrays, 0).items()}
    chunk = policy.predict_chunk(single).actions
    np.testing.assert_allclose(chunk.numpy(), arrays["0/output/action_chunk"], atol=TOLERANCE)


def test_select_action_pops_the_chunk_in_order(loaded, fixtures_dir: Path) -> None:
    policy = loaded("act_tiny")
    arrays = np.load(fixtures_dir / "act_tiny.reference.npz")
    observation = inputs_of(arrays, 0)
    expected = arrays["0/output/action_chunk"][0]
    actions = [policy.select_action(observation) for _ in range(expected.shape[0])]
    np.testing.assert_allclose(np.concatenate(actions), expected, atol=TOLERANCE)


@pytest.mark.slow
@pytest.mark.lerobot
@pytest.mark.parametrize("name", CHECKPOINTS)
def test_lerobot_loads_what_rlctl_saved(
    lerobot, name: str, fixtures_dir: Path, tmp_path: Path
) -> None:
    saved = load_policy_folder(fixtures_dir / name, device="cpu").save(tmp_path / name)
    reference = fixtures_dir / f"{name}.reference.npz"
    report = lerobot(LEROBOT_SCRIPT, saved, reference, timeout=900)
    assert report["frames"] > 0
    assert report["max_abs_error"] <= TOLERANCE
