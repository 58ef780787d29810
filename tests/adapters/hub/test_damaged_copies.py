"""A local copy that cannot be loaded is a cache miss: damaged files are fetched again.

Against the fake Hub with the real huggingface_hub: a dataset is pushed, a local copy of it (the
revision-safe cache, or a folder under HF_LEROBOT_HOME) is damaged the ways disks and
interrupted copies damage files, and resolving the repo id must give back a copy whose every file
equals the Hub's, the damaged ones fetched again and the others left alone. Offline, or with the
Hub's own copy damaged, it stops with an error naming the files.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog
from click.testing import CliRunner

from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.adapters.hub.integrity import LeRobotIntegrity
from rlctl.adapters.hub.layout import LeRobotLayout
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.reader import LeRobotDatasetReader
from rlctl.application.ports.hub import HubNotCached
from rlctl.application.use_cases.pull_dataset import PullDataset, PullDatasetRequest
from rlctl.application.use_cases.push_dataset import PushDataset, PushDatasetRequest
from rlctl.domain.errors import CorruptDataset
from rlctl.entrypoints.cli.main import cli
from rlctl.entrypoints.container import build_container

pytestmark = pytest.mark.timeout(60)

REPO = "alice/sim_video"
FRONT = "observation.images.front"
DATA = "data/chunk-000/file-000.parquet"
VIDEO = f"videos/{FRONT}/chunk-000/file-000.mp4"
INFO = "meta/info.json"
TASKS = "meta/tasks.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"


def resolve_location(location, **options) -> Path:
    """A folder or repo id to a local dataset root, as the container composes `ResolveDataset`."""
    return build_container().resolve_dataset()(location, **options)


def _cut(path: Path) -> None:
    data = path.read_bytes()
    _rewrite(path, data[: len(data) // 2])


def _garble_start(path: Path) -> None:
    data = path.read_bytes()
    _rewrite(path, os.urandom(64) + data[64:])


def _bad_json(path: Path) -> None:
    _rewrite(path, path.read_bytes()[:-20])


def _rewrite(path: Path, data: bytes) -> None:
    # Through a cache snapshot's link: the blob itself is what a failing disk damages.
    path.write_bytes(data)


def _remove(path: Path) -> None:
    path.unlink()


DAMAGE: dict[str, tuple[str, Callable[[Path], None]]] = {
    "missing parquet": (DATA, _remove),
    "cut parquet": (DATA, _cut),
    "parquet with a garbled header": (DATA, _garble_start),
    "missing video": (VIDEO, _remove),
    "cut video": (VIDEO, _cut),
    "video with a garbled header": (VIDEO, _garble_start),
    "missing info.json": (INFO, _remove),
    "corrupt info.json": (INFO, _bad_json),
    "missing tasks": (TASKS, _remove),
    "cut episodes table": (EPISODES, _cut),
}


def push(root: Path) -> None:
    PushDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())(
        PushDatasetRequest(str(root), REPO)
    )


def pull(**options) -> Path:
    use_case = PullDataset(
        HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout(), LeRobotIntegrity()
    )
    return use_case(PullDatasetRequest(REPO, **options)).root


def repairs(logs: list[dict]) -> list[list[str]]:
    """The files each repair's warning names."""
    return [list(e["files"]) for e in logs if e["event"].startswith("local copy damaged")]


def same_files(copy: Path, original: Path) -> None:
    for path in original.rglob("*"):
        if path.is_file():
            name = path.relative_to(original)
            assert (copy / name).read_bytes() == path.read_bytes(), name


