"""The config classes of the parts a command's settings name: robots, teleoperators, envs,
cameras, the live display, and where LeRobot keeps datasets.

They are pure data (attrs) but live beside the adapters that build them (a new robot or env is
one config class plus one module, found through entry points). The CLI names them through this
module only, so that no CLI module imports an adapter (the import contract `rlctl.entrypoints.cli
imports no adapter` ignores exactly these imports). Importing them is cheap: the SDKs, OpenCV and
the simulators load when a part is built, by the container.
"""

from __future__ import annotations

from pathlib import Path

from rlctl.adapters.cameras.config import OpenCVCameraConfig
from rlctl.adapters.display.settings import DisplaySettings
from rlctl.adapters.hub.settings import HubSettings
from rlctl.adapters.motors.config import MotorBusConfig
from rlctl.adapters.robots.config import LeKiwiConfig, RobotConfig
from rlctl.adapters.sim.config import EnvConfig
from rlctl.adapters.sim.envs.pusht import PushtEnv
from rlctl.adapters.sim.registry import ENV_TYPES  # noqa: F401  (hooks env structuring)
from rlctl.adapters.teleop.config import TeleoperatorConfig

__all__ = [
    "DisplaySettings",
    "EnvConfig",
    "LeKiwiConfig",
    "MotorBusConfig",
    "OpenCVCameraConfig",
    "PushtEnv",
    "RobotConfig",
    "TeleoperatorConfig",
    "lerobot_home",
]


def lerobot_home() -> Path:
    """`$HF_LEROBOT_HOME` (LeRobot's default when unset): where `--dataset.repo_id` datasets
    are recorded."""
    return HubSettings.from_environment().lerobot_home
