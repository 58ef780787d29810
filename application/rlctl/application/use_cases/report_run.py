"""ReportRun: a report of a training run, an evaluation or a rollout, as one HTML page and a PNG
of curves.

A training run (`metrics.jsonl`, `rlctl_config.json`, `checkpoints/`) gets its loss, learning
rate, gradient norm and data-wait curves, any loss parts the policy logs, the success and
rewards of the evaluations made while training, its config and its evaluation videos. An
evaluation folder (`eval_info.json`, `videos/`) gets success per task and per episode, the
reward of each episode, and the episode videos. A rollout's report file (`rollout_info.json`)
gets its loop timing, who drove and the interventions (`report_rollout`). What is shown is
decided here; reading the folder and drawing are the ports' work.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from rlctl.application.ports.run_report import (
    Panel,
    ReportRenderer,
    RunFolderReader,
    RunRecord,
    RunReport,
    Series,
    Table,
    Video,
)
from rlctl.application.use_cases.report_rollout import rollout_report
from rlctl.domain.errors import InvalidInput

REPORT_NAME = "report.html"
CURVES_NAME = "report_curves.png"
# Train metrics drawn in panels of their own, in this order; any other figure the policy logs
# (loss parts) joins the loss panel.
_TRAIN_PANELS = (
    ("loss", "Loss", ""),
    ("lr", "Learning rate", ""),
    ("grad_norm", "Gradient norm", ""),
    ("data_wait", "Data wait (share of step time)", ""),
)
_THROUGHPUT = ("samples_per_s", "update_s", "dataloading_s")
_NOT_CURVES = {"step", "phase", "time", *_THROUGHPUT}
_EVAL_SUCCESS = "pc_success"
_EVAL_REWARDS = ("avg_sum_reward", "avg_max_reward")
PERCENT = (0.0, 100.0)
_STEP_VIDEOS = re.compile(r"videos_step_(\d+)")


@attrs.frozen
class ReportFiles:
    html: str
    png: str | None
    report: RunReport


def _section(config: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = config.get(key)
    return value if isinstance(value, Mapping) else {}


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _fmt(value: Any, spec: str, suffix: str = "") -> str:
    return f"{value:{spec}}{suffix}" if _finite(value) else "n/a"


def _series(records: Sequence[Mapping[str, Any]], key: str, name: str | None = None) -> Series:
    points = [(float(r["step"]), float(r[key])) for r in records if _finite(r.get(key))]
    return Series(name or key, tuple(p[0] for p in points), tuple(p[1] for p in points))


def _last_by_step(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A resumed run appends records for steps it logged before: keep the latest of each."""
    by_step: dict[int, Mapping[str, Any]] = {}
    for record in records:
        step = record.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            by_step[step] = record
    return [by_step[s] for s in sorted(by_step)]


