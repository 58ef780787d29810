"""rlctl's own checkpoints: save -> load gives the same policy; broken folders name the file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rlctl.adapters.policies.checkpoint import read_config, write_config
from rlctl.adapters.policies.errors import (
    CheckpointError,
    CheckpointMismatch,
    CheckpointNotFound,
    UnknownPolicyType,
)
from rlctl.adapters.policies.loaded_policy import (
    LeRobotPolicyLoader,
    LoadedPolicy,
    create_policy,
    load_policy_folder,
)
from rlctl.application.ports.policy import Policy, PolicyLoader
from rlctl.domain.errors import ConfigError, FeatureMismatch, InvalidInput, RlctlError
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import MLPConfig
from rlctl.domain.remote_inference import NonFiniteChunk

STATS = {
    "observation.state": {
        "mean": np.array([1.0, -2.0, 0.5]),
        "std": np.array([2.0, 0.5, 1.0]),
    },
    "action": {"mean": np.array([0.1, 0.2]), "std": np.array([3.0, 0.25])},
}


def mlp_policy() -> LoadedPolicy:
    torch.manual_seed(0)
    config = MLPConfig(
        input_features={"observation.state": typed_feature("STATE", (3,))},
        output_features={"action": typed_feature("ACTION", (2,))},
        chunk_size=4,
        n_action_steps=2,
        hidden_dims=(16,),
    )
    return create_policy(config, STATS, device="cpu")


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    return mlp_policy().save(tmp_path / "policy")


OBSERVATION = {"observation.state": np.array([[0.5, -1.0, 2.0], [1.0, 1.0, 1.0]], np.float32)}


def test_loaded_policy_serves_the_ports(saved: Path) -> None:
    loader: PolicyLoader = LeRobotPolicyLoader()
    policy: Policy = loader.load(saved, device="cpu")
    assert set(policy.input_features) == {"observation.state"}
    assert policy.predict_chunk(OBSERVATION).actions.shape == (2, 4, 2)


def test_round_trip_predicts_identically(saved: Path) -> None:
    original = mlp_policy()
    reloaded = load_policy_folder(saved)
    expected = original.predict_chunk(OBSERVATION).actions
    assert torch.equal(reloaded.predict_chunk(OBSERVATION).actions, expected)
    # Actions come back in the dataset's units: the post-processor undoes the normalisation.
    raw = original.model.predict_chunk({"observation.state": torch.zeros(1, 3)})
    unnormalised = original.predict_chunk({"observation.state": STATS["observation.state"]["mean"]})
    scale, shift = torch.tensor([3.0, 0.25]), torch.tensor([0.1, 0.2])
    assert torch.allclose(unnormalised.actions, raw * scale + shift, atol=1e-6)


def test_select_action_follows_the_chunk(saved: Path) -> None:
    policy = load_policy_folder(saved)
    chunk = policy.predict_chunk(OBSERVATION).actions
    policy.reset()
    first, second = policy.select_action(OBSERVATION), policy.select_action(OBSERVATION)
    assert isinstance(first, np.ndarray) and first.shape == chunk[:, 0].shape
    assert np.allclose(first, chunk[:, 0]) and np.allclose(second, chunk[:, 1])


def test_observations_between_chunks_are_not_preprocessed(saved: Path) -> None:
    policy = load_policy_folder(saved)
    calls = []
    process_batch = policy.preprocessor.process_batch
    policy.preprocessor.process_batch = lambda batch: calls.append(1) or process_batch(batch)
    chunk = policy.predict_chunk(OBSERVATION).actions
    policy.reset()
    calls.clear()
    # n_action_steps=2: the observation is read at ticks 0 and 2 only; ticks 1 and 3 pop.
    actions = [policy.select_action(OBSERVATION) for _ in range(4)]
    assert len(calls) == 2
    assert np.allclose(actions[1], chunk[:, 1]) and np.allclose(actions[2], chunk[:, 0])


def test_a_training_run_folder_is_found_by_its_pretrained_model(tmp_path: Path) -> None:
    mlp_policy().save(tmp_path / "checkpoints" / "last" / "pretrained_model")
    assert load_policy_folder(tmp_path / "checkpoints" / "last").config.type_name == "mlp"


def test_saving_over_a_checkpoint_replaces_it(saved: Path) -> None:
    (saved / "stale.txt").write_text("old")
    mlp_policy().save(saved)
    assert not (saved / "stale.txt").exists()
    assert not list(saved.parent.glob(".*rlctl-*"))


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(CheckpointNotFound) as caught:
        load_policy_folder(tmp_path / "nowhere")
    assert "nowhere" in str(caught.value)


@pytest.mark.parametrize(
    "file",
    [
        "model.safetensors",
        "config.json",
        "policy_preprocessor.json",
        "policy_postprocessor_step_0_unnormalizer_processor.safetensors",
    ],
)
def test_missing_file_is_named(saved: Path, file: str) -> None:
    (saved / file).unlink()
    with pytest.raises(CheckpointNotFound) as caught:
        load_policy_folder(saved)
    assert caught.value.where == str(saved / file)
    assert caught.value.hint


def test_wrong_shapes_list_the_offending_keys(saved: Path) -> None:
    config = json.loads((saved / "config.json").read_text())
    config["hidden_dims"] = [8]
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointMismatch) as caught:
        load_policy_folder(saved)
    error = caught.value
    assert error.where == str(saved / "model.safetensors")
    assert "network.0.weight (model [8, 3], file [16, 3])" in error.message
    assert "network.2.weight" in error.message


def test_missing_and_unexpected_keys_are_listed(saved: Path) -> None:
    config = json.loads((saved / "config.json").read_text())
    config["hidden_dims"] = [16, 16]
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointMismatch, match=r"keys missing from the file: network\.4"):
        load_policy_folder(saved)


def test_unknown_policy_type_names_the_config(saved: Path) -> None:
    config = json.loads((saved / "config.json").read_text())
    config["type"] = "not_a_policy_type"
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnknownPolicyType) as caught:
        load_policy_folder(saved)
    assert str(saved / "config.json") in str(caught.value)
    assert "act" in (caught.value.hint or "") and "diffusion" in (caught.value.hint or "")


def test_invalid_config_value_names_the_file(saved: Path) -> None:
    config = json.loads((saved / "config.json").read_text())
    config["n_action_steps"] = 9
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="n_action_steps") as caught:
        load_policy_folder(saved)
    assert str(saved / "config.json") in str(caught.value)


def test_keys_from_a_newer_lerobot_are_ignored(saved: Path) -> None:
    config = json.loads((saved / "config.json").read_text())
    config["some_future_option"] = True
    (saved / "config.json").write_text(json.dumps(config))
    assert load_policy_folder(saved).config.chunk_size == 4


@pytest.mark.parametrize("file", ["model.safetensors", "config.json", "policy_postprocessor.json"])
def test_damaged_files_are_named(saved: Path, file: str) -> None:
    (saved / file).write_bytes(b"\x00garbage")
    with pytest.raises(RlctlError) as caught:
        load_policy_folder(saved)
    assert str(saved / file) in str(caught.value)


def test_unknown_processor_step_names_the_pipeline_file(saved: Path) -> None:
    data = json.loads((saved / "policy_preprocessor.json").read_text())
    data["steps"].append({"registry_name": "tokenizer_processor", "config": {}})
    (saved / "policy_preprocessor.json").write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match="tokenizer_processor") as caught:
        load_policy_folder(saved)
    assert str(saved / "policy_preprocessor.json") in str(caught.value)


@pytest.mark.parametrize("name", ["act_tiny", "diffusion_tiny"])
def test_a_lerobot_config_json_is_written_back_key_for_key(
    name: str, fixtures_dir: Path, tmp_path: Path
) -> None:
    # rlctl-only fields at their defaults (relative actions off) stay out of LeRobot's file.
    folder = fixtures_dir / name
    written = write_config(read_config(folder), tmp_path)
    assert json.loads(written.read_text()) == json.loads((folder / "config.json").read_text())


# --- a checkpoint reads nothing outside its folder --------------------------------------------


def _normalizer_entry(saved: Path) -> tuple[dict, int]:
    data = json.loads((saved / "policy_preprocessor.json").read_text())
    index = next(i for i, step in enumerate(data["steps"]) if step.get("state_file"))
    return data, index


@pytest.mark.parametrize(
    "state_file",
    [
        "/etc/passwd",
        "../outside.safetensors",
        "sub/../../outside.safetensors",
        "~/outside.safetensors",
        "C:\\outside.safetensors",
        "..\\outside.safetensors",
        "",
        7,
    ],
)
def test_a_state_file_outside_the_checkpoint_is_refused(saved: Path, state_file) -> None:
    # A real safetensors file sits where the path points: only the location is wrong.
    (saved.parent / "outside.safetensors").write_bytes(
        (saved / "policy_postprocessor_step_0_unnormalizer_processor.safetensors").read_bytes()
    )
    data, index = _normalizer_entry(saved)
    data["steps"][index]["state_file"] = state_file
    (saved / "policy_preprocessor.json").write_text(json.dumps(data))
    with pytest.raises(CheckpointError) as caught:
        load_policy_folder(saved)
    assert caught.value.where == f"{saved / 'policy_preprocessor.json'}: steps[{index}].state_file"
    assert "relative to its own folder" in (caught.value.hint or "")


def test_a_state_file_linked_out_of_the_checkpoint_is_refused(saved: Path) -> None:
    data, index = _normalizer_entry(saved)
    name = data["steps"][index]["state_file"]
    outside = saved.parent / "elsewhere.safetensors"
    (saved / name).rename(outside)
    (saved / name).symlink_to(outside)
    with pytest.raises(CheckpointError, match="outside the checkpoint folder") as caught:
        load_policy_folder(saved)
    assert caught.value.where == f"{saved / 'policy_preprocessor.json'}: steps[{index}].state_file"


def test_a_state_file_in_a_subfolder_of_the_checkpoint_is_fine(saved: Path) -> None:
    data, index = _normalizer_entry(saved)
    name = data["steps"][index]["state_file"]
    (saved / "state").mkdir()
    (saved / name).rename(saved / "state" / name)
    data["steps"][index]["state_file"] = f"state/{name}"
    (saved / "policy_preprocessor.json").write_text(json.dumps(data))
    assert load_policy_folder(saved).config.type_name == "mlp"


@pytest.mark.parametrize("file", ["config.json", "model.safetensors", "policy_postprocessor.json"])
def test_a_checkpoint_file_linked_out_of_the_folder_is_refused(saved: Path, file: str) -> None:
    outside = saved.parent / f"elsewhere-{file}"
    (saved / file).rename(outside)
    (saved / file).symlink_to(outside)
    with pytest.raises(CheckpointError, match="outside the checkpoint folder") as caught:
        load_policy_folder(saved)
    assert str(saved / file) in str(caught.value)


def test_a_hub_cache_snapshot_linking_into_its_blobs_loads(tmp_path: Path) -> None:
    """huggingface_hub's cache: snapshots/<commit>/<file> -> ../../blobs/<hash>."""
    source = mlp_policy().save(tmp_path / "policy")
    repo = tmp_path / "models--someone--mlp"
    snapshot, blobs = repo / "snapshots" / "0123abcd", repo / "blobs"
    snapshot.mkdir(parents=True)
    blobs.mkdir()
    for number, file in enumerate(sorted(source.iterdir())):
        file.rename(blobs / f"blob{number}")
        (snapshot / file.name).symlink_to(Path("..", "..", "blobs", f"blob{number}"))
    assert load_policy_folder(snapshot).config.type_name == "mlp"


