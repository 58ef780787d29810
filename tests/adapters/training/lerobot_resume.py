"""Run by LeRobot's Python (RLCTL_LEROBOT_PYTHON), never imported by rlctl's tests: read an rlctl
training checkpoint the way `lerobot-train --resume` does and print what was restored as JSON."""

import json
import sys
from pathlib import Path

import lerobot.policies  # noqa: F401  (registers the policy configs)
from lerobot.common.train_utils import load_training_state
from lerobot.configs.train import TrainPipelineConfig
from lerobot.optim.factory import make_optimizer_and_scheduler
from lerobot.policies.factory import get_policy_class

checkpoint = Path(sys.argv[1])
config = TrainPipelineConfig.from_pretrained(checkpoint / "pretrained_model")
policy = get_policy_class(config.policy.type).from_pretrained(checkpoint / "pretrained_model")
optimizer, scheduler = make_optimizer_and_scheduler(config, policy)
step, optimizer, scheduler = load_training_state(checkpoint, optimizer, scheduler)
print(
    json.dumps(
        {
            "step": step,
            "policy": config.policy.type,
            "optimizer": config.optimizer.type,
            "lrs": [group["lr"] for group in optimizer.param_groups],
            "states": len(optimizer.state),
        }
    )
)
