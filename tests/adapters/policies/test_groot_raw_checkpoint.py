"""NVIDIA's own GR00T N1.7 checkpoint layout as a base model (`base_model_path`, as LeRobot reads
`nvidia/GR00T-N1.7-3B`), at tiny size (raw_groot.py): sharded weights under NVIDIA's key names
load into rlctl's modules, the side files (processor_config.json, statistics.json,
embodiment_id.json) set the processors as LeRobot sets them, native relative actions decode
against the state, a Hub id is fetched into the Hub cache (then served offline), and weights
that do not fit are named."""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="GR00T needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import LoadedPolicy, create_policy
from rlctl.adapters.policies.vla import groot_checkpoint
from rlctl.adapters.policies.vla.groot_processors import (
    GrootActionDecode,
    GrootActionUnpack,
    GrootPackInputs,
    GrootVLMEncode,
)
from rlctl.domain.errors import ConfigError, NotSupported
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.groot import GrootConfig
from tests.adapters.hub.conftest import FakeHub, fake_hub, hub_env  # noqa: F401 (fixtures)

HERE = Path(__file__).parent
RAW = runpy.run_path(str(HERE / "raw_groot.py"))
TAG, HORIZON = RAW["TAG"], RAW["HORIZON"]
STATE = np.array([[0.1, -0.2, 0.3, 0.6, 0.5]], np.float32)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("groot") / "tiny"
    written: Path = runpy.run_path(str(HERE / "tiny_groot.py"))["write_tiny_groot"](out)
    return written


@pytest.fixture(scope="module")
def raw(tiny: Path) -> Path:
    folder: Path = RAW["write_raw_groot"](tiny, tiny.parent / "raw")
    return folder


def raw_config(base: str | Path, **overrides: Any) -> GrootConfig:
    settings: dict[str, Any] = {
        "base_model_path": str(base),
        "embodiment_tag": TAG,
        "chunk_size": 8,
        "n_action_steps": 8,
        "max_state_dim": 16,
        "max_action_dim": 16,
        "use_bf16": False,
        "device": "cpu",
        **overrides,
    }
    return GrootConfig(
        input_features={
            "observation.state": typed_feature("STATE", (5,)),
            "observation.images.front": typed_feature("VISUAL", (3, 32, 32)),
        },
        output_features={"action": typed_feature("ACTION", (4,))},
        **settings,
    )


def dataset_stats() -> dict[str, dict[str, np.ndarray]]:
    return {
        "observation.state": {"min": -np.ones(5), "max": np.ones(5)},
        "action": {"min": -2 * np.ones(4), "max": 2 * np.ones(4)},
    }


def observation() -> dict[str, Any]:
    return {
        "observation.state": STATE,
        "observation.images.front": np.full((1, 3, 32, 32), 0.4, np.float32),
        "task": "close the drawer",
    }


def file_tensor(folder: Path, key: str) -> torch.Tensor:
    from safetensors import safe_open

    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    with safe_open(str(folder / index[key]), framework="pt") as handle:
        return handle.get_tensor(key).float()


def assert_weights_are_the_files(policy: LoadedPolicy, folder: Path) -> None:
    state = policy.model.state_dict()
    for key in (
        "action_head.state_encoder.layer1.W",
        "action_head.model.transformer_blocks.0.attn1.to_q.weight",
        "backbone.model.model.language_model.layers.1.mlp.up_proj.weight",
        "backbone.model.model.visual.blocks.0.attn.qkv.weight",
    ):
        assert torch.equal(state[f"_groot_model.{key}"].float(), file_tensor(folder, key)), key
    embeddings = file_tensor(folder, "backbone.model.model.language_model.embed_tokens.weight")
    assert torch.equal(state["_groot_model.backbone.model.lm_head.weight"].float(), embeddings)