@pytest.mark.parametrize(
    ("observation", "complaint"),
    [
        ({}, r"it reads observation.state \(3,\), which the observation lacks"),
        (
            {"observation.stat": OBSERVATION["observation.state"]},
            r"it reads observation.state \(3,\), which the observation lacks",
        ),
        (
            {"observation.state": np.zeros((1, 5), np.float32)},
            r"it reads observation.state as \(3,\), the observation has \(1, 5\)",
        ),
        (
            {"observation.state": np.array([[None, 1, 2]], dtype=object)},
            "it reads observation.state as numbers, the observation has an array of object",
        ),
    ],
)
def test_an_observation_the_policy_cannot_read_is_refused_as_policy_serve_refuses_it(
    saved: Path, observation, complaint: str
) -> None:
    policy = load_policy_folder(saved)
    for ask in (policy.predict_chunk, policy.select_action):
        with pytest.raises(FeatureMismatch, match=complaint) as raised:
            ask(observation)
        assert raised.value.where == "observation" and str(saved) in raised.value.message
    # A single observation without its batch axis is still read.
    assert policy.predict_chunk({"observation.state": np.zeros(3, np.float32)}).actions.shape == (
        1,
        4,
        2,
    )


def test_nothing_is_predicted_from_nan_and_no_nan_action_is_returned(saved: Path) -> None:
    policy = load_policy_folder(saved)
    state = np.array([[np.nan, 0.0, 0.0]], np.float32)
    for ask in (policy.predict_chunk, policy.select_action):
        with pytest.raises(InvalidInput, match=r"observation\.state holds NaN or infinite values"):
            ask({"observation.state": state})
    with torch.no_grad():
        for weight in policy.model.parameters():
            weight.fill_(float("nan"))
    for ask in (policy.predict_chunk, policy.select_action):
        policy.reset()
        with pytest.raises(NonFiniteChunk, match="answered with NaN or infinite actions") as raised:
            ask(OBSERVATION)
        assert str(saved) in raised.value.message


