"""ALOHA (gym-aloha): bimanual insertion and cube transfer in MuJoCo (dm_control)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from rlctl.adapters.sim.config import EnvConfig, EnvFeature


def _aloha_map() -> dict[str, str]:
    return {
        "action": "action",
        "agent_pos": "observation.state",
        "top": "observation.image.top",
        "pixels/top": "observation.images.top",
    }


@EnvConfig.register("aloha")
@attrs.frozen(kw_only=True)
class AlohaEnv(EnvConfig):
    extra: ClassVar[str | None] = "aloha"

    # AlohaInsertion-v0 or AlohaTransferCube-v0.
    task: str | None = "AlohaInsertion-v0"
    fps: int = 50
    episode_length: int | None = 400
    obs_type: Literal["pixels", "pixels_agent_pos"] = "pixels_agent_pos"
    observation_height: int = 480
    observation_width: int = 640
    render_mode: str = "rgb_array"
    features_map: dict[str, str] = attrs.field(factory=_aloha_map)

    def default_features(self) -> dict[str, EnvFeature]:
        image = EnvFeature("VISUAL", (self.observation_height, self.observation_width, 3))
        features = {"action": EnvFeature("ACTION", (14,))}
        if self.obs_type == "pixels":
            features["top"] = image
        else:
            features["agent_pos"] = EnvFeature("STATE", (14,))
            features["pixels/top"] = image
        return features

    def gym_kwargs(self) -> dict[str, Any]:
        return {
            "obs_type": self.obs_type,
            "render_mode": self.render_mode,
            "observation_height": self.observation_height,
            "observation_width": self.observation_width,
        }
