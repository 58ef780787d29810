"""`dataset.hf_dataset` (LeRobot's Hugging Face `datasets.Dataset` of the data rows) and the card
that lets `datasets.load_dataset(ROOT)` read a recorded dataset."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import attrs
import numpy as np
import pytest
import torch

from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer
from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset

datasets = pytest.importorskip("datasets", reason="the `datasets` extra is not installed")


def load_support():
    path = Path(__file__).with_name("writer_support.py")
    spec = importlib.util.spec_from_file_location("writer_support", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


support = load_support()
PLAN = support.DatasetPlan(
    fps=10,
    state_dim=3,
    episodes=(("pick",) * 4, ("place",) * 6, ("pick",) * 5),
    reward=True,
    image=True,
    grid=(2, 3),
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hf") / "pick_place"
    support.write(root, PLAN)
    return root


def test_hf_dataset_holds_the_readers_columns_row_for_row(recorded: Path) -> None:
    # `datasets` is imported here, so pyarrow knows its ArrayND types: the reader must still
    # give the 2-D feature as a tensor (it reads the types' storage), as in a process without it.
    dataset = LeRobotTorchDataset(recorded)
    rows = dataset.hf_dataset
    assert len(rows) == len(dataset) == sum(PLAN.lengths)
    # LeRobot's features: scalars as Value, vectors as fixed-length lists, images as Image.
    features = rows.features
    assert features["next.reward"] == datasets.Value("float32")
    assert features["observation.state"] == datasets.List(datasets.Value("float32"), length=3)
    assert isinstance(features[support.IMAGE], datasets.Image)
    assert features["index"] == datasets.Value("int64")
    for i in (0, 5, len(dataset) - 1):
        row, item = rows[i], dataset[i]
        for key, value in row.items():
            assert isinstance(value, torch.Tensor), key
            torch.testing.assert_close(value.to(item[key].dtype), item[key], rtol=0, atol=0)


def test_hf_dataset_shares_the_readers_memory(recorded: Path) -> None:
    dataset = LeRobotTorchDataset(recorded)
    column = dataset.hf_dataset.data.column("action").chunk(0).values.to_numpy()
    assert np.shares_memory(column, dataset.reader._table.numeric["action"])


def test_filter_select_and_pandas_work_as_in_lerobot(recorded: Path) -> None:
    rows = LeRobotTorchDataset(recorded).hf_dataset
    second = rows.filter(lambda row: row["episode_index"] == 1)
    assert len(second) == PLAN.lengths[1]
    assert sorted(int(e) for e in second.unique("episode_index")) == [1]
    first_two = rows.select(range(PLAN.lengths[0] + PLAN.lengths[1]))
    assert set(first_two.to_pandas()["episode_index"]) == {0, 1}
    frame = rows.select_columns(["index", "task_index"]).to_pandas()
    assert frame["index"].tolist() == list(range(len(rows)))


def test_a_subset_of_episodes_gives_only_their_rows(recorded: Path) -> None:
    rows = LeRobotTorchDataset(recorded, episodes=[2]).hf_dataset
    assert len(rows) == PLAN.lengths[2]
    assert set(rows.to_pandas()["episode_index"]) == {2}


def test_lerobots_own_dataset_without_a_card(fixtures_dir: Path) -> None:
    root = fixtures_dir / "sim_images"
    if not root.is_dir():
        pytest.skip(f"LeRobot's fixtures are not at {fixtures_dir}")
    dataset = LeRobotTorchDataset(root)
    rows = dataset.hf_dataset
    assert len(rows) == len(dataset)
    torch.testing.assert_close(
        rows[3]["observation.images.front"], dataset[3]["observation.images.front"]
    )


def test_load_dataset_reads_a_recorded_folder(recorded: Path) -> None:
    card = (recorded / "README.md").read_text()
    assert 'data_files: "data/*/*.parquet"' in card
    loaded = datasets.load_dataset(str(recorded), split="train")
    assert loaded.num_rows == sum(PLAN.lengths)
    mine = LeRobotTorchDataset(recorded).hf_dataset.to_pandas()
    theirs = loaded.to_pandas()
    for key in ("index", "episode_index", "next.reward"):
        assert theirs[key].tolist() == mine[key].tolist()
    np.testing.assert_array_equal(
        np.stack(theirs["observation.state"].to_numpy()),
        np.stack(mine["observation.state"].to_numpy()),
    )


def test_resume_updates_the_cards_counts_and_keeps_the_users_words(
    recorded: Path, tmp_path: Path
) -> None:
    root = tmp_path / "copy"
    shutil.copytree(recorded, root)
    card = root / "README.md"
    card.write_text(card.read_text() + "\nMy own notes.\n")
    more = attrs.evolve(PLAN, episodes=(*PLAN.episodes, ("pick",) * 3))
    session = LeRobotV3Writer(options=support.fast_options()).resume(root)
    with session:
        for t in range(3):
            session.add_frame(support.frame(more, 3, t))
        session.save_episode()
    text = card.read_text()
    assert "| Episodes | 4 |" in text and f"| Frames | {sum(PLAN.lengths) + 3} |" in text
    assert text.endswith("My own notes.\n")
    assert datasets.load_dataset(str(root), split="train").num_rows == sum(PLAN.lengths) + 3


def test_a_readme_of_the_users_is_never_replaced(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    root.mkdir()
    session = LeRobotV3Writer(options=support.fast_options()).create(
        root, fps=PLAN.fps, features=PLAN.features()
    )
    (root / "README.md").write_text("# my robot\n")
    with session:
        for t in range(2):
            session.add_frame(support.frame(PLAN, 0, t))
        session.save_episode()
    assert (root / "README.md").read_text() == "# my robot\n"


def test_no_card_for_a_dataset_without_episodes(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    with LeRobotV3Writer(options=support.fast_options()).create(
        root, fps=PLAN.fps, features=PLAN.features()
    ):
        pass
    assert not (root / "README.md").exists()
