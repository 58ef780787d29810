"""Policy configurations: ACT, Diffusion Policy and a small MLP, as frozen attrs classes.

They live in the application layer, not beside the torch models, because nothing in them needs
torch: the training use case reads their delta indices and presets, and the CLI structures
`--policy.type=act --policy.chunk_size=50` into them without importing a model (`rlctl --help`
must stay fast). The torch models in `rlctl.adapters.policies` take these objects.

Field names and defaults are LeRobot 0.6.1's, key for key, so that a LeRobot `config.json`
structures into these classes and unstructures back to the same JSON (`lerobot_config_data`
leaves out the relative-action fields, which only LeRobot's pi0/pi05 know, while unused).
`PolicyConfig` is a tagged union on `type`: a new policy is one class here
(`@PolicyConfig.register("name")`) plus one model module in `rlctl.adapters.policies`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from rlctl.domain.config import tagged_union, unstructure
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureKind, FeatureSpec

# LeRobot's FeatureType and NormalizationMode, as the strings its config.json holds.
FEATURE_TYPES = ("STATE", "VISUAL", "ENV", "ACTION", "REWARD", "LANGUAGE")
NORM_MODES = ("MEAN_STD", "MIN_MAX", "IDENTITY", "QUANTILES", "QUANTILE10")

OBS_STATE = "observation.state"
OBS_ENV_STATE = "observation.environment_state"
ACTION = "action"


def _feature_type(value: Any) -> str:
    text = str(getattr(value, "value", value)).upper()
    if text not in FEATURE_TYPES:
        raise ConfigError(f"unknown feature type {value!r}; known: {', '.join(FEATURE_TYPES)}")
    return text


def _norm_mapping(value: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for kind, mode in value.items():
        mode_text = str(getattr(mode, "value", mode)).upper()
        if mode_text not in NORM_MODES:
            raise ConfigError(
                f"unknown normalisation mode {mode!r} for {kind}; known: {', '.join(NORM_MODES)}",
                where="normalization_mapping",
            )
        out[_feature_type(kind)] = mode_text
    return out


def _int_tuple(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


def _names(value: Any) -> tuple[str, ...]:
    # A single name from the command line (`--policy.relative_exclude_joints=gripper`) is one
    # name, not a string of letters.
    if isinstance(value, str):
        return (value,) if value else ()
    return tuple(str(v) for v in value)


def _optional_names(value: Any) -> tuple[str, ...] | None:
    return None if value is None else _names(value)


def _optional_pair(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    pair = _int_tuple(value)
    if len(pair) != 2 or min(pair) <= 0:
        raise ConfigError(f"expected two positive integers (height, width), got {value!r}")
    return pair  # type: ignore[return-value]


@attrs.frozen
class PolicyFeature:
    """What a policy reads or writes under one key: LeRobot's `{"type": "STATE", "shape": [6]}`."""

    type: str = attrs.field(converter=_feature_type)
    shape: tuple[int, ...] = attrs.field(converter=_int_tuple)


def _features(value: Mapping[str, Any] | None) -> dict[str, PolicyFeature]:
    if value is None:
        return {}
    return {
        key: feature if isinstance(feature, PolicyFeature) else PolicyFeature(**feature)
        for key, feature in value.items()
    }


def _mean_std_everywhere() -> dict[str, str]:
    return {"VISUAL": "MEAN_STD", "STATE": "MEAN_STD", "ACTION": "MEAN_STD"}


