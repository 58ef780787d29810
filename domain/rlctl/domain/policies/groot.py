"""GR00T N1.7's settings: LeRobot 0.6.1's `GrootConfig`, field for field.

GR00T N1.7 (NVIDIA) is a vision-language-action policy: a Qwen3-VL backbone (Cosmos-Reason2-2B,
cut after `select_layer` layers) reads the camera images and the task; a diffusion transformer
(DiT) that alternates cross-attention to the image tokens and to the text tokens with
self-attention over its own turns noise into a chunk of actions by flow matching. The state,
the actions and the DiT's output pass through projectors chosen per embodiment (one set of
weights per `embodiment_tag`).

The architecture is not in this config: as in LeRobot it is the base model's
(`base_model_path`, a folder or Hub id holding a GR00T N1.7 `config.json`; NVIDIA's
`nvidia/GR00T-N1.7-3B` by default). State and action are min-max normalised by the policy's own
processor step, so `normalization_mapping` is IDENTITY everywhere.

The fields after `model_params_fp32` are LeRobot's deprecated Isaac-GR00T runner fields: kept so
that a config.json round-trips, read by nothing. N1.5 checkpoints are refused with LeRobot's
guidance, as LeRobot refuses them.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from typing import Any, ClassVar

import attrs

from rlctl.domain.errors import ConfigError
from rlctl.domain.optimization import OptimizerSpec, SchedulerSpec
from rlctl.domain.policies.config import PolicyConfig, names_tuple, norm_mapping, require

GROOT_N1_7_BASE_MODEL = "nvidia/GR00T-N1.7-3B"
GROOT_N1_7_BACKBONE_MODEL = "nvidia/Cosmos-Reason2-2B"
# The horizon N1.7 checkpoints predict (LeRobot's N1_7_NATIVE_ACTION_HORIZON).
NATIVE_ACTION_HORIZON = 40
DECODE_LIBERO = "libero"
DECODE_AUTO = "auto"
N1_5_REMOVAL_GUIDANCE = (
    "GR00T N1.5 support was removed from LeRobot (and rlctl reads only N1.7): to keep using an "
    "N1.5 checkpoint, use lerobot==0.5.1; otherwise migrate to GR00T N1.7 (base model "
    "nvidia/GR00T-N1.7-3B)"
)

log = logging.getLogger(__name__)


def _groot_norms() -> dict[str, str]:
    return {"VISUAL": "IDENTITY", "STATE": "IDENTITY", "ACTION": "IDENTITY"}


def _float_pair(value: Iterable[float]) -> tuple[float, float]:
    first, second = (float(x) for x in value)
    return first, second


def _int_pair(value: Iterable[int]) -> tuple[int, int]:
    first, second = (int(x) for x in value)
    return first, second


def _base_model(value: str | None) -> str:
    return GROOT_N1_7_BASE_MODEL if value is None else str(value)


def _decode_transform(value: str | None) -> str | None:
    """LeRobot's `normalize_groot_action_decode_transform`: none, libero, or auto (resolved
    after the embodiment is known)."""
    if value is None:
        return None
    text = str(value).lower()
    if text in ("none", ""):
        return None
    if text in (DECODE_AUTO, DECODE_LIBERO):
        return text
    raise ConfigError(
        f"unsupported GR00T N1.7 action decode transform {value!r}",
        where="policy.action_decode_transform",
        hint="use none, libero or auto (libero for the libero_sim embodiment, else none)",
    )


def _legacy(name: str, legacy: Any, current: Any) -> Any:
    """A converter that moves a GR00T N1.5-era default to N1.7's, with LeRobot's warning."""

    def convert(value: Any) -> Any:
        seen = tuple(value) if isinstance(value, (list, tuple)) else value
        if seen == legacy:
            log.warning(
                "GrootConfig.%s=%s matches a legacy GR00T N1.5-era default; remapping it to %s, "
                "the value GR00T N1.7 checkpoints expect. Set a different value explicitly if "
                "this is not what you want.",
                name,
                legacy,
                current,
            )
            return current
        return seen

    return convert


def _legacy_int(name: str, legacy: int, current: int, value: Any) -> int:
    return int(_legacy(name, legacy, current)(int(value)))


# Named converters (attrs' mypy plugin reads only named functions): N1.5-era defaults -> N1.7's.
def _chunk_size(value: Any) -> int:
    return _legacy_int("chunk_size", 50, 40, value)


def _n_action_steps(value: Any) -> int:
    return _legacy_int("n_action_steps", 50, 40, value)


def _max_state_dim(value: Any) -> int:
    return _legacy_int("max_state_dim", 64, 132, value)


def _max_action_dim(value: Any) -> int:
    return _legacy_int("max_action_dim", 32, 132, value)


def _image_size(value: Iterable[int]) -> tuple[int, int]:
    pair: tuple[int, int] = _legacy("image_size", (224, 224), (256, 256))(_int_pair(value))
    return pair


def model_version_of(path: str) -> str | None:
    """ "n1.7", "n1.5" or None, from a base model's name (LeRobot's path test)."""
    lower = path.lower()
    if "gr00t-n1.7" in lower or "gr00t_n1.7" in lower:
        return "n1.7"
    if "gr00t-n1.5" in lower or "gr00t_n1.5" in lower:
        return "n1.5"
    return None


@PolicyConfig.register("groot")
@attrs.frozen(kw_only=True)
class GrootConfig(PolicyConfig):
    """GR00T N1.7 with LeRobot's defaults (NVIDIA's 3 B base model, a 40-step chunk)."""

    supports_rtc: ClassVar[bool] = True
    # LeRobot's GrootConfig has no action_feature_names: the action names live in the
    # processors' action groups instead.
    lerobot_omits: ClassVar[tuple[str, ...]] = ("action_feature_names",)
    # Relative actions are normalised per step of the native 40-step chunk, whatever chunk_size
    # (LeRobot's horizon-preserving relative statistics).
    relative_stats_horizon: ClassVar[int | None] = NATIVE_ACTION_HORIZON

    chunk_size: int = attrs.field(default=40, converter=_chunk_size)
    n_action_steps: int = attrs.field(default=40, converter=_n_action_steps)
    # Shorter state and action vectors are zero-padded to these sizes.
    max_state_dim: int = attrs.field(default=132, converter=_max_state_dim)
    max_action_dim: int = attrs.field(default=132, converter=_max_action_dim)
    normalization_mapping: dict[str, str] = attrs.field(
        factory=_groot_norms, converter=norm_mapping
    )
    # The base model: its config.json gives the architecture, its weights the starting point.
    base_model_path: str = attrs.field(default=GROOT_N1_7_BASE_MODEL, converter=_base_model)
    # After unnormalising: "libero" maps a [0, 1] gripper to LIBERO's -1/+1 (auto: for the
    # libero_sim embodiment only), none leaves the actions as they are.
    action_decode_transform: str | None = attrs.field(
        default=DECODE_AUTO, converter=_decode_transform
    )
    # Which embodiment's projectors the policy uses (ids as LeRobot's N1.7 mapping gives them).
    embodiment_tag: str = "new_embodiment"
    tune_llm: bool = False
    tune_visual: bool = False
    tune_projector: bool = True
    tune_diffusion_model: bool = True
    tune_vlln: bool = True
    # The top layers of the (cut) language model that learn, whatever tune_llm says.
    tune_top_llm_layers: int = 0
    # Flow-matching steps per chunk; None keeps the base model's (4).
    num_inference_timesteps: int | None = None
    # Real-time chunking's blend of the previous chunk's overlap; None keeps the base model's (6).
    rtc_ramp_rate: float | None = None
    use_flash_attention: bool = False
    # Relative actions (`use_relative_actions`): each chunk relative to the state it starts from,
    # normalised per step; action dimensions whose name contains one of these words stay
    # absolute (none by default, as in LeRobot: ["gripper"] keeps a gripper absolute).
    relative_exclude_joints: tuple[str, ...] = attrs.field(default=(), converter=names_tuple)
    optimizer_lr: float = 1e-4
    optimizer_betas: tuple[float, float] = attrs.field(default=(0.9, 0.999), converter=_float_pair)
    optimizer_eps: float = 1e-8
    optimizer_weight_decay: float = 1e-5
    warmup_ratio: float = 0.05
    # Training and inference compute under bfloat16 autocast, parameters stay float32.
    use_bf16: bool = True
    model_params_fp32: bool = True
    image_size: tuple[int, int] = attrs.field(default=(256, 256), converter=_image_size)
    tokenizer_assets_repo: str | None = None
    lora_rank: int = 0
    lora_alpha: int = 16
    lora_dropout: float = 0.1
    lora_full_model: bool = False
    video_backend: str = "decord"
    balance_dataset_weights: bool = True
    balance_trajectory_weights: bool = True
    dataset_paths: list[str] | None = None
    output_dir: str = "./tmp/gr00t"
    save_steps: int = 1000
    max_steps: int = 10000
    batch_size: int = 32
    dataloader_num_workers: int = 8
    report_to: str = "wandb"
    resume: bool = False

    def __attrs_post_init__(self) -> None:
        require(
            self.tokenizer_assets_repo is None,
            "tokenizer_assets_repo only existed for GR00T N1.5: this looks like an N1.5 "
            "checkpoint or config",
            "tokenizer_assets_repo",
            N1_5_REMOVAL_GUIDANCE,
        )
        if self.action_decode_transform == DECODE_AUTO:
            resolved = DECODE_LIBERO if self.embodiment_tag == "libero_sim" else None
            # LeRobot resolves it in __post_init__ too, so config.json holds the result.
            object.__setattr__(self, "action_decode_transform", resolved)
        version = model_version_of(self.base_model_path)
        require(
            version in (None, "n1.7"),
            f"base_model_path {self.base_model_path!r} looks like GR00T {version}, not N1.7",
            "base_model_path",
            N1_5_REMOVAL_GUIDANCE,
        )
        require(
            self.n_action_steps <= self.chunk_size,
            f"n_action_steps ({self.n_action_steps}) cannot exceed chunk_size ({self.chunk_size})",
            "n_action_steps",
        )
        require(self.n_action_steps >= 1, "must be at least 1", "n_action_steps")
        require(self.n_obs_steps == 1, "GR00T reads one observation step", "n_obs_steps")
        require(self.max_state_dim > 0, "must be positive", "max_state_dim")
        require(self.max_action_dim > 0, "must be positive", "max_action_dim")
        require(
            self.num_inference_timesteps is None or self.num_inference_timesteps >= 1,
            "must be at least 1 (or unset: the base model's)",
            "num_inference_timesteps",
        )
        require(self.tune_top_llm_layers >= 0, "cannot be negative", "tune_top_llm_layers")
        require(
            not self.use_peft and self.lora_rank == 0,
            "LoRA / PEFT fine-tuning of GR00T is not wired (nor is it in LeRobot 0.6.1)",
            "lora_rank",
        )
        for key, feature in self.input_features.items():
            if key == "observation.state" and feature.shape:
                require(
                    feature.shape[0] <= self.max_state_dim,
                    f"the state has {feature.shape[0]} dimensions, more than max_state_dim "
                    f"({self.max_state_dim})",
                    "max_state_dim",
                    "raise --policy.max_state_dim (the base model's projectors must match it)",
                )
        action = self.output_features.get("action")
        if action is not None and action.shape:
            require(
                action.shape[0] <= self.max_action_dim,
                f"the action has {action.shape[0]} dimensions, more than max_action_dim "
                f"({self.max_action_dim})",
                "max_action_dim",
                "raise --policy.max_action_dim (the base model's projectors must match it)",
            )

    def optimizer_preset(self) -> OptimizerSpec:
        return OptimizerSpec(
            type="adamw",
            lr=self.optimizer_lr,
            betas=self.optimizer_betas,
            eps=self.optimizer_eps,
            weight_decay=self.optimizer_weight_decay,
            grad_clip_norm=1.0,
        )

    def scheduler_preset(self) -> SchedulerSpec:
        """Isaac-GR00T's cosine schedule with warm-up over `warmup_ratio` of `max_steps`."""
        return SchedulerSpec(
            type="diffuser",
            name="cosine",
            num_warmup_steps=math.ceil(self.max_steps * self.warmup_ratio),
        )

    @property
    def observation_delta_indices(self) -> None:
        return None

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(min(self.chunk_size, NATIVE_ACTION_HORIZON)))

    @property
    def drop_n_last_frames(self) -> int:
        """Episode tails that cannot supply a whole chunk are not trained on (LeRobot's)."""
        return max(0, len(self.action_delta_indices) - 1)


attrs.resolve_types(GrootConfig)
