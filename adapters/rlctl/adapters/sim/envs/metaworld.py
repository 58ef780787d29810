"""Meta-World: single tasks (`push-v3`), difficulty suites (`easy`, `medium`, `hard`,
`very_hard`, LeRobot's names), Meta-World's multi-task sets (`mt10`, `mt50`) and
comma-separated mixes of them (`--env.task=easy,push-v3`).

Each entry of `task` is a suite; a difficulty or a set expands to its tasks, a task name is a
suite of one. Tasks are numbered from 0 within their suite, as LeRobot numbers them.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar, Literal

import attrs

from rlctl.adapters.sim.config import EnvConfig, env_feature
from rlctl.application.ports.simulation import SimTask
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec

# Meta-World's MT10 set, in its own order (metaworld.env_dict.MT10_V3).
MT10 = (
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "door-open-v3",
    "drawer-open-v3",
    "drawer-close-v3",
    "button-press-topdown-v3",
    "peg-insert-side-v3",
    "window-open-v3",
    "window-close-v3",
)


def multitask_sets(all_tasks: list[str]) -> dict[str, list[str]]:
    """MT10 and MT50 (every task, alphabetical as Meta-World lists them)."""
    return {"mt10": list(MT10), "mt50": sorted(all_tasks)}


def _metaworld_map() -> dict[str, str]:
    return {
        "action": "action",
        "agent_pos": "observation.state",
        "environment_state": "observation.environment_state",
        "pixels": "observation.image",
        "top": "observation.image",
        "pixels/top": "observation.image",
    }


@EnvConfig.register("metaworld")
@attrs.frozen(kw_only=True)
class MetaworldEnv(EnvConfig):
    extra: ClassVar[str | None] = "metaworld"

    task: str | None = "push-v3"
    fps: int = 80
    episode_length: int | None = 400
    # "state" is rlctl's render-free mode: agent_pos plus the full 39-value state.
    obs_type: Literal["pixels", "pixels_agent_pos", "state"] = "pixels_agent_pos"
    render_mode: str = "rgb_array"
    camera_name: str = "corner2"
    observation_height: int = 480
    observation_width: int = 480
    # Accepted for LeRobot configs; every suite is evaluated task by task here.
    multitask_eval: bool = True
    features_map: dict[str, str] = attrs.field(factory=_metaworld_map)

    def renders_on_gpu(self) -> bool:
        # MuJoCo: EGL when MUJOCO_GL says so or on a machine without a display (see mujoco_gl).
        from rlctl.adapters.sim.mujoco_gl import egl_on_gpu

        return egl_on_gpu(headless_default=True)

    def worker_preload(self) -> tuple[str, ...]:
        return ("metaworld",)

    def default_features(self) -> dict[str, FeatureSpec]:
        features = {"action": env_feature("ACTION", (4,))}
        if self.obs_type != "state":
            shape = (self.observation_height, self.observation_width, 3)
            features["pixels"] = env_feature("VISUAL", shape)
        if self.obs_type in ("pixels_agent_pos", "state"):
            features["agent_pos"] = env_feature("STATE", (4,))
        if self.obs_type == "state":
            features["environment_state"] = env_feature("ENV", (39,))
        return features

    def suites(self) -> dict[str, list[str]]:
        from rlctl.adapters.sim.envs.metaworld_env import task_name, task_table

        table = task_table()
        groups = [g.strip() for g in (self.task or "").split(",") if g.strip()]
        if not groups:
            raise ConfigError(
                "no Meta-World task given",
                where="env.task",
                hint="name a task (push-v3), a difficulty (easy, medium, hard, very_hard), a "
                "multi-task set (mt10, mt50) or a comma-separated list of them",
            )
        sets = multitask_sets(list(table["tasks"]))
        out: dict[str, list[str]] = {}
        for group in groups:
            names = table["suites"].get(group) or sets.get(group.lower()) or [task_name(group)]
            unknown = [n for n in names if n not in table["tasks"]]
            if unknown:
                raise ConfigError(
                    f"unknown Meta-World task {unknown[0]!r}",
                    where="env.task",
                    hint=f"difficulties: {', '.join(table['suites'])}; sets: mt10, mt50; "
                    "tasks look like push-v3",
                )
            out[group] = list(names)
        return out

    def tasks(self) -> list[SimTask]:
        return [
            SimTask(suite, task_id, name)
            for suite, names in self.suites().items()
            for task_id, name in enumerate(names)
        ]

    def env_factory(self, task: SimTask) -> Any:
        return functools.partial(
            make_metaworld_env,
            task.name,
            self.obs_type,
            self.camera_name,
            self.render_mode,
            self.observation_width,
            self.observation_height,
            self.episode_length,
        )


def make_metaworld_env(
    task: str,
    obs_type: str,
    camera_name: str,
    render_mode: str,
    width: int,
    height: int,
    episode_length: int | None,
) -> Any:
    import gymnasium as gym

    from rlctl.adapters.sim.config import ensure_importable
    from rlctl.adapters.sim.envs.metaworld_env import MAX_EPISODE_STEPS

    ensure_importable("metaworld", MetaworldEnv().install_hint())
    from rlctl.adapters.sim.envs.metaworld_env import MetaWorldEnv

    env = MetaWorldEnv(task, obs_type, camera_name, render_mode, width, height)
    limit = min(episode_length or MAX_EPISODE_STEPS, MAX_EPISODE_STEPS)
    return gym.wrappers.TimeLimit(env, max_episode_steps=limit)
