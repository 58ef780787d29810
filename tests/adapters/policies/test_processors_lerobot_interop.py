"""LeRobot 0.6.1 loads the processor files rlctl writes, relative actions included, and gets the
same values from them (run when RLCTL_LEROBOT_PYTHON names a Python with lerobot==0.6.1)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rlctl.adapters.policies.checkpoint import read_processors
from rlctl.adapters.policies.processors import make_pre_post_processors, write_pipeline
from rlctl.domain.features import typed_feature
from rlctl.domain.frames import Transition
from rlctl.domain.policies import MLPConfig
from rlctl.domain.processors import RelativeActionsConfig

LEROBOT_SCRIPT = Path(__file__).with_name("lerobot_processors.py")
NAMES = ("shoulder.pos", "elbow.pos", "wrist.pos", "gripper.pos")


@pytest.mark.lerobot
def test_lerobot_runs_rlctls_relative_action_processors(lerobot, tmp_path: Path) -> None:
    config = MLPConfig(
        input_features={"observation.state": typed_feature("STATE", (4,))},
        output_features={"action": typed_feature("ACTION", (4,))},
        normalization_mapping={"STATE": "MEAN_STD", "ACTION": "MEAN_STD"},
    )
    stats = {
        "observation.state": {"mean": np.full(4, 0.5), "std": np.full(4, 2.0)},
        "action": {"mean": np.array([0.1, -0.2, 0.3, 0.4]), "std": np.array([1.5, 2.0, 0.5, 1.0])},
    }
    relative = RelativeActionsConfig(exclude_joints=("gripper",), action_names=NAMES)
    for pipeline in make_pre_post_processors(config, stats, relative_actions=relative):
        write_pipeline(pipeline, tmp_path)
    state = [[1.0, -2.0, 3.0, 0.25], [0.5, 0.5, -1.0, 0.75]]
    action = [[2.0, -1.0, 2.5, 0.9], [0.0, 1.0, 1.0, 0.1]]
    theirs = lerobot(LEROBOT_SCRIPT, tmp_path, json.dumps(state), json.dumps(action))

    pre, post = read_processors(tmp_path)
    observation = {"observation.state": torch.tensor(state)}
    processed = pre.process_batch({**observation, "action": torch.tensor(action)})["action"]
    back = post(Transition(observation=observation, action=processed)).action
    np.testing.assert_allclose(processed.numpy(), theirs["processed"], atol=1e-6)
    np.testing.assert_allclose(back.numpy(), theirs["back"], atol=1e-6)
    # The gripper stays absolute, the other joints are relative, and the round trip is whole.
    expected = (np.array(action) - np.array(state) * [1, 1, 1, 0] - stats["action"]["mean"]) / (
        stats["action"]["std"]
    )
    np.testing.assert_allclose(processed.numpy(), expected, atol=1e-6)
    np.testing.assert_allclose(back.numpy(), action, atol=1e-6)
