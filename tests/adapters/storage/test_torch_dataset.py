"""The torch Dataset adapters: DataLoader workers with either backend, and multi-datasets."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import structlog
import torch
from torch.utils.data import DataLoader

from rlctl.adapters.storage.lerobot_v3.decoders import DecoderFactory, process_local_decoder
from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset, MultiLeRobotTorchDataset
from rlctl.domain.errors import InvalidInput, RlctlError

DELTAS = {
    "action": [i / 10 for i in range(5)],
    "observation.state": [-0.1, 0.0],
    "observation.images.front": [-0.1, 0.0],
}


def _usable(backend: str) -> bool:
    from rlctl.adapters.video.auto import video_decoder_for

    try:
        video_decoder_for(backend).close()
    except RlctlError:
        return False
    return True


@pytest.mark.slow  # forks two workers
@pytest.mark.parametrize("backend", ["pyav", "torchcodec"])
def test_dataloader_with_two_workers_after_the_parent_decoded(fixtures_dir, backend):
    if not _usable(backend):
        pytest.skip(f"{backend} cannot run here")
    dataset = LeRobotTorchDataset(
        fixtures_dir / "sim_video", delta_timestamps=DELTAS, video_backend=backend
    )
    # The parent decodes first: LeRobot's torchcodec path then crashes in forked workers.
    expected = {int(dataset[i]["index"]): dataset[i] for i in range(len(dataset))}
    loader = DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2)
    seen = 0
    for batch in loader:
        assert batch["observation.images.front"].shape[1:] == (2, 3, 48, 64)
        for row, index in enumerate(batch["index"].tolist()):
            want = expected[index]
            assert batch["task"][row] == want["task"]
            for key in ("action", "action_is_pad", "observation.state", "timestamp"):
                assert torch.equal(batch[key][row], want[key]), key
            assert torch.equal(
                batch["observation.images.front"][row], want["observation.images.front"]
            )
        seen += len(batch["index"])
    assert seen == len(dataset) == 75


def test_dataset_exposes_meta_and_transforms(fixtures_dir):
    dataset = LeRobotTorchDataset(fixtures_dir / "sim_images")
    assert dataset.meta.fps == 10 and len(dataset) == 27
    dataset.set_image_transforms(lambda t: t[:1])
    assert dataset[0]["observation.images.front"].shape == (1, 48, 64)
    dataset.clear_image_transforms()
    assert dataset[0]["observation.images.front"].shape == (3, 48, 64)


def test_multi_dataset_concatenates_and_marks_the_source(fixtures_dir):
    multi = MultiLeRobotTorchDataset(
        [fixtures_dir / "sim_video", fixtures_dir / "sim_images"], video_backend="pyav"
    )
    assert len(multi) == 75 + 27 and multi.num_episodes == 5 and multi.num_frames == 75 + 27
    assert multi.differences == [] and multi.disabled_features == set()
    first, last = multi[74], multi[75]
    assert int(first["dataset_index"]) == 0 and int(first["index"]) == 74
    assert int(last["dataset_index"]) == 1 and int(last["index"]) == 0
    assert first.keys() == last.keys()
    batch = next(iter(DataLoader(multi, batch_size=4, sampler=[73, 74, 75, 76])))
    assert batch["dataset_index"].tolist() == [0, 0, 1, 1]
    assert multi.stats is not None and multi.stats["action"].count == 75 + 27


def test_multi_dataset_propagates_transforms_to_children(fixtures_dir):
    multi = MultiLeRobotTorchDataset(
        [fixtures_dir / "sim_video", fixtures_dir / "sim_images"], video_backend="pyav"
    )
    multi.set_image_transforms(lambda t: t * 0)
    assert all(d.reader.image_transforms is not None for d in multi.datasets)
    assert float(multi[0]["observation.images.front"].sum()) == 0.0
    assert float(multi[80]["observation.images.front"].sum()) == 0.0
    multi.clear_image_transforms()
    assert all(d.reader.image_transforms is None for d in multi.datasets)
    with pytest.raises(InvalidInput):
        multi.set_image_transforms("flip")  # type: ignore[arg-type]


def _with_extra_feature(fixtures_dir: Path, tmp_path: Path) -> Path:
    root = tmp_path / "sim_images_plus"
    shutil.copytree(fixtures_dir / "sim_images", root)
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    data = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(data)
    pq.write_table(
        table.append_column("reward", pa.array([0.5] * table.num_rows, pa.float32())), data
    )
    info = json.loads((root / "meta/info.json").read_text())
    info["features"]["reward"] = {"dtype": "float32", "shape": [1], "names": None}
    info["features"]["observation.state"]["shape"] = [6]
    (root / "meta/info.json").write_text(json.dumps(info))
    return root


def test_multi_dataset_reports_differences_and_keeps_what_is_shared(fixtures_dir, tmp_path):
    extra = _with_extra_feature(fixtures_dir, tmp_path)
    with structlog.testing.capture_logs() as logs:
        multi = MultiLeRobotTorchDataset(
            [fixtures_dir / "sim_video", extra],
            delta_timestamps={"reward": [0.0, 0.1]},
            video_backend="pyav",
        )
    assert multi.disabled_features == {"reward"}
    assert len(multi.differences) == 1 and "reward" in multi.differences[0]
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert len(warnings) == 1 and "reward" in warnings[0]["differences"]
    for item in (multi[0], multi[80]):
        assert "reward" not in item and "reward_is_pad" not in item
        assert "action" in item


class _NullDecoder:
    def decode(self, path, timestamps, tolerance_s):  # pragma: no cover - never decodes
        raise AssertionError("not used")

    def close(self) -> None:
        pass


def test_workers_skip_the_torchcodec_probe_their_parent_passed(monkeypatch):
    import rlctl.adapters.video.auto as auto

    probed: list[str] = []
    monkeypatch.setattr(auto, "video_decoder_for", lambda b: probed.append(b) or _NullDecoder())
    monkeypatch.setattr(auto, "torchcodec_decoder", _NullDecoder)
    factory = DecoderFactory("torchcodec")
    factory()
    worker_copy = pickle.loads(pickle.dumps(factory))
    worker_copy()
    assert probed == ["torchcodec"]


def test_each_process_makes_its_own_decoder(monkeypatch):
    made: list[_NullDecoder] = []
    local = process_local_decoder(lambda: made.append(_NullDecoder()) or made[-1])
    assert local.get() is local.get() is made[0]
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as in a forked DataLoader worker
    assert local.get() is made[1]
    assert len(made) == 2
