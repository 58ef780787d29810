"""Run by LeRobot's Python (RLCTL_LEROBOT_PYTHON), never imported by rlctl's tests.

Loads the processor pair saved in FOLDER with LeRobot 0.6.1, wires them as its policy loader
does, and prints, as JSON, what they make of one batch: the pre-processed action and the action
the post-processor gives back for it.

    python lerobot_processors.py FOLDER STATE_JSON ACTION_JSON
"""

import json
import sys

import torch
from lerobot.policies.factory import _reconnect_relative_absolute_steps
from lerobot.processor import PolicyProcessorPipeline
from lerobot.processor.converters import policy_action_to_transition, transition_to_policy_action


def main(folder: str, state: str, action: str) -> None:
    pre = PolicyProcessorPipeline.from_pretrained(folder, "policy_preprocessor.json")
    post = PolicyProcessorPipeline.from_pretrained(
        folder,
        "policy_postprocessor.json",
        to_transition=policy_action_to_transition,
        to_output=transition_to_policy_action,
    )
    _reconnect_relative_absolute_steps(pre, post)
    batch = {
        "observation.state": torch.tensor(json.loads(state)),
        "action": torch.tensor(json.loads(action)),
    }
    processed = pre(batch)["action"]
    back = post(processed)
    print(json.dumps({"processed": processed.tolist(), "back": back.tolist()}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
