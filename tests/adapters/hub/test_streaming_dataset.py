"""Streaming a dataset from the fake Hub: items equal the local reader's, shards cover it once,
and each failure is one clear error."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import attrs
import pytest
import torch
from torch.utils.data import DataLoader

from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.adapters.hub.layout import LeRobotLayout
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.adapters.storage.streaming.dataset import StreamingLeRobotDataset
from rlctl.adapters.storage.streaming.source import open_source
from rlctl.application.ports.hub import HubError, HubNotCached
from rlctl.application.use_cases.push_dataset import PushDataset, PushDatasetRequest
from rlctl.domain.errors import CorruptDataset, InvalidInput

pytestmark = pytest.mark.timeout(120)

REPO = "alice/streamed"
STATE, ACTION, VIDEO, IMAGE = (
    "observation.state",
    "action",
    "observation.images.front",
    "observation.images.wrist",
)
DELTAS = {STATE: [-0.2, -0.1, 0.0], ACTION: [0.0, 0.1, 0.2, 0.3], VIDEO: [-0.1, 0.0]}


def _writer_support():
    path = Path(__file__).parents[1] / "storage" / "writer_support.py"
    spec = importlib.util.spec_from_file_location("writer_support", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ws = _writer_support()


def push(root: Path) -> str:
    result = PushDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())(
        PushDatasetRequest(str(root), REPO)
    )
    return result.commit


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight episodes, a camera as video and one as images, a few episodes per file."""
    plan = ws.DatasetPlan(
        fps=10,
        state_dim=3,
        episodes=tuple(("pick" if e % 2 else "place",) * (5 + e) for e in range(8)),
        image=True,
        video=True,
    )
    root = tmp_path_factory.mktemp("streamed") / "local"
    ws.write(root, plan, data_files_size_in_mb=0.004, video_files_size_in_mb=0.004)
    return root


@pytest.fixture
def pushed(fake_hub, hub_env, written) -> Path:
    push(written)
    return written


