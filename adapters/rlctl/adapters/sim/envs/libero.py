"""LIBERO: 130 language-described manipulation tasks in five suites, through hf-libero.

`--env.type=libero --env.task=libero_object` (or `libero_spatial`, `libero_goal`, `libero_10`,
`libero_90`, or several comma-separated) with `--env.task_ids=[0,3]` to keep some tasks of each
suite. The settings and the observation layout are LeRobot 0.6.1's `LiberoEnv`: agent-view and
wrist cameras (`pixels/image`, `pixels/image2`), the `robot_state` dict mapped to
`observation.state.eef_pos` …, and the env processor step that turns the images and assembles
the 8-value `observation.state` (`env_processors`). Episode lengths default to the suite's
(LeRobot's numbers: a little above the longest training demonstration).

The task list is read from hf-libero's task map without importing LIBERO (which would need its
config file, torch and robosuite); the simulator itself starts on each env's first reset, inside
its worker. See `libero_setup` for the config file and the assets, and docs/guides/libero.md.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import attrs

from rlctl.adapters.sim.config import ACTION, EnvConfig, env_feature
from rlctl.adapters.sim.envs.libero_setup import INSTALL_HINT, require_libero
from rlctl.application.ports.simulation import SimTask, SimulationError
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec

SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
# Steps per episode by suite, as LeRobot 0.6.1 sets them (above the longest demonstration).
SUITE_MAX_STEPS = {
    "libero_spatial": 280,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
DEFAULT_MAX_STEPS = 500
CAMERAS = ("agentview_image", "robot0_eye_in_hand_image")


def _libero_map() -> dict[str, str]:
    state = "observation.state"
    return {
        ACTION: ACTION,
        "robot_state/eef/pos": f"{state}.eef_pos",
        "robot_state/eef/quat": f"{state}.eef_quat",
        "robot_state/eef/mat": f"{state}.eef_mat",
        "robot_state/gripper/qpos": f"{state}.gripper_qpos",
        "robot_state/gripper/qvel": f"{state}.gripper_qvel",
        "robot_state/joints/pos": f"{state}.joint_pos",
        "robot_state/joints/vel": f"{state}.joint_vel",
        "pixels/agentview_image": "observation.images.image",
        "pixels/robot0_eye_in_hand_image": "observation.images.image2",
    }


def _task_ids(value: Any) -> list[int] | None:
    return None if value is None else sorted({int(v) for v in value})


def instruction(task_name: str) -> str:
    """A LIBERO task's instruction, from its file name as LIBERO derives it.

    LIBERO-90 and -10 names start with the scene (`KITCHEN_SCENE3_turn_on_the_stove`), which is
    not part of the instruction; the other suites' names are the instruction.
    """
    if task_name[:1].isupper() and "SCENE" in task_name:
        scene_end = task_name.index("SCENE") + len("SCENE")
        while scene_end < len(task_name) and task_name[scene_end].isdigit():
            scene_end += 1
        task_name = task_name[scene_end:].lstrip("_")
    return task_name.replace("_", " ")


@functools.cache
def task_map() -> dict[str, list[str]]:
    """`{suite: [task name, ...]}` from hf-libero's task map, read without importing LIBERO."""
    root = require_libero()
    path = root / "benchmark" / "libero_suite_task_map.py"
    spec = importlib.util.spec_from_file_location("_rlctl_libero_task_map", path)
    if spec is None or spec.loader is None:
        raise SimulationError(f"hf-libero has no task map at {path}", hint=INSTALL_HINT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {suite: list(names) for suite, names in module.libero_task_map.items()}


@EnvConfig.register("libero")
@attrs.frozen(kw_only=True)
class LiberoEnv(EnvConfig):
    extra: ClassVar[str | None] = "libero"

    # A suite or several, comma-separated: libero_spatial, libero_object, libero_goal, libero_10,
    # libero_90.
    task: str | None = "libero_10"
    # Tasks to keep in each suite (by index); None runs them all.
    task_ids: list[int] | None = attrs.field(default=None, converter=_task_ids)
    # robosuite's control frequency (20 Hz), and the videos' frame rate.
    fps: int = 20
    # None: the suite's own length (280 for libero_object, 520 for libero_10 …).
    episode_length: int | None = None
    obs_type: Literal["pixels", "pixels_agent_pos"] = "pixels_agent_pos"
    render_mode: str = "rgb_array"
    # robosuite camera observations, comma-separated; the first one is filmed.
    camera_name: str = "agentview_image,robot0_eye_in_hand_image"
    # Start each episode from LIBERO's recorded initial states (env i of n: states i, i+n, …).
    init_states: bool = True
    # Rebuild the simulator on every reset (LIBERO's default; False keeps it, faster).
    hard_reset: bool = True
    # Camera → image name (`observation.images.<name>`); None: agentview → image, wrist → image2.
    camera_name_mapping: dict[str, str] | None = None
    observation_height: int = 360
    observation_width: int = 360
    # LIBERO-plus perturbations: not supported here (False only).
    is_libero_plus: bool = False
    # relative (delta end-effector poses, as LIBERO's datasets) or absolute.
    control_mode: Literal["relative", "absolute"] = "relative"
    features_map: dict[str, str] = attrs.field(factory=_libero_map)

    def __attrs_post_init__(self) -> None:
        if self.fps <= 0:
            raise ConfigError(f"fps must be positive, got {self.fps}", where="env.fps")
        if not self.hard_reset and not self.init_states:
            raise ConfigError("hard_reset=false needs init_states=true", where="env.hard_reset")
        if self.is_libero_plus:
            raise ConfigError(
                "LIBERO-plus is not supported", where="env.is_libero_plus", hint="leave it false"
            )
        unknown = [c for c in self.cameras() if c not in CAMERAS]
        if unknown:
            raise ConfigError(
                f"unknown LIBERO camera {unknown[0]!r}",
                where="env.camera_name",
                hint=f"cameras: {', '.join(CAMERAS)}",
            )
        if self.camera_name_mapping:
            # As LeRobot does: the mapped names decide the policy keys of the two cameras.
            for camera in CAMERAS:
                name = self.camera_name_mapping.get(camera)
                if name:
                    self.features_map[f"pixels/{camera}"] = f"observation.images.{name}"

    def cameras(self) -> list[str]:
        return [c.strip() for c in self.camera_name.split(",") if c.strip()]

    def camera_names(self) -> dict[str, str]:
        default = {"agentview_image": "image", "robot0_eye_in_hand_image": "image2"}
        return {**default, **(self.camera_name_mapping or {})}

    def install_hint(self) -> str:
        return INSTALL_HINT

    def renders_on_gpu(self) -> bool:
        # MuJoCo: EGL when MUJOCO_GL says so or on a machine without a display (see mujoco_gl).
        from rlctl.adapters.sim.mujoco_gl import egl_on_gpu

        return egl_on_gpu(headless_default=True)

    def worker_preload(self) -> tuple[str, ...]:
        return ("rlctl.adapters.sim.envs.libero_env", "rlctl.adapters.sim.envs.libero_preload")

    def default_features(self) -> dict[str, FeatureSpec]:
        image = env_feature("VISUAL", (self.observation_height, self.observation_width, 3))
        names = self.camera_names()
        features = {ACTION: env_feature("ACTION", (7,))}
        for camera in self.cameras():
            features[f"pixels/{names[camera]}"] = image
        if self.obs_type == "pixels_agent_pos":
            shapes = {
                "eef/pos": (3,),
                "eef/quat": (4,),
                "eef/mat": (3, 3),
                "gripper/qpos": (2,),
                "gripper/qvel": (2,),
                "joints/pos": (7,),
                "joints/vel": (7,),
            }
            for key, shape in shapes.items():
                features[f"robot_state/{key}"] = env_feature("STATE", shape)
        return features

    def suites(self) -> list[str]:
        names = [s.strip() for s in (self.task or "").split(",") if s.strip()]
        if not names:
            raise ConfigError(
                "no LIBERO suite given", where="env.task", hint=f"suites: {', '.join(SUITES)}"
            )
        return names

    def tasks(self) -> list[SimTask]:
        table = task_map()
        out: list[SimTask] = []
        for suite in self.suites():
            if suite not in table:
                raise ConfigError(
                    f"unknown LIBERO suite {suite!r}",
                    where="env.task",
                    hint=f"suites: {', '.join(sorted(table))}",
                )
            names = table[suite]
            ids = self.task_ids if self.task_ids is not None else list(range(len(names)))
            wrong = [i for i in ids if not 0 <= i < len(names)]
            if wrong:
                raise ConfigError(
                    f"task id {wrong[0]} is out of range for {suite} (0 to {len(names) - 1})",
                    where="env.task_ids",
                )
            out.extend(SimTask(suite, i, names[i]) for i in ids)
        return out

    def max_steps(self, suite: str) -> int:
        if self.episode_length is not None:
            return self.episode_length
        return SUITE_MAX_STEPS.get(suite, DEFAULT_MAX_STEPS)

    def env_processors(self) -> tuple[Any, Any]:
        from rlctl.adapters.sim.envs.libero_processor import LiberoObservation
        from rlctl.domain.processors import ProcessorPipeline

        return (
            ProcessorPipeline([LiberoObservation()], name="env_preprocessor"),
            ProcessorPipeline(name="env_postprocessor"),
        )

    def env_factory(self, task: SimTask) -> Callable[[], Any]:
        return self.env_factories(task, 1)[0]

    def env_factories(self, task: SimTask, n_envs: int) -> list[Callable[[], Any]]:
        options = {
            "max_episode_steps": self.max_steps(task.suite),
            "cameras": tuple(self.cameras()),
            "camera_name_mapping": dict(self.camera_names()),
            "obs_type": self.obs_type,
            "render_mode": self.render_mode,
            "observation_height": self.observation_height,
            "observation_width": self.observation_width,
            "init_states": self.init_states,
            "n_envs": n_envs,
            "control_freq": self.fps,
            "control_mode": self.control_mode,
            "hard_reset": self.hard_reset,
        }
        return [
            functools.partial(
                make_libero_env, task.suite, task.task_id, task.name, episode_index=i, **options
            )
            for i in range(n_envs)
        ]


def make_libero_env(suite: str, task_id: int, name: str, **options: Any) -> Any:
    from rlctl.adapters.sim.envs.libero_env import LiberoGymEnv

    return LiberoGymEnv(suite, task_id, name, instruction(name), **options)