@pytest.fixture
def home_copy(hub_env: Path, sim_video_copy: Path) -> Path:
    """The dataset pushed, and copied (as a user records or copies one) under HF_LEROBOT_HOME."""
    push(sim_video_copy)
    home = hub_env / "lerobot" / REPO
    shutil.copytree(sim_video_copy, home)
    return home


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_file_in_the_cache_is_fetched_again(case, fake_hub, hub_env, sim_video_copy):
    name, damage = DAMAGE[case]
    push(sim_video_copy)
    root = pull()
    damage(root / name)
    fetched = len(fake_hub.file_gets())

    with structlog.testing.capture_logs() as logs:
        again = resolve_location(REPO)

    assert again == root
    same_files(root, sim_video_copy)
    warned = repairs(logs)
    if damage is _remove:
        # A link gone from the snapshot: huggingface_hub links its blob again by itself.
        assert warned in ([], [[name]])
        assert len(fake_hub.file_gets()) - fetched <= 1
    else:
        assert warned == [[name]]
        assert len(fake_hub.file_gets()) - fetched == 1  # that file alone
    assert LeRobotDatasetReader(root)[0]["index"].item() == 0


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_file_under_lerobot_home_is_replaced_and_the_rest_kept(
    case, fake_hub, hub_env, home_copy, sim_video_copy
):
    name, damage = DAMAGE[case]
    damage(home_copy / name)
    notes = home_copy / "notes.txt"  # the user's own file
    notes.write_text("mine")
    untouched = home_copy / (VIDEO if name != VIDEO else DATA)
    before = untouched.stat()

    with structlog.testing.capture_logs() as logs:
        root = resolve_location(REPO)

    assert root == home_copy
    same_files(home_copy, sim_video_copy)
    assert notes.read_text() == "mine"
    after = untouched.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert repairs(logs) == [[name]]
    assert not (home_copy / ".cache").exists()  # no download records: still a plain folder
    assert len(LeRobotDatasetReader(root)) == 75


def test_a_healthy_copy_is_read_as_it_is(fake_hub, hub_env, home_copy):
    requests = len(fake_hub.requests)

    assert resolve_location(REPO) == home_copy
    assert len(fake_hub.requests) == requests  # no request at all


def test_offline_a_damaged_copy_is_one_error_naming_the_file_and_nothing_is_removed(
    fake_hub, hub_env, home_copy, monkeypatch
):
    _cut(home_copy / DATA)
    damaged = (home_copy / DATA).read_bytes()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    requests = len(fake_hub.requests)

    with pytest.raises(HubNotCached) as raised:
        resolve_location(REPO)

    assert DATA in raised.value.message
    assert "offline" in raised.value.message
    assert raised.value.where == str(home_copy / DATA)
    assert f"HF_HUB_OFFLINE=0 rlctl dataset pull {REPO}" in (raised.value.hint or "")
    assert (home_copy / DATA).read_bytes() == damaged
    assert len(fake_hub.requests) == requests


def test_offline_a_damaged_cache_is_one_error_too(fake_hub, hub_env, sim_video_copy, monkeypatch):
    push(sim_video_copy)
    root = pull()
    _garble_start(root / VIDEO)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    with pytest.raises(HubNotCached, match="offline mode"):
        resolve_location(REPO)