@pytest.mark.slow
def test_a_raw_checkpoint_loads_and_its_side_files_set_the_processors(raw: Path) -> None:
    policy = create_policy(raw_config(raw), dataset_stats())
    assert_weights_are_the_files(policy, raw)
    assert all(p.dtype == torch.float32 for p in policy.model.parameters())  # fp32 params

    [pack] = [s for s in policy.preprocessor if isinstance(s, GrootPackInputs)]
    [encode] = [s for s in policy.preprocessor if isinstance(s, GrootVLMEncode)]
    statistics = json.loads((raw / "statistics.json").read_text())[TAG]
    assert pack.config.raw_stats == statistics and pack.config.use_percentiles
    assert pack.config.embodiment_mapping[TAG] == 5
    assert (pack.config.action_horizon, pack.config.valid_action_horizon) == (8, HORIZON)
    assert pack.config.video_modality_keys == ["front"]
    # The checkpoint's own statistics normalise the state (q01/q99 with percentiles).
    low = np.concatenate([statistics["state"][k]["q01"] for k in ("arm", "gripper", "load")])
    assert np.allclose(pack.stats["observation.state"]["min"], low)
    assert (encode.config.image_target_size, encode.config.image_crop_size) == ([32, 32], [28, 28])
    [decode] = [s for s in policy.postprocessor if isinstance(s, GrootActionDecode)]
    assert decode.config.use_relative_action

    assert policy.model.action_buffer().n_action_steps == HORIZON  # LeRobot's queue steps
    # What the loaded model trains on is the window the trainer reads.
    assert policy.model.trained_action_horizon == HORIZON
    window = type(policy.model).training_window(policy.model.config).action_indices
    assert window == list(range(policy.model.trained_action_horizon))
    processed = policy.preprocessor.process_batch(observation())
    assert processed["embodiment_id"].tolist() == [5]
    chunk = policy.predict_chunk(observation()).actions.numpy()
    assert chunk.shape == (1, HORIZON, 4)  # the checkpoint's chunk for this embodiment
    # The relative arm comes back around the state, per step; the absolute gripper in q01..q99.
    relative = statistics["relative_action"]["arm"]
    arm_low = np.asarray(relative["min"]) + STATE[:, None, :3]
    arm_high = np.asarray(relative["max"]) + STATE[:, None, :3]
    assert ((chunk[..., :3] >= arm_low - 1e-5) & (chunk[..., :3] <= arm_high + 1e-5)).all()
    gripper = statistics["action"]["gripper"]
    assert (chunk[..., 3] >= gripper["q01"][0] - 1e-5).all()
    assert (chunk[..., 3] <= gripper["q99"][0] + 1e-5).all()
    with pytest.raises(NotSupported, match="whole chunk at a time"):
        policy.select_action(observation())


