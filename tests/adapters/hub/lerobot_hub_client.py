"""Run by LeRobot's Python (RLCTL_LEROBOT_PYTHON), never imported by rlctl's tests.

Opens a Hub dataset with LeRobot 0.6.1 (HF_ENDPOINT, HF_LEROBOT_HOME and HF_HUB_OFFLINE come
from the environment) and prints, as one JSON line, where LeRobot found it and what it holds.
Usage: python lerobot_hub_client.py REPO_ID
"""

import json
import sys

from lerobot.datasets.lerobot_dataset import LeRobotDataset


def main() -> None:
    dataset = LeRobotDataset(sys.argv[1], video_backend="pyav")
    item = dataset[0]
    print(
        json.dumps(
            {
                "root": str(dataset.root),
                "revision": dataset.revision,
                "frames": dataset.num_frames,
                "episodes": dataset.num_episodes,
                "keys": sorted(item),
            }
        )
    )


if __name__ == "__main__":
    main()
