"""Reports written to real files: the run folder read from disk, the HTML page, the PNG."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from rlctl.adapters.reports.chart import PALETTE, Line, layout, nice_ticks, svg
from rlctl.adapters.reports.png import paint
from rlctl.adapters.reports.renderer import HtmlReportRenderer
from rlctl.adapters.reports.run_folder import LocalRunFolder
from rlctl.adapters.telemetry.metrics import JsonlMetricsSink
from rlctl.application.ports.run_report import Panel, Series
from rlctl.application.use_cases.report_run import ReportRun


def write_train_run(root: Path, steps: int = 30, evals: bool = True) -> Path:
    (root / "checkpoints" / "000030").mkdir(parents=True)
    (root / "checkpoints" / "last").symlink_to("000030")
    config = {"policy": {"type": "act"}, "dataset": {"root": "data/x"}, "steps": steps}
    (root / "rlctl_config.json").write_text(json.dumps(config))
    sink = JsonlMetricsSink(root / "metrics.jsonl")
    for step in range(1, steps + 1):
        sink.write(
            step,
            {"loss": 2.0 / step, "kld_loss": 0.1 / step, "lr": 1e-4 * (1 - step / 60),
             "grad_norm": 5.0 / step, "data_wait": 0.05, "samples_per_s": 80.0},
        )  # fmt: skip
        if evals and step % 10 == 0:
            sink.write(step, {"pc_success": 3.0 * step, "avg_sum_reward": step / 2}, phase="eval")
    sink.close()
    video = root / "eval" / "videos_step_30" / "pusht_0" / "eval_episode_0.mp4"
    video.parent.mkdir(parents=True)
    video.write_bytes(b"\x00\x00\x00\x18ftypmp42 not really a video")
    return root


def report(root: Path, **options):
    return ReportRun(LocalRunFolder(), HtmlReportRenderer())(str(root), **options)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def test_a_training_run_on_disk_reads_back_whole(tmp_path):
    record = LocalRunFolder().read(str(write_train_run(tmp_path / "run")))
    assert len([m for m in record.metrics if m["phase"] == "train"]) == 30
    assert [m["step"] for m in record.metrics if m["phase"] == "eval"] == [10, 20, 30]
    assert record.checkpoints == (30,)  # the `last` link is not a second checkpoint
    assert record.videos == ("eval/videos_step_30/pusht_0/eval_episode_0.mp4",)
    assert record.config["policy"]["type"] == "act"


def test_a_half_written_last_line_is_skipped_and_said(tmp_path):
    run = write_train_run(tmp_path / "run", evals=False)
    with (run / "metrics.jsonl").open("a") as file:
        file.write('{"step": 31, "phase": "train", "lo')
    files = report(run)
    assert "1 unreadable line(s) of metrics.jsonl skipped" in Path(files.html).read_text()
    assert files.report.panels[0].series[0].x[-1] == 30.0


def test_the_html_page_is_self_contained_with_a_line_per_curve(tmp_path):
    run = write_train_run(tmp_path / "run")
    files = report(run)
    text = Path(files.html).read_text(encoding="utf-8")
    page = parse(Path(files.html))
    # Nothing fetched from anywhere: no external script, stylesheet or image.
    for tag, attrs in page.tags:
        assert not (tag == "script" and attrs.get("src")), attrs
        assert not (tag == "link" and attrs.get("rel") == "stylesheet"), attrs
        assert not (tag == "img" and not attrs.get("src", "").startswith("data:")), attrs
    lines = {a["data-name"]: a["points"] for t, a in page.tags if t == "polyline"}
    assert {"loss", "kld_loss", "lr", "grad_norm", "data_wait", "success %"} <= set(lines)
    assert len(lines["loss"].split()) == 30 and len(lines["success %"].split()) == 3
    # The loss falls: its line goes down the page (SVG y grows downwards).
    ys = [float(p.split(",")[1]) for p in lines["loss"].split()]
    assert ys == sorted(ys)
    for title in ("Loss", "Learning rate", "Gradient norm", "Data wait", "Evaluation success"):
        assert title in text
    assert '"type": "act"' in text  # the config
    videos = [a["src"] for t, a in page.tags if t == "video"]
    assert videos == ["eval/videos_step_30/pusht_0/eval_episode_0.mp4"]
    assert (run / videos[0]).is_file()


def test_videos_are_referenced_from_where_the_page_is_or_embedded(tmp_path):
    run = write_train_run(tmp_path / "run")
    elsewhere = tmp_path / "shared" / "page.html"
    report(run, html=str(elsewhere))
    (src,) = [a["src"] for t, a in parse(elsewhere).tags if t == "video"]
    assert (elsewhere.parent / src).resolve() == (
        run / "eval/videos_step_30/pusht_0/eval_episode_0.mp4"
    ).resolve()
    report(run, html=str(tmp_path / "one.html"), embed_videos=True)
    (src,) = [a["src"] for t, a in parse(tmp_path / "one.html").tags if t == "video"]
    assert src.startswith("data:video/mp4;base64,")


def test_watching_makes_the_page_reload_itself(tmp_path):
    run = write_train_run(tmp_path / "run")
    files = report(run, refresh_s=15)
    assert '<meta http-equiv="refresh" content="15">' in Path(files.html).read_text()
    files = report(run)
    assert "http-equiv" not in Path(files.html).read_text()


def test_the_png_draws_every_panel(tmp_path):
    run = write_train_run(tmp_path / "run")
    files = report(run)
    image = Image.open(files.png)
    assert image.format == "PNG"
    panels = len(files.report.panels)
    assert image.size == (2 * 640, 44 + ((panels + 1) // 2) * 340)
    pixels = np.asarray(image.convert("RGB"))
    # The loss line's blue (the palette's first colour) is drawn in the first panel.
    blue = np.all(np.abs(pixels.astype(int) - [0x1F, 0x77, 0xB4]) < 30, axis=-1)
    assert blue[44 : 44 + 340, :640].sum() > 200
    # The second panel's lr line too, and the loss part's red.
    assert blue[44 : 44 + 340, 640:].sum() > 200
    red = np.all(np.abs(pixels.astype(int) - [0xD6, 0x27, 0x28]) < 30, axis=-1)
    assert red[44 : 44 + 340, :640].sum() > 100


def test_a_folder_with_no_run_says_so(tmp_path):
    from rlctl.domain.errors import InvalidInput

    with pytest.raises(InvalidInput, match="neither a training run nor an evaluation"):
        report(tmp_path)
    with pytest.raises(InvalidInput, match="no run folder here"):
        report(tmp_path / "missing")


def test_nice_ticks_are_round_and_inside_the_range():
    assert [round(t, 9) for t in nice_ticks(0, 1)] == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(1, 4, count=6, min_step=1) == [1, 2, 3, 4]
    ticks = nice_ticks(0.0003, 0.0011)
    assert all(0.0003 <= t <= 0.0011 for t in ticks) and len(ticks) >= 3


def test_one_layout_feeds_both_outputs_and_a_missing_value_breaks_the_line():
    nan = float("nan")
    panel = Panel("loss", "step", (Series("loss", (1, 2, 3, 4, 5, 6), (4, 3, nan, 2, 1, 0.5)),))
    chart = layout(panel, 640, 340, title=True, legend=True)
    drawn = [shape for shape in chart.shapes if isinstance(shape, Line) and shape.name == "loss"]
    assert [len(line.points) for line in drawn] == [2, 3]
    text = svg(chart)
    assert text.count('data-name="loss"') == 2
    numbers = re.findall(r'\b(?:points|x\d?|y\d?|cx|cy)="([^"]*)"', text)
    assert all(np.isfinite(float(v)) for n in numbers for p in n.split() for v in p.split(","))
    image = Image.new("RGB", (640, 340), "#ffffff")
    paint(ImageDraw.Draw(image), chart, 0, 0)
    blue = np.asarray(image).astype(int) - [int(PALETTE[0][i : i + 2], 16) for i in (1, 3, 5)]
    plot = chart.frame
    inside = np.all(np.abs(blue) < 30, axis=-1)[
        int(plot.top) : int(plot.top + plot.height), int(plot.left) : int(plot.left + plot.width)
    ]
    assert inside.sum() > 100  # the painted lines, where the SVG puts them


def test_a_rollout_report_file_or_its_folder_is_read_and_another_json_is_refused(tmp_path):
    from rlctl.domain.errors import InvalidInput

    info = {"strategy": "base", "timing": {"target_s": 0.05}, "ticks": 3}
    (tmp_path / "arm.rollout_info.json").write_text(json.dumps(info))
    record = LocalRunFolder().read(str(tmp_path / "arm.rollout_info.json"))
    assert record.rollout_info == info and record.location.endswith("arm.rollout_info.json")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "rollout_info.json").write_text(json.dumps(info))
    assert LocalRunFolder().read(str(folder)).rollout_info == info
    (tmp_path / "other.json").write_text(json.dumps({"loss": 1}))
    with pytest.raises(InvalidInput, match="not a rollout's report") as caught:
        LocalRunFolder().read(str(tmp_path / "other.json"))
    assert caught.value.where.endswith("other.json")
