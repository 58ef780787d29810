"""The reader against what LeRobot 0.6.1 itself returned for the datasets it wrote (../shared)."""

from __future__ import annotations

import functools
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.domain.errors import InvalidInput, RlctlError

DATASETS = ("sim_video", "sim_images")
BACKENDS = ("pyav", "torchcodec")


@functools.cache
def _backend_available(backend: str) -> bool:
    from rlctl.adapters.video.auto import video_decoder_for

    try:
        video_decoder_for(backend).close()
    except RlctlError:
        return False
    return True


def reference(fixtures_dir: Path, name: str) -> tuple[dict, np.lib.npyio.NpzFile]:
    spec = json.loads((fixtures_dir / f"{name}.reference.json").read_text())
    return spec, np.load(fixtures_dir / f"{name}.reference.npz")


def reference_deltas(spec: dict, fps: int) -> dict[str, list[float]]:
    return {
        key: [f / fps for f in frames] for key, frames in spec["delta_timestamps_in_frames"].items()
    }


def _cases() -> list:
    # torchcodec's first import costs seconds (it loads ffmpeg's libraries): marked slow.
    return [
        pytest.param((d, b), id=f"{d}-{b}", marks=[pytest.mark.slow] if b == "torchcodec" else [])
        for d in DATASETS
        for b in BACKENDS
    ]


@pytest.fixture(scope="module", params=_cases())
def case(request, fixtures_dir):
    name, backend = request.param
    if not _backend_available(backend):
        pytest.skip(f"video backend {backend} cannot run here")
    spec, arrays = reference(fixtures_dir, name)
    root = fixtures_dir / name
    fps = LeRobotMetaReader().read_meta(root).fps
    reader = LeRobotDatasetReader(
        root, delta_timestamps=reference_deltas(spec, fps), video_backend=backend
    )
    yield spec, arrays, reader
    reader.close()


def test_length_matches_lerobot(case):
    spec, _, reader = case
    assert len(reader) == spec["len"]


def test_every_reference_item_matches_lerobot(case):
    spec, arrays, reader = case
    for expected in spec["items"]:
        index = expected["index"]
        item = reader[index]
        assert item["task"] == expected["task"]
        assert sorted(k for k in item if k != "task") == sorted(expected["keys"])
        for key in expected["keys"]:
            want = arrays[f"{index}/{key}"]
            got = item[key]
            assert isinstance(got, torch.Tensor), key
            got = got.numpy()
            assert (got.dtype, got.shape) == (want.dtype, want.shape), f"{index}/{key}"
            if want.dtype == np.float32 and want.ndim >= 3:  # camera frames
                assert float(np.abs(got - want).mean()) <= 1 / 255, f"{index}/{key}"
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{index}/{key}")


def test_a_batch_equals_the_items_one_by_one(case):
    _, _, reader = case
    positions = [p % len(reader) for p in (5, 0, 44, 45, 5, -1)]
    batch = reader.get_items(positions)
    for position, item in zip(positions, batch):
        single = reader[position]
        assert single.keys() == item.keys()
        for key, value in single.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(item[key], value), key
            else:
                assert item[key] == value


def test_items_are_fresh_tensors(case):
    _, _, reader = case
    first = reader[3]
    for value in first.values():
        if isinstance(value, torch.Tensor):
            value.zero_() if value.dtype != torch.bool else value.fill_(True)
    again = reader[3]
    assert int(again["index"]) == 3
    assert not bool(again["action_is_pad"].all())


def test_negative_indices_slices_and_range(case):
    _, _, reader = case
    assert int(reader[-1]["index"]) == len(reader) - 1
    assert [int(i["index"]) for i in reader[2:5]] == [2, 3, 4]
    with pytest.raises(IndexError):
        reader[len(reader)]


def test_reader_survives_pickling_after_decoding(case):
    _, _, reader = case
    before = reader[7]
    clone = pickle.loads(pickle.dumps(reader))
    after = clone[7]
    for key, value in before.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(after[key], value), key


