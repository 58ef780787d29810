"""What every policy config has: LeRobot's `PreTrainedConfig` fields, as a frozen attrs class.

Policy configs are pure data: the training use case reads their delta indices and presets, and
the CLI structures `--policy.type=act --policy.chunk_size=50` into them without importing a
model (`rlctl --help` must stay fast). Field names and defaults are LeRobot 0.6.1's, key for key,
so that a LeRobot `config.json` structures into these classes and unstructures back to the same
JSON (`lerobot_config_data` leaves out the relative-action fields while unused).

`PolicyConfig` is a tagged union on `type`. A policy type is one config class registered with
`@PolicyConfig.register("name")` (and an entry point in the group `rlctl.policies`, see
`registry`), and its optimiser preset (`optimizer_preset`, `scheduler_preset`, as LeRobot's
configs give them). The class that serves it (a torch model, a scripted policy) is not named
here: the adapters find it by the type's name (entry points `rlctl.policy_models`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from rlctl.domain.config import Register, tagged_union, unstructure
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import (
    FeatureKind,
    FeatureSpec,
    typed_feature,
    typed_features,
    typed_kind,
)
from rlctl.domain.optimization import OptimizerSpec, SchedulerSpec
from rlctl.domain.policies.compute_dtype import ComputeDtype

# LeRobot's NormalizationMode, as the strings its config.json holds.
NORM_MODES = ("MEAN_STD", "MIN_MAX", "IDENTITY", "QUANTILES", "QUANTILE10")

OBS_STATE = "observation.state"
OBS_ENV_STATE = "observation.environment_state"
ACTION = "action"
# The statistics key of per-step relative action statistics (`relative_stats_horizon`), as
# Isaac-GR00T's statistics.json names them.
RELATIVE_ACTION = "relative_action"


def norm_mapping(value: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for kind, mode in value.items():
        mode_text = str(mode).upper()
        if mode_text not in NORM_MODES:
            raise ConfigError(
                f"unknown normalisation mode {mode!r} for {kind}; known: {', '.join(NORM_MODES)}",
                where="normalization_mapping",
            )
        out[typed_kind(kind).value.upper()] = mode_text
    return out


# The device types torch knows (`torch.device`), optionally with an index: "cuda:1".
_DEVICE = re.compile(
    r"(cpu|cuda|mps|xpu|hpu|npu|meta|ipu|mkldnn|opengl|opencl|ideep|hip|ve|fpga|maia|xla|lazy"
    r"|vulkan|mtia|privateuseone)(:\d+)?"
)


def optional_device(value: Any) -> str | None:
    """A torch device string, or None (the policy then runs where it is loaded)."""
    if value is None or (isinstance(value, str) and _DEVICE.fullmatch(value)):
        return value
    raise ConfigError(
        f"unknown device {value!r}"[:120],
        where="device",
        hint="give a torch device such as 'cpu', 'cuda', 'cuda:0' or 'mps' (or null)",
    )


def int_tuple(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


def names_tuple(value: Any) -> tuple[str, ...]:
    # A single name from the command line (`--policy.relative_exclude_joints=gripper`) is one
    # name, not a string of letters.
    if isinstance(value, str):
        return (value,) if value else ()
    return tuple(str(v) for v in value)


def optional_names(value: Any) -> tuple[str, ...] | None:
    return None if value is None else names_tuple(value)


def optional_pair(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    pair = int_tuple(value)
    if len(pair) != 2 or min(pair) <= 0:
        raise ConfigError(f"expected two positive integers (height, width), got {value!r}")
    return pair


# LeRobot's pi0/pi05 default and `recompute_stats(relative_action=True)`'s.
RELATIVE_EXCLUDE_DEFAULT = ("gripper",)


def _mean_std_everywhere() -> dict[str, str]:
    return {"VISUAL": "MEAN_STD", "STATE": "MEAN_STD", "ACTION": "MEAN_STD"}


@tagged_union
@attrs.frozen(kw_only=True)
class PolicyConfig:
    """What every policy config has: LeRobot's `PreTrainedConfig` fields."""

    n_obs_steps: int = 1
    # Actions of each predicted chunk executed before the next prediction (per-policy default).
    n_action_steps: int = 1
    input_features: dict[str, FeatureSpec] = attrs.field(factory=dict, converter=typed_features)
    output_features: dict[str, FeatureSpec] = attrs.field(factory=dict, converter=typed_features)
    device: str | None = attrs.field(default=None, converter=optional_device)
    use_amp: bool = False
    # rlctl's: the dtype a bfloat16 model computes in here (`compute_dtype`: auto, keep,
    # float32). Not in config.json (LeRobot has no such key): a setting of the run, not the model.
    compute_dtype: ComputeDtype = "auto"
    use_peft: bool = False
    # LeRobot defaults this to True; rlctl pushes only when asked on its command line, so the
    # field only round-trips here.
    push_to_hub: bool = False
    repo_id: str | None = None
    private: bool | None = None
    tags: list[str] | None = None
    license: str | None = None
    pretrained_path: str | None = None
    pretrained_revision: str | None = None
    normalization_mapping: dict[str, str] = attrs.field(
        factory=_mean_std_everywhere, converter=norm_mapping
    )
    # Learn actions relative to the state (`action - observation.state`, statistics included);
    # the policy's processors convert back, so it still outputs absolute actions. LeRobot's
    # pi0/pi05 fields; config.json holds them only when they are used.
    use_relative_actions: bool = False
    # Action dimensions kept absolute: those whose name (the dataset's action names) contains
    # one of these words. LeRobot's default, "gripper", excludes nothing on a dataset without
    # one (every dimension is then relative); [] makes every dimension relative.
    relative_exclude_joints: tuple[str, ...] = attrs.field(
        default=RELATIVE_EXCLUDE_DEFAULT, converter=names_tuple
    )
    # The dataset's action names, filled in when training starts.
    action_feature_names: tuple[str, ...] | None = attrs.field(
        default=None, converter=optional_names
    )

    type_name: ClassVar[str]  # set by the tagged union's register()
    register: ClassVar[Register]
    # False for policies that act without learning (random, scripted experts).
    trainable: ClassVar[bool] = True
    # False for models trained like policies that give no actions (the reward classifier).
    acts: ClassVar[bool] = True
    # False for policies that read states only: a dataset's cameras are then neither decoded nor
    # normalised for them, and their input features leave the cameras out.
    reads_images: ClassVar[bool] = True
    # True for flow-matching policies whose sampler follows real-time chunking's guidance
    # (`rtc_config`, `rlctl.domain.policies.rtc`); the others ignore committed actions.
    supports_rtc: ClassVar[bool] = False
    # Fields of this base that the LeRobot config class lacks (LeRobot refuses unknown keys in
    # a config.json): derived here, left out of the file.
    lerobot_omits: ClassVar[tuple[str, ...]] = ()
    # How relative actions are normalised (`use_relative_actions`): None, with statistics over
    # every action of every chunk, in place of the `action` ones (LeRobot's pi0/pi05); a number
    # H, with one row of statistics per chunk step over every H-step chunk inside an episode,
    # kept under `relative_action` beside the absolute `action` ones (GR00T N1.7's).
    relative_stats_horizon: ClassVar[int | None] = None

    # --- features, as LeRobot's config properties name them ---------------------------------

    @property
    def image_features(self) -> dict[str, FeatureSpec]:
        return {k: f for k, f in self.input_features.items() if f.kind is FeatureKind.VISUAL}

    @property
    def robot_state_feature(self) -> FeatureSpec | None:
        feature = self.input_features.get(OBS_STATE)
        return feature if feature is not None and feature.kind is FeatureKind.STATE else None

    @property
    def env_state_feature(self) -> FeatureSpec | None:
        return next((f for f in self.input_features.values() if f.kind is FeatureKind.ENV), None)

    @property
    def action_feature(self) -> FeatureSpec | None:
        feature = self.output_features.get(ACTION)
        return feature if feature is not None and feature.kind is FeatureKind.ACTION else None

    @property
    def action_dim(self) -> int:
        feature = self.action_feature
        if feature is None:
            raise ConfigError(
                "the policy has no 'action' output feature",
                where="output_features",
                hint="set output_features from the dataset's features before building the model",
            )
        return int(feature.shape[0])

    # --- how it trains unless --optimizer.* / --scheduler.* say otherwise ---------------------

    def optimizer_preset(self) -> OptimizerSpec:
        """The optimiser this policy trains with (LeRobot's `get_optimizer_preset`); the base
        gives LeRobot's default `AdamConfig`."""
        return OptimizerSpec()

    def scheduler_preset(self) -> SchedulerSpec | None:
        """Its learning-rate schedule (LeRobot's `get_scheduler_preset`); None: a constant lr."""
        return None

    # --- what the dataset must deliver around each frame (frame offsets) ----------------------

    @property
    def observation_delta_indices(self) -> list[int] | None:
        return None

    @property
    def action_delta_indices(self) -> list[int] | None:
        return None

    @property
    def reward_delta_indices(self) -> list[int] | None:
        """Frame offsets of `next.reward` (policies that learn a value from rewards: TD-MPC)."""
        return None

    def with_features(
        self,
        input_features: Mapping[str, FeatureSpec],
        output_features: Mapping[str, FeatureSpec],
    ) -> PolicyConfig:
        return attrs.evolve(
            self, input_features=dict(input_features), output_features=dict(output_features)
        )


