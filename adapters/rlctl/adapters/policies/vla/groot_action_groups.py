"""GR00T N1.7's action groups: the action vector cut into named groups, each absolute or relative
to the matching group of the state, each with its own statistics — Isaac-GR00T's
`modality_config` and grouped `statistics.json`, as LeRobot 0.6.1's `processor_groot.py` reads
and writes them.

LeRobot uses them for GR00T's relative actions (`use_relative_actions`): the dataset's action
names give the groups (`action_groups`: each run of relative joints one `single_arm` group, each
excluded joint a group of its own, named after it), the relative groups are normalised per chunk
step with the `relative_action` statistics (`(horizon, dim)`), the absolute ones with the
dataset's (its 1st/99th percentiles instead of min/max when every group has them). The pack step
makes the training chunk relative to the state and normalises it group by group; the decode step
(`groot_n1_7_action_decode_v1`) unnormalises each group and adds the state back (`non_eef`), or
composes the pose (`eef`, `xyz+rot6d`).

The configs are kept as LeRobot writes them (plain JSON in the step's config), so a checkpoint
travels both ways unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import ACTION, OBS_STATE, RELATIVE_ACTION
from rlctl.domain.policies.groot import NATIVE_ACTION_HORIZON

SINGLE_ARM = "single_arm"
STAT_NAMES = ("min", "max", "mean", "std")
WHERE = "policy.use_relative_actions"


def config_value(value: Any) -> str:
    """LeRobot's `config_value`: an action config's enum value, lower-cased and canonical."""
    text = str(getattr(value, "value", value)).lower()
    return {"xyz_rot6d": "xyz+rot6d", "xyz_rotvec": "xyz+rotvec"}.get(text, text)


def stat_dim(entry: Any) -> int:
    """LeRobot's `stat_dim_from_entry`: the width of one group's statistics (0 if none)."""
    if not isinstance(entry, Mapping):
        return 0
    for name in ("mean", "q01", "min", "max", "std"):
        value = entry.get(name)
        if value is not None and hasattr(value, "shape") and hasattr(value, "ndim"):
            return int(value.shape[-1]) if value.ndim > 0 else 1
        if isinstance(value, list) and value:
            first = value[0]
            if isinstance(first, (list, tuple)) and first:
                return len(first)
            return len(value)
    return 0


def section(modality_config: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    part = (modality_config or {}).get(name, {})
    return part if isinstance(part, dict) else {}


def action_keys_and_configs(
    modality_config: Mapping[str, Any] | None,
) -> tuple[list[Any], list[Any]]:
    action = section(modality_config, "action")
    keys, configs = action.get("modality_keys", []), action.get("action_configs", [])
    return (
        keys if isinstance(keys, list) else [],
        configs if isinstance(configs, list) else [],
    )


def group_config(configs: Sequence[Any], index: int) -> dict[str, Any]:
    entry = configs[index] if index < len(configs) else {}
    return entry if isinstance(entry, dict) else {}


def is_relative(config: Mapping[str, Any]) -> bool:
    return config_value(config.get("rep")) == "relative"


def has_relative_groups(modality_config: Mapping[str, Any] | None) -> bool:
    _, configs = action_keys_and_configs(modality_config)
    return any(isinstance(c, dict) and is_relative(c) for c in configs)


def state_groups(
    state: Any, raw_stats: Mapping[str, Any] | None, modality_config: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The raw state `(B, D)` cut into the modality config's state groups, in order."""
    if raw_stats is None or modality_config is None:
        return {}
    keys = section(modality_config, "state").get("modality_keys", [])
    stats = raw_stats.get("state", {}) if isinstance(raw_stats.get("state"), dict) else {}
    grouped: dict[str, Any] = {}
    start = 0
    for key in keys if isinstance(keys, list) else []:
        if not isinstance(key, str):
            continue
        dim = stat_dim(stats.get(key, {}))
        if dim <= 0:
            continue
        grouped[key] = state[:, start : start + dim]
        start += dim
    return grouped