@tagged_union
@attrs.frozen(kw_only=True)
class PolicyConfig:
    """What every policy config has: LeRobot's `PreTrainedConfig` fields."""

    n_obs_steps: int = 1
    input_features: dict[str, PolicyFeature] = attrs.field(factory=dict, converter=_features)
    output_features: dict[str, PolicyFeature] = attrs.field(factory=dict, converter=_features)
    device: str | None = None
    use_amp: bool = False
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
        factory=_mean_std_everywhere, converter=_norm_mapping
    )
    # Learn actions relative to the state (`action - observation.state`, statistics included);
    # the policy's processors convert back, so it still outputs absolute actions. LeRobot's
    # pi0/pi05 fields; config.json holds them only when they are used.
    use_relative_actions: bool = False
    # Action dimensions kept absolute: those whose name (the dataset's action names) contains
    # one of these words, e.g. '["gripper"]'.
    relative_exclude_joints: tuple[str, ...] = attrs.field(default=(), converter=_names)
    # The dataset's action names, filled in when training starts.
    action_feature_names: tuple[str, ...] | None = attrs.field(
        default=None, converter=_optional_names
    )

    type_name: ClassVar[str]  # set by the tagged union's register()

    # --- features, as LeRobot's config properties name them ---------------------------------

    @property
    def image_features(self) -> dict[str, PolicyFeature]:
        return {k: f for k, f in self.input_features.items() if f.type == "VISUAL"}

    @property
    def robot_state_feature(self) -> PolicyFeature | None:
        feature = self.input_features.get(OBS_STATE)
        return feature if feature is not None and feature.type == "STATE" else None

    @property
    def env_state_feature(self) -> PolicyFeature | None:
        return next((f for f in self.input_features.values() if f.type == "ENV"), None)

    @property
    def action_feature(self) -> PolicyFeature | None:
        feature = self.output_features.get(ACTION)
        return feature if feature is not None and feature.type == "ACTION" else None

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

    # --- what the dataset must deliver around each frame (frame offsets) ----------------------

    @property
    def observation_delta_indices(self) -> list[int] | None:
        return None

    @property
    def action_delta_indices(self) -> list[int] | None:
        return None

    def with_features(
        self,
        input_features: Mapping[str, PolicyFeature],
        output_features: Mapping[str, PolicyFeature],
    ) -> PolicyConfig:
        return attrs.evolve(
            self, input_features=dict(input_features), output_features=dict(output_features)
        )


def _require(condition: bool, message: str, where: str, hint: str | None = None) -> None:
    if not condition:
        raise ConfigError(message, where=f"policy.{where}", hint=hint)


def _check_resnet(name: str) -> None:
    _require(
        name.startswith("resnet"),
        f"vision_backbone must be a ResNet (resnet18, resnet34, resnet50, resnet101, resnet152), "
        f"got {name!r}",
        "vision_backbone",
    )


@PolicyConfig.register("act")
@attrs.frozen(kw_only=True)
class ACTConfig(PolicyConfig):
    """Action Chunking Transformer (Zhao et al. 2023), LeRobot's defaults (ALOHA-sized)."""

    chunk_size: int = 100
    n_action_steps: int = 100
    vision_backbone: str = "resnet18"
    pretrained_backbone_weights: str | None = "ResNet18_Weights.IMAGENET1K_V1"
    replace_final_stride_with_dilation: bool = False
    pre_norm: bool = False
    dim_model: int = 512
    n_heads: int = 8
    dim_feedforward: int = 3200
    feedforward_activation: str = "relu"
    n_encoder_layers: int = 4
    # The original ACT code asks for 7 decoder layers but a bug makes it use only the first.
    n_decoder_layers: int = 1
    use_vae: bool = True
    latent_dim: int = 32
    n_vae_encoder_layers: int = 4
    temporal_ensemble_coeff: float | None = None
    dropout: float = 0.1
    kl_weight: float = 10.0
    optimizer_lr: float = 1e-5
    optimizer_weight_decay: float = 1e-4
    optimizer_lr_backbone: float = 1e-5

    def __attrs_post_init__(self) -> None:
        _check_resnet(self.vision_backbone)
        _require(
            self.n_action_steps <= self.chunk_size,
            f"n_action_steps ({self.n_action_steps}) cannot exceed chunk_size ({self.chunk_size})",
            "n_action_steps",
        )
        _require(
            self.temporal_ensemble_coeff is None or self.n_action_steps == 1,
            "temporal ensembling queries the policy every step, so n_action_steps must be 1",
            "n_action_steps",
            hint="set --policy.n_action_steps=1 or drop temporal_ensemble_coeff",
        )
        _require(self.n_obs_steps == 1, "ACT reads one observation step", "n_obs_steps")
        _require(
            self.dim_model % self.n_heads == 0,
            f"dim_model ({self.dim_model}) must be divisible by n_heads ({self.n_heads})",
            "dim_model",
        )
        _require(
            self.feedforward_activation in ("relu", "gelu", "glu"),
            f"feedforward_activation must be relu, gelu or glu, got "
            f"{self.feedforward_activation!r}",
            "feedforward_activation",
        )

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))