def require(condition: bool, message: str, where: str, hint: str | None = None) -> None:
    if not condition:
        raise ConfigError(message, where=f"policy.{where}", hint=hint)


# The most layers a config may stack: far above any real checkpoint's (X-VLA 24, VQ-BeT 8),
# and far below what would take hours to build (each layer is Python objects, even on the
# meta device).
MAX_LAYERS = 1024


def require_layers(value: int, where: str) -> None:
    require(
        1 <= value <= MAX_LAYERS,
        f"{where} must be between 1 and {MAX_LAYERS}, got {value}",
        where,
        hint="use the config.json saved with the weights",
    )


def check_resnet(name: str) -> None:
    require(
        name.startswith("resnet"),
        f"vision_backbone must be a ResNet (resnet18, resnet34, resnet50, resnet101, resnet152), "
        f"got {name!r}",
        "vision_backbone",
    )


RELATIVE_ACTION_FIELDS = ("use_relative_actions", "relative_exclude_joints", "action_feature_names")
# Fields of every rlctl policy config that no LeRobot config has: settings of a run, never
# written to config.json or train_config.json.
RLCTL_RUN_FIELDS = ("compute_dtype",)


def lerobot_config_data(config: PolicyConfig) -> dict[str, Any]:
    """The config as plain data for config.json and train_config.json.

    LeRobot refuses unknown keys in a config.json, and only some of its policies (pi0, pi05,
    GR00T) know the relative-action fields; so they are written only while relative actions are
    on — then all three, so that a reader's own defaults (pi0 excludes "gripper") never fill a
    gap. Off, they change nothing, and the file stays what LeRobot writes.
    """
    data = unstructure(config)
    # Fields the LeRobot counterpart lacks (a reward model has no n_obs_steps …).
    for name in (*getattr(type(config), "lerobot_omits", ()), *RLCTL_RUN_FIELDS):
        data.pop(name, None)
    if not config.use_relative_actions:
        for name in RELATIVE_ACTION_FIELDS:
            data.pop(name, None)
    return data


_POLICY_KINDS = (FeatureKind.STATE, FeatureKind.VISUAL, FeatureKind.ENV, FeatureKind.ACTION)


def dataset_policy_features(
    features: Mapping[str, FeatureSpec],
) -> tuple[dict[str, FeatureSpec], dict[str, FeatureSpec]]:
    """A dataset's features as a policy's (inputs, outputs), as LeRobot's
    `dataset_to_policy_features` maps them: images become channels-first `(C, H, W)`."""
    inputs: dict[str, FeatureSpec] = {}
    outputs: dict[str, FeatureSpec] = {}
    for key, spec in features.items():
        kind = spec.kind
        if kind not in _POLICY_KINDS:
            continue
        if kind is FeatureKind.VISUAL:
            height, width, channels = spec.hwc
            shape: tuple[int, ...] = (channels, height, width)
        else:
            shape = spec.shape
        target = outputs if kind is FeatureKind.ACTION else inputs
        target[key] = typed_feature(kind, shape, key)
    return inputs, outputs


attrs.resolve_types(PolicyConfig)
