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


def rollout_info(ticks: int = 40) -> dict:
    """What `rlctl rollout` writes, made by the use case's own report type."""
    from pathlib import Path

    from rlctl.application.control_loop import LoopStats
    from rlctl.application.use_cases.run_rollout import RolloutReport, Timeline

    drivers = ["policy"] * 10 + ["move"] * 5 + ["human"] * 10 + ["policy"] * (ticks - 25)
    periods = [0.05] * (ticks - 1)
    periods[30] = 0.25  # one slow tick
    starts = [0.0]
    for p in periods:
        starts.append(starts[-1] + p)
    report = RolloutReport(
        strategy="dagger",
        root=Path("data/rollout_fix"),
        saved_episodes=(0,),
        frames=ticks,
        total_episodes=1,
        uploads=0,
        stopped=False,
        interrupted=True,
        timing=LoopStats.of(periods, 0.05, ticks=ticks, late_ticks=1),
        ticks=ticks,
        policy_ticks=ticks - 15,
        human_ticks=10,
        held_ticks=3,
        interventions=((15, 24),),
        max_policy_jump=0.7,
        timeline=Timeline(
            starts=tuple(starts),
            drivers=tuple(drivers),
            fresh=tuple(i % 10 != 3 for i in range(ticks)),
            jumps=tuple(0.1 * (i % 3) for i in range(ticks)),
        ),
    )
    return report.to_info()


def test_a_rollout_gets_its_timing_who_drove_and_the_interventions():
    info = rollout_info()
    use_case, _ = reporting(
        {"r/rollout_fix.rollout_info.json": RunRecord(location="r", rollout_info=info)}
    )
    files = use_case("r/rollout_fix.rollout_info.json")
    report = files.report
    assert report.kind == "rollout"
    assert files.html == "r/rollout_fix.rollout_info.html"
    assert files.png == "r/rollout_fix.rollout_info_curves.png"
    facts = dict(report.facts)
    assert facts["strategy"] == "dagger" and facts["interventions"] == "1"
    assert facts["policy / human / held ticks"] == "25 / 10 / 3"
    assert facts["target period"] == "50.0 ms" and facts["late ticks"] == "1"
    period = next(p for p in report.panels if p.title == "Loop period")
    assert max(period.series[0].y) == pytest.approx(250.0)
    assert period.series[1].y == (50.0, 50.0)  # the target
    moved = next(p for p in report.panels if p.title.startswith("Largest joint change"))
    assert [s.name for s in moved.series] == ["policy", "human", "move"]
    assert len(moved.series[1].x) == 10
    held = next(p for p in report.panels if p.title.startswith("Policy ticks without"))
    assert held.series[0].x[held.series[0].y.index(1.0)] == 3.0
    assert sum(held.series[0].y) == 2  # stale at 3, 13, 23, 33: the policy drove 3 and 33
    table = next(t for t in report.tables if t.title.startswith("Interventions"))
    assert table.rows == ((1, 15, 24, 10, "0.5 s"),)
    assert any("interrupted" in note for note in report.notes)


def test_a_thinned_rollout_timeline_gives_periods_per_tick():
    info = rollout_info(40)
    info["timeline"] = {
        "every": 4,
        "start_s": [0.0, 0.2, 0.4, 1.2],
        "driver": ["policy"] * 4,
        "fresh": [True] * 4,
        "jump": [0.0, float("nan"), 0.1, 0.2],
    }
    use_case, _ = reporting({"x.json": RunRecord(location="x.json", rollout_info=info)})
    report = use_case("x.json").report
    period = next(p for p in report.panels if p.title == "Loop period")
    assert period.series[0].x == (4.0, 8.0, 12.0)
    assert period.series[0].y == pytest.approx((50.0, 50.0, 200.0))
    moved = next(p for p in report.panels if p.title.startswith("Largest joint change"))
    assert moved.series[0].y == (0.0, 0.1, 0.2)  # the NaN is left out