@pytest.mark.slow
def test_weights_that_do_not_fit_the_config_are_named(raw: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    broken = tmp_path / "broken"
    shutil.copytree(raw, broken)
    index = json.loads((broken / "model.safetensors.index.json").read_text())["weight_map"]
    key = "action_head.state_encoder.layer1.W"
    shard = broken / index[key]
    tensors = load_file(str(shard))
    tensors.pop(key)
    tensors["action_head.not_a_module.weight"] = torch.zeros(2)
    save_file(tensors, str(shard))
    with pytest.raises(ConfigError) as raised:
        create_policy(raw_config(broken), dataset_stats())
    message = raised.value.message
    assert "1 missing (action_head.state_encoder.layer1.W)" in message
    assert "1 unknown (action_head.not_a_module.weight)" in message
    (broken / index[key]).unlink()
    with pytest.raises(ConfigError, match="cannot read the GR00T base model's weights"):
        create_policy(raw_config(broken), dataset_stats())


def test_side_files_are_read_for_the_embodiment_asked(tmp_path: Path) -> None:
    raw = RAW["write_side_files"](tmp_path / "raw")
    assets = groot_checkpoint.checkpoint_assets(raw_config(raw))
    assert assets is not None and assets.has_stats and assets.use_relative_action
    assert (assets.valid_action_horizon, assets.max_action_horizon) == (HORIZON, 8)
    assert assets.embodiment_mapping == {TAG: 5, "new_embodiment": 10}
    # An embodiment the statistics do not hold: the dataset's statistics normalise (LeRobot's).
    other = groot_checkpoint.checkpoint_assets(raw_config(raw, embodiment_tag="new_embodiment"))
    assert other is not None and not other.has_stats
    assert groot_checkpoint.checkpoint_action_horizon(raw_config(raw)) == HORIZON
    assert groot_checkpoint.checkpoint_action_horizon(raw_config(raw, embodiment_tag="x")) is None
    # A LeRobot checkpoint folder (config.json with a `type`) is no raw checkpoint.
    lerobot = tmp_path / "lerobot"
    lerobot.mkdir()
    (lerobot / "config.json").write_text(json.dumps({"type": "groot"}))
    assert not groot_checkpoint.is_raw_checkpoint(str(lerobot))
    broken = tmp_path / "broken"
    shutil.copytree(raw, broken)
    (broken / "statistics.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"cannot read the GR00T checkpoint's statistics.json"):
        groot_checkpoint.checkpoint_assets(raw_config(broken))


def test_the_training_window_is_the_checkpoints_chunk_for_the_embodiment(tmp_path: Path) -> None:
    """chunk_size 8 but the raw checkpoint's embodiment chunk is 6: the trainer reads 6 actions
    a sample (its pre-processor would cut the other 2) and leaves out the last 5 frames of each
    episode (a whole 6-step chunk is there before them), not 8 and 7."""
    from rlctl.adapters.policies.vla.groot import GrootPolicy
    from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
    from rlctl.adapters.training.data import open_training_data, sample_positions
    from rlctl.domain.train_settings import DatasetSource

    raw = RAW["write_side_files"](tmp_path / "raw")
    config = raw_config(raw)
    assert config.action_delta_indices == list(range(8))  # what the config alone names
    window = GrootPolicy.training_window(config)
    assert (window.action_indices, window.drop_n_last_frames) == (list(range(HORIZON)), 5)

    root = runpy.run_path(str(HERE / "relative_arm_dataset.py"))["write_arm_dataset"](
        tmp_path / "arm"
    )
    meta = LeRobotDatasetReader(root).meta
    data = open_training_data(root, meta, DatasetSource(root=str(root)), config)
    reader = data.dataset.reader
    assert reader.delta_timestamps == {"action": [i / meta.fps for i in range(HORIZON)]}
    item = data.dataset[0]
    assert tuple(item["action"].shape) == (HORIZON, 4)
    assert tuple(item["action_is_pad"].shape) == (HORIZON,)
    lengths = data.episode_lengths()
    assert len(sample_positions(data, config)) == sum(n - (HORIZON - 1) for n in lengths)

    # An embodiment the checkpoint has no chunk for, or a shorter chunk_size: the config's.
    other = raw_config(raw, embodiment_tag="new_embodiment")
    assert GrootPolicy.training_window(other).action_indices == list(range(8))
    short = raw_config(raw, chunk_size=4, n_action_steps=4)
    assert GrootPolicy.training_window(short).action_indices == list(range(4))


def test_a_base_model_that_is_neither_folder_nor_repo_id_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="no such folder, and not a Hub repo id"):
        groot_checkpoint.base_folder(str(tmp_path / "no" / "such" / "folder"))
    # NVIDIA's default base model out of reach (the tests' Hub is a closed port, the cache
    # empty): its built-in architecture with random weights, asked of the Hub once.
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty_cache"))
    monkeypatch.setattr(groot_checkpoint, "_fetched", {})
    assert groot_checkpoint.base_folder("nvidia/GR00T-N1.7-3B") is None
    assert list(groot_checkpoint._fetched.values()) == [None]


@pytest.mark.slow
def test_a_raw_checkpoint_on_the_hub_is_fetched_then_served_offline(
    raw: Path,
    fake_hub: FakeHub,  # noqa: F811 (the Hub tests' fixture)
    hub_env: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo_id = "nvidia-tiny/GR00T-N1.7-tiny"
    repo = fake_hub.create("model", repo_id)
    commit = "a" * 40
    repo.commits[commit] = {p.name: p.read_bytes() for p in raw.iterdir() if p.is_file()}
    repo.commits[commit]["README.md"] = b"not fetched"
    repo.branches["main"] = commit
    monkeypatch.setattr(groot_checkpoint, "_fetched", {})

    policy = create_policy(raw_config(repo_id), dataset_stats())
    assert_weights_are_the_files(policy, raw)
    snapshot = hub_env / "hub" / "models--nvidia-tiny--GR00T-N1.7-tiny" / "snapshots" / commit
    assert (snapshot / "statistics.json").is_file() and not (snapshot / "README.md").exists()
    # As in LeRobot, a Hub id gives the architecture and the weights; its side files are read
    # only from a local folder, so the dataset's statistics normalise.
    assert not [s for s in policy.postprocessor if isinstance(s, GrootActionDecode)]
    assert [s for s in policy.postprocessor if isinstance(s, GrootActionUnpack)]

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(groot_checkpoint, "_fetched", {})
    requests = len(fake_hub.requests)
    assert groot_checkpoint.base_folder(repo_id) == snapshot
    assert len(fake_hub.requests) == requests
    with pytest.raises(ConfigError, match="nobody/none"):
        groot_checkpoint.base_folder("nobody/none")


@pytest.mark.lerobot
@pytest.mark.slow
@pytest.mark.parametrize("relative", [True, False], ids=["native relative", "absolute"])
def test_a_raw_checkpoint_lerobot_writes_predicts_the_same_chunk_in_rlctl(
    relative: bool, lerobot, tiny: Path, tmp_path: Path
) -> None:
    """LeRobot writes the raw checkpoint with its own GR00TN17.save_pretrained and predicts from
    it (`base_model_path`, its processors from the side files); rlctl, from the same folder,
    predicts the same chunk for the same inputs and initial noise."""
    rng = np.random.default_rng(5)
    inputs = {
        "observation.state": rng.normal(scale=0.3, size=(2, 5)).astype(np.float32),
        "observation.images.front": rng.uniform(size=(2, 3, 32, 32)).astype(np.float32),
        "noise": rng.normal(size=(2, 8, 16)).astype(np.float32),
        "task": np.array(["close the drawer", "Put the bowl on the plate!"]),
    }
    inputs_path = tmp_path / "inputs.npz"
    np.savez(inputs_path, **inputs)
    spec = {
        "seed": 11,
        "cameras": {"observation.images.front": [3, 32, 32]},
        "state_dim": 5,
        "action_dim": 4,
        "config": {
            "embodiment_tag": TAG,
            "chunk_size": 8,
            "n_action_steps": 8,
            "max_state_dim": 16,
            "max_action_dim": 16,
            "use_bf16": False,
        },
        "side_files": RAW["side_files"](3, relative=relative),
    }
    folder = tmp_path / "raw"
    theirs = lerobot(
        Path(HERE / "lerobot_groot.py"), "raw", folder, tiny, json.dumps(spec), inputs_path
    )
    policy = create_policy(raw_config(folder))
    given = {k: v for k, v in inputs.items() if k not in ("task", "noise")}
    given["task"] = [str(t) for t in inputs["task"]]
    ours = policy.predict_chunk(given, noise=inputs["noise"]).actions.numpy()
    expected = np.array(theirs["chunk"])
    assert ours.shape == expected.shape == (2, HORIZON, 4)
    np.testing.assert_allclose(ours, expected, atol=1e-4)


def frame(height: int = 40, width: int = 56) -> torch.Tensor:
    generator = torch.Generator().manual_seed(2)
    return torch.randint(0, 256, (3, height, width), dtype=torch.uint8, generator=generator)


def test_the_cv2_image_path_keeps_the_aspect_and_letter_boxing_squares_it() -> None:
    from rlctl.adapters.policies.vla.groot_processors import transform_frame, transform_frame_cv2

    # Shortest edge to 32 (40x56 -> 32x45), a centred 28/32 crop, shortest edge to 32 again.
    out = transform_frame_cv2(frame(), [32, 32], [28, 28], None, None)
    assert out.shape == (3, 32, 45) and out.dtype == torch.uint8
    boxed = transform_frame_cv2(frame(), [32, 32], [28, 28], None, None, letter_box=True)
    assert boxed.shape == (3, 32, 32)
    # Letter-boxing pads the short side with black: the top rows of a wide frame stay black.
    assert not transform_frame(frame(), [32, 32], None, None, None, letter_box=True)[:, :3].any()
    corner = transform_frame_cv2(frame(), [32, 32], [28, 28], None, None, crop_position=(0, 0))
    assert corner.shape == out.shape and not torch.equal(corner, out)


CASES = (("centre", False, None), ("boxed", True, None), ("placed", False, (0.2, 0.7)))


@pytest.mark.lerobot
@pytest.mark.slow
def test_the_cv2_image_path_and_letter_boxing_match_lerobots(lerobot, tmp_path: Path) -> None:
    from rlctl.adapters.policies.vla.groot_processors import transform_frame, transform_frame_cv2

    image = frame()
    np.save(tmp_path / "frame.npy", image.numpy())
    code = f"""
import json, numpy as np, torch
from lerobot.policies.groot import processor_groot as p
chw = np.load({str(tmp_path / "frame.npy")!r})
hwc = np.ascontiguousarray(chw.transpose(1, 2, 0))
out = {{}}
for name, box, pos in {CASES!r}:
    out[name] = p._transform_n1_7_image_for_vlm_albumentations(
        hwc, image_crop_size=[28, 28], image_target_size=[32, 32], shortest_image_edge=None,
        crop_fraction=None, letter_box_transform=box, crop_position=pos).tolist()
out["torch_boxed"] = p._transform_n1_7_image_for_vlm_torch(
    torch.from_numpy(chw), image_crop_size=[28, 28], image_target_size=[32, 32],
    shortest_image_edge=None, crop_fraction=None, letter_box_transform=True).tolist()
print(json.dumps(out))
"""
    theirs = lerobot("-c", code)
    for name, box, pos in CASES:
        ours = transform_frame_cv2(image, [32, 32], [28, 28], None, None, box, pos)
        assert np.array_equal(ours.permute(1, 2, 0).numpy(), np.array(theirs[name])), name
    boxed = transform_frame(image, [32, 32], [28, 28], None, None, letter_box=True)
    assert np.array_equal(boxed.numpy(), np.array(theirs["torch_boxed"]))
