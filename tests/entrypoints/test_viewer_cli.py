"""`rlctl dataset view` as a user types it, on LeRobot-written datasets."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request

import pytest
from click.testing import CliRunner

from rlctl.entrypoints.cli.main import cli

SERVE = "from rlctl.entrypoints.cli.main import main; main()"


def read_line(stream, timeout: float = 60) -> str:
    """The next line of a child's output; fails (instead of waiting for ever) after timeout."""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert got, f"no line within {timeout} s"
    return got[0]


def serve(root, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SERVE, "dataset", "view", str(root), "--no-browser", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RLCTL_LOG_LEVEL": "warning"},
    )


def stop(process: subprocess.Popen) -> tuple[str, str]:
    process.send_signal(signal.SIGINT)
    try:
        return process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=20)


def test_out_writes_the_page_with_lerobots_episode_spans(fixtures_dir, tmp_path):
    out = tmp_path / "site"
    result = CliRunner().invoke(
        cli, ["dataset", "view", str(fixtures_dir / "sim_video"), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert f"wrote 3 episodes to {out / 'index.html'}" in result.output
    page = json.loads((out / "data" / "dataset.json").read_text())
    assert [e["length"] for e in page["episodes"]] == [20, 25, 30]
    assert page["groups"][0]["names"] == [f"joint_{i}" for i in range(6)]
    # LeRobot put the three episodes in one file: episode 1 starts 2 s in, ends at 4.5 s.
    clip = json.loads((out / "data" / "episode-1.json").read_text())["videos"][0]
    assert (clip["start_s"], clip["end_s"]) == (2.0, 4.5)
    video = out / "media" / clip["file"]
    assert video.read_bytes() == (fixtures_dir / "sim_video" / clip["file"]).read_bytes()


def test_a_dataset_of_images_has_plots_and_no_clips(fixtures_dir, tmp_path):
    out = tmp_path / "site"
    result = CliRunner().invoke(
        cli, ["dataset", "view", str(fixtures_dir / "sim_images"), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    page = json.loads((out / "data" / "dataset.json").read_text())
    assert page["cameras"] == [] and len(page["groups"]) == 2
    episode = json.loads((out / "data" / "episode-1.json").read_text())
    assert episode["videos"] == [] and len(episode["series"]["action"]) == 6


def test_a_missing_dataset_is_one_line_and_a_hint(tmp_path):
    result = CliRunner().invoke(cli, ["dataset", "view", str(tmp_path / "nope"), "--out", "x"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output and "no dataset folder" in result.output


@pytest.mark.slow
def test_serving_prints_the_address_and_stops_on_ctrl_c(fixtures_dir):
    root = fixtures_dir / "sim_video"
    process = serve(root)
    try:
        line = read_line(process.stdout)
        assert line.startswith(f"serving {root.resolve()} at http://127.0.0.1:"), line
        url = line.split(" at ")[1].split()[0]
        with urllib.request.urlopen(url + "data/dataset.json", timeout=10) as response:
            assert len(json.load(response)["episodes"]) == 3
        request = urllib.request.Request(
            url + "media/videos/observation.images.front/chunk-000/file-000.mp4",
            headers={"Range": "bytes=0-7"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 206 and response.read()[4:8] == b"ftyp"
    finally:
        out, err = stop(process)
    assert process.returncode == 0, err
    assert "stopped" in out
    assert "warning" not in err


def test_an_address_other_machines_reach_is_refused_before_the_dataset_is_read(tmp_path):
    for host in ("0.0.0.0", "::"):
        result = CliRunner().invoke(
            cli, ["dataset", "view", str(tmp_path / "nope"), "--host", host, "--no-browser"]
        )
        assert result.exit_code == 1, result.output
        assert "reachable from other machines" in result.output
        assert "--insecure" in result.output and "127.0.0.1" in result.output
        assert "no dataset folder" not in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_insecure_serves_the_network_with_a_warning_and_refuses_rebound_names(fixtures_dir):
    process = serve(fixtures_dir / "sim_video", "--host", "0.0.0.0", "--insecure")
    try:
        line = read_line(process.stdout)
        assert " at http://127.0.0.1:" in line, line
        port = int(line.split(" at ")[1].split()[0].rstrip("/").rsplit(":", 1)[1])
        warning = read_line(process.stderr)
        assert warning.startswith("warning: --host 0.0.0.0 --insecure: any machine"), warning
        assert f"port {port}" in warning and "without a password" in warning
        for host, status in ((f"127.0.0.1:{port}", 200), (f"rebound.example:{port}", 421)):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("GET", "/data/dataset.json", headers={"Host": host})
            assert connection.getresponse().status == status, host
            connection.close()
    finally:
        _, err = stop(process)
    assert process.returncode == 0, err


def test_a_hub_repo_id_is_pulled_then_viewed(fixtures_dir, tmp_path, monkeypatch):
    """REPO_ID goes through the container's dataset resolver (an in-memory Hub here)."""
    from dependency_injector import providers

    import rlctl.entrypoints.container as wiring
    from rlctl.adapters.memory.hub import InMemoryHub
    from rlctl.application.use_cases.push_dataset import PushDatasetRequest

    hub = InMemoryHub(tmp_path / "hub")
    build = wiring.build_container

    def with_hub(*args, **kwargs):
        container = build(*args, **kwargs)
        container.hub.override(providers.Object(hub))
        return container

    with_hub().push_dataset()(PushDatasetRequest(str(fixtures_dir / "sim_video"), "alice/sim"))
    monkeypatch.setattr(wiring, "build_container", with_hub)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "site"
    result = CliRunner().invoke(cli, ["dataset", "view", "alice/sim", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert hub.fetched
    page = json.loads((out / "data" / "dataset.json").read_text())
    assert [e["length"] for e in page["episodes"]] == [20, 25, 30]
    clip = json.loads((out / "data" / "episode-2.json").read_text())["videos"][0]
    assert (out / "media" / clip["file"]).is_file()
