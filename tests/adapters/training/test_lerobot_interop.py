"""LeRobot reads an rlctl training checkpoint as its own: `train_config.json` parses into its
`TrainPipelineConfig`, and its resume path restores the optimiser, scheduler and step."""

from __future__ import annotations

from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("lerobot_resume.py")

pytestmark = [pytest.mark.slow, pytest.mark.lerobot]


@pytest.mark.parametrize("kind", ["act", "diffusion"])
def test_lerobot_resumes_an_rlctl_checkpoint(lerobot, kind, make_settings, train, tiny):
    report, _ = train(make_settings(policy=getattr(tiny, kind)(), steps=2, save_freq=2))
    restored = lerobot(SCRIPT, report.last_checkpoint.location)
    assert restored["step"] == 2 and restored["policy"] == kind and restored["states"] > 0
    if kind == "act":
        assert restored["optimizer"] == "adamw" and restored["lrs"] == [1e-5, 1e-5]
    else:
        assert restored["optimizer"] == "adam" and restored["lrs"] == [pytest.approx(1e-4)]