def _diffusion_norms() -> dict[str, str]:
    return {"VISUAL": "MEAN_STD", "STATE": "MIN_MAX", "ACTION": "MIN_MAX"}


@PolicyConfig.register("diffusion")
@attrs.frozen(kw_only=True)
class DiffusionConfig(PolicyConfig):
    """Diffusion Policy (Chi et al. 2023) with a 1D conditional U-Net, LeRobot's defaults."""

    n_obs_steps: int = 2
    normalization_mapping: dict[str, str] = attrs.field(
        factory=_diffusion_norms, converter=_norm_mapping
    )
    horizon: int = 64
    n_action_steps: int = 32
    drop_n_last_frames: int = 7
    vision_backbone: str = "resnet18"
    resize_shape: tuple[int, int] | None = attrs.field(default=None, converter=_optional_pair)
    crop_ratio: float = 1.0
    crop_shape: tuple[int, int] | None = attrs.field(default=None, converter=_optional_pair)
    crop_is_random: bool = True
    pretrained_backbone_weights: str | None = "ResNet18_Weights.IMAGENET1K_V1"
    use_group_norm: bool = False
    spatial_softmax_num_keypoints: int = 32
    use_separate_rgb_encoder_per_camera: bool = True
    down_dims: tuple[int, ...] = attrs.field(default=(512, 1024, 2048), converter=_int_tuple)
    kernel_size: int = 5
    n_groups: int = 8
    diffusion_step_embed_dim: int = 128
    use_film_scale_modulation: bool = True
    gradient_checkpointing: bool = False
    noise_scheduler_type: str = "DDPM"
    num_train_timesteps: int = 100
    beta_schedule: str = "squaredcos_cap_v2"
    beta_start: float = 0.0001
    beta_end: float = 0.02
    prediction_type: str = "epsilon"
    clip_sample: bool = True
    clip_sample_range: float = 1.0
    num_inference_steps: int | None = None
    compile_model: bool = False
    compile_mode: str = "reduce-overhead"
    do_mask_loss_for_padding: bool = False
    optimizer_lr: float = 1e-4
    optimizer_betas: tuple[float, float] = attrs.field(
        default=(0.95, 0.999), converter=lambda v: tuple(float(x) for x in v)
    )
    optimizer_eps: float = 1e-8
    optimizer_weight_decay: float = 1e-6
    scheduler_name: str = "cosine"
    scheduler_warmup_steps: int = 500

    def __attrs_post_init__(self) -> None:
        _check_resnet(self.vision_backbone)
        _require(
            self.prediction_type in ("epsilon", "sample"),
            f"prediction_type must be 'epsilon' or 'sample', got {self.prediction_type!r}",
            "prediction_type",
        )
        _require(
            self.noise_scheduler_type in ("DDPM", "DDIM"),
            f"noise_scheduler_type must be 'DDPM' or 'DDIM', got {self.noise_scheduler_type!r}",
            "noise_scheduler_type",
        )
        _require(
            0 < self.crop_ratio <= 1.0,
            f"crop_ratio must be in (0, 1], got {self.crop_ratio}",
            "crop_ratio",
        )
        factor = 2 ** len(self.down_dims)
        _require(
            self.horizon % factor == 0,
            f"horizon ({self.horizon}) must be a multiple of 2**len(down_dims) = {factor}, "
            "because the U-Net halves the sequence at each level",
            "horizon",
        )
        # n_action_steps beyond horizon - n_obs_steps + 1 is not refused: LeRobot trains and
        # runs such configs, executing the (shorter) chunk the horizon leaves.
        steps = self.num_inference_steps
        _require(
            steps is None or 0 < steps <= self.num_train_timesteps,
            f"num_inference_steps ({steps}) must be in 1..num_train_timesteps "
            f"({self.num_train_timesteps})",
            "num_inference_steps",
        )
        for key, feature in self.image_features.items():
            crop = self.effective_crop_shape
            if self.resize_shape is None and crop is not None:
                _require(
                    crop[0] <= feature.shape[1] and crop[1] <= feature.shape[2],
                    f"crop_shape {list(crop)} does not fit the image {key} {list(feature.shape)}",
                    "crop_shape",
                )

    @property
    def effective_crop_shape(self) -> tuple[int, int] | None:
        """The crop the encoder applies; with a resize, LeRobot derives it from crop_ratio."""
        if self.resize_shape is None:
            return self.crop_shape
        if self.crop_ratio < 1.0:
            return (
                int(self.resize_shape[0] * self.crop_ratio),
                int(self.resize_shape[1] * self.crop_ratio),
            )
        return None

    @property
    def observation_delta_indices(self) -> list[int]:
        return list(range(1 - self.n_obs_steps, 1))

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(1 - self.n_obs_steps, 1 - self.n_obs_steps + self.horizon))