def train_report(record: RunRecord) -> RunReport:
    train = _last_by_step([r for r in record.metrics if r.get("phase", "train") == "train"])
    evals = _last_by_step([r for r in record.metrics if r.get("phase") == "eval"])
    panels: list[Panel] = []
    shown = {key for key, _, _ in _TRAIN_PANELS}
    parts = sorted({k for r in train for k, v in r.items() if _finite(v)} - shown - _NOT_CURVES)
    for key, title, unit in _TRAIN_PANELS:
        lines = [_series(train, key)]
        if key == "loss":
            # A part equal to the loss (a policy with one term) would hide under it.
            lines += [s for s in (_series(train, p) for p in parts) if s.y != lines[0].y]
        lines = [s for s in lines if s.x]
        if lines:
            panels.append(Panel(title, "step", tuple(lines), unit))
    if evals:
        success = _series(evals, _EVAL_SUCCESS, "success %")
        if success.x:
            panels.append(Panel("Evaluation success", "step", (success,), "%", True, PERCENT))
        rewards = tuple(s for s in (_series(evals, k) for k in _EVAL_REWARDS) if s.x)
        if rewards:
            panels.append(Panel("Evaluation reward", "step", rewards, markers=True))
    throughput = _series(train, "samples_per_s")
    if throughput.x:
        panels.append(Panel("Throughput", "step", (throughput,), "samples/s"))

    config = record.config or {}
    policy = _section(config, "policy")
    dataset = _section(config, "dataset")
    last = train[-1] if train else {}
    facts = [
        ("policy", str(policy.get("type", "?"))),
        ("dataset", str(dataset.get("repo_id") or dataset.get("root") or "?")),
        ("steps logged", f"{int(last['step'])} of {config.get('steps', '?')}" if last else "none"),
        ("last loss", _fmt(last.get("loss"), ".4g")),
        ("checkpoints", ", ".join(str(s) for s in record.checkpoints) or "none"),
    ]
    if evals and _finite(evals[-1].get(_EVAL_SUCCESS)):
        facts.append(
            ("last eval success", f"{evals[-1][_EVAL_SUCCESS]:.1f}% at step {evals[-1]['step']}")
        )
    tables = []
    if evals:
        keys = [
            k
            for k in (_EVAL_SUCCESS, *_EVAL_REWARDS, "n_episodes", "eval_s")
            if any(k in r for r in evals)
        ]
        tables.append(
            Table(
                "Evaluations during training",
                ("step", *keys),
                tuple((r["step"], *(r.get(k) for k in keys)) for r in evals),
            )
        )
    videos = []
    for path in record.videos:
        match = _STEP_VIDEOS.search(path)
        label = f"step {int(match.group(1))}: {PurePosixPath(path).name}" if match else path
        videos.append((int(match.group(1)) if match else -1, path, label))
    notes = []
    if record.skipped_lines:
        notes.append(f"{record.skipped_lines} unreadable line(s) of metrics.jsonl skipped")
    if not train:
        notes.append("no training step logged yet")
    return RunReport(
        kind="train",
        location=record.location,
        title=f"Training run {config.get('job_name') or PurePosixPath(record.location).name}",
        facts=tuple(facts),
        panels=tuple(panels),
        tables=tuple(tables),
        videos=tuple(Video(label, path) for _, path, label in sorted(videos)),
        config=record.config,
        notes=tuple(notes),
    )


def _video_for(record: RunRecord, written: str) -> str | None:
    """The run folder's copy of a path eval_info.json names (written from wherever eval ran)."""
    parts = PurePosixPath(written.replace("\\", "/")).parts
    for start in range(len(parts)):
        tail = "/".join(parts[start:])
        if tail in record.videos:
            return tail
    return None


