"""A checkpoint's `config.json`, read without torch: what `rlctl train --policy.path` layers its
settings on, and what `read_config` structures before a model is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from rlctl.adapters.policies.errors import CheckpointError, UnknownPolicyType
from rlctl.adapters.policies.files import read_checkpoint_json
from rlctl.domain.config import fields_of, structure
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import PolicyConfig, known_policy_types
from rlctl.domain.run_layout import POLICY_CONFIG_FILE

log = structlog.get_logger(__name__)


def read_config_data(folder: Path) -> dict[str, Any]:
    """`folder/config.json` as plain data: a known policy type, and only the keys its config
    class has (a newer LeRobot may add some; they are dropped and logged rather than refused)."""
    path = folder / POLICY_CONFIG_FILE
    data = read_checkpoint_json(path)
    if not isinstance(data, dict):
        raise CheckpointError("config.json must hold a JSON object", where=str(path))
    known = known_policy_types()
    policy_type = data.get("type")
    if not isinstance(policy_type, str) or policy_type not in known:
        raise UnknownPolicyType(
            f"unknown policy type {policy_type!r}",
            where=f"{path}: type",
            hint=f"known policy types: {', '.join(known)} (another type needs the package that "
            "provides it)",
        )
    allowed = {"type", *fields_of(known[policy_type])}
    extra = sorted(set(data) - allowed)
    if extra:
        log.warning("ignoring unknown policy config keys", file=str(path), keys=extra)
    return {k: v for k, v in data.items() if k in allowed}


def structure_config(data: dict[str, Any], path: Path) -> PolicyConfig:
    """The config `data` (read from `path`) describes; a bad value names the file and key."""
    try:
        return structure(data, PolicyConfig)
    except ConfigError as err:
        raise CheckpointError(
            err.message, where=f"{path}: {err.where}" if err.where else str(path), hint=err.hint
        ) from err
