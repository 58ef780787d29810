"""GR00T N1.7's processor steps, as LeRobot 0.6.1's `processor_groot.py` writes and runs them for
its own checkpoints (a LeRobot-trained GR00T, or one fine-tuned from the base model):

    pre:  rename -> to_batch -> groot_n1_7_pack_inputs_v1 -> groot_n1_7_vlm_encode_v1 -> device
    post: groot_action_unpack_unnormalize_v2 (relative actions: groot_n1_7_action_decode_v1)
          -> device(cpu)

- pack: the cameras (in sorted key order) become uint8 frames; the task becomes the prompt text
  (lower-cased, only letters, digits, spaces and `_` kept; "Perform the task." when empty); the
  state and the actions are min-max normalised into [-1, 1] with the dataset's min/max (clipped),
  zero-padded to `max_state_dim` / `max_action_dim` and the actions to `action_horizon` steps,
  with an action mask (padding and `action_is_pad` steps masked out); the embodiment's id joins
  the batch. The statistics are the step's state (`<key>.<stat>`, every key LeRobot was given).
- vlm encode: each frame is resized (bicubic, antialiased) to `image_target_size`, centre-cropped
  by `image_crop_size / image_target_size` and resized back; frames and prompt become one
  Qwen3-VL chat message, and the backbone's processor (its tokenizer, image processor and chat
  template, read from `model_name`) gives `input_ids`, `attention_mask` (left padding),
  `pixel_values` and `image_grid_thw`.
- unpack: the model's actions cut to the env's action size, clipped to [-1, 1], unnormalised
  with the action min/max; with `libero_gripper_action`, the last dimension (a [0, 1] gripper)
  becomes LIBERO's -1/+1.

With relative actions (`use_relative_actions`, LeRobot's native N1.7 path), the pack step holds
the action groups (`groot_action_groups`: `raw_stats`, `modality_config`, percentiles, the
checkpoint's camera order): the training chunk becomes relative to its state and is normalised
group by group, per chunk step for the relative groups; the post-processor's
`groot_n1_7_action_decode_v1` undoes it on a whole chunk, against the raw state given with it.

What NVIDIA's raw N1.7 checkpoints' side files set (`groot_checkpoint`), as LeRobot honours
them: the cv2 image path (`use_albumentations`, with its random crop while training),
letter-boxing, the checkpoint's video horizon, state dropout while training, its embodiment ids,
its grouped statistics (percentiles) and its relative action groups. rlctl also accepts cameras
of different sizes in one batch (LeRobot stacks them and needs one size).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import structlog
import torch
from torch import Tensor

from rlctl.adapters.policies.vla.groot_action_groups import (
    action_keys_and_configs,
    config_value,
    decode_stats,
    group_config,
    has_relative_groups,
    is_relative,
    relative_assets,
    relative_eef_to_absolute,
    section,
    stat_dim,
    state_groups,
)
from rlctl.adapters.policies.vla.loading import require_transformers
from rlctl.domain.errors import ConfigError, InvalidInput, NotSupported
from rlctl.domain.frames import Transition
from rlctl.domain.policies import RELATIVE_ACTION
from rlctl.domain.policies.groot import (
    DECODE_LIBERO,
    GROOT_N1_7_BACKBONE_MODEL,
    NATIVE_ACTION_HORIZON,
    GrootConfig,
)
from rlctl.domain.processors import Step, register_step

PACK_STEP = "groot_n1_7_pack_inputs_v1"
ENCODE_STEP = "groot_n1_7_vlm_encode_v1"
UNPACK_STEP = "groot_action_unpack_unnormalize_v2"
DECODE_STEP = "groot_n1_7_action_decode_v1"
OBS_STATE = "observation.state"
OBS_IMAGE = "observation.image"
OBS_IMAGES = "observation.images"
ACTION = "action"
VIDEO = "video"  # the packed frames, between the pack and the encode steps
DEFAULT_LANGUAGE = "Perform the task."
DEFAULT_TARGET_SIZE = (256, 256)
DEFAULT_CROP_SIZE = (230, 230)
EMBODIMENT_MAPPING = {
    "oxe_droid_relative_eef_relative_joint": 24,
    "xdof_relative_eef_relative_joint": 27,
    "xdof_relative_eef_relative_joint_subtask": 27,
    "real_g1_relative_eef_relative_joints": 25,
    "real_r1_pro_sharpa_relative_eef": 26,
    "real_r1_pro_sharpa_relative_eef_human": 26,
    "real_r1_pro_sharpa_relative_eef_maxinsights": 26,
    "real_r1_pro_sharpa_relative_eef_mecka": 26,
    "unitree_g1_full_body_with_waist_height_nav_cmd": 25,
    "simpler_env_google": 0,
    "simpler_env_widowx": 1,
    "libero_sim": 2,
    "new_embodiment": 10,
}
log = structlog.get_logger(__name__)


# -- statistics as the steps keep them ---------------------------------------------------------

Stats = dict[str, dict[str, np.ndarray]]


def flat_stats(stats: Mapping[str, Mapping[str, Any]] | None) -> dict[str, np.ndarray]:
    if not stats:
        return {}
    return {
        f"{key}.{name}": np.asarray(value.detach().cpu() if isinstance(value, Tensor) else value)
        for key, per_key in stats.items()
        for name, value in per_key.items()
    }


def nested_stats(state: Mapping[str, Any]) -> Stats:
    nested: Stats = {}
    for flat_key, value in state.items():
        if "." in flat_key:
            key, name = flat_key.rsplit(".", 1)
            nested.setdefault(key, {})[name] = np.asarray(value)
    return nested


def stat_vector(
    stats: Stats, key: str, name: str, dims: int, missing: float, pad: float, like: Tensor
) -> Tensor:
    """One statistic as a float32 vector of `dims`: flattened, then cut or padded with `pad`
    (`missing` everywhere when the statistic is absent)."""
    raw = stats.get(key, {}).get(name)
    values = (
        torch.full((dims,), missing) if raw is None else torch.as_tensor(np.asarray(raw)).flatten()
    )
    values = values.to(device=like.device, dtype=torch.float32)
    if values.numel() >= dims:
        return values[:dims]
    fill = torch.full((dims - values.numel(),), pad, dtype=torch.float32, device=like.device)
    return torch.cat([values, fill])


def min_max_normalize(x: Tensor, stats: Stats, key: str, clip: bool) -> Tensor:
    """LeRobot's `_min_max_norm`: into [-1, 1] (0 where min == max), clipped when `clip`."""
    if key not in stats:
        return x
    dims = x.shape[-1]
    low = stat_vector(stats, key, "min", dims, 0.0, 0.0, x)
    high = stat_vector(stats, key, "max", dims, 1.0, 1.0, x)
    span = high - low
    usable = span != 0
    mapped = 2 * (x - low) / torch.where(usable, span, torch.ones_like(span)) - 1
    normalized = torch.where(usable, mapped, torch.zeros_like(mapped))
    return normalized.clamp(-1.0, 1.0) if clip else normalized


