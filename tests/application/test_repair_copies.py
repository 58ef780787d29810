"""The repair policy of `PullDataset` / `ResolveDataset`, with the in-memory Hub and declared
damage: which files are fetched again, which copy is written, when it stops."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import attrs
import pytest
import structlog

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


# --- files whose bytes are not the Hub's: only the Hub's hashes tell -----------------------------


def _garble(path: Path) -> None:
    """Same size, other bytes: what flipped bits look like to every check but a hash."""
    path.write_bytes(bytes(b ^ 0xFF for b in path.read_bytes()))


def test_a_pull_fetches_again_a_cached_file_whose_bytes_are_not_the_hubs(world):
    w = world
    root = w.pull(PullDatasetRequest(REPO)).root
    _garble(root / data_file(1))
    w.hub.fetched.clear()

    pulled = w.pull(PullDatasetRequest(REPO))

    assert pulled.replaced == (data_file(1),)
    assert [name for _, _, name in w.hub.fetched] == [data_file(1)]
    assert (root / data_file(1)).read_bytes() == (w.source / data_file(1)).read_bytes()


def test_resolving_compares_nothing_but_a_failed_read_does(world):
    w = world
    root = w.pull(PullDatasetRequest(REPO)).root
    _garble(root / video_file(0))
    w.hub.fetched.clear()

    assert w.resolve(REPO) == root
    assert w.hub.fetched == []  # opening stays cheap: no hash, no transfer

    opened: list[bytes] = []

    def opener(found: Path) -> str:
        content = (found / video_file(0)).read_bytes()
        opened.append(content)
        if content != (w.source / video_file(0)).read_bytes():
            raise CorruptDataset("cannot decode", where=str(found / video_file(0)))
        return "opened"

    assert w.resolve.read(REPO, opener) == "opened"
    assert len(opened) == 2
    assert [name for _, _, name in w.hub.fetched] == [video_file(0)]


def test_a_failed_read_of_a_copy_equal_to_the_hubs_keeps_its_error(world):
    w = world
    w.pull(PullDatasetRequest(REPO))
    w.hub.fetched.clear()

    def opener(found: Path) -> None:
        raise CorruptDataset("the reader's own fault", where=str(found))

    with pytest.raises(CorruptDataset, match="the reader's own fault"):
        w.resolve.read(REPO, opener)
    assert w.hub.fetched == []


def test_a_home_copy_equal_to_the_hubs_in_meta_gets_its_damaged_data_replaced(world):
    w = world
    home = w.hub.home_root(REPO)
    shutil.copytree(w.source, home)
    _garble(home / data_file(0))

    pulled = w.pull(PullDatasetRequest(REPO))

    assert pulled.root == home
    assert pulled.replaced == (data_file(0),)
    assert w.integrity.replaced == [data_file(0)]
    assert (home / data_file(0)).read_bytes() == (w.source / data_file(0)).read_bytes()


def test_a_home_copy_whose_meta_differs_is_another_version_and_is_kept(world):
    w = world
    home = w.hub.home_root(REPO)
    shutil.copytree(w.source, home)
    (home / "meta/info.json").write_text("recorded further here")
    _garble(home / data_file(0))
    kept = (home / data_file(0)).read_bytes()

    pulled = w.pull(PullDatasetRequest(REPO))

    assert pulled.replaced == ()
    assert (home / data_file(0)).read_bytes() == kept
    assert w.integrity.replaced == []


def test_a_home_copy_the_hub_does_not_have_is_pulled_as_it_is(tmp_path):
    hub = InMemoryHub(tmp_path / "hub")
    meta = make_meta([0])
    home = write_dataset(hub.home_root(REPO), meta)
    pull = PullDataset(hub, FixedMetaReader(meta), LeRobotLayout(), DeclaredIntegrity())

    with structlog.testing.capture_logs() as logs:
        pulled = pull(PullDatasetRequest(REPO))

    assert pulled.root == home and pulled.replaced == ()
    assert any("could not compare" in e["event"] for e in logs)


def test_offline_a_pull_compares_nothing(world):
    w = world
    root = w.pull(PullDatasetRequest(REPO)).root
    _garble(root / data_file(1))
    w.hub.offline = True

    assert w.pull(PullDatasetRequest(REPO)).replaced == ()


def test_bytes_the_hub_serves_unlike_its_own_record_stop_the_pull(world, monkeypatch):
    w = world
    root = w.pull(PullDatasetRequest(REPO)).root
    _garble(root / data_file(1))
    listing = w.hub.recorded_files

    def lying(repo):
        found = listing(repo)
        files = dict(found.files)
        files[data_file(1)] = attrs.evolve(files[data_file(1)], sha256="0" * 64)
        return attrs.evolve(found, files=files)

    monkeypatch.setattr(w.hub, "recorded_files", lying)

    with pytest.raises(CorruptDataset, match="still differ from the Hub's own record"):
        w.pull(PullDatasetRequest(REPO))
