"""Each way the Hub says no becomes one `HubError` naming the repo and revision, with a fix."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from rlctl.adapters.hub.huggingface import HuggingFaceHub
from rlctl.adapters.hub.layout import LeRobotLayout
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.application.ports.hub import (
    HubAccessDenied,
    HubError,
    HubNotCached,
    HubRepoNotFound,
    HubRevisionNotFound,
    HubTransferInterrupted,
    PushRequest,
    RepoRef,
)
from rlctl.application.use_cases.pull_dataset import PullDataset, PullDatasetRequest
from rlctl.application.use_cases.push_dataset import PushDataset, PushDatasetRequest
from rlctl.domain.errors import InvalidInput

from .conftest import BAD_TOKEN, READ_ONLY_TOKEN

pytestmark = pytest.mark.timeout(60)

VIDEO = "videos/observation.images.front/chunk-000/file-000.mp4"


def pull(repo_id: str = "alice/sim_video", **options):
    use_case = PullDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())
    return use_case(PullDatasetRequest(repo_id, **options))


def push(root: Path, repo_id: str = "alice/sim_video"):
    use_case = PushDataset(HuggingFaceHub(), LeRobotMetaReader(), LeRobotLayout())
    return use_case(PushDatasetRequest(str(root), repo_id))


def test_a_missing_repo_is_named_with_a_login_hint(fake_hub, hub_env):
    with pytest.raises(HubRepoNotFound) as error:
        pull("alice/nope")

    assert str(error.value).startswith("dataset alice/nope@v3.0: no dataset repo 'alice/nope'")
    assert "hf auth login" in error.value.hint


def test_a_private_repo_without_the_right_token_reads_as_missing(
    fake_hub, hub_env, sim_video_copy, monkeypatch
):
    push(sim_video_copy)
    fake_hub.repo("dataset", "alice/sim_video").private = True
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HOME", str(hub_env / "no-login-here"))

    with pytest.raises(HubRepoNotFound, match="or it is private"):
        pull()


def test_a_gated_repo_says_to_accept_its_conditions(fake_hub, hub_env, sim_video_copy):
    push(sim_video_copy)
    fake_hub.repo("dataset", "alice/sim_video").gated = True

    with pytest.raises(HubAccessDenied) as error:
        pull()

    assert "gated" in str(error.value)
    assert "/datasets/alice/sim_video" in error.value.hint


def test_a_rejected_token_is_a_401_with_a_login_hint(fake_hub, hub_env, monkeypatch):
    fake_hub.create("dataset", "alice/sim_video")
    monkeypatch.setenv("HF_TOKEN", BAD_TOKEN)

    with pytest.raises(HubAccessDenied) as error:
        pull()

    assert "401" in str(error.value)
    assert "hf auth login" in error.value.hint
    assert BAD_TOKEN not in str(error.value) + error.value.hint


def test_a_missing_revision_names_it(fake_hub, hub_env, sim_video_copy):
    push(sim_video_copy)

    with pytest.raises(HubRevisionNotFound) as error:
        pull(revision="v9.9")

    assert str(error.value).startswith("dataset alice/sim_video@v9.9:")
    assert "'v9.9'" in str(error.value)


def test_pushing_without_write_access_is_a_403(fake_hub, hub_env, sim_video_copy, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", READ_ONLY_TOKEN)

    with pytest.raises(HubAccessDenied) as error:
        push(sim_video_copy)

    assert "403" in str(error.value)
    assert "write access" in error.value.hint


def test_pushing_offline_is_refused_before_any_request(
    fake_hub, hub_env, sim_video_copy, monkeypatch
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    with pytest.raises(HubError, match="offline"):
        push(sim_video_copy)

    assert fake_hub.requests == []


def test_a_transfer_that_keeps_breaking_says_to_run_again_and_the_rerun_resumes(
    fake_hub, hub_env, sim_video_copy
):
    push(sim_video_copy)
    fake_hub.interrupt(VIDEO, times=100, after_bytes=0)

    with pytest.raises(HubTransferInterrupted) as error:
        pull()

    assert "run the same command again" in error.value.hint
    fetched = {r.path for r in fake_hub.file_gets() if not r.path.endswith(".mp4")}
    fake_hub.interruptions.clear()
    pulled = pull()
    assert (pulled.root / VIDEO).read_bytes() == (sim_video_copy / VIDEO).read_bytes()
    again = [r.path for r in fake_hub.file_gets() if not r.path.endswith(".mp4")]
    assert len(again) == len(fetched)  # what arrived before the break was not fetched again


def test_an_unreachable_hub_with_nothing_cached_says_so(hub_env, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())

    with pytest.raises(HubNotCached) as error:
        pull()

    assert "cannot reach the Hub" in str(error.value)


def test_a_push_of_an_empty_selection_is_refused(fake_hub, hub_env, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    request = PushRequest(
        RepoRef("alice/x", "model"), folder, card="---\n---\n", commit_message="m"
    )

    with pytest.raises(InvalidInput, match="nothing to push"):
        HuggingFaceHub().push(request)


def closed_port_url() -> str:
    """A loopback URL nothing listens on (a port bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_the_network_beyond_loopback_is_out_of_reach():
    # The guard in conftest.py: a test that tried to reach a real Hub would fail, not connect.
    with pytest.raises(AssertionError, match="tests stay on loopback"):
        socket.create_connection(("192.0.2.1", 443), timeout=0.1)