def test_a_device_torch_cannot_read_is_refused_or_falls_back_to_the_cpu(saved: Path) -> None:
    with pytest.raises(ConfigError, match="unknown device 'bogus'") as raised:
        load_policy_folder(saved, device="bogus")
    assert raised.value.where == "device"
    config = json.loads((saved / "config.json").read_text())
    config["device"] = "cuda:99999999999999999999"  # a device string torch cannot parse
    (saved / "config.json").write_text(json.dumps(config))
    assert load_policy_folder(saved).device == torch.device("cpu")


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("text", [b"\xff\xfe\x00garbage", b"[" * 100_000 + b"]" * 100_000])
def test_a_config_json_not_utf8_or_nested_too_deep_is_a_checkpoint_error(
    saved: Path, text: bytes
) -> None:
    (saved / "config.json").write_bytes(text)
    with pytest.raises(CheckpointError) as raised:
        load_policy_folder(saved)
    assert raised.value.where == str(saved / "config.json")


def test_a_device_that_is_no_torch_device_is_named(saved: Path) -> None:
    _edit(saved / "config.json", lambda d: d.__setitem__("device", "bogus"))
    with pytest.raises(CheckpointError, match="unknown device 'bogus'") as raised:
        load_policy_folder(saved)
    assert raised.value.where == f"{saved / 'config.json'}: device"
    _edit(saved / "config.json", lambda d: d.__setitem__("device", "cpu"))
    post = saved / "policy_postprocessor.json"
    for bad in ("bogus", 3):
        _edit(post, lambda d, bad=bad: d["steps"][1]["config"].__setitem__("device", bad))
        with pytest.raises(CheckpointError, match="torch device") as raised:
            load_policy_folder(saved, device="cpu")
        assert raised.value.where == f"{post}: steps[1].config.device"


