"""The repair policy of `PullDataset` / `ResolveDataset`, with the in-memory Hub and declared
damage: which files are fetched again, which copy is written, when it stops."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from rlctl.adapters.hub.layout import LeRobotLayout
from rlctl.adapters.memory.hub import InMemoryHub
from rlctl.adapters.memory.integrity import DeclaredIntegrity
from rlctl.application.ports.hub import HubNotCached
from rlctl.application.use_cases.pull_dataset import (
    PullDataset,
    PullDatasetRequest,
    ResolveDataset,
)
from rlctl.application.use_cases.push_dataset import PushDataset, PushDatasetRequest
from rlctl.domain.errors import CorruptDataset
from tests.application.test_hub_use_cases import (
    REPO,
    FixedMetaReader,
    data_file,
    make_meta,
    video_file,
    write_dataset,
)


@pytest.fixture
def world(tmp_path: Path) -> SimpleNamespace:
    meta = make_meta([0, 0, 1])
    hub = InMemoryHub(tmp_path / "hub")
    reader = FixedMetaReader(meta)
    source = write_dataset(tmp_path / "dataset", meta)
    PushDataset(hub, reader, LeRobotLayout())(PushDatasetRequest(str(source), REPO))
    integrity = DeclaredIntegrity()
    pull = PullDataset(hub, reader, LeRobotLayout(), integrity)
    resolve = ResolveDataset(hub, pull)
    return SimpleNamespace(hub=hub, integrity=integrity, pull=pull, resolve=resolve, source=source)


def test_a_damaged_cached_file_is_fetched_again_and_only_it(world):
    w = world
    root = w.pull(PullDatasetRequest(REPO)).root
    (root / data_file(1)).write_bytes(b"garbage")
    w.integrity.declare(root, data_file(1))
    w.hub.fetched.clear()

    assert w.resolve(REPO) == root

    assert [name for _, _, name in w.hub.fetched] == [data_file(1)]
    assert (root / data_file(1)).read_bytes() == (w.source / data_file(1)).read_bytes()


def test_a_damaged_home_copy_is_repaired_in_place_from_the_cache(world):
    w = world
    home = write_dataset(w.hub.home_root(REPO), make_meta([0, 0, 1]))
    (home / video_file(0)).write_bytes(b"cut")
    w.integrity.declare(home, video_file(0))

    assert w.resolve(REPO) == home

    assert w.integrity.replaced == [video_file(0)]
    assert (home / video_file(0)).read_bytes() == (w.source / video_file(0)).read_bytes()


def test_damaged_meta_is_repaired_before_the_files_it_names(world):
    w = world
    home = write_dataset(w.hub.home_root(REPO), make_meta([0, 0, 1]))
    (home / "meta/info.json").write_text("{")
    (home / data_file(0)).unlink()
    w.integrity.declare(home, "meta/info.json")
    w.integrity.declare(home, data_file(0))

    w.resolve(REPO)

    assert w.integrity.replaced == ["meta/info.json", data_file(0)]


def test_a_pull_repairs_the_home_copy_readers_prefer(world):
    w = world
    home = write_dataset(w.hub.home_root(REPO), make_meta([0, 0, 1]))
    (home / data_file(0)).unlink()
    w.integrity.declare(home, data_file(0))

    pulled = w.pull(PullDatasetRequest(REPO))

    assert pulled.root == home
    assert (home / data_file(0)).is_file()


def test_offline_nothing_is_fetched_and_the_error_names_the_file(world):
    w = world
    home = write_dataset(w.hub.home_root(REPO), make_meta([0, 0, 1]))
    w.integrity.declare(home, data_file(1))
    w.hub.offline = True

    with pytest.raises(HubNotCached) as raised:
        w.resolve(REPO)

    assert data_file(1) in raised.value.message
    assert w.integrity.replaced == []


def test_a_hub_copy_as_damaged_as_ours_stops_the_repair(world):
    w = world
    root = w.pull(PullDatasetRequest(REPO)).root
    w.integrity.declare(root, data_file(0))  # the Hub's bytes are the ones declared damaged

    with pytest.raises(CorruptDataset, match="still cannot be loaded"):
        w.resolve(REPO)


def test_without_an_integrity_check_a_copy_is_trusted_as_found(tmp_path):
    hub = InMemoryHub(tmp_path / "hub")
    meta = make_meta([0])
    home = write_dataset(hub.home_root(REPO), meta)
    resolve = ResolveDataset(hub, PullDataset(hub, FixedMetaReader(meta), LeRobotLayout()))

    assert resolve(REPO) == home
