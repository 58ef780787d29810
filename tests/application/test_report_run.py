"""ReportRun through the container with in-memory run folders: what a report shows."""

from __future__ import annotations

import math

import pytest
from dependency_injector import providers
from hypothesis import given
from hypothesis import strategies as st

from rlctl.adapters.memory.run_report import InMemoryRunFolders, RecordingReportRenderer
from rlctl.application.ports.run_report import RunRecord
from rlctl.domain.errors import InvalidInput
from rlctl.entrypoints.container import build_container


def reporting(records: dict[str, RunRecord]):
    container = build_container()
    renderer = RecordingReportRenderer()
    container.run_folder.override(providers.Object(InMemoryRunFolders(records)))
    container.report_renderer.override(providers.Object(renderer))
    return container.report_run(), renderer


def train_record(steps: int, **extra) -> RunRecord:
    metrics = [
        {
            "step": s,
            "phase": "train",
            "loss": 1.0 / s,
            "l1_loss": 0.5 / s,
            "lr": 1e-4,
            "grad_norm": 2.0,
            "data_wait": 0.1,
            "samples_per_s": 100.0,
        }
        for s in range(1, steps + 1)
    ]
    return RunRecord(
        location="runs/act",
        config={"policy": {"type": "act"}, "dataset": {"repo_id": "me/pusht"}, "steps": steps},
        metrics=metrics,
        checkpoints=(steps,),
        **extra,
    )


@given(st.integers(1, 40))
def test_a_training_run_gets_loss_lr_grad_norm_and_data_wait_curves(steps):
    use_case, renderer = reporting({"runs/act": train_record(steps)})
    files = use_case("runs/act")
    assert files.html == "runs/act/report.html" and files.png == "runs/act/report_curves.png"
    report, options = renderer.html[files.html]
    assert renderer.png[files.png] is report and options == {"embed_videos": False, "refresh_s": 0}
    panels = {p.title: p for p in report.panels}
    assert list(panels)[:4] == [
        "Loss",
        "Learning rate",
        "Gradient norm",
        "Data wait (share of step time)",
    ]
    loss = panels["Loss"]
    assert [s.name for s in loss.series] == ["loss", "l1_loss"]  # parts join the loss
    assert loss.series[0].x == tuple(float(s) for s in range(1, steps + 1))
    assert loss.series[0].y == tuple(1.0 / s for s in range(1, steps + 1))
    assert dict(report.facts)["steps logged"] == f"{steps} of {steps}"
    assert report.config["policy"]["type"] == "act"


def test_a_resumed_run_keeps_the_latest_record_of_each_step():
    record = train_record(3)
    again = {**record.metrics[1], "loss": 9.0}
    resumed = RunRecord(location="runs/act", metrics=[*record.metrics, again])
    use_case, _ = reporting({"runs/act": resumed})
    report = use_case("runs/act").report
    assert report.panels[0].series[0].y == (1.0, 9.0, 1.0 / 3)


def test_evaluations_during_training_get_a_success_curve_and_table():
    evals = [
        {"step": 10, "phase": "eval", "pc_success": 20.0, "avg_sum_reward": 3.0, "n_episodes": 5},
        {"step": 20, "phase": "eval", "pc_success": 60.0, "avg_sum_reward": 7.0, "n_episodes": 5},
    ]
    record = train_record(20)
    record = RunRecord(
        location=record.location,
        config=record.config,
        metrics=[*record.metrics, *evals],
        videos=("eval/videos_step_20/pusht_0/eval_episode_0.mp4",),
    )
    use_case, _ = reporting({"runs/act": record})
    report = use_case("runs/act").report
    success = next(p for p in report.panels if p.title == "Evaluation success")
    assert success.series[0].x == (10.0, 20.0) and success.series[0].y == (20.0, 60.0)
    assert success.y_limits == (0.0, 100.0)
    table = next(t for t in report.tables if t.title == "Evaluations during training")
    assert table.rows == ((10, 20.0, 3.0, 5), (20, 60.0, 7.0, 5))
    assert report.videos[0].label == "step 20: eval_episode_0.mp4"
    assert dict(report.facts)["last eval success"] == "60.0% at step 20"


