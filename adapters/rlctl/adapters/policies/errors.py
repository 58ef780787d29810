"""Errors about policy checkpoints; each names the file, what is wrong in it, and the fix."""

from __future__ import annotations

from rlctl.domain.errors import ConfigError, RlctlError


class CheckpointError(RlctlError):
    """A policy checkpoint folder cannot be read or written."""


class CheckpointNotFound(CheckpointError):
    """The folder, or a file the checkpoint needs, does not exist."""


class UnknownPolicyType(CheckpointError, ConfigError):
    """`config.json` names a policy type rlctl does not implement."""


class CheckpointMismatch(CheckpointError):
    """The weights in `model.safetensors` do not fit the model `config.json` describes."""
