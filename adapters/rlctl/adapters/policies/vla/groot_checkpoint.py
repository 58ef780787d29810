"""NVIDIA's own GR00T N1.7 checkpoint layout, as LeRobot 0.6.1 reads it through
`--policy.base_model_path` (`nvidia/GR00T-N1.7-3B`, or a fine-tune written by Isaac-GR00T):

    config.json              GR00TN17Config (`model_type` "Gr00tN1d7", no LeRobot `type`)
    model.safetensors        or model-0000i-of-0000n.safetensors + model.safetensors.index.json,
                             keys `backbone.model...` and `action_head...` (rlctl's module names
                             without the `_groot_model.` prefix)
    processor_config.json    `processor_kwargs`: per-embodiment `modality_configs` (state and
                             action groups, action `delta_indices`, cameras), image geometry,
                             `use_percentiles`, `use_relative_action`, `state_dropout_prob`, ...
    statistics.json          per embodiment, per modality group: min/max/mean/std/q01/q99
                             (`relative_action`: one row per chunk step)
    embodiment_id.json       embodiment tag -> projector index

The folder is found through huggingface_hub (a local folder, or a Hub id fetched into the Hub
cache: HF_HUB_OFFLINE serves the cache). As in LeRobot, the side files are honoured only for a
local folder (LeRobot tests `Path(base_model_path).is_dir()`): from a Hub id only the
architecture and the weights are used.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import structlog

from rlctl.adapters.policies.vla.groot_action_groups import flatten_group_stats, section
from rlctl.domain.errors import ConfigError, RlctlError
from rlctl.domain.policies.groot import GROOT_N1_7_BASE_MODEL, GrootConfig

log = structlog.get_logger(__name__)

PROCESSOR_CONFIG = "processor_config.json"
STATISTICS = "statistics.json"
EMBODIMENT_IDS = "embodiment_id.json"
# What a base model needs from the Hub: its config, weights and side files (not its README,
# nor an Isaac-GR00T training state that may sit beside them).
HUB_FILES = [
    "config.json",
    "*.safetensors",
    "model.safetensors.index.json",
    PROCESSOR_CONFIG,
    STATISTICS,
    EMBODIMENT_IDS,
]
N1_7_MODEL_TYPES = {"gr00tn1d7", "gr00t_n1d7", "gr00t_n1_7"}
N1_5_MODEL_TYPES = {"gr00t_n1_5", "gr00tn1_5", "gr00t_n15", "gr00t_n1d5", "gr00tn1d5"}
# Per process: one Hub round trip per base model (a run reads it for the model and processors).
_fetched: dict[tuple[str, ...], Path | None] = {}


def model_version(data: Mapping[str, Any]) -> str | None:
    """LeRobot's `_infer_groot_model_version_from_config`: "n1.7", "n1.5" or None."""
    version = data.get("model_version")
    if isinstance(version, str):
        return "n1.5" if version.lower() in ("n1.5", "n1_5", "n1d5", "n15", "1.5") else "n1.7"
    for candidate in [data.get("model_type"), *(data.get("architectures") or [])]:
        if isinstance(candidate, str):
            name = candidate.lower().replace("-", "_")
            if name in N1_7_MODEL_TYPES:
                return "n1.7"
            if name in N1_5_MODEL_TYPES:
                return "n1.5"
    if data.get("model_name") == "nvidia/Cosmos-Reason2-2B":
        return "n1.7"
    backbone = data.get("backbone_cfg")
    if isinstance(backbone, dict) and "eagle_path" in backbone:
        return "n1.5"
    return None