def decode_stats(
    raw_stats: Mapping[str, Any],
    key: str,
    config: Mapping[str, Any],
    *,
    use_relative_action: bool,
    use_percentiles: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """LeRobot's `_n1_7_decode_stats_for_action`: the (low, high) one action group is
    normalised with: relative groups their per-step min/max, the others min/max (q01/q99 with
    percentiles)."""
    relative = use_relative_action and is_relative(config)
    modality = RELATIVE_ACTION if relative else ACTION
    stats = raw_stats.get(modality, {}).get(key, {})
    low_name = "min" if relative or not use_percentiles else "q01"
    high_name = "max" if relative or not use_percentiles else "q99"
    if not isinstance(stats, dict) or low_name not in stats or high_name not in stats:
        raise ConfigError(
            f"GR00T's {modality} statistics of action group {key!r} lack {low_name}/{high_name}",
            where=f"raw_stats.{modality}.{key}",
            hint="the checkpoint's processor files are incomplete: save them again",
        )
    return (
        np.asarray(stats[low_name], dtype=np.float32),
        np.asarray(stats[high_name], dtype=np.float32),
    )


# -- xyz + 6D rotation poses (Isaac-GR00T's relative end-effector actions) ---------------------


def _rot6d_to_matrix(rot6d: np.ndarray) -> np.ndarray:
    rows = rot6d.reshape(2, 3).astype(np.float64)
    first = rows[0] / np.linalg.norm(rows[0])
    second = rows[1] - np.dot(first, rows[1]) * first
    second = second / np.linalg.norm(second)
    return np.vstack([first, second, np.cross(first, second)])


def _homogeneous(xyz_rot6d: np.ndarray) -> np.ndarray:
    transform = np.eye(4, dtype=np.float64)
    transform[:3, :3] = _rot6d_to_matrix(xyz_rot6d[3:])
    transform[:3, 3] = xyz_rot6d[:3]
    return transform


def relative_eef_to_absolute(action: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """LeRobot's `relative_eef_to_absolute`: each `(B, T, 9)` xyz+rot6d delta composed onto the
    `(B, 9)` reference pose (reference @ delta)."""
    out = np.empty_like(action, dtype=np.float64)
    for row in range(action.shape[0]):
        base = _homogeneous(reference[row])
        for step in range(action.shape[1]):
            pose = base @ _homogeneous(action[row, step])
            out[row, step] = np.concatenate([pose[:3, 3], pose[:2, :3].reshape(-1)])
    return out.astype(np.float32)


# -- the groups LeRobot derives from a dataset's action names ----------------------------------


class ActionGroup(NamedTuple):
    key: str
    indices: list[int]
    relative: bool


def _group_key(name: str) -> str:
    base = name.removesuffix(".pos").split(".")[-1]
    return base.replace(" ", "_") or "action"


def action_groups(
    names: Sequence[str], action_dim: int, exclude_joints: Sequence[str]
) -> list[ActionGroup]:
    """LeRobot's `_infer_n1_7_action_groups`: runs of relative joints (`single_arm`, then
    `single_arm_<n>`), each excluded joint (a name containing one of `exclude_joints`, any case)
    alone and absolute."""
    tokens = [str(token).lower() for token in exclude_joints if token]
    groups: list[ActionGroup] = []
    current: list[int] = []

    def flush() -> None:
        if not current:
            return
        taken = any(group.key == SINGLE_ARM for group in groups)
        key = f"{SINGLE_ARM}_{len(groups)}" if taken else SINGLE_ARM
        groups.append(ActionGroup(key, list(current), True))
        current.clear()

    for index, name in enumerate(list(names)[:action_dim]):
        if any(token in str(name).lower() for token in tokens):
            flush()
            groups.append(ActionGroup(_group_key(str(name)), [index], False))
        else:
            current.append(index)
    flush()
    keys = [group.key for group in groups]
    doubled = sorted({key for key in keys if keys.count(key) > 1})
    if doubled:
        raise ConfigError(
            f"GR00T's action groups are named after the excluded joints, and {doubled} name "
            "several",
            where="policy.relative_exclude_joints",
            hint="exclude joints whose names (without '.pos', after the last '.') differ",
        )
    return groups


def _sliced(stats: Mapping[str, Any], indices: list[int]) -> dict[str, Any]:
    """LeRobot's `_slice_stats_entry`: one group's columns of every statistic (per-step ones
    keep their rows), the count whole; mean and std from min/max where absent."""
    top = max(indices)
    out: dict[str, Any] = {}
    for name, value in stats.items():
        if name == "count":
            out[name] = np.asarray(value).flatten().tolist()
            continue
        array = np.asarray(value, dtype=np.float32)
        if array.ndim >= 2:
            if array.shape[-1] > top:
                out[name] = array[..., indices].tolist()
            continue
        array = array.flatten()
        if array.size > top:
            out[name] = [float(array[index]) for index in indices]
    if "min" in out and "max" in out:
        low = np.asarray(out["min"], dtype=np.float32)
        high = np.asarray(out["max"], dtype=np.float32)
        out.setdefault("mean", ((low + high) * 0.5).tolist())
        out.setdefault("std", (np.abs(high - low) * 0.5).tolist())
    return out


def _flat_values(value: Any) -> list[float]:
    return [float(v) for v in np.asarray(value, dtype=np.float64).reshape(-1)]


def flatten_group_stats(
    raw_stats: Mapping[str, Any],
    modality_config: Mapping[str, Any],
    modality: str,
    *,
    use_percentiles: bool,
    use_relative_action: bool,
) -> dict[str, list[float]]:
    """LeRobot's `flatten_n1_7_modality_stats`: one modality's group statistics end to end, in
    the config's order (relative groups: their `relative_action` ones, flattened)."""
    source = raw_stats.get(modality, {})
    keys = section(modality_config, modality).get("modality_keys", [])
    configs = action_keys_and_configs(modality_config)[1] if modality == ACTION else []
    relative_stats = raw_stats.get(RELATIVE_ACTION, {})
    out: dict[str, list[float]] = {}
    for name in STAT_NAMES:
        values: list[float] = []
        source_name = {"min": "q01", "max": "q99"}.get(name, name) if use_percentiles else name
        for index, key in enumerate(keys):
            if not isinstance(key, str):
                continue
            stats, stat = source, source_name
            if use_relative_action and is_relative(group_config(configs, index)):
                stats, stat = relative_stats, name
            entry = stats.get(key, {}) if isinstance(stats, dict) else {}
            if not isinstance(entry, dict) or entry.get(stat) is None:
                raise ConfigError(
                    f"GR00T's statistics lack {stat!r} for {modality} group {key!r}",
                    where=f"{modality}.{key}",
                    hint="recompute the dataset's statistics (`rlctl dataset recompute-stats`)",
                )
            values.extend(_flat_values(entry[stat]))
        if values:
            out[name] = values
    return out


class RelativeAssets(NamedTuple):
    """What GR00T's relative-action pack and decode steps are built with."""

    raw_stats: dict[str, Any]
    modality_config: dict[str, Any]
    # The flat `observation.state` / `action` min/max/mean/std the pack step keeps as its state.
    stats: dict[str, dict[str, list[float]]]
    use_percentiles: bool
    action_horizon: int
    valid_action_horizon: int
    video_modality_keys: list[str] | None


def _percentiles_everywhere(raw_stats: Mapping[str, Any], groups: list[ActionGroup]) -> bool:
    """LeRobot's `_grouped_stats_support_percentiles`: q01/q99 in every state group and every
    absolute action group."""
    for group in groups:
        if not {"q01", "q99"} <= set(raw_stats["state"].get(group.key, {})):
            return False
        if not group.relative and not {"q01", "q99"} <= set(raw_stats[ACTION].get(group.key, {})):
            return False
    return True


def relative_assets(
    *,
    action_names: Sequence[str] | None,
    action_dim: int,
    exclude_joints: Sequence[str],
    stats: Mapping[str, Mapping[str, Any]],
    chunk_size: int,
    camera_keys: Sequence[str],
) -> RelativeAssets:
    """LeRobot's `_build_n1_7_relative_action_processor_assets` from the dataset's statistics
    (`observation.state` and `action` absolute, `relative_action` per step), its action names
    and cameras (`observation.images.<key>`, in the dataset's order)."""
    if not action_names:
        raise ConfigError(
            "GR00T's relative actions group the action dimensions by their names, and the "
            "policy has none (`action_feature_names`)",
            where=WHERE,
            hint="train from a dataset whose action feature names its dimensions",
        )
    relative_stats = stats.get(RELATIVE_ACTION)
    state_stats, action_stats = stats.get(OBS_STATE), stats.get(ACTION)
    if not relative_stats or not state_stats or not action_stats:
        lacking = [k for k in (OBS_STATE, ACTION, RELATIVE_ACTION) if not stats.get(k)]
        raise ConfigError(
            f"GR00T's relative actions need the {lacking} statistics (the per-step relative "
            "ones are computed from the dataset when training starts)",
            where=WHERE,
            hint="train through `rlctl train`, which computes them, or pass them in the stats",
        )
    groups = action_groups(action_names, action_dim, exclude_joints)
    if not any(group.relative for group in groups):
        raise ConfigError(
            f"relative_exclude_joints {list(exclude_joints)} exclude every action dimension",
            where="policy.relative_exclude_joints",
            hint="turn relative actions off instead (--policy.use_relative_actions=false)",
        )
    raw_stats: dict[str, Any] = {
        "state": {g.key: _sliced(state_stats, g.indices) for g in groups},
        ACTION: {g.key: _sliced(action_stats, g.indices) for g in groups},
        RELATIVE_ACTION: {g.key: _sliced(relative_stats, g.indices) for g in groups if g.relative},
    }
    horizon = _stats_horizon(relative_stats) or min(chunk_size, NATIVE_ACTION_HORIZON)
    keys = [g.key for g in groups]
    modality_config: dict[str, Any] = {
        "state": {"modality_keys": keys},
        ACTION: {
            "modality_keys": keys,
            "action_configs": [
                {
                    "rep": "RELATIVE" if g.relative else "ABSOLUTE",
                    "type": "NON_EEF",
                    "format": "DEFAULT",
                    "state_key": None,
                }
                for g in groups
            ],
            "delta_indices": list(range(horizon)),
        },
    }
    cameras = [k.removeprefix("observation.images.") for k in camera_keys]
    cameras = [c for c, k in zip(cameras, camera_keys, strict=True) if c != k]
    if cameras:
        modality_config["video"] = {"modality_keys": cameras, "delta_indices": [0]}
    percentiles = _percentiles_everywhere(raw_stats, groups)
    flat = {
        key: flatten_group_stats(
            raw_stats, modality_config, modality, use_percentiles=percentiles,
            use_relative_action=True,
        )
        for key, modality in ((OBS_STATE, "state"), (ACTION, ACTION))
    }  # fmt: skip
    return RelativeAssets(
        raw_stats=raw_stats,
        modality_config=modality_config,
        stats=flat,
        use_percentiles=percentiles,
        action_horizon=horizon,
        valid_action_horizon=min(chunk_size, horizon),
        video_modality_keys=cameras or None,
    )


def _stats_horizon(stats: Mapping[str, Any]) -> int | None:
    for name in ("min", "max", "mean", "std", "q01", "q99"):
        value = stats.get(name)
        if value is not None:
            array = np.asarray(value)
            return int(array.shape[0]) if array.ndim >= 2 else None
    return None