def assert_items_equal(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert got[key].dtype == value.dtype, key
            assert got[key].shape == value.shape, key
            assert torch.equal(got[key], value), key
        else:
            assert got[key] == value, key


def indices(items) -> list[int]:
    return [int(item["index"]) for item in items]


def test_items_are_the_local_readers_items_windows_and_cameras_included(pushed):
    assert len(list((pushed / "data").rglob("*.parquet"))) > 2
    assert len(list((pushed / "videos").rglob("*.mp4"))) > 1
    streamed = StreamingLeRobotDataset(REPO, delta_timestamps=DELTAS, shuffle=False)
    local = LeRobotDatasetReader(pushed, delta_timestamps=DELTAS)

    items = list(streamed)

    assert indices(items) == list(range(len(local)))
    for item in items:
        assert_items_equal(item, local[int(item["index"])])
    assert streamed.num_frames == len(local) and streamed.num_episodes == 8


def test_only_meta_is_downloaded_and_unselected_episodes_are_never_fetched(
    fake_hub, pushed, hub_env
):
    streamed = StreamingLeRobotDataset(REPO, episodes=[6], shuffle=False, video_backend="pyav")
    local = LeRobotDatasetReader(pushed, episodes=[6], video_backend="pyav")

    items = list(streamed)

    assert len(items) == len(local) == 11
    for got, want in zip(items, local):
        assert_items_equal(got, want)
    on_disk = {
        p.relative_to(streamed.root).parts[0] for p in streamed.root.rglob("*") if p.is_file()
    }
    assert on_disk <= {"meta", "README.md", ".gitattributes"}
    fetched = {r.path.split("/resolve/")[1].split("/", 1)[1] for r in fake_hub.file_gets()}
    meta = LeRobotMetaReader().read_meta(pushed)
    episode = meta.episodes[6]
    needed = set(LeRobotLayout().episode_files(meta, [6]))
    assert {f for f in fetched if not f.startswith("meta/")} == needed, episode
    for get in fake_hub.file_gets():  # data and videos: by ranges, of the pinned commit
        if "/meta/" not in get.path:
            assert f"/resolve/{streamed.commit}/" in get.path and "range" in get.headers


def test_shuffled_order_is_seeded_by_seed_and_epoch_and_covers_every_frame_once(pushed):
    streamed = StreamingLeRobotDataset(REPO, buffer_size=16, seed=3)
    first = indices(streamed)
    again = indices(streamed)
    streamed.set_epoch(1)
    other_epoch = indices(streamed)

    assert sorted(first) == list(range(streamed.num_frames))
    assert first == again
    assert first != list(range(streamed.num_frames))
    assert sorted(other_epoch) == sorted(first) and other_epoch != first


def test_two_dataloader_workers_read_disjoint_shards_that_cover_the_dataset(pushed):
    streamed = StreamingLeRobotDataset(REPO, delta_timestamps=DELTAS, buffer_size=8)
    local = LeRobotDatasetReader(pushed, delta_timestamps=DELTAS)
    loader = DataLoader(streamed, batch_size=4, num_workers=2)

    seen = []
    for batch in loader:
        seen += batch["index"].tolist()
        position = int(batch["index"][0])
        assert torch.equal(batch[VIDEO][0], local[position][VIDEO])
        assert torch.equal(batch[f"{ACTION}_is_pad"][0], local[position][f"{ACTION}_is_pad"])

    assert Counter(seen) == Counter(range(len(local)))


@pytest.mark.parametrize("workers", [0, 2])
def test_two_ranks_read_disjoint_shards_that_cover_the_dataset(pushed, workers):
    seen: list[int] = []
    for rank in (0, 1):
        streamed = StreamingLeRobotDataset(REPO, rank=rank, world_size=2, buffer_size=8)
        loader = DataLoader(streamed, batch_size=None, num_workers=workers)
        mine = [int(item["index"]) for item in loader]
        assert mine, f"rank {rank} read nothing"
        seen += mine

    assert Counter(seen) == Counter(range(streamed.num_frames))


def test_a_file_missing_on_the_hub_is_one_error_naming_it(fake_hub, pushed):
    streamed = StreamingLeRobotDataset(REPO, shuffle=False)
    repo = fake_hub.repo("dataset", REPO)
    video = next(p for p in repo.commits[streamed.commit] if p.endswith(".mp4"))
    del repo.commits[streamed.commit][video]

    with pytest.raises(HubError) as error:
        list(streamed)

    assert video in error.value.message and video in error.value.where
    assert "incomplete" in error.value.hint


def test_a_damaged_table_is_one_error_naming_the_file(fake_hub, pushed):
    streamed = StreamingLeRobotDataset(REPO, shuffle=False)
    files = fake_hub.repo("dataset", REPO).commits[streamed.commit]
    data = sorted(p for p in files if p.startswith("data/"))[0]
    files[data] = b"not a parquet file" * 10

    with pytest.raises(CorruptDataset) as error:
        list(streamed)

    assert data in error.value.where and "damaged" in error.value.hint


def test_rows_that_disagree_with_the_metadata_are_refused_as_locally(fake_hub, pushed):
    streamed = StreamingLeRobotDataset(REPO, shuffle=False)
    files = fake_hub.repo("dataset", REPO).commits[streamed.commit]
    data = sorted(p for p in files if p.startswith("data/"))
    files[data[0]] = files[data[1]]  # another file's rows

    with pytest.raises(CorruptDataset) as error:
        list(streamed)

    assert data[0] in error.value.where and "rows" in error.value.message


def test_an_unreachable_hub_is_one_error_with_a_hint(hub_env, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")

    with pytest.raises(HubNotCached) as error:
        StreamingLeRobotDataset(REPO)

    assert "cannot reach the Hub" in error.value.message and error.value.hint


def test_the_hub_going_away_mid_stream_is_one_error_with_a_hint(fake_hub, pushed):
    streamed = StreamingLeRobotDataset(REPO, shuffle=False)
    source = streamed.source
    closed = attrs.evolve(source.files, endpoint="http://127.0.0.1:9")
    streamed.source = attrs.evolve(source, files=closed)

    with pytest.raises(HubError) as error:
        next(iter(streamed))

    assert "cannot reach the Hub" in error.value.message
    assert "rlctl dataset pull" in error.value.hint


@pytest.mark.parametrize("backend", ["pyav", "torchcodec"])
def test_a_video_the_hub_stops_sending_is_one_error_naming_it(fake_hub, pushed, backend):
    if backend == "torchcodec":
        pytest.importorskip("torchcodec")
    streamed = StreamingLeRobotDataset(REPO, shuffle=False, video_backend=backend)
    files = fake_hub.repo("dataset", REPO).commits[streamed.commit]
    for path in files:
        if path.endswith(".mp4"):
            fake_hub.interrupt(path, times=1000, after_bytes=0)

    with pytest.raises(HubError) as error:
        list(streamed)

    assert "cannot reach the Hub" in error.value.message and ".mp4" in error.value.where
    assert "rlctl dataset pull" in error.value.hint


def test_offline_mode_refuses_streaming_with_a_hint(pushed, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    with pytest.raises(HubNotCached) as error:
        StreamingLeRobotDataset(REPO)

    assert "offline" in error.value.message and "HF_HUB_OFFLINE" in error.value.hint


def test_reads_by_small_ranges_give_the_same_items(pushed):
    source = open_source(REPO, None, None)
    small = attrs.evolve(source, files=attrs.evolve(source.files, block_bytes=512, max_blocks=4))
    streamed = StreamingLeRobotDataset(small, shuffle=False, episodes=[1, 5])
    local = LeRobotDatasetReader(pushed, episodes=[1, 5])

    for got, want in zip(list(streamed), local, strict=True):
        assert_items_equal(got, want)


def test_bad_arguments_are_refused_before_any_read(pushed):
    with pytest.raises(InvalidInput, match="buffer_size"):
        StreamingLeRobotDataset(REPO, buffer_size=0)
    with pytest.raises(InvalidInput, match="delta_timestamps"):
        StreamingLeRobotDataset(REPO, delta_timestamps={"nope": [0.0]})
    with pytest.raises(InvalidInput, match="episode 99"):
        StreamingLeRobotDataset(REPO, episodes=[99])
    with pytest.raises(InvalidInput, match="rank"):
        StreamingLeRobotDataset(REPO, rank=2, world_size=2)


def test_rlctl_train_trains_from_the_stream_without_fetching_unread_cameras(
    fake_hub, pushed, tmp_path
):
    from click.testing import CliRunner

    from rlctl.adapters.policies.loaded_policy import load_policy_folder
    from rlctl.entrypoints.cli.main import cli

    out = tmp_path / "run"
    args = [
        "train",
        f"--dataset.repo_id={REPO}",
        "--dataset.streaming=true",
        "--policy.type=mlp",
        "--policy.chunk_size=3",
        "--policy.n_action_steps=3",
        "--policy.hidden_dims=[16]",
        "--steps=3",
        "--batch_size=4",
        "--num_workers=0",
        "--log_freq=1",
        "--save_freq=3",
        f"--output_dir={out}",
    ]
    result = CliRunner().invoke(cli, args)

    assert result.exit_code == 0, result.output
    assert "trained steps 0..3 of 3" in result.output
    policy = load_policy_folder(out / "checkpoints" / "last" / "pretrained_model")
    assert policy.predict_chunk({STATE: torch.zeros(1, 3)}).actions.shape == (1, 3, 3)
    assert not fake_hub.file_gets(".mp4")  # the MLP reads no camera: no video was fetched
    assert fake_hub.file_gets(".parquet")


def test_streaming_needs_a_repo_id(tmp_path):
    from click.testing import CliRunner

    from rlctl.entrypoints.cli.main import cli

    result = CliRunner().invoke(
        cli, ["train", f"--dataset.root={tmp_path}", "--dataset.streaming=true", "--steps=1"]
    )

    assert result.exit_code != 0
    assert "streaming reads a dataset from the Hub" in result.output


def test_open_dataset_streams_a_repo_id(pushed):
    import rlctl.api

    streamed = rlctl.api.open_dataset(REPO, streaming=True, buffer_size=4, seed=7, episodes=[2, 3])
    local = LeRobotDatasetReader(pushed, episodes=[2, 3])

    assert isinstance(streamed, torch.utils.data.IterableDataset)
    assert (streamed.buffer_size, streamed.seed) == (4, 7)
    items = sorted(streamed, key=lambda item: int(item["index"]))
    for got, want in zip(items, local, strict=True):
        assert_items_equal(got, want)
    with pytest.raises(InvalidInput, match="repo id"):
        rlctl.api.open_dataset(str(pushed), streaming=True)
