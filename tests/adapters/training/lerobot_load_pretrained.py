"""Run by LeRobot's Python (RLCTL_LEROBOT_PYTHON), never imported by rlctl's tests: load a
`pretrained_model` folder with LeRobot's `from_pretrained` and print each weight's sum as JSON."""

import json
import sys
from pathlib import Path

import lerobot.policies  # noqa: F401  (registers the policy configs)
from lerobot.configs.policies import PreTrainedConfig
from lerobot.policies.factory import get_policy_class

folder = Path(sys.argv[1])
config = PreTrainedConfig.from_pretrained(folder)
policy = get_policy_class(config.type).from_pretrained(folder)
sums = {name: float(t.double().sum()) for name, t in policy.state_dict().items()}
print(json.dumps({"policy": config.type, "sums": sums}))
