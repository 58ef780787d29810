"""`rlctl report` on real runs: a tiny `rlctl train` and a short `rlctl eval` in PushT."""

from __future__ import annotations

import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from rlctl.entrypoints.cli.main import cli

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags(path: Path) -> list[tuple[str, dict]]:
    parser = _Tags()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.tags


def test_train_says_how_to_report_and_the_report_draws_its_metrics(fixtures_dir, tmp_path):
    runner = CliRunner()
    out = tmp_path / "run"
    # As tests/entrypoints/test_train_cli.py trains: a tiny MLP on LeRobot's sim_video.
    result = runner.invoke(
        cli,
        [
            "train",
            f"--dataset.root={fixtures_dir / 'sim_video'}",
            "--policy.type=mlp",
            "--policy.chunk_size=5",
            "--policy.n_action_steps=5",
            "--policy.hidden_dims=[32,32]",
            "--steps=4",
            "--batch_size=4",
            "--num_workers=0",
            "--log_freq=1",
            "--save_freq=2",
            f"--output_dir={out}",
        ],
    )
    assert result.exit_code == 0, result.output
    assert f"rlctl report {out}" in result.output

    result = runner.invoke(cli, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out / 'report.html'} and {out / 'report_curves.png'}" in result.output
    page = out / "report.html"
    lines = {a["data-name"]: a["points"] for t, a in tags(page) if t == "polyline"}
    for name in ("loss", "lr", "grad_norm", "data_wait"):
        assert len(lines[name].split()) == 4, name
    text = page.read_text()
    assert '"type": "mlp"' in text and "000002" not in text and "2, 4" in text  # checkpoints
    assert Image.open(out / "report_curves.png").size[0] == 1280


def test_train_keeps_its_report_fresh_and_writes_the_last_one(fixtures_dir, tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            f"--dataset.root={fixtures_dir / 'sim_video'}",
            "--policy.type=mlp",
            "--policy.chunk_size=5",
            "--policy.n_action_steps=5",
            "--policy.hidden_dims=[32,32]",
            "--steps=4",
            "--batch_size=4",
            "--num_workers=0",
            "--log_freq=1",
            "--save_freq=4",
            "--report_refresh_s=0.001",
            f"--output_dir={out}",
        ],
    )
    assert result.exit_code == 0, result.output
    page = out / "report.html"
    assert f"report: {page}" in result.output
    lines = {a["data-name"]: a["points"] for t, a in tags(page) if t == "polyline"}
    assert len(lines["loss"].split()) == 4  # the last page has every step
    assert 'http-equiv="refresh"' not in page.read_text()  # and no longer reloads itself
    assert (out / "report_curves.png").is_file()


def test_an_evaluation_report_shows_success_rewards_and_its_videos(tmp_path):
    pytest.importorskip("gym_pusht")
    runner = CliRunner()
    out = tmp_path / "eval"
    result = runner.invoke(
        cli,
        [
            "eval",
            "--env.type=pusht",
            "--env.episode_length=15",
            "--eval.n_episodes=2",
            "--eval.batch_size=2",
            "--eval.max_episodes_rendered=2",
            f"--output_dir={out}",
        ],
    )
    assert result.exit_code == 0, result.output
    page = tmp_path / "elsewhere" / "eval.html"
    result = runner.invoke(cli, ["report", str(out), "--out", str(page)])
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert "Success per task" in text and "PushT-v0" in text and "Sum of rewards" in text
    videos = [a["src"] for t, a in tags(page) if t == "video"]
    assert len(videos) == 2
    for src in videos:
        assert (page.parent / src).resolve().is_file()  # relative to the page, not the run
    assert (page.parent / "report_curves.png").is_file()

    chromium = shutil.which("chromium")
    if chromium is None:
        return
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            headless=True,
            args=["--no-sandbox", "--headless", "--disable-dev-shm-usage"],
        )
        tab = browser.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda error: errors.append(str(error)))
        tab.goto(page.as_uri())
        # The episode videos load from the page's relative paths and decode.
        tab.wait_for_function(
            "[...document.querySelectorAll('video')]"
            ".every(v => v.readyState >= 1 && v.duration > 0)",
            timeout=15_000,
        )
        browser.close()
    assert not errors, errors


def test_a_folder_that_is_no_run_is_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert result.exit_code == 1
    assert "neither a training run nor an evaluation" in result.output
    assert "Traceback" not in result.output


def test_watch_rewrites_the_report_until_ctrl_c(tmp_path):
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    run = tmp_path / "run"
    run.mkdir()
    metrics = run / "metrics.jsonl"
    metrics.write_text(json.dumps({"step": 1, "phase": "train", "loss": 1.0}) + "\n")
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from rlctl.entrypoints.cli.main import main; main()",
            "report",
            str(run),
            "--watch",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RLCTL_LOG_LEVEL": "warning"},
    )
    try:
        assert process.stdout.readline().startswith(f"wrote {run / 'report.html'}")
        page = (run / "report.html").read_text()
        assert '<meta http-equiv="refresh" content="1">' in page
        # The run goes on: the next rewrite shows the new step.
        with metrics.open("a") as file:
            file.write(json.dumps({"step": 2, "phase": "train", "loss": 0.5}) + "\n")
        assert process.stdout.readline().startswith("wrote ")
        deadline = time.monotonic() + 10
        while "2 of ?" not in (run / "report.html").read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "2 of ?" in (run / "report.html").read_text()
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "stopped" in out
