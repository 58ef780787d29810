"""PushT (gym-pusht): push a T-shaped block onto its target with a 2-D point agent."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from rlctl.adapters.sim.config import RLCTL_ONLY, EnvConfig, env_feature
from rlctl.domain.features import FeatureSpec


def _pusht_map() -> dict[str, str]:
    return {
        "action": "action",
        "agent_pos": "observation.state",
        "environment_state": "observation.environment_state",
        "pixels": "observation.image",
    }


@EnvConfig.register("pusht")
@attrs.frozen(kw_only=True)
class PushtEnv(EnvConfig):
    extra: ClassVar[str | None] = "pusht"

    task: str | None = "PushT-v0"
    fps: int = 10
    episode_length: int | None = 300
    obs_type: Literal["pixels_agent_pos", "environment_state_agent_pos", "state", "pixels"] = (
        "pixels_agent_pos"
    )
    render_mode: str = "rgb_array"
    visualization_width: int = 384
    visualization_height: int = 384
    # LeRobot 0.6.1 declares 384x384 here but never passes it to the env, which renders its
    # observation at gym-pusht's 96x96 (what diffusion_pusht was trained on); rlctl passes it,
    # so the default is the size the env really produces.
    observation_height: int = 96
    observation_width: int = 96
    # gym-pusht's env drawing each state once (`pusht_render`): the same pixels, far less work.
    fast_render: bool = attrs.field(default=True, metadata={RLCTL_ONLY: True})
    features_map: dict[str, str] = attrs.field(factory=_pusht_map)

    def worker_preload(self) -> tuple[str, ...]:
        return ("gym_pusht",)

    def renders_on_gpu(self) -> bool:
        return False  # pygame draws on the CPU, whatever MUJOCO_GL says

    def entry_point(self) -> str | None:
        return "rlctl.adapters.sim.envs.pusht_render:PushTDrawnOnce" if self.fast_render else None

    def default_features(self) -> dict[str, FeatureSpec]:
        features = {
            "action": env_feature("ACTION", (2,)),
            "agent_pos": env_feature("STATE", (2,)),
        }
        if self.obs_type == "pixels_agent_pos":
            shape = (self.observation_height, self.observation_width, 3)
            features["pixels"] = env_feature("VISUAL", shape)
        elif self.obs_type == "environment_state_agent_pos":
            features["environment_state"] = env_feature("ENV", (16,))
        return features

    def gym_kwargs(self) -> dict[str, Any]:
        return {
            "obs_type": self.obs_type,
            "render_mode": self.render_mode,
            "visualization_width": self.visualization_width,
            "visualization_height": self.visualization_height,
            "observation_width": self.observation_width,
            "observation_height": self.observation_height,
        }