def test_a_post_processor_saved_for_a_gpu_runs_where_the_policy_is_loaded(saved: Path) -> None:
    post = saved / "policy_postprocessor.json"
    _edit(post, lambda d: d["steps"][1]["config"].__setitem__("device", "cuda:5"))
    actions = load_policy_folder(saved, device="cpu").predict_chunk(OBSERVATION).actions
    assert torch.as_tensor(actions).device == torch.device("cpu")


@pytest.mark.parametrize("config", [[1, 2], "cpu"])
def test_a_step_config_that_is_no_object_is_refused(saved: Path, config) -> None:
    pre = saved / "policy_preprocessor.json"
    _edit(pre, lambda d: d["steps"][2].__setitem__("config", config))
    with pytest.raises(CheckpointError, match="JSON object") as raised:
        load_policy_folder(saved)
    assert raised.value.where == f"{pre}: steps[2].config"


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ([1.0, 1.0, 1.0, 1.0, 1.0], "does not fit the feature's shape"),
        ([float("nan"), 1.0, 1.0], "NaN or inf"),
        (None, "needs the std statistic"),
    ],
)
def test_damaged_normaliser_statistics_are_refused_when_loaded(
    saved: Path, value, complaint: str
) -> None:
    from safetensors.numpy import load_file, save_file

    name = "policy_preprocessor_step_3_normalizer_processor.safetensors"
    state = load_file(str(saved / name))
    if value is None:
        del state["observation.state.std"]
    else:
        state["observation.state.std"] = np.asarray(value, np.float32)
    save_file(state, str(saved / name))
    with pytest.raises(CheckpointError, match=complaint) as raised:
        load_policy_folder(saved)
    assert raised.value.where == f"{saved / 'policy_preprocessor.json'}: observation.state.std"


@pytest.mark.parametrize(
    ("key", "value", "error", "complaint"),
    [
        ("chunk_size", 10**7, CheckpointMismatch, "network.2.weight"),  # 1.8 GiB if built
        ("hidden_dims", [10**9], CheckpointMismatch, "network.0.weight"),
        ("hidden_dims", [-1], CheckpointError, "hidden_dims"),
        ("dropout", 2.0, CheckpointError, "dropout"),
    ],
)
def test_a_config_json_with_absurd_sizes_is_refused_before_allocating(
    saved: Path, key: str, value, error: type, complaint: str
) -> None:
    import resource

    _edit(saved / "config.json", lambda d: d.__setitem__(key, value))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(error, match=complaint):
        load_policy_folder(saved)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # KiB


def test_a_rename_map_that_renames_away_a_policy_input_is_refused(saved: Path) -> None:
    pre = saved / "policy_preprocessor.json"
    _edit(
        pre, lambda d: d["steps"][0]["config"].__setitem__("rename_map", {"observation.state": "x"})
    )
    with pytest.raises(CheckpointError, match=r"observation\.state") as raised:
        load_policy_folder(saved)
    assert raised.value.where == f"{pre}: steps[0].config.rename_map"
    swap = {"observation.state": "observation.other", "observation.raw": "observation.state"}
    _edit(pre, lambda d: d["steps"][0]["config"].__setitem__("rename_map", swap))
    load_policy_folder(saved)  # another observation becomes the state: fine
