"""gym-hil: MuJoCo Franka Panda tasks for human-in-the-loop RL (`--env.type=hil`).

LeRobot 0.6.1 reaches them through its `gym_manipulator` env with `name=gym_hil`; the settings
here are that config's, field for field (`processor.gripper`, `processor.reset`,
`processor.image_preprocessing` …; the real-robot ones — `robot`, `teleop`, inverse kinematics —
do not apply to a simulator and are refused when set). Tasks: `PandaPickCube-v0`,
`PandaArrangeBoxes-v0` and their `Keyboard` / `Gamepad` variants, where a person takes over
from the policy (space toggles the intervention on the keyboard, RB on a gamepad). The `-v0`
may be left out.

Observations: `pixels/front`, `pixels/wrist` (two 128x128 cameras by default) and `agent_pos`
(18 values), mapped to `observation.images.front`, `observation.images.wrist` and
`observation.state` as LeRobot's processors map them. `obs_type=environment_state_agent_pos`
(LeRobot's name for its state-only gym envs; LeRobot itself always builds gym-hil with its
cameras) is gym-hil's own state-only observation (`image_obs=False`): `agent_pos` and
`environment_state`, the cube's position (3 values, `observation.environment_state`), and
nothing rendered, so a step costs the physics alone. The action is an end-effector delta
`(x, y, z)` in [-1, 1] plus a gripper command in [0, 2] (1 stays; 2 closes
the gripper, 0 opens it: gym-hil's keyboard and gamepad call them "open" and "close" the other
way round, and rlctl's input devices map the keys as gym-hil does).

Each step's `info` carries what gym-hil tags: `is_intervention`, `teleop_action` (the action
that was executed), `discrete_penalty`, `rerecord_episode`, and `next.success` when the person
ended the episode. MuJoCo renders offscreen on a machine without a display (`MUJOCO_GL=egl`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import attrs

from rlctl.adapters.sim.config import RLCTL_ONLY, EnvConfig, env_feature
from rlctl.application.ports.simulation import SimTask
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureSpec

# gym-hil's tasks: scene, input device (None: the policy alone), and the gripper penalty its
# registration gives (LeRobot passes its own, 0.0 unless `processor.gripper` says otherwise).
SCENES = ("PandaPickCube", "PandaArrangeBoxes")
INPUTS = {"": None, "Keyboard": "keyboard", "Gamepad": "gamepad"}
TASK_PATTERN = re.compile(
    r"^(?P<scene>PandaPickCube|PandaArrangeBoxes)(?P<input>Keyboard|Gamepad)?(-v0)?$"
)
# gym-hil registers every task with this step limit.
GYM_HIL_MAX_STEPS = 100
STATE_DIM = 18
# gym-hil's state-only observation adds the cube's (or the first box's) position.
ENVIRONMENT_STATE_DIM = 3
OBS_TYPES = ("pixels_agent_pos", "environment_state_agent_pos")
# gym-hil's reward types: "sparse" (1 once the cube is lifted 10 cm, or every box is on its
# target) or "dense" (the gripper's closeness to the cube and the lift, or the boxes' closeness
# to their targets, every step).
REWARD_TYPES = ("sparse", "dense")
ACTION_NAMES = ("delta_x", "delta_y", "delta_z", "gripper")


def _hil_map() -> dict[str, str]:
    return {
        "action": "action",
        "agent_pos": "observation.state",
        "pixels/front": "observation.images.front",
        "pixels/wrist": "observation.images.wrist",
        "environment_state": "observation.environment_state",
    }


# --- LeRobot's HILSerlProcessorConfig and its sections, field for field ------------------------


@attrs.frozen(kw_only=True)
class ImagePreprocessingConfig:
    # Per image key, (top, left, height, width) in pixels.
    crop_params_dict: dict[str, tuple[int, int, int, int]] | None = None
    # (height, width) every image is resized to after its crop.
    resize_size: tuple[int, int] | None = None


@attrs.frozen(kw_only=True)
class RewardClassifierSettings:
    """Where a trained reward classifier is, and how its prediction becomes the reward."""

    pretrained_path: str | None = None
    success_threshold: float = 0.5
    success_reward: float = 1.0


@attrs.frozen(kw_only=True)
class InverseKinematicsConfig:
    urdf_path: str | None = None
    target_frame_name: str | None = None
    end_effector_bounds: dict[str, list[float]] | None = None
    end_effector_step_sizes: dict[str, float] | None = None


@attrs.frozen(kw_only=True)
class ObservationConfig:
    add_joint_velocity_to_observation: bool = False
    add_current_to_observation: bool = False
    add_ee_pose_to_observation: bool = False
    display_cameras: bool = False


@attrs.frozen(kw_only=True)
class GripperConfig:
    use_gripper: bool = True
    gripper_penalty: float = 0.0


@attrs.frozen(kw_only=True)
class ResetConfig:
    fixed_reset_joint_positions: Any | None = None
    reset_time_s: float = 5.0
    # The episode's length in seconds: `control_time_s * fps` steps.
    control_time_s: float = 20.0
    terminate_on_success: bool = True


@attrs.frozen(kw_only=True)
class HILSerlProcessorConfig:
    # LeRobot's real-robot setting; with gym-hil the task name picks the input device.
    control_mode: str = "gamepad"
    observation: ObservationConfig | None = None
    image_preprocessing: ImagePreprocessingConfig | None = None
    gripper: GripperConfig | None = None
    reset: ResetConfig | None = None
    inverse_kinematics: InverseKinematicsConfig | None = None
    reward_classifier: RewardClassifierSettings | None = None
    max_gripper_pos: float | None = 100.0


def _rlctl_only(default: Any) -> Any:
    return attrs.field(default=default, metadata={RLCTL_ONLY: True})


@EnvConfig.register("hil")
@attrs.frozen(kw_only=True)
class HilEnv(EnvConfig):
    extra: ClassVar[str | None] = "hil"

    task: str | None = "PandaPickCube-v0"
    # gym-hil steps its controller every 0.1 s.
    fps: int = 10
    # None: `processor.reset.control_time_s * fps` with a reset section, else gym-hil's 100.
    episode_length: int | None = None
    features_map: dict[str, str] = attrs.field(factory=_hil_map)
    # LeRobot's `gym_manipulator` names the simulator this way; only gym_hil is served here.
    name: str = "gym_hil"
    robot: Any | None = None
    teleop: Any | None = None
    processor: HILSerlProcessorConfig = attrs.field(factory=HILSerlProcessorConfig)
    # rlctl's: what the robot sees: "pixels_agent_pos" (both cameras and the arm's state) or
    # "environment_state_agent_pos" (the arm's state and the cube's position, nothing rendered:
    # gym-hil's state-only observation).
    obs_type: str = _rlctl_only("pixels_agent_pos")
    # rlctl's: the cameras' size (gym-hil renders 128x128 unless told).
    observation_height: int = _rlctl_only(128)
    observation_width: int = _rlctl_only(128)
    # rlctl's: the seconds gym-hil waits on each reset for a person to look (its own default is 1).
    reset_delay_seconds: float = _rlctl_only(0.0)
    # gym-hil's: put the cube at a random place on each reset (PandaPickCube's
    # `random_block_position`; PandaArrangeBoxes shuffles its boxes on every reset anyway).
    random_block_position: bool = _rlctl_only(False)
    # gym-hil's `reward_type`: "sparse" (its default: 1 on success, else 0) or "dense" (a
    # shaped reward every step; success is then gym-hil's own check, the cube lifted in hand).
    reward_type: str = _rlctl_only("sparse")
    # rlctl's: "auto" takes the input device from the task name; "scripted" replays
    # `scripted_keys` instead of a keyboard (tests, demos without a desktop); "none" never
    # lets a person take over.
    input: Literal["auto", "keyboard", "gamepad", "scripted", "none"] = _rlctl_only("auto")
    # rlctl's: keyboard events by step, "STEP press|release KEY" (keys: up, down, left, right,
    # shift, shift_r, ctrl_l, ctrl_r, enter, esc, space, r), e.g. "0 press space".
    scripted_keys: tuple[str, ...] = attrs.field(
        default=(), converter=tuple, metadata={RLCTL_ONLY: True}
    )

    def __attrs_post_init__(self) -> None:
        self.scene_and_input()
        if self.name != "gym_hil":
            raise ConfigError(
                f"the hil env type runs gym-hil, not {self.name!r}",
                where="env.name",
                hint="leave env.name at gym_hil; a real arm is a robot (--robot.type=...)",
            )
        for field in ("robot", "teleop"):
            if getattr(self, field) is not None:
                raise ConfigError(
                    f"gym-hil takes no {field}",
                    where=f"env.{field}",
                    hint="leave it out: the person intervenes through the task's keyboard or "
                    "gamepad variant (PandaPickCubeKeyboard-v0)",
                )
        if self.processor.inverse_kinematics is not None:
            raise ConfigError(
                "gym-hil takes end-effector actions itself: inverse kinematics does not apply",
                where="env.processor.inverse_kinematics",
                hint="leave it out",
            )
        if self.obs_type not in OBS_TYPES:
            raise ConfigError(
                f"unknown obs_type {self.obs_type!r}",
                where="env.obs_type",
                hint=f"one of {', '.join(OBS_TYPES)}",
            )
        images = self.processor.image_preprocessing
        if (
            not self.has_cameras()
            and images is not None
            and (images.crop_params_dict or images.resize_size)
        ):
            raise ConfigError(
                "image_preprocessing crops and resizes the cameras, and a state-only env has none",
                where="env.processor.image_preprocessing",
                hint="leave it out, or use --env.obs_type=pixels_agent_pos",
            )
        if self.reward_type not in REWARD_TYPES:
            raise ConfigError(
                f"unknown reward_type {self.reward_type!r}",
                where="env.reward_type",
                hint=f"one of {', '.join(REWARD_TYPES)} (gym-hil's)",
            )
        scene, _ = self.scene_and_input()
        if self.random_block_position and scene != "PandaPickCube":
            raise ConfigError(
                f"{scene} takes no random_block_position: it shuffles its boxes on every reset",
                where="env.random_block_position",
                hint="leave it out, or use PandaPickCube-v0",
            )
        if self.fps <= 0:
            raise ConfigError(f"fps must be positive, got {self.fps}", where="env.fps")
        if self.observation_height < 8 or self.observation_width < 8:
            raise ConfigError(
                "the cameras need at least 8x8 pixels",
                where="env.observation_height/env.observation_width",
            )
        from rlctl.adapters.sim.envs.hil_input import parse_scripted_keys

        parse_scripted_keys(self.scripted_keys)
        if self.scripted_keys and self.input not in ("scripted", "auto"):
            raise ConfigError(
                "scripted_keys are replayed only with input=scripted",
                where="env.scripted_keys",
                hint="set --env.input=scripted, or leave scripted_keys out",
            )

    def scene_and_input(self) -> tuple[str, str | None]:
        """(`PandaPickCube`, `keyboard`) for `PandaPickCubeKeyboard-v0`, as `input` overrides."""
        match = TASK_PATTERN.match(self.task or "")
        if match is None:
            known = [f"{s}{i}-v0" for s in SCENES for i in INPUTS]
            raise ConfigError(
                f"unknown gym-hil task {self.task!r}",
                where="env.task",
                hint=f"tasks: {', '.join(known)}",
            )
        device = INPUTS[match["input"] or ""]
        if self.input == "auto":
            device = "scripted" if self.scripted_keys else device
        elif self.input != "none":
            device = self.input
        else:
            device = None
        return match["scene"], device

    @property
    def gym_id(self) -> str:
        scene, _ = self.scene_and_input()
        match = TASK_PATTERN.match(self.task or "")
        assert match is not None  # scene_and_input said what is wrong otherwise
        return f"gym_hil/{scene}{match['input'] or ''}-v0"

    def use_gripper(self) -> bool:
        return self.processor.gripper.use_gripper if self.processor.gripper is not None else True

    def gripper_penalty(self) -> float:
        # As LeRobot's make_robot_env: 0.0 without a gripper section, whatever gym-hil registers.
        gripper = self.processor.gripper
        return gripper.gripper_penalty if gripper is not None else 0.0

    def terminate_on_success(self) -> bool:
        return self.processor.reset.terminate_on_success if self.processor.reset else True

    def max_steps(self) -> int:
        if self.episode_length is not None:
            return self.episode_length
        if self.processor.reset is not None:
            return int(self.processor.reset.control_time_s * self.fps)
        return GYM_HIL_MAX_STEPS

    def has_cameras(self) -> bool:
        return self.obs_type == "pixels_agent_pos"

    def renders_on_gpu(self) -> bool:
        from rlctl.adapters.sim.mujoco_gl import egl_on_gpu

        return egl_on_gpu(headless_default=True)

    def default_features(self) -> dict[str, FeatureSpec]:
        features = {
            # LeRobot's names for gym-hil's actions (gym_manipulator's recorded datasets).
            "action": attrs.evolve(env_feature("ACTION", (4,)), names=list(ACTION_NAMES)),
            "agent_pos": env_feature("STATE", (STATE_DIM,)),
        }
        if not self.has_cameras():
            return features | {"environment_state": env_feature("ENV", (ENVIRONMENT_STATE_DIM,))}
        image = env_feature("VISUAL", (self.observation_height, self.observation_width, 3))
        return features | {"pixels/front": image, "pixels/wrist": image}

    def tasks(self) -> list[SimTask]:
        return [SimTask("hil", 0, self.gym_id.removeprefix("gym_hil/"))]

    def env_processors(self) -> tuple[Any, Any]:
        from rlctl.adapters.sim.envs.hil_processor import env_pipelines

        return env_pipelines(self)

    def env_factory(self, task: SimTask) -> Callable[[], Any]:
        scene, device = self.scene_and_input()
        return functools.partial(
            make_hil_env,
            HilEnvSpec(
                scene=scene,
                device=device,
                height=self.observation_height,
                width=self.observation_width,
                image_obs=self.has_cameras(),
                use_gripper=self.use_gripper(),
                gripper_penalty=self.gripper_penalty(),
                max_steps=self.max_steps(),
                reset_delay_s=self.reset_delay_seconds,
                random_block_position=self.random_block_position,
                reward_type=self.reward_type,
                scripted_keys=self.scripted_keys,
                install_hint=self.install_hint(),
            ),
        )


@attrs.frozen(kw_only=True)
class HilEnvSpec:
    """What a worker needs to build one gym-hil env (picklable)."""

    scene: str
    device: str | None
    height: int
    width: int
    image_obs: bool
    use_gripper: bool
    gripper_penalty: float
    max_steps: int
    reset_delay_s: float
    random_block_position: bool
    reward_type: str
    scripted_keys: tuple[str, ...]
    install_hint: str


def make_hil_env(spec: HilEnvSpec) -> Any:
    from rlctl.adapters.sim.config import ensure_importable
    from rlctl.adapters.sim.mujoco_gl import use_offscreen_gl_when_headless

    use_offscreen_gl_when_headless()
    ensure_importable("gym_hil", spec.install_hint)
    from rlctl.adapters.sim.envs.hil_env import build_hil_env

    return build_hil_env(spec)