def eval_report(record: RunRecord) -> RunReport:
    info = record.eval_info or {}
    episodes = [e for e in info.get("per_episode", []) if isinstance(e, Mapping)]
    per_task = [t for t in info.get("per_task", []) if isinstance(t, Mapping)]
    names = {
        (t.get("task_group"), t.get("task_id")): str(t.get("task") or t.get("task_group"))
        for t in per_task
    }
    task_rows = []
    for task in per_task:
        successes = list(task.get("metrics", {}).get("successes", []))
        rewards = [r for r in task.get("metrics", {}).get("sum_rewards", []) if _finite(r)]
        rate = 100 * sum(map(bool, successes)) / len(successes) if successes else float("nan")
        mean = sum(rewards) / len(rewards) if rewards else float("nan")
        task_rows.append(
            (
                task.get("task_group"),
                task.get("task_id"),
                task.get("task", ""),
                len(successes),
                rate,
                mean,
            )
        )
    episode_rows = tuple(
        (
            e.get("episode_ix"),
            names.get((e.get("task_group"), e.get("task_id")), e.get("task_group")),
            "yes" if e.get("success") else "no",
            e.get("sum_reward"),
            e.get("max_reward"),
            e.get("length"),
            e.get("seed"),
        )
        for e in episodes
    )
    panels = []
    by_task: dict[str, list[Mapping[str, Any]]] = {}
    for e in episodes:
        by_task.setdefault(names.get((e.get("task_group"), e.get("task_id")), "?"), []).append(e)
    for key, title in (
        ("sum_reward", "Sum of rewards per episode"),
        ("max_reward", "Max reward per episode"),
    ):
        lines = []
        for task_name, items in by_task.items():
            points = [
                (float(e["episode_ix"]), float(e[key]))
                for e in items
                if _finite(e.get(key)) and _finite(e.get("episode_ix"))
            ]
            if points:
                lines.append(
                    Series(task_name, tuple(p[0] for p in points), tuple(p[1] for p in points))
                )
        if lines:
            panels.append(Panel(title, "episode", tuple(lines), markers=True))
    success_lines = []
    for task_name, items in by_task.items():
        done = 0
        xs, ys = [], []
        for count, e in enumerate(items, start=1):
            done += bool(e.get("success"))
            xs.append(float(e.get("episode_ix", count - 1)))
            ys.append(100 * done / count)
        success_lines.append(Series(task_name, tuple(xs), tuple(ys)))
    if success_lines:
        panels.insert(
            0, Panel("Success rate so far", "episode", tuple(success_lines), "%", True, PERCENT)
        )

    videos = []
    seen = set()
    for task in per_task:
        paths = task.get("metrics", {}).get("video_paths", [])
        task_episodes = [
            e
            for e in episodes
            if (e.get("task_group"), e.get("task_id"))
            == (task.get("task_group"), task.get("task_id"))
        ]
        for i, written in enumerate(paths):
            path = _video_for(record, str(written))
            if path is None:
                continue
            seen.add(path)
            episode = task_episodes[i] if i < len(task_episodes) else None
            number = episode.get("episode_ix") if episode else i
            label = f"{task.get('task') or task.get('task_group')} episode {number}"
            if episode is not None:
                label += " · success" if episode.get("success") else " · failure"
            videos.append(Video(label, path))
    videos += [Video(path, path) for path in record.videos if path not in seen]

    overall = info.get("overall", {}) if isinstance(info.get("overall"), Mapping) else {}
    facts = [
        ("episodes", str(overall.get("n_episodes", len(episodes)))),
        ("success", _fmt(overall.get("pc_success"), ".1f", "%")),
        ("avg sum reward", _fmt(overall.get("avg_sum_reward"), ".4g")),
        ("avg max reward", _fmt(overall.get("avg_max_reward"), ".4g")),
        ("eval time", _fmt(overall.get("eval_s"), ".1f", " s")),
    ]
    env = (record.config or {}).get("env")
    if isinstance(env, Mapping) and env.get("type"):
        facts.insert(0, ("env", str(env["type"])))
    return RunReport(
        kind="eval",
        location=record.location,
        title=f"Evaluation {PurePosixPath(record.location).name}",
        facts=tuple(facts),
        panels=tuple(panels),
        tables=(
            Table(
                "Success per task",
                ("group", "task id", "task", "episodes", "success %", "avg sum reward"),
                tuple(task_rows),
            ),
            Table(
                "Episodes",
                ("episode", "task", "success", "sum reward", "max reward", "length", "seed"),
                episode_rows,
            ),
        ),
        videos=tuple(videos),
        config=record.config,
    )


def build_report(record: RunRecord) -> RunReport:
    if record.rollout_info is not None:
        return rollout_report(record)
    if record.eval_info is not None:
        return eval_report(record)
    if record.metrics or record.checkpoints:
        return train_report(record)
    raise InvalidInput(
        "this folder holds neither a training run nor an evaluation",
        where=record.location,
        hint="give the output dir of `rlctl train` (metrics.jsonl) or of `rlctl eval` "
        "(eval_info.json), or the report file of `rlctl rollout` (rollout_info.json)",
    )


class ReportRun:
    def __init__(self, reader: RunFolderReader, renderer: ReportRenderer) -> None:
        self._reader = reader
        self._renderer = renderer

    def __call__(
        self,
        location: str,
        *,
        html: str | None = None,
        png: str | None = None,
        embed_videos: bool = False,
        refresh_s: int = 0,
    ) -> ReportFiles:
        """Write `<run>/report.html` and `<run>/report_curves.png` (or where asked); the PNG is
        skipped when there is no curve to draw."""
        report = build_report(self._reader.read(location))
        given = Path(location)
        if given.suffix == ".json":  # a rollout's report file: the page goes beside it
            html_path = html or str(given.with_suffix(".html"))
            png_path = png or str(given.with_name(f"{given.stem}_curves.png"))
        else:
            base = Path(html).parent if html else given
            html_path = html or str(base / REPORT_NAME)
            png_path = png or str(base / CURVES_NAME)
        self._renderer.write_html(report, html_path, embed_videos=embed_videos, refresh_s=refresh_s)
        written_png = None
        if report.panels:
            self._renderer.write_png(report, png_path)
            written_png = png_path
        return ReportFiles(html=html_path, png=written_png, report=report)
