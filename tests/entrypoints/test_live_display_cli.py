"""`--display_data=true` and `rlctl dataset view --rerun` as a user types them, on a machine
without a screen (as CI is): one message says where the recording went, and rerun reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rlctl.adapters.display.rerun_display import RerunDisplay
from rlctl.adapters.memory.live_display import NoDisplay
from rlctl.entrypoints.cli.main import cli
from rlctl.entrypoints.cli.record import RecordCommandSettings
from rlctl.entrypoints.container import build_container
from rlctl.entrypoints.settings import AppSettings

rr = pytest.importorskip("rerun")

SCRIPTED = [
    "--robot.type=scripted",
    "--robot.cameras={front: {type: synthetic, width: 64, height: 48}}",
    "--teleop.type=scripted",
    "--controls=off",
    "--progress=silent",
]


@pytest.fixture(autouse=True)
def headless(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.chdir(tmp_path)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def rows_by_entity(path: Path) -> dict[str, int]:
    rows: dict[str, int] = {}
    for chunk in rr.chunk.RrdReader(path).stream().collect().stream():
        if not chunk.is_static:
            rows[chunk.entity_path] = rows.get(chunk.entity_path, 0) + chunk.num_rows
    return rows


def test_record_with_display_data_and_no_screen_writes_an_rrd_and_says_how_to_view_it(
    tmp_path: Path,
) -> None:
    result = invoke(
        "record",
        *SCRIPTED,
        f"--dataset.root={tmp_path / 'ds'}",
        "--dataset.num_episodes=1",
        "--dataset.fps=50",
        "--dataset.episode_time_s=0.4",
        "--dataset.reset_time_s=0",
        "--display_data=true",
    )
    assert result.exit_code == 0, result.output
    written = list((tmp_path / "outputs" / "display").glob("record_*.rrd"))
    assert len(written) == 1
    relative = Path("outputs/display") / written[0].name
    messages = [line for line in result.output.splitlines() if "live display:" in line]
    assert messages == [
        f"live display: no screen here, so the frames go to {relative}; view it with "
        f"`rerun {relative}` (or watch live in a browser: --display.mode=web)"
    ]
    rows = rows_by_entity(written[0])
    assert set(rows) == {"/observation.state", "/observation.images.front", "/action"}
    # A real-time loop may drop frames the display cannot keep up with, never more.
    assert 1 <= rows["/action"] <= 20


def test_without_display_data_nothing_is_shown(tmp_path: Path) -> None:
    result = invoke(
        "record",
        *SCRIPTED,
        f"--dataset.root={tmp_path / 'ds'}",
        "--dataset.num_episodes=1",
        "--dataset.fps=50",
        "--dataset.episode_time_s=0.1",
        "--dataset.reset_time_s=0",
    )
    assert result.exit_code == 0, result.output
    assert "live display" not in result.output and not (tmp_path / "outputs").exists()


def test_the_container_selects_the_display_by_the_setting() -> None:
    assert isinstance(build_container(AppSettings()).live_display(), NoDisplay)
    assert isinstance(build_container(RecordCommandSettings()).live_display(), NoDisplay)
    shown = build_container(RecordCommandSettings(display_data=True)).live_display()
    assert isinstance(shown, RerunDisplay) and shown.settings.mode == "auto"


def test_help_lists_the_display_settings() -> None:
    for command in ("record", "teleoperate", "eval"):
        result = invoke(command, "--help")
        assert "--display_data" in result.output, command
        assert "--display.mode" in result.output and "--display.rrd" in result.output


def test_dataset_view_rerun_writes_one_episode_with_its_cameras_and_named_series(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ds"
    recorded = invoke(
        "record",
        *SCRIPTED,
        f"--dataset.root={root}",
        "--dataset.num_episodes=2",
        "--dataset.fps=50",
        "--dataset.episode_time_s=0.3",
        "--dataset.reset_time_s=0",
    )
    assert recorded.exit_code == 0, recorded.output
    out = tmp_path / "ep1.rrd"
    result = invoke(
        "dataset",
        "view",
        str(root),
        "--rerun",
        "--episode",
        "1",
        "--out",
        str(out),
        "--dataset.video_backend=pyav",
    )
    assert result.exit_code == 0, result.output
    assert f"wrote episode 1 (15 frames; observation.images.front) to {out}" in result.output
    assert f"`rerun {out}`" in result.output
    assert rows_by_entity(out) == {
        "/observation.state": 15,
        "/observation.images.front": 15,
        "/action": 15,
    }
    missing = CliRunner().invoke(cli, ["dataset", "view", str(root), "--rerun", "--episode", "7"])
    assert missing.exit_code == 1 and "episode 7 does not exist" in missing.output


@pytest.mark.slow
def test_eval_with_display_data_writes_the_first_envs_steps_beside_its_results(
    tmp_path: Path,
) -> None:
    pytest.importorskip("gym_pusht")
    out = tmp_path / "eval"
    result = invoke(
        "eval",
        "--env.type=pusht",
        "--env.episode_length=8",
        "--eval.n_episodes=2",
        "--eval.batch_size=2",
        "--eval.use_async_envs=false",
        "--eval.max_episodes_rendered=0",
        f"--output_dir={out}",
        "--progress=silent",
        "--display_data=true",
    )
    assert result.exit_code == 0, result.output
    rrd = out / "display.rrd"
    assert f"the frames go to {rrd}" in result.output
    # Unpaced: every step of the first env is shown, none dropped.
    assert rows_by_entity(rrd) == {"/observation.image": 8, "/observation.state": 8, "/action": 8}
