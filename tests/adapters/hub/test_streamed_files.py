"""A Hub dataset's files read by ranges through huggingface_hub's file system, at one commit:
right bytes for any read, few blocks kept, every failure one `HubError` naming the file."""

from __future__ import annotations

import multiprocessing
import pickle
import random
import subprocess
import sys
from urllib.parse import unquote

import pytest

from rlctl.adapters.hub.streamed_files import HubFiles
from rlctl.application.ports.hub import HubAccessDenied, HubError, HubNotCached, HubRepoNotFound

from .conftest import BAD_TOKEN, FakeHub

pytestmark = pytest.mark.timeout(60)

REPO = "alice/ranges"
VIDEO = "videos/front/chunk-000/file-000.mp4"
CONTENT = random.Random(0).randbytes(10_000)


@pytest.fixture
def files(fake_hub: FakeHub, hub_env) -> HubFiles:
    """A repo whose main holds VIDEO (and a few neighbours), read in 512-byte blocks, 4 kept."""
    repo = fake_hub.create("dataset", REPO)
    commit = "c" * 40
    repo.commits[commit] = {
        **{f"videos/front/chunk-000/file-00{i}.mp4": bytes([i]) * 10 for i in range(1, 6)},
        VIDEO: CONTENT,
        "meta/info.json": b"{}",
    }
    repo.branches["main"] = commit
    return HubFiles(REPO, commit, endpoint=fake_hub.url, block_bytes=512, max_blocks=4)


def file_gets(hub: FakeHub) -> list:
    return hub.file_gets(".mp4")


def test_any_read_gives_the_files_bytes_by_ranges_of_the_commit_keeping_few_blocks(fake_hub, files):
    remote = files.open(VIDEO)
    spots = random.Random(1).sample(range(len(CONTENT)), 40)

    for start in spots:
        remote.seek(start)
        assert remote.read(700) == CONTENT[start : start + 700]
        assert remote.cache.cache_info().currsize <= 4  # memory stays bounded
    remote.seek(-5, 2)
    assert remote.read(100) == CONTENT[-5:] and remote.read(10) == b""
    assert remote.size == len(CONTENT) and remote.seekable()

    gets = file_gets(fake_hub)
    assert gets and all(f"/resolve/{files.commit}/" in g.path for g in gets)
    assert all(g.headers.get("range", "").startswith("bytes=") for g in gets)
    assert fake_hub.bytes_sent < len(CONTENT) * 5  # blocks, not the file per read


def test_a_later_push_does_not_change_what_is_read(fake_hub, files):
    repo = fake_hub.repo("dataset", REPO)
    newer = "d" * 40
    repo.commits[newer] = {**repo.commits[files.commit], VIDEO: b"x" * len(CONTENT)}
    repo.branches["main"] = newer

    assert files.open(VIDEO).read(len(CONTENT)) == CONTENT


def test_a_server_that_ignores_ranges_still_gives_the_right_bytes(fake_hub, files):
    fake_hub.ignore_ranges = True
    remote = files.open(VIDEO)

    remote.seek(3000)
    assert remote.read(1500) == CONTENT[3000:4500]
    remote.seek(9990)
    assert remote.read(100) == CONTENT[9990:]


def test_a_folder_listed_over_several_pages_is_found(fake_hub, files):
    fake_hub.tree_page_size = 2

    assert files.open(VIDEO).read(100) == CONTENT[:100]
    assert files.open("videos/front/chunk-000/file-005.mp4").read(10) == bytes([5]) * 10
    pages = [r for r in fake_hub.requests if "/tree/" in r.path]
    assert len(pages) >= 3


def test_a_dropped_connection_is_retried(fake_hub, files):
    fake_hub.interrupt(VIDEO, times=2, after_bytes=100)

    assert files.open(VIDEO).read(2000) == CONTENT[:2000]


def test_a_connection_that_always_drops_is_one_error_naming_the_file(fake_hub, files):
    remote = files.open(VIDEO)
    fake_hub.interrupt(VIDEO, times=100, after_bytes=10)

    with pytest.raises(HubNotCached) as error:
        remote.read(2000)

    assert VIDEO in error.value.message and error.value.where == files.url(VIDEO)
    assert f"rlctl dataset pull {REPO}" in error.value.hint


def test_a_file_the_commit_lacks_is_one_error_naming_it(files):
    missing = "videos/front/chunk-009/file-000.mp4"  # its folder is missing too

    for path in (missing, "videos/front/chunk-000/file-999.mp4"):
        with pytest.raises(HubError) as error:
            files.open(path)
        assert path in error.value.message and error.value.where == files.url(path)
        assert "incomplete" in error.value.hint


def test_a_token_refused_mid_stream_is_one_error_naming_the_file(files, monkeypatch):
    remote = files.open(VIDEO)
    monkeypatch.setenv("HF_TOKEN", BAD_TOKEN)

    with pytest.raises(HubAccessDenied) as error:
        remote.read(100)

    assert error.value.where == files.url(VIDEO) and "hf auth login" in error.value.hint


def test_a_private_repo_without_a_token_is_one_error_naming_the_file(fake_hub, files, monkeypatch):
    fake_hub.repo("dataset", REPO).private = True
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")

    with pytest.raises(HubRepoNotFound) as error:
        # Another endpoint spelling: a file system that has not seen the repo yet.
        HubFiles(REPO, files.commit, endpoint=files.endpoint + "/").open(VIDEO)

    assert error.value.where.endswith(VIDEO) and "private" in error.value.message


READ_IN_A_FRESH_PROCESS = f"""
import pickle, sys
remote = pickle.loads(sys.stdin.buffer.read()).open({VIDEO!r})
remote.seek(4000)
sys.stdout.buffer.write(remote.read(1000))
"""


def _read_in_child(blob: bytes, start: int) -> bytes:
    remote = pickle.loads(blob).open(VIDEO)
    remote.seek(start)
    return remote.read(1000)


def test_a_pickled_copy_reads_in_a_forked_process(fake_hub, files):
    files.open(VIDEO).read(10)  # the parent's file system has listed the folder
    listed = [r for r in fake_hub.requests if "/api/" in r.path]
    context = multiprocessing.get_context("fork")

    with context.Pool(1) as pool:
        got = pool.apply_async(_read_in_child, (pickle.dumps(files), 4000)).get(timeout=30)

    assert got == CONTENT[4000:5000]
    # fsspec gives a forked child a file system of its own (it empties the instance cache):
    # it asks for the commit once and lists the file's folder once.
    again = [unquote(r.path.split("?")[0]) for r in fake_hub.requests if "/api/" in r.path][
        len(listed) :
    ]
    assert again == [
        f"/api/datasets/{REPO}/revision/{files.commit}",
        f"/api/datasets/{REPO}/tree/{files.commit}/videos/front/chunk-000",
    ]


@pytest.mark.slow
def test_a_pickled_copy_reads_in_a_fresh_process(files):
    done = subprocess.run(
        [sys.executable, "-c", READ_IN_A_FRESH_PROCESS],
        input=pickle.dumps(files),
        capture_output=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout == CONTENT[4000:5000]