@pytest.fixture(scope="module")
def sim_video(fixtures_dir):
    return fixtures_dir / "sim_video"


def test_meta_holds_info_tasks_episodes_and_stats(sim_video):
    meta = LeRobotMetaReader().read_meta(sim_video)
    assert (meta.fps, meta.total_episodes, meta.total_frames) == (10, 3, 75)
    assert meta.tasks == ("pick the cube", "place the cube")
    assert [e.length for e in meta.episodes] == [20, 25, 30]
    assert meta.episodes[1].tasks == ("place the cube",)
    assert meta.episodes[2].columns["videos/observation.images.front/from_timestamp"] == 4.5
    assert "stats/action/mean" in meta.episodes[0].columns
    assert meta.video_keys == ["observation.images.front"]
    assert meta.stats is not None and meta.stats["action"]["mean"].shape == (6,)
    assert LeRobotMetaReader().size_on_disk(sim_video) > 50_000


def test_episode_subset_is_reindexed_in_file_order(sim_video):
    full = LeRobotDatasetReader(sim_video, video_backend="pyav")
    subset = LeRobotDatasetReader(sim_video, episodes=[2, 0], video_backend="pyav")
    assert len(subset) == 50 and subset.num_episodes == 2
    # LeRobot keeps file order, whatever order the episodes were asked in.
    pairs = [(0, 0), (19, 19), (20, 45), (49, 74)]
    for mine, theirs in pairs:
        a, b = subset[mine], full[theirs]
        assert int(a["index"]) == int(b["index"]) and a["task"] == b["task"]
        assert torch.equal(a["observation.images.front"], b["observation.images.front"])


def test_windows_stay_inside_the_selected_episode(sim_video):
    deltas = {"action": [i / 10 for i in range(5)]}
    subset = LeRobotDatasetReader(
        sim_video, episodes=[1], delta_timestamps=deltas, video_backend="pyav"
    )
    full = LeRobotDatasetReader(sim_video, delta_timestamps=deltas, video_backend="pyav")
    last = subset[len(subset) - 1]
    assert torch.equal(last["action"], full[44]["action"])
    assert last["action_is_pad"].tolist() == [False, True, True, True, True]


def test_unknown_episode_is_refused(sim_video):
    with pytest.raises(InvalidInput, match="episode 9 does not exist"):
        LeRobotDatasetReader(sim_video, episodes=[9])


def test_delta_timestamps_must_name_features_and_sit_on_the_frame_grid(sim_video):
    with pytest.raises(InvalidInput, match="actoin"):
        LeRobotDatasetReader(sim_video, delta_timestamps={"actoin": [0.0]})
    with pytest.raises(InvalidInput, match="frame grid"):
        LeRobotDatasetReader(sim_video, delta_timestamps={"action": [0.05]})


def test_image_transforms_apply_to_every_camera_and_can_be_changed(sim_video, fixtures_dir):
    reader = LeRobotDatasetReader(
        sim_video, image_transforms=lambda t: t * 0 + 0.5, video_backend="pyav"
    )
    assert bool((reader[0]["observation.images.front"] == 0.5).all())
    reader.set_image_transforms(lambda t: t[:, :8, :8])
    assert reader[0]["observation.images.front"].shape == (3, 8, 8)
    reader.clear_image_transforms()
    assert reader[0]["observation.images.front"].shape == (3, 48, 64)
    images = LeRobotDatasetReader(fixtures_dir / "sim_images", image_transforms=lambda t: t * 0)
    assert float(images[0]["observation.images.front"].abs().sum()) == 0.0


def test_a_transform_that_is_not_callable_is_refused_at_once(sim_video):
    with pytest.raises(InvalidInput, match="callable"):
        LeRobotDatasetReader(sim_video, image_transforms="resize")  # type: ignore[arg-type]
    reader = LeRobotDatasetReader(sim_video)
    with pytest.raises(InvalidInput, match="callable"):
        reader.set_image_transforms(42)  # type: ignore[arg-type]