def prompt_texts(language: Any, batch: int, *, formalize: bool) -> list[str]:
    """LeRobot's `prepare_n1_7_language_batch`: one text per row, "Perform the task." for none,
    lower-cased and stripped of punctuation when `formalize`."""
    if language is None or (isinstance(language, str) and language == ""):
        texts = [DEFAULT_LANGUAGE] * batch
    elif isinstance(language, str):
        texts = [language] * batch
    elif isinstance(language, (list, tuple)):
        texts = [str(t) for t in language] or [DEFAULT_LANGUAGE] * batch
        if len(texts) == 1 and batch > 1:
            texts = texts * batch
        elif len(texts) != batch:
            raise InvalidInput(
                f"the batch has {batch} rows but {len(texts)} task texts",
                where="task",
                hint="give one task per row, or one for all",
            )
    else:
        texts = [str(language)] * batch
    out = []
    for item in texts:
        text = item if item else DEFAULT_LANGUAGE
        if formalize:
            text = "".join(ch for ch in text.lower() if ch.isalnum() or ch.isspace() or ch == "_")
        out.append(text)
    return out


def _batch_rows(transition: Transition) -> int:
    for value in [*transition.observation.values(), transition.action]:
        if isinstance(value, (Tensor, np.ndarray)) and value.ndim >= 1:
            return int(value.shape[0])
    return 1


def _device(transition: Transition) -> torch.device:
    for value in transition.observation.values():
        if isinstance(value, Tensor):
            return value.device
    return torch.device("cpu")


def _as_tensor(value: Any, where: str) -> Tensor:
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if not isinstance(value, Tensor):
        raise InvalidInput(f"{where} must be an array, got {type(value).__name__}", where=where)
    return value


# -- pack --------------------------------------------------------------------------------------


def _mapping(value: Mapping[str, Any] | None) -> dict[str, int]:
    return dict(EMBODIMENT_MAPPING) if value is None else {str(k): int(v) for k, v in value.items()}


@attrs.frozen(kw_only=True)
class PackConfig:
    """LeRobot's `GrootN17PackInputsStep` config, field for field."""

    state_horizon: int = 1
    action_horizon: int = NATIVE_ACTION_HORIZON
    valid_action_horizon: int = NATIVE_ACTION_HORIZON
    video_horizon: int | None = None
    max_state_dim: int = 132
    max_action_dim: int = 132
    language_key: str = "task"
    formalize_language: bool = True
    embodiment_tag: str = "new_embodiment"
    embodiment_mapping: dict[str, int] = attrs.field(default=None, converter=_mapping)
    normalize_min_max: bool = True
    state_dropout_prob: float = 0.0
    clip_outliers: bool = True
    use_percentiles: bool = False
    video_modality_keys: list[str] | None = None
    raw_stats: dict[str, Any] | None = None
    modality_config: dict[str, Any] | None = None

    def __attrs_post_init__(self) -> None:
        if self.state_horizon != 1:
            raise ConfigError("GR00T N1.7 reads one state step", where=f"{PACK_STEP}.state_horizon")
        if not 0.0 <= self.state_dropout_prob <= 1.0:
            raise ConfigError(
                f"state_dropout_prob {self.state_dropout_prob} is no probability",
                where=f"{PACK_STEP}.state_dropout_prob",
            )