@pytest.mark.parametrize("where", ["cache", "home"])
def test_when_the_hub_copy_is_damaged_too_it_stops_naming_the_file(
    where, fake_hub, hub_env, home_copy, sim_video_copy
):
    remote = fake_hub.repo("dataset", REPO)
    commit = remote.tags["v3.0"]
    good = remote.commits[commit][VIDEO]
    remote.commits[commit][VIDEO] = good[: len(good) // 3]
    if where == "cache":
        shutil.rmtree(home_copy)
        with pytest.raises(CorruptDataset, match="still cannot be loaded"):
            pull()  # the first pull already fetches the bad copy
        root = hub_env / "lerobot" / "hub" / "datasets--alice--sim_video" / "snapshots" / commit
    else:
        root = home_copy
        _cut(root / VIDEO)

    with pytest.raises(CorruptDataset) as raised:
        resolve_location(REPO)

    assert VIDEO in raised.value.message
    assert "still cannot be loaded" in raised.value.message
    assert "damaged too" in (raised.value.hint or "")
    assert (root / DATA).read_bytes() == (sim_video_copy / DATA).read_bytes()  # the rest kept


def test_a_local_dataset_the_hub_does_not_have_says_so(fake_hub, hub_env, sim_video_copy):
    home = hub_env / "lerobot" / "alice" / "unpushed"
    shutil.copytree(sim_video_copy, home)
    _remove(home / VIDEO)

    with pytest.raises(CorruptDataset) as raised:
        resolve_location("alice/unpushed")

    assert "fetching them again failed" in raised.value.message
    assert "no dataset repo 'alice/unpushed'" in raised.value.message
    assert (home / DATA).is_file()


def test_only_the_episodes_asked_for_are_checked(fake_hub, hub_env, home_copy):
    info = json.loads((home_copy / INFO).read_text())
    assert info["total_episodes"] == 3  # one data file and one video hold all three

    _remove(home_copy / VIDEO)
    root = resolve_location(REPO, episodes="0")

    assert (root / VIDEO).is_file()


def test_dataset_pull_as_typed_repairs_a_damaged_home_copy(fake_hub, hub_env, home_copy):
    _cut(home_copy / DATA)
    _remove(home_copy / VIDEO)

    result = CliRunner().invoke(cli, ["dataset", "pull", REPO, "--json"])

    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert Path(answer["root"]) == home_copy
    assert LeRobotIntegrity().damaged_files(home_copy) == []
    assert len(LeRobotDatasetReader(home_copy)) == 75


def test_dataset_pull_as_typed_offline_on_a_damaged_copy_is_one_line_and_a_hint(
    fake_hub, hub_env, home_copy, monkeypatch
):
    _cut(home_copy / VIDEO)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    result = CliRunner().invoke(cli, ["dataset", "pull", REPO])

    assert result.exit_code == 1
    assert "error: " in result.output
    assert VIDEO in result.output
    assert f"HF_HUB_OFFLINE=0 rlctl dataset pull {REPO}" in result.output
    assert "Traceback" not in result.output


# --- damage only a hash sees: bytes flipped inside a file, its size and structure intact ------


def _flip(path: Path, at: float) -> None:
    data = bytearray(path.read_bytes())
    start = int(len(data) * at)
    for i in range(start, start + 16):
        data[i] ^= 0xFF
    _rewrite(path, bytes(data))


def _reads(root: Path) -> bool:
    try:
        LeRobotDatasetReader(root)[0]
    except CorruptDataset:
        return False
    return True


def flip_unreadable(path: Path, root: Path) -> None:
    """Flip bytes inside `path` where the quick check still passes but a read fails."""
    original = path.read_bytes()
    for at in (0.3, 0.1, 0.6, 0.35, 0.25, 0.65):
        _flip(path, at)
        if LeRobotIntegrity(None).damaged_files(root) == [] and not _reads(root):
            return
        _rewrite(path, original)
    pytest.fail(f"no flip of {path.name} both passes the quick check and fails a read")


def flip_silently(path: Path, root: Path) -> None:
    """Flip bytes inside `path` where the quick check passes and a read gives wrong values."""
    original = path.read_bytes()
    for at in (0.5, 0.4, 0.2, 0.45):
        _flip(path, at)
        if LeRobotIntegrity(None).damaged_files(root) == [] and _reads(root):
            return
        _rewrite(path, original)
    pytest.fail(f"no flip of {path.name} leaves it readable")


def pull_as_typed(*args: str) -> tuple[int, str, dict]:
    result = CliRunner().invoke(cli, ["dataset", "pull", REPO, *args, "--json"])
    return (
        result.exit_code,
        result.output,
        json.loads(result.stdout) if result.exit_code == 0 else {},
    )


@pytest.mark.parametrize("flip", [flip_unreadable, flip_silently], ids=["unreadable", "silent"])
def test_pull_replaces_a_home_data_file_whose_bytes_are_not_the_hubs(
    flip, fake_hub, hub_env, home_copy, sim_video_copy
):
    flip(home_copy / DATA, home_copy)
    assert LeRobotIntegrity(None).damaged_files(home_copy) == []  # the quick check is blind
    untouched = (home_copy / VIDEO).stat()

    code, output, answer = pull_as_typed()

    assert code == 0, output
    assert answer["replaced"] == [DATA]
    same_files(home_copy, sim_video_copy)
    after = (home_copy / VIDEO).stat()
    assert (after.st_ino, after.st_mtime_ns) == (untouched.st_ino, untouched.st_mtime_ns)
    assert len(LeRobotDatasetReader(home_copy)) == 75


def test_pull_as_typed_names_the_files_it_replaced(fake_hub, hub_env, home_copy):
    flip_silently(home_copy / DATA, home_copy)
    _flip(home_copy / VIDEO, 0.5)

    result = CliRunner().invoke(cli, ["dataset", "pull", REPO])

    assert result.exit_code == 0, result.output
    assert "replaced 2 file(s) of the local copy" in result.output
    assert f"  {DATA}" in result.output and f"  {VIDEO}" in result.output


def test_pull_replaces_a_cached_file_whose_bytes_are_not_the_hubs(
    fake_hub, hub_env, sim_video_copy
):
    push(sim_video_copy)
    root = pull()
    flip_unreadable(root / DATA, root)  # the blob the snapshot links to
    _flip(root / VIDEO, 0.5)
    gets = len(fake_hub.file_gets())

    code, output, answer = pull_as_typed()

    assert code == 0, output
    assert sorted(answer["replaced"]) == sorted([DATA, VIDEO])
    assert len(fake_hub.file_gets()) - gets == 2  # those two files alone
    same_files(root, sim_video_copy)
    assert pull_as_typed()[2]["replaced"] == []  # a healthy copy: nothing fetched


def test_a_copy_edited_locally_is_kept_as_it_is(fake_hub, hub_env, home_copy):
    """Another version than the Hub's (its meta/ differs): its data may differ on purpose."""
    flip_silently(home_copy / DATA, home_copy)
    stats = json.loads((home_copy / "meta/stats.json").read_text())
    stats["action"]["mean"][0] += 1.0  # e.g. statistics recomputed locally
    (home_copy / "meta/stats.json").write_text(json.dumps(stats))
    kept = {name: (home_copy / name).read_bytes() for name in (DATA, "meta/stats.json")}

    code, output, answer = pull_as_typed()

    assert code == 0, output
    assert answer["replaced"] == []
    assert {name: (home_copy / name).read_bytes() for name in kept} == kept
    assert "metadata is not the Hub's" in output


def test_opening_a_repo_id_whose_copy_fails_to_read_repairs_it_from_the_hashes(
    fake_hub, hub_env, home_copy, sim_video_copy
):
    import rlctl.api

    flip_unreadable(home_copy / DATA, home_copy)

    with structlog.testing.capture_logs() as logs:
        dataset = rlctl.api.open_dataset(REPO)

    assert len(dataset) == 75
    same_files(home_copy, sim_video_copy)
    assert any(e["event"].startswith("the copy failed to open") for e in logs)


def test_opening_a_healthy_repo_id_hashes_nothing(fake_hub, hub_env, home_copy, monkeypatch):
    import rlctl.adapters.hub.file_hashes as file_hashes
    import rlctl.api

    hashed: list[Path] = []
    real = file_hashes.hash_file
    monkeypatch.setattr(file_hashes, "hash_file", lambda p: hashed.append(p) or real(p))
    requests = len(fake_hub.requests)

    assert len(rlctl.api.open_dataset(REPO)) == 75
    assert hashed == [] and len(fake_hub.requests) == requests


def test_a_second_pull_reuses_hashes_unless_the_file_was_written_since(
    fake_hub, hub_env, home_copy, sim_video_copy, monkeypatch
):
    import rlctl.adapters.hub.file_hashes as file_hashes

    hashed: list[str] = []
    real = file_hashes.hash_file
    monkeypatch.setattr(file_hashes, "hash_file", lambda p: hashed.append(Path(p).name) or real(p))
    assert pull_as_typed()[2]["replaced"] == []
    assert len(hashed) > 0
    hashed.clear()

    assert pull_as_typed()[2]["replaced"] == []
    assert hashed == []  # nothing was touched: the hashes are kept

    # Bytes flipped and the modification time put back: the change time still tells.
    before = (home_copy / DATA).stat()
    flip_silently(home_copy / DATA, home_copy)
    os.utime(home_copy / DATA, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert pull_as_typed()[2]["replaced"] == [DATA]
    same_files(home_copy, sim_video_copy)


def test_opening_a_repo_id_whose_cached_copy_fails_to_read_repairs_it(
    fake_hub, hub_env, sim_video_copy
):
    import rlctl.api

    push(sim_video_copy)
    root = pull()
    flip_unreadable(root / DATA, root)

    assert len(rlctl.api.open_dataset(REPO)) == 75
    same_files(root, sim_video_copy)


def test_a_failed_read_the_hub_cannot_explain_is_the_reads_own_error(
    fake_hub, hub_env, home_copy, monkeypatch
):
    """The copy is the Hub's byte for byte: the read's error stands, nothing is fetched."""
    import rlctl.api
    from rlctl.adapters.storage.lerobot_v3 import reader

    def broken(*args, **kwargs):
        raise CorruptDataset("the decoder is broken", where="here")

    monkeypatch.setattr(reader.LeRobotDatasetReader, "__init__", broken)
    gets = len(fake_hub.file_gets())

    with pytest.raises(CorruptDataset, match="the decoder is broken"):
        rlctl.api.open_dataset(REPO)
    assert len(fake_hub.file_gets()) == gets
