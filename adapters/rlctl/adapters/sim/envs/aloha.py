"""ALOHA (gym-aloha): bimanual insertion and cube transfer in MuJoCo (dm_control).

Observations: `pixels/top` (the top camera, 480x640, the only size gym-aloha renders) and
`agent_pos` (the 14 joint positions), or `top` alone with `obs_type=pixels`. Every step renders,
so a machine without a display renders offscreen: `MUJOCO_GL=egl` unless the user set it (see
`rlctl.adapters.sim.mujoco_gl`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import attrs

from rlctl.adapters.sim.config import EnvConfig, env_feature
from rlctl.adapters.sim.mujoco_gl import use_offscreen_gl_when_headless
from rlctl.application.ports.simulation import SimTask
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec

# gym-aloha (0.1.5) renders its observation camera at this size whatever it is asked for.
RENDERED_SIZE = (480, 640)


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

    def __attrs_post_init__(self) -> None:
        if (self.observation_height, self.observation_width) != RENDERED_SIZE:
            raise ConfigError(
                f"gym-aloha renders its camera at {RENDERED_SIZE[0]}x{RENDERED_SIZE[1]}, not "
                f"{self.observation_height}x{self.observation_width}",
                where="env.observation_height/env.observation_width",
                hint=f"leave them at their defaults, {RENDERED_SIZE[0]} and {RENDERED_SIZE[1]}",
            )

    def renders_on_gpu(self) -> bool:
        # MuJoCo: EGL when MUJOCO_GL says so or on a machine without a display (see mujoco_gl).
        from rlctl.adapters.sim.mujoco_gl import egl_on_gpu

        return egl_on_gpu(headless_default=True)

    def default_features(self) -> dict[str, FeatureSpec]:
        image = env_feature("VISUAL", (self.observation_height, self.observation_width, 3))
        features = {"action": env_feature("ACTION", (14,))}
        if self.obs_type == "pixels":
            features["top"] = image
        else:
            features["agent_pos"] = env_feature("STATE", (14,))
            features["pixels/top"] = image
        return features

    def env_factory(self, task: SimTask) -> Callable[[], Any]:
        return functools.partial(make_aloha_env, super().env_factory(task))

    def gym_kwargs(self) -> dict[str, Any]:
        return {
            "obs_type": self.obs_type,
            "render_mode": self.render_mode,
            "observation_height": self.observation_height,
            "observation_width": self.observation_width,
        }


def make_aloha_env(factory: Callable[[], Any]) -> Any:
    # Before gym-aloha imports dm_control, which picks its GL backend once, at import.
    use_offscreen_gl_when_headless()
    return factory()