def read_json(path: Path) -> dict[str, Any]:
    """A side file's object; {} when the file is not there (as LeRobot's `read_json`)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"cannot read the GR00T checkpoint's {path.name}: {err}",
            where=str(path),
            hint="the file must be the JSON object Isaac-GR00T wrote; restore it or remove it",
        ) from err
    if not isinstance(data, dict):
        raise ConfigError(
            f"the GR00T checkpoint's {path.name} is not a JSON object", where=str(path)
        )
    return data


def base_folder(name: str) -> Path | None:
    """The folder `base_model_path` names: a local folder, or a Hub repo id fetched (config,
    weights, side files) into the Hub cache. None for NVIDIA's default base model when the Hub
    cannot give it (rlctl then builds its architecture with random weights); any other name
    that cannot be found is refused."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    from rlctl.application.ports.hub import is_repo_id

    if not is_repo_id(name):
        raise ConfigError(
            f"cannot find the GR00T base model {name!r}: no such folder, and not a Hub repo id",
            where="policy.base_model_path",
            hint="give a folder holding a GR00T N1.7 config.json (and its weights), or a Hub "
            f"repo id such as {GROOT_N1_7_BASE_MODEL}",
        )
    key = (
        name,
        *(
            os.environ.get(k, "")
            for k in ("HF_ENDPOINT", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE")
        ),
    )
    if key in _fetched:
        return _fetched[key]
    from rlctl.adapters.hub.huggingface import HuggingFaceHub
    from rlctl.application.ports.hub import RepoRef

    try:
        snapshot = HuggingFaceHub().download(RepoRef(name, "model", None), allow=HUB_FILES)
    except RlctlError as err:
        if name == GROOT_N1_7_BASE_MODEL:
            log.warning(
                "cannot fetch GR00T's base model: its architecture is built with random weights",
                base_model_path=name,
                reason=err.message,
            )
            _fetched[key] = None
            return None
        raise ConfigError(
            f"cannot fetch the GR00T base model {name!r}: {err.message}",
            where="policy.base_model_path",
            hint=err.hint
            or "check the repo id and your connection (or HF_HUB_OFFLINE and the Hub cache)",
        ) from err
    if not (snapshot.root / "config.json").is_file():
        raise ConfigError(
            f"the Hub repo {name!r} holds no config.json: it is not a GR00T N1.7 base model",
            where="policy.base_model_path",
            hint=f"give a GR00T N1.7 checkpoint, such as {GROOT_N1_7_BASE_MODEL}",
        )
    _fetched[key] = snapshot.root
    return snapshot.root


def is_raw_checkpoint(name: str) -> bool:
    """LeRobot's `is_raw_groot_n1_7_checkpoint`: a local folder whose config.json is NVIDIA's
    (no LeRobot `type`, an N1.7 model)."""
    path = Path(name).expanduser()
    if path.name == "config.json":
        path = path.parent
    if not path.is_dir():
        return False
    data = read_json(path / "config.json")
    return "type" not in data and model_version(data) == "n1.7"


class CheckpointAssets(NamedTuple):
    """LeRobot's `_GrootN17CheckpointProcessorAssets`: what a raw checkpoint's side files say
    about the processors, for one embodiment."""

    stats: dict[str, dict[str, list[float]]]  # flat observation.state / action statistics
    raw_stats: dict[str, Any]
    modality_config: dict[str, Any]
    embodiment_mapping: dict[str, int] | None
    formalize_language: bool
    valid_action_horizon: int | None
    max_action_horizon: int | None
    video_horizon: int | None
    use_percentiles: bool
    use_relative_action: bool
    state_dropout_prob: float
    clip_outliers: bool
    video_modality_keys: list[str] | None
    image_crop_size: list[int] | None
    image_target_size: list[int] | None
    shortest_image_edge: int | None
    crop_fraction: float | None
    use_albumentations: bool
    letter_box_transform: bool

    @property
    def has_stats(self) -> bool:
        """LeRobot's `has_modality_stats`: the checkpoint normalises this embodiment itself."""
        return any(bool(per) for per in self.stats.values())


def _bool(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _pair(value: Any) -> list[int] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        first, second = _int(value[0]), _int(value[1])
        if first is not None and second is not None:
            return [first, second]
    return None


def _horizon(modality_config: Mapping[str, Any], modality: str) -> int | None:
    delta = section(modality_config, modality).get("delta_indices", [])
    return len(delta) or None if isinstance(delta, list) else None


def _embodiment_mapping(folder: Path) -> dict[str, int] | None:
    parsed: dict[str, int] = {}
    for key, value in read_json(folder / EMBODIMENT_IDS).items():
        number = _int(value)
        if isinstance(key, str) and number is not None:
            parsed[key] = number
    return parsed or None


def checkpoint_assets(config: GrootConfig) -> CheckpointAssets | None:
    """LeRobot's `_load_n1_7_checkpoint_processor_assets`: None unless `base_model_path` is a
    local raw N1.7 checkpoint folder."""
    if not is_raw_checkpoint(config.base_model_path):
        return None
    folder = Path(config.base_model_path).expanduser()
    if folder.name == "config.json":
        folder = folder.parent
    kwargs = read_json(folder / PROCESSOR_CONFIG).get("processor_kwargs", {})
    kwargs = kwargs if isinstance(kwargs, dict) else {}
    raw_stats = read_json(folder / STATISTICS).get(config.embodiment_tag)
    raw_stats = raw_stats if isinstance(raw_stats, dict) else {}
    modality_configs = kwargs.get("modality_configs", {})
    modality_config = (
        modality_configs.get(config.embodiment_tag) if isinstance(modality_configs, dict) else None
    )
    modality_config = modality_config if isinstance(modality_config, dict) else {}
    use_relative = bool(kwargs.get("use_relative_action", False))
    use_percentiles = bool(kwargs.get("use_percentiles", False))
    stats: dict[str, dict[str, list[float]]] = {}
    if raw_stats and modality_config:
        for key, modality in (("observation.state", "state"), ("action", "action")):
            stats[key] = flatten_group_stats(
                raw_stats,
                modality_config,
                modality,
                use_percentiles=use_percentiles,
                use_relative_action=use_relative,
            )
    cameras = section(modality_config, "video").get("modality_keys", [])
    cameras = [c for c in cameras if isinstance(c, str)] if isinstance(cameras, list) else []
    return CheckpointAssets(
        stats=stats,
        raw_stats=raw_stats,
        modality_config=modality_config,
        embodiment_mapping=_embodiment_mapping(folder),
        formalize_language=_bool(kwargs.get("formalize_language"), True),
        valid_action_horizon=_horizon(modality_config, "action"),
        max_action_horizon=(
            kwargs["max_action_horizon"]
            if isinstance(kwargs.get("max_action_horizon"), int)
            and not isinstance(kwargs.get("max_action_horizon"), bool)
            else None
        ),
        video_horizon=_horizon(modality_config, "video"),
        use_percentiles=use_percentiles,
        use_relative_action=use_relative,
        state_dropout_prob=_float(kwargs.get("state_dropout_prob")) or 0.0,
        clip_outliers=_bool(kwargs.get("clip_outliers"), True),
        video_modality_keys=cameras or None,
        image_crop_size=_pair(kwargs.get("image_crop_size")),
        image_target_size=_pair(kwargs.get("image_target_size")),
        shortest_image_edge=_int(kwargs.get("shortest_image_edge")),
        crop_fraction=_float(kwargs.get("crop_fraction")),
        use_albumentations=_bool(kwargs.get("use_albumentations"), False),
        letter_box_transform=_bool(kwargs.get("letter_box_transform"), False),
    )


def checkpoint_action_horizon(config: GrootConfig) -> int | None:
    """LeRobot's `infer_groot_n1_7_action_horizon`: the chunk length the raw checkpoint's
    processor config gives `config.embodiment_tag` (None: not a raw local checkpoint, or no
    such embodiment there)."""
    path = Path(config.base_model_path).expanduser()
    if not path.is_dir():
        return None
    kwargs = read_json(path / PROCESSOR_CONFIG).get("processor_kwargs", {})
    configs = kwargs.get("modality_configs", {}) if isinstance(kwargs, dict) else {}
    modality = configs.get(config.embodiment_tag) if isinstance(configs, dict) else None
    return _horizon(modality, "action") if isinstance(modality, dict) else None