class StatsStep[ConfigT](Step[ConfigT]):
    """A step holding the dataset's statistics as its state (`<key>.<stat>`, as LeRobot's
    GR00T steps save them)."""

    def __init__(
        self, config: ConfigT | None = None, stats: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        super().__init__(config)
        self.stats: Stats = nested_stats(flat_stats(stats))

    def state_dict(self) -> dict[str, np.ndarray]:
        return flat_stats(self.stats)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.stats = nested_stats(state)


@register_step(PACK_STEP)
class GrootPackInputs(StatsStep[PackConfig]):
    """Frames, prompt text, normalised and padded state and actions, masks, embodiment id."""

    config_class = PackConfig

    def __init__(
        self, config: PackConfig | None = None, stats: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        super().__init__(config, stats)
        self._warned = False
        # LeRobot's `training` (not saved): set on the pipeline a training run builds, so the
        # state is dropped (state_dropout_prob) only there, and only while gradients flow.
        self.training = False

    def __call__(self, transition: Transition) -> Transition:
        config = self.config
        observation = dict(transition.observation)
        complementary = dict(transition.complementary_data)
        keys = self._camera_keys(observation)
        if keys:
            observation[VIDEO] = [
                _align_video_horizon(_uint8_frames(observation[key], key), config.video_horizon)
                for key in keys
            ]
            for key in keys:
                observation.pop(key)
        observation.pop(OBS_IMAGE, None)
        rows = _batch_rows(transition)
        complementary["language"] = prompt_texts(
            complementary.get(config.language_key), rows, formalize=config.formalize_language
        )
        raw_state = None
        if OBS_STATE in observation:
            raw_state = _as_tensor(observation.pop(OBS_STATE), OBS_STATE)
            observation["state"] = self._state(raw_state)
        action = transition.action
        if action is not None:
            action, complementary["action_mask"] = self._action(
                _as_tensor(action, ACTION), complementary, raw_state
            )
        device = _device(transition)
        if "action_mask" not in complementary:
            mask = torch.zeros(rows, config.action_horizon, dtype=torch.float32, device=device)
            mask[:, : min(config.valid_action_horizon, config.action_horizon)] = 1.0
            complementary["action_mask"] = mask
        identity = config.embodiment_mapping.get(config.embodiment_tag, 0)
        complementary["embodiment_id"] = torch.full(
            (rows,), identity, dtype=torch.int32, device=device
        )
        return transition.evolve(
            observation=observation, action=action, complementary_data=complementary
        )

    def _camera_keys(self, observation: Mapping[str, Any]) -> list[str]:
        """LeRobot's camera order: the checkpoint's cameras (`video_modality_keys`, a
        `wrist_image` also found as `image2`) when one is there, else every camera sorted."""
        available = sorted(k for k in observation if k.startswith(OBS_IMAGES))
        if not available and OBS_IMAGE in observation:
            return [OBS_IMAGE]
        wanted = self.config.video_modality_keys
        if not wanted:
            return available
        ordered, unmatched = [], []
        for key in wanted:
            candidates = [f"{OBS_IMAGES}.{key}"]
            if key == "wrist_image":
                candidates.append(f"{OBS_IMAGES}.image2")
            match = next((c for c in candidates if c in available), None)
            if match is None:
                unmatched.append(key)
            else:
                ordered.append(match)
        unused = sorted(set(available) - set(ordered))
        if (unmatched or unused or not ordered) and not self._warned:
            self._warned = True
            log.warning(
                "GR00T's cameras differ from those it was trained with",
                trained_with=wanted,
                given=available,
                missing=unmatched,
                dropped=unused if ordered else [],
                hint="rename the cameras (--rename_map) to the ones it was trained with",
            )
        return ordered or available

    def _state(self, state: Tensor) -> Tensor:
        config = self.config
        if state.ndim != 2:
            raise InvalidInput(
                f"the state must be (batch, dims), got {tuple(state.shape)}", where=OBS_STATE
            )
        rows, dims = state.shape
        if dims > config.max_state_dim:
            raise InvalidInput(
                f"the state has {dims} dimensions, more than max_state_dim "
                f"({config.max_state_dim})",
                where=OBS_STATE,
                hint="raise --policy.max_state_dim (and the base model's)",
            )
        state = state.to(torch.float32)
        if config.normalize_min_max:
            state = min_max_normalize(state, self.stats, OBS_STATE, config.clip_outliers)
        state = state.unsqueeze(1)
        if dims < config.max_state_dim:
            pad = state.new_zeros(rows, 1, config.max_state_dim - dims)
            state = torch.cat([state, pad], dim=2)
        if self.training and torch.is_grad_enabled() and config.state_dropout_prob > 0:
            dropped = torch.tensor(
                [random.random() < config.state_dropout_prob for _ in range(rows)],
                dtype=torch.bool,
                device=state.device,
            ).view(rows, 1, 1)
            state = state.masked_fill(dropped, 0)
        return state

    def _action(
        self, action: Tensor, complementary: Mapping[str, Any], raw_state: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        config = self.config
        if action.ndim == 2:
            action = action.unsqueeze(1)
        if action.ndim != 3:
            raise InvalidInput(
                f"the action must be (batch, dims) or (batch, steps, dims), got "
                f"{tuple(action.shape)}",
                where=ACTION,
            )
        rows, horizon, dims = action.shape
        is_pad = complementary.get(f"{ACTION}_is_pad", complementary.get("action_horizon_is_pad"))
        if horizon > config.valid_action_horizon:
            # A raw checkpoint's shorter chunk (its `delta_indices`): LeRobot's dataset gives
            # only those steps; the ones past it would be masked out anyway.
            horizon = config.valid_action_horizon
            action = action[:, :horizon]
            if is_pad is not None:
                is_pad = torch.as_tensor(is_pad)
                if is_pad.ndim == 2 or (is_pad.ndim == 1 and rows == 1):
                    is_pad = is_pad[..., :horizon]
        if horizon > config.action_horizon:
            raise InvalidInput(
                f"the action chunk has {horizon} steps, more than action_horizon "
                f"({config.action_horizon})",
                where=ACTION,
            )
        if dims > config.max_action_dim:
            raise InvalidInput(
                f"the action has {dims} dimensions, more than max_action_dim "
                f"({config.max_action_dim})",
                where=ACTION,
                hint="raise --policy.max_action_dim (and the base model's)",
            )
        action = action.to(torch.float32)
        if raw_state is not None:
            action = self._relative_for_training(action, raw_state)
        if config.normalize_min_max:
            grouped = self._normalize_groups(action)
            if grouped is not None:
                action = grouped
            elif has_relative_groups(config.modality_config):
                raise InvalidInput(
                    f"the relative action chunk {tuple(action.shape)} does not fit the per-step "
                    "relative statistics of its action groups (their horizon or widths)",
                    where=ACTION,
                    hint="the chunk must be at most the statistics' horizon and as wide as "
                    "the action the policy was trained on",
                )
            else:
                flat = min_max_normalize(
                    action.reshape(rows * horizon, dims), self.stats, ACTION, config.clip_outliers
                )
                action = flat.view(rows, horizon, dims)
        valid_horizon = min(horizon, config.valid_action_horizon, config.action_horizon)
        if dims < config.max_action_dim:
            action = torch.cat(
                [action, action.new_zeros(rows, horizon, config.max_action_dim - dims)], 2
            )
        if horizon < config.action_horizon:
            pad = action.new_zeros(rows, config.action_horizon - horizon, config.max_action_dim)
            action = torch.cat([action, pad], dim=1)
            horizon = config.action_horizon
        valid = torch.zeros(rows, horizon, dtype=torch.bool, device=action.device)
        valid[:, :valid_horizon] = True
        if is_pad is not None:
            pad_mask = torch.as_tensor(is_pad, dtype=torch.bool, device=action.device)
            if pad_mask.ndim == 1:
                if rows == 1 and pad_mask.numel() == horizon:
                    pad_mask = pad_mask.unsqueeze(0)
                elif horizon == 1 and pad_mask.numel() == rows:
                    pad_mask = pad_mask.view(rows, 1)
            if pad_mask.ndim != 2 or pad_mask.shape[0] != rows:
                raise InvalidInput(
                    f"action_is_pad must be (batch, steps), got {tuple(pad_mask.shape)} for "
                    f"actions {tuple(action.shape)}",
                    where="action_is_pad",
                )
            steps = min(horizon, pad_mask.shape[1])
            valid[:, :steps] &= ~pad_mask[:, :steps]
        if valid_horizon < horizon or is_pad is not None:
            action = action.clone()
            action[:, valid_horizon:, :] = 0
            action = action * valid.unsqueeze(-1).to(action.dtype)
        mask = torch.zeros(rows, horizon, config.max_action_dim, device=action.device)
        mask[:, :, : min(dims, config.max_action_dim)] = valid.unsqueeze(-1).to(mask.dtype)
        return action, mask

    def _relative_for_training(self, action: Tensor, state: Tensor) -> Tensor:
        """LeRobot's `_convert_relative_action_groups_for_training`: each relative group minus
        its state group (the state the chunk starts from)."""
        config = self.config
        if config.raw_stats is None or config.modality_config is None:
            return action
        keys, configs = action_keys_and_configs(config.modality_config)
        states = state_groups(state.to(action.dtype), config.raw_stats, config.modality_config)
        if not states:
            return action
        absolute = config.raw_stats.get(ACTION, {})
        start, converted = 0, action
        for index, key in enumerate(keys):
            if not isinstance(key, str):
                continue
            dim = stat_dim(absolute.get(key, {}))
            if dim <= 0:
                continue
            end = start + dim
            if end > action.shape[-1]:
                break
            group = group_config(configs, index)
            if is_relative(group):
                where = f"{PACK_STEP}.modality_config.action.{key}"
                if config_value(group.get("type")) != "non_eef":
                    raise ConfigError(
                        f"GR00T trains relative action groups of type non_eef only; {key!r} "
                        f"is {group}",
                        where=where,
                    )
                state_key = group.get("state_key") or key
                reference = states.get(state_key)
                if reference is None or reference.shape[-1] != dim:
                    raise InvalidInput(
                        f"relative action group {key!r} ({dim} dimensions) has no state group "
                        f"{state_key!r} as wide",
                        where=where,
                        hint="the state must hold each joint the relative actions move",
                    )
                if converted is action:
                    converted = action.clone()
                converted[..., start:end] -= reference[:, None, :]
            start = end
        return converted

    def _normalize_groups(self, action: Tensor) -> Tensor | None:
        """LeRobot's `_normalize_action_groups_for_training`: each group into [-1, 1] with its
        own statistics (relative groups per chunk step); None when the groups do not fit."""
        config = self.config
        if config.raw_stats is None or config.modality_config is None:
            return None
        keys, configs = action_keys_and_configs(config.modality_config)
        parts, start = [], 0
        for index, key in enumerate(keys):
            if not isinstance(key, str):
                continue
            group = group_config(configs, index)
            modality = RELATIVE_ACTION if is_relative(group) else ACTION
            dim = stat_dim(config.raw_stats.get(modality, {}).get(key, {}))
            if dim <= 0:
                continue
            end = start + dim
            if end > action.shape[-1]:
                return None
            low_np, high_np = decode_stats(
                config.raw_stats,
                key,
                group,
                use_relative_action=True,
                use_percentiles=config.use_percentiles,
            )
            values = action[..., start:end]
            low = torch.as_tensor(low_np, dtype=values.dtype, device=values.device)
            high = torch.as_tensor(high_np, dtype=values.dtype, device=values.device)
            if low.ndim == 1:
                low, high = low.view(1, 1, -1), high.view(1, 1, -1)
            elif low.ndim == 2 and values.shape[1] <= low.shape[0]:
                low, high = (
                    low[: values.shape[1]].unsqueeze(0),
                    high[: values.shape[1]].unsqueeze(0),
                )
            else:
                return None
            span = high - low
            usable = span != 0
            mapped = 2 * (values - low) / torch.where(usable, span, torch.ones_like(span)) - 1
            normalized = torch.where(usable, mapped, torch.zeros_like(values))
            parts.append(normalized.clamp(-1.0, 1.0) if config.clip_outliers else normalized)
            start = end
        if not parts or start != action.shape[-1]:
            return None
        return torch.cat(parts, dim=-1)


def _uint8_frames(image: Any, key: str) -> Tensor:
    """(B, T, C, H, W) uint8 frames of a camera given as (B, C, H, W) or (B, T, C, H, W), floats
    in [0, 1] (LeRobot's truncating `* 255`) or uint8."""
    frames = _as_tensor(image, key)
    if frames.is_floating_point():
        frames = (frames.clamp(0, 1) * 255.0).to(torch.uint8)
    if frames.ndim == 4:
        frames = frames.unsqueeze(1)
    if frames.ndim != 5 or frames.shape[2] != 3:
        raise InvalidInput(
            f"the camera must be (batch, 3, height, width), got {tuple(frames.shape)}",
            where=key,
            hint="GR00T reads RGB cameras, channels first",
        )
    return frames


def _align_video_horizon(frames: Tensor, horizon: int | None) -> Tensor:
    """LeRobot's `_align_video_horizon`: the checkpoint's frames per camera, the latest kept or
    the first repeated in front."""
    if horizon is None or horizon <= 0 or frames.shape[1] == horizon:
        return frames
    if frames.shape[1] > horizon:
        return frames[:, -horizon:]
    pad = frames[:, :1].expand(-1, horizon - frames.shape[1], -1, -1, -1)
    return torch.cat([pad, frames], dim=1)


# -- VLM encode --------------------------------------------------------------------------------


def _optional_pair(value: Any) -> list[int] | None:
    return None if value is None else [int(v) for v in value]


@attrs.frozen(kw_only=True)
class EncodeConfig:
    """LeRobot's `GrootN17VLMEncodeStep` config, field for field."""

    model_name: str = GROOT_N1_7_BACKBONE_MODEL
    image_crop_size: list[int] | None = attrs.field(default=None, converter=_optional_pair)
    image_target_size: list[int] | None = attrs.field(default=None, converter=_optional_pair)
    shortest_image_edge: int | None = None
    crop_fraction: float | None = None
    use_albumentations: bool = False
    letter_box_transform: bool = False
    device: str | None = None


def load_vlm_processor(name: str) -> Any:
    """The backbone's Qwen3-VL processor (tokenizer, image and video processors, chat template),
    built as LeRobot builds it; tests map Cosmos-Reason2's Hub name to a local folder here."""
    transformers = require_transformers(f"GR00T's processor {name!r}")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(name)
        images = transformers.Qwen2VLImageProcessor.from_pretrained(name)
        videos = transformers.Qwen3VLVideoProcessor.from_pretrained(name)
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"cannot load GR00T's backbone processor {name!r}: {err}",
            where=f"{ENCODE_STEP}.model_name",
            hint="give a local Qwen3-VL folder (tokenizer, preprocessor_config.json, "
            "video_preprocessor_config.json), or a Hub id already in the Hub cache",
        ) from err
    processor = transformers.Qwen3VLProcessor(
        image_processor=images,
        tokenizer=tokenizer,
        video_processor=videos,
        chat_template=tokenizer.chat_template,
    )
    processor.tokenizer.padding_side = "left"
    return processor


def transform_frame(
    image: Tensor,
    target: list[int] | None,
    crop: list[int] | None,
    shortest_edge: int | None,
    crop_fraction: float | None,
    letter_box: bool = False,
) -> Tensor:
    """LeRobot's `_transform_n1_7_image_for_vlm_torch` on one (C, H, W) uint8 frame: padded to a
    square (`letter_box`), resized to a square of `shortest_edge` (default: the target height),
    centre-cropped, resized to target."""
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as tv

    if target is None:
        return image
    height, width = target
    if letter_box and image.shape[-2] != image.shape[-1]:
        side = max(image.shape[-2:])
        left, top = (side - image.shape[-1]) // 2, (side - image.shape[-2]) // 2
        image = tv.pad(
            image, [left, top, side - image.shape[-1] - left, side - image.shape[-2] - top], fill=0
        )
    edge = shortest_edge or height
    image = tv.resize(image, [edge, edge], interpolation=InterpolationMode.BICUBIC, antialias=True)
    if crop_fraction is None and crop is not None:
        crop_fraction = crop[0] / float(height)
    if crop_fraction is not None and 0.0 < crop_fraction < 1.0:
        crop_h = max(1, round(image.shape[-2] * crop_fraction))
        crop_w = max(1, round(image.shape[-1] * crop_fraction))
        top = max(0, (image.shape[-2] - crop_h) // 2)
        left = max(0, (image.shape[-1] - crop_w) // 2)
        image = image[..., top : top + crop_h, left : left + crop_w]
    if tuple(image.shape[-2:]) != (height, width):
        image = tv.resize(
            image, [height, width], interpolation=InterpolationMode.BICUBIC, antialias=True
        )
    return image


def transform_frame_cv2(
    image: Tensor,
    target: list[int] | None,
    crop: list[int] | None,
    shortest_edge: int | None,
    crop_fraction: float | None,
    letter_box: bool = False,
    crop_position: tuple[float, float] | None = None,
) -> Tensor:
    """LeRobot's `_transform_n1_7_image_for_vlm_albumentations` (checkpoints saved with
    `use_albumentations`): cv2 INTER_AREA resizes of the shortest edge around a floored crop,
    centred (`crop_position` None) or placed at (y, x) fractions (training's random crop)."""
    import cv2

    if target is None:
        return image
    frame = np.ascontiguousarray(image.permute(1, 2, 0).cpu().numpy())
    if letter_box and frame.shape[0] != frame.shape[1]:
        side = max(frame.shape[:2])
        top, left = (side - frame.shape[0]) // 2, (side - frame.shape[1]) // 2
        bottom, right = side - frame.shape[0] - top, side - frame.shape[1] - left
        frame = cv2.copyMakeBorder(frame, top, bottom, left, right, cv2.BORDER_CONSTANT, value=0)
    edge = shortest_edge or target[0]

    def shortest_to_edge(values: np.ndarray) -> np.ndarray:
        height, width = values.shape[:2]
        if min(height, width) == edge:
            return values
        scale = edge / float(min(height, width))
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        return cv2.resize(values, size, interpolation=cv2.INTER_AREA)

    frame = shortest_to_edge(frame)
    if crop_fraction is None and crop is not None:
        crop_fraction = crop[0] / float(target[0])
    if crop_fraction is not None and 0.0 < crop_fraction < 1.0:
        height, width = frame.shape[:2]
        crop_h, crop_w = max(1, int(height * crop_fraction)), max(1, int(width * crop_fraction))
        if crop_position is None:
            top, left = max(0, (height - crop_h) // 2), max(0, (width - crop_w) // 2)
        else:
            top = round((height - crop_h) * min(max(crop_position[0], 0.0), 1.0))
            left = round((width - crop_w) * min(max(crop_position[1], 0.0), 1.0))
        frame = frame[top : top + crop_h, left : left + crop_w]
    frame = shortest_to_edge(np.ascontiguousarray(frame))
    return torch.from_numpy(np.ascontiguousarray(frame)).permute(2, 0, 1)


@register_step(ENCODE_STEP)
class GrootVLMEncode(Step[EncodeConfig]):
    """The frames and the prompt as one Qwen3-VL chat message per row, tokenised."""

    config_class = EncodeConfig

    def __init__(self, config: EncodeConfig | None = None, *, processor: Any = None) -> None:
        super().__init__(config)
        self.processor = (
            processor if processor is not None else load_vlm_processor(self.config.model_name)
        )
        # LeRobot's `training` (not saved): the cv2 path's random crop, on a training run's
        # pipeline only, while gradients flow.
        self.training = False

    def __call__(self, transition: Transition) -> Transition:
        observation = dict(transition.observation)
        cameras = observation.pop(VIDEO, None)
        if cameras is None:
            return transition
        config = self.config
        rows = int(cameras[0].shape[0])
        texts = prompt_texts(transition.complementary_data.get("language"), rows, formalize=False)
        prompts, images = [], []
        random_crop = config.use_albumentations and self.training and torch.is_grad_enabled()
        for row in range(rows):
            steps = int(cameras[0].shape[1])
            if config.use_albumentations:
                # Isaac-GR00T's one crop window per sample, the same for every camera and step.
                position = (random.random(), random.random()) if random_crop else None
                frames = [
                    transform_frame_cv2(
                        camera[row, step].cpu(),
                        config.image_target_size,
                        config.image_crop_size,
                        config.shortest_image_edge,
                        config.crop_fraction,
                        config.letter_box_transform,
                        position,
                    )
                    for step in range(steps)
                    for camera in cameras
                ]
            else:
                frames = [
                    transform_frame(
                        camera[row, step].cpu(),
                        config.image_target_size,
                        config.image_crop_size,
                        config.shortest_image_edge,
                        config.crop_fraction,
                        config.letter_box_transform,
                    )
                    for step in range(steps)
                    for camera in cameras
                ]
            content = [{"type": "image", "image": frame} for frame in frames]
            content.append({"type": "text", "text": texts[row]})
            prompts.append(
                self.processor.apply_chat_template(
                    [{"role": "user", "content": content}],
                    tokenize=False,
                    add_generation_prompt=False,
                )
            )
            images.extend(frames)
        encoded = self.processor(text=prompts, images=images, return_tensors="pt", padding=True)
        complementary = dict(transition.complementary_data)
        complementary.update({key: value for key, value in encoded.items()})
        return transition.evolve(observation=observation, complementary_data=complementary)


# -- unpack ------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class UnpackConfig:
    """LeRobot's `GrootActionUnpackUnnormalizeStep` config, field for field."""

    env_action_dim: int = 0
    normalize_min_max: bool = True
    clip_normalized_action: bool = False
    libero_gripper_action: bool = False
    libero_gripper_binarize: bool = True


@register_step(UNPACK_STEP)
class GrootActionUnpack(StatsStep[UnpackConfig]):
    """The model's actions back in the env's units (and LIBERO's gripper convention)."""

    config_class = UnpackConfig

    def __call__(self, transition: Transition) -> Transition:
        action = transition.action
        if not isinstance(action, Tensor):
            return transition
        config = self.config
        if config.env_action_dim and action.shape[-1] >= config.env_action_dim:
            action = action[..., : config.env_action_dim]
        if config.normalize_min_max and self.stats:
            if config.clip_normalized_action:
                action = action.clamp(-1.0, 1.0)
            dims = action.shape[-1]
            low = stat_vector(self.stats, ACTION, "min", dims, 0.0, 0.0, action)
            high = stat_vector(self.stats, ACTION, "max", dims, 1.0, 0.0, action)
            low, high = low.to(action.dtype), high.to(action.dtype)
            span = high - low
            usable = span != 0
            restored = (action + 1.0) * 0.5 * torch.where(usable, span, torch.ones_like(span)) + low
            action = torch.where(usable, restored, low)
        if config.libero_gripper_action and action.shape[-1] >= 7:
            gripper = action[..., -1]
            action = action.clone()
            action[..., -1] = (
                -torch.sign(2.0 * gripper - 1.0)
                if config.libero_gripper_binarize
                else -(2.0 * gripper - 1.0)
            )
        return transition.evolve(action=action)


# -- decode (action groups) --------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DecodeConfig:
    """LeRobot's `GrootN17ActionDecodeStep` config, field for field."""

    env_action_dim: int = 0
    raw_stats: dict[str, Any] | None = None
    modality_config: dict[str, Any] | None = None
    use_percentiles: bool = False
    use_relative_action: bool = False
    action_decode_transform: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.action_decode_transform not in (None, DECODE_LIBERO):
            raise ConfigError(
                f"unsupported GR00T N1.7 action decode transform {self.action_decode_transform!r}",
                where=f"{DECODE_STEP}.action_decode_transform",
                hint="use none or libero",
            )


@register_step(DECODE_STEP)
class GrootActionDecode(Step[DecodeConfig]):
    """The model's actions back in the env's units, group by group: unnormalised with each
    group's statistics (relative groups per chunk step), relative groups added to the state
    they were predicted from (the raw `observation.state` given with the actions), cut to the
    env's action size (and LIBERO's gripper convention).

    A relative chunk is decoded whole, against the state it was predicted from: one action at a
    time (`select_action`) is refused, as in LeRobot, since a queued action would be measured
    from a later state with the first step's statistics."""

    config_class = DecodeConfig

    @property
    def decodes_whole_chunks(self) -> bool:
        return self.config.use_relative_action

    def __call__(self, transition: Transition) -> Transition:
        action = transition.action
        config = self.config
        if not isinstance(action, Tensor) or config.raw_stats is None:
            return transition
        if config.modality_config is None:
            return transition
        keys, configs = action_keys_and_configs(config.modality_config)
        if config.use_relative_action and action.ndim != 3:
            raise NotSupported(
                "GR00T's relative actions are decoded a whole chunk at a time, against the "
                "state the chunk was predicted from; one action at a time is refused (as "
                "LeRobot's select_action refuses it)",
                where=DECODE_STEP,
                hint="predict whole chunks (LoadedPolicy.predict_chunk, `rlctl policy serve`) "
                "and execute their actions, or train with absolute actions",
            )
        values = action.detach().cpu().float().numpy()
        single = values.ndim == 2
        if single:
            values = values[:, None, :]
        delta = section(config.modality_config, ACTION).get("delta_indices", [])
        if isinstance(delta, list) and delta and values.ndim == 3:
            values = values[:, : max(1, min(values.shape[1], len(delta)))]
        decoded: dict[str, np.ndarray] = {}
        start = 0
        absolute = config.raw_stats.get(ACTION, {})
        for index, key in enumerate(keys):
            if not isinstance(key, str) or not isinstance(absolute.get(key), dict):
                continue
            dim = stat_dim(absolute[key])
            if dim <= 0:
                continue
            low, high = decode_stats(
                config.raw_stats,
                key,
                group_config(configs, index),
                use_relative_action=config.use_relative_action,
                use_percentiles=config.use_percentiles,
            )
            normalized = values[..., start : start + dim]
            if low.ndim == 2 and normalized.shape[1] <= low.shape[0]:
                low, high = low[: normalized.shape[1]], high[: normalized.shape[1]]
            decoded[key] = (np.clip(normalized, -1.0, 1.0) + 1.0) * 0.5 * (high - low) + low
            start += dim
        if config.use_relative_action:
            self._to_absolute(decoded, keys, configs, transition)
        if not decoded:
            return transition
        out = np.concatenate([decoded[k] for k in keys if isinstance(k, str) and k in decoded], -1)
        if config.env_action_dim and out.shape[-1] > config.env_action_dim:
            out = out[..., : config.env_action_dim]
        if config.action_decode_transform == DECODE_LIBERO:
            out = _libero_gripper(out, keys, decoded)
        if single:
            out = out[:, 0]
        return transition.evolve(
            action=torch.as_tensor(out, dtype=action.dtype, device=action.device)
        )

    def _to_absolute(
        self,
        decoded: dict[str, np.ndarray],
        keys: list[Any],
        configs: list[Any],
        transition: Transition,
    ) -> None:
        state = transition.observation.get(OBS_STATE)
        if state is None:
            raise InvalidInput(
                "GR00T's relative actions are decoded against the state they were predicted "
                "from, and the post-processor was given none",
                where=OBS_STATE,
                hint="pass the raw observation with the actions to the post-processor",
            )
        raw = np.asarray(
            state.detach().cpu().float().numpy() if isinstance(state, Tensor) else state,
            dtype=np.float32,
        )
        if raw.ndim == 1:
            raw = raw[None]
        references = state_groups(raw, self.config.raw_stats, self.config.modality_config)
        for index, key in enumerate(keys):
            if not isinstance(key, str) or key not in decoded or index >= len(configs):
                continue
            group = configs[index]
            if not isinstance(group, dict) or not is_relative(group):
                continue
            state_key = group.get("state_key") or key
            reference = references.get(state_key)
            where = f"{DECODE_STEP}.modality_config.action.{key}"
            if reference is None:
                raise InvalidInput(
                    f"the state has no group {state_key!r} for relative action group {key!r}",
                    where=where,
                    hint="give the state the policy was trained with",
                )
            kind = config_value(group.get("type"))
            form = config_value(group.get("format"))
            if kind == "non_eef":
                decoded[key] = decoded[key] + reference[:, None, :]
            elif kind == "eef" and form == "xyz+rot6d":
                decoded[key] = relative_eef_to_absolute(decoded[key], reference)
            else:
                raise ConfigError(
                    f"unsupported relative GR00T N1.7 action group {key!r}: {group}",
                    where=where,
                    hint="relative groups are non_eef, or eef in xyz+rot6d",
                )


def _libero_gripper(
    out: np.ndarray, keys: list[Any], decoded: Mapping[str, np.ndarray]
) -> np.ndarray:
    """LeRobot's `_apply_n1_7_action_decode_transform`: the `gripper` group's [0, 1] becomes
    LIBERO's -1/+1."""
    start = 0
    for key in keys:
        if not isinstance(key, str) or key not in decoded:
            continue
        end = start + decoded[key].shape[-1]
        if key == "gripper":
            if end > out.shape[-1] or end - start != 1:
                raise ConfigError(
                    "LIBERO's action decoding needs a one-dimensional gripper group inside the "
                    "env's action",
                    where=f"{DECODE_STEP}.action_decode_transform",
                )
            out = out.copy()
            out[..., start:end] = -np.sign(2.0 * out[..., start:end] - 1.0)
            return out
        start = end
    raise ConfigError(
        "LIBERO's action decoding needs an action group named 'gripper'",
        where=f"{DECODE_STEP}.action_decode_transform",
        hint="keep the gripper absolute (--policy.relative_exclude_joints='[\"gripper\"]'), "
        "or set --policy.action_decode_transform=none",
    )


def relative_action_steps(
    config: GrootConfig, stats: Mapping[str, Mapping[str, Any]], pack: GrootPackInputs
) -> tuple[GrootPackInputs, GrootActionDecode]:
    """GR00T's relative-action pack and decode steps (LeRobot's native relative path): `pack`
    with the action groups and their statistics, and the decode step in place of the unpack
    one. `stats` holds the dataset's `observation.state` and `action` statistics and the
    per-step `relative_action` ones."""
    action = config.action_feature
    action_dim = int(action.shape[0]) if action is not None and action.shape else 0
    assets = relative_assets(
        action_names=config.action_feature_names,
        action_dim=action_dim,
        exclude_joints=config.relative_exclude_joints,
        stats=stats,
        chunk_size=config.chunk_size,
        camera_keys=list(config.image_features),
    )
    relative_pack = GrootPackInputs(
        attrs.evolve(
            pack.config,
            action_horizon=assets.action_horizon,
            valid_action_horizon=assets.valid_action_horizon,
            use_percentiles=assets.use_percentiles,
            video_modality_keys=assets.video_modality_keys,
            raw_stats=assets.raw_stats,
            modality_config=assets.modality_config,
        ),
        {
            key: {n: np.asarray(v, np.float32) for n, v in per.items()}
            for key, per in assets.stats.items()
        },
    )
    decode = GrootActionDecode(
        DecodeConfig(
            env_action_dim=action_dim,
            raw_stats=assets.raw_stats,
            modality_config=assets.modality_config,
            use_percentiles=assets.use_percentiles,
            use_relative_action=True,
            action_decode_transform=config.action_decode_transform,
        )
    )
    return relative_pack, decode