@PolicyConfig.register("mlp")
@attrs.frozen(kw_only=True)
class MLPConfig(PolicyConfig):
    """rlctl's small state-only policy: observation history -> a chunk of actions, one MLP.

    Meant for quick experiments and smoke tests (trains in seconds on a CPU); it reads the
    robot state and the environment state, never images.
    """

    chunk_size: int = 10
    n_action_steps: int = 10
    hidden_dims: tuple[int, ...] = attrs.field(default=(256, 256), converter=_int_tuple)
    activation: str = "relu"
    dropout: float = 0.0
    optimizer_lr: float = 1e-3
    optimizer_weight_decay: float = 0.0

    def __attrs_post_init__(self) -> None:
        _require(
            self.n_action_steps <= self.chunk_size,
            f"n_action_steps ({self.n_action_steps}) cannot exceed chunk_size ({self.chunk_size})",
            "n_action_steps",
        )
        _require(
            self.activation in ("relu", "gelu", "tanh"),
            f"activation must be relu, gelu or tanh, got {self.activation!r}",
            "activation",
        )
        _require(self.n_obs_steps >= 1, "n_obs_steps must be at least 1", "n_obs_steps")

    @property
    def observation_delta_indices(self) -> list[int] | None:
        return list(range(1 - self.n_obs_steps, 1)) if self.n_obs_steps > 1 else None

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))


# Resolve the string annotations now, so that a config unstructures correctly even before any
# config has been structured (cattrs reads the field types from the classes).
for _cls in (PolicyFeature, PolicyConfig, ACTConfig, DiffusionConfig, MLPConfig):
    attrs.resolve_types(_cls)

RELATIVE_ACTION_FIELDS = ("use_relative_actions", "relative_exclude_joints", "action_feature_names")


def lerobot_config_data(config: PolicyConfig) -> dict[str, Any]:
    """The config as plain data for config.json and train_config.json.

    LeRobot refuses unknown keys in a config.json, and only some of its policies (pi0, pi05,
    GR00T) know the relative-action fields; so they are written only while relative actions are
    on — then all three, so that a reader's own defaults (pi0 excludes "gripper") never fill a
    gap. Off, they change nothing, and the file stays what LeRobot writes.
    """
    data = unstructure(config)
    if not config.use_relative_actions:
        for name in RELATIVE_ACTION_FIELDS:
            data.pop(name, None)
    return data


_KIND_TO_TYPE = {
    FeatureKind.STATE: "STATE",
    FeatureKind.VISUAL: "VISUAL",
    FeatureKind.ENV: "ENV",
    FeatureKind.ACTION: "ACTION",
}


def policy_features(
    features: Mapping[str, FeatureSpec],
) -> tuple[dict[str, PolicyFeature], dict[str, PolicyFeature]]:
    """A dataset's features as a policy's (inputs, outputs), as LeRobot's
    `dataset_to_policy_features` maps them: images become channels-first `(C, H, W)`."""
    inputs: dict[str, PolicyFeature] = {}
    outputs: dict[str, PolicyFeature] = {}
    for key, spec in features.items():
        kind = _KIND_TO_TYPE.get(spec.kind)
        if kind is None:
            continue
        if kind == "VISUAL":
            height, width, channels = spec.hwc
            shape: tuple[int, ...] = (channels, height, width)
        else:
            shape = spec.shape
        target = outputs if kind == "ACTION" else inputs
        target[key] = PolicyFeature(type=kind, shape=shape)
    return inputs, outputs