def eval_record() -> RunRecord:
    per_episode = [
        {"episode_ix": i, "sum_reward": float(i), "max_reward": 1.0, "success": i % 2 == 1,
         "seed": 100 + i, "length": 50, "task_group": "pusht", "task_id": 0}
        for i in range(4)
    ]  # fmt: skip
    return RunRecord(
        location="evals/one",
        eval_info={
            "per_episode": per_episode,
            "per_task": [
                {
                    "task_group": "pusht",
                    "task_id": 0,
                    "task": "PushT-v0",
                    "metrics": {
                        "sum_rewards": [0.0, 1.0, 2.0, 3.0],
                        "successes": [False, True, False, True],
                        # Written from the folder eval ran in: the run has them under videos/.
                        "video_paths": [
                            "/elsewhere/evals/one/videos/pusht_0/eval_episode_0.mp4",
                            "/elsewhere/evals/one/videos/pusht_0/eval_episode_1.mp4",
                        ],
                    },
                }
            ],
            "overall": {"pc_success": 50.0, "avg_sum_reward": 1.5, "n_episodes": 4},
        },
        videos=(
            "videos/pusht_0/eval_episode_0.mp4",
            "videos/pusht_0/eval_episode_1.mp4",
        ),
        config={"env": {"type": "pusht"}},
    )


def test_an_evaluation_gets_success_per_task_and_episode_rewards_and_videos():
    use_case, _ = reporting({"evals/one": eval_record()})
    report = use_case("evals/one").report
    assert report.kind == "eval"
    tasks = next(t for t in report.tables if t.title == "Success per task")
    assert tasks.rows == (("pusht", 0, "PushT-v0", 4, 50.0, 1.5),)
    episodes = next(t for t in report.tables if t.title == "Episodes")
    assert [row[2] for row in episodes.rows] == ["no", "yes", "no", "yes"]
    rewards = next(p for p in report.panels if p.title == "Sum of rewards per episode")
    assert rewards.series[0].y == (0.0, 1.0, 2.0, 3.0)
    success = next(p for p in report.panels if p.title == "Success rate so far")
    assert success.series[0].y == (0.0, 50.0, 100 / 3, 50.0)
    assert [(v.label, v.path) for v in report.videos] == [
        ("PushT-v0 episode 0 · failure", "videos/pusht_0/eval_episode_0.mp4"),
        ("PushT-v0 episode 1 · success", "videos/pusht_0/eval_episode_1.mp4"),
    ]
    assert dict(report.facts)["success"] == "50.0%" and dict(report.facts)["env"] == "pusht"


def test_the_page_can_be_written_elsewhere_with_videos_embedded():
    use_case, renderer = reporting({"evals/one": eval_record()})
    files = use_case("evals/one", html="share/r.html", embed_videos=True, refresh_s=5)
    assert files.png == "share/report_curves.png"
    assert renderer.html["share/r.html"][1] == {"embed_videos": True, "refresh_s": 5}


def test_a_folder_that_is_no_run_is_a_clear_error():
    use_case, _ = reporting({"empty": RunRecord(location="empty")})
    with pytest.raises(InvalidInput, match="neither a training run nor an evaluation"):
        use_case("empty")


def test_non_finite_figures_are_left_out_of_curves():
    record = train_record(3)
    broken = [{**record.metrics[0], "loss": math.nan}, *record.metrics[1:]]
    use_case, _ = reporting({"runs/act": RunRecord(location="runs/act", metrics=broken)})
    loss = use_case("runs/act").report.panels[0].series[0]
    assert loss.x == (2.0, 3.0)
