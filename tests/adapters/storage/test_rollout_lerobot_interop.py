"""A DAgger rollout's dataset, written by the LeRobot v3.0 writer, as LeRobot 0.6.1 reads it:
its `intervention` column (bool, shape (1,)) with the corrections tagged True."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from rlctl.adapters.memory.clock import ManualClock
from rlctl.adapters.memory.control import ScriptedRolloutControls
from rlctl.adapters.memory.policy import ScriptedPolicy
from rlctl.adapters.memory.robot import ScriptedRobot
from rlctl.adapters.memory.teleoperator import ScriptedTeleoperator
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer
from rlctl.application.ports.control import RolloutEvent as E
from rlctl.application.use_cases.record_episodes import DatasetTarget
from rlctl.application.use_cases.run_rollout import RolloutSettings, RunRollout
from rlctl.domain.rollout import DAggerStrategyConfig

READ = textwrap.dedent(
    """
    import json, sys
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    ds = LeRobotDataset("local/rollout_dagger", root=sys.argv[1])
    feature = ds.meta.features["intervention"]
    tags = [bool(ds[i]["intervention"].reshape(-1)[0]) for i in range(len(ds))]
    print(json.dumps({"dtype": feature["dtype"], "shape": list(feature["shape"]),
                      "tags": tags, "dtype_item": str(ds[0]["intervention"].dtype)}))
    """
)


@pytest.mark.lerobot
def test_lerobot_reads_the_intervention_column_of_a_dagger_rollout(lerobot, tmp_path):
    root = tmp_path / "rollout_dagger"
    keys = {5: {E.PAUSE_RESUME}, 6: {E.CORRECTION}, 12: {E.CORRECTION}, 13: {E.PAUSE_RESUME}}
    use_case = RunRollout(
        ScriptedRobot(),
        ManualClock(),
        policy=ScriptedPolicy(4),
        teleop=ScriptedTeleoperator(script=lambda t: [0.1 * t] * 4),
        writer=LeRobotV3Writer(),
        controls=ScriptedRolloutControls(keys),
    )
    strategy = DAggerStrategyConfig(
        record_autonomous=True, episode_time_s=100.0, smooth_handover=False
    )
    settings = RolloutSettings(fps=10, duration_s=2, task="fix", return_to_initial_position=False)
    report = use_case(strategy, settings, DatasetTarget(root=root, video=False))
    assert report.human_ticks == 6
    read = lerobot("-c", READ, root)
    assert read["dtype"] == "bool" and read["shape"] == [1]
    assert read["dtype_item"] == "torch.bool"
    assert np.sum(read["tags"]) == 6 and len(read["tags"]) == 18  # the 2 paused ticks: not stored
