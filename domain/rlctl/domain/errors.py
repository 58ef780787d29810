"""Errors that carry what went wrong, where, and what to do about it.

Every error a user can see is an `RlctlError`: the CLI prints `str(error)` as one line plus the
hint, without a traceback. Adapters translate third-party exceptions into these.
"""

from __future__ import annotations


class RlctlError(Exception):
    """Every user-facing error: `message` says what, `where` says where, `hint` what to do."""

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None) -> None:
        self.message = message
        self.where = where
        self.hint = hint
        super().__init__(self.summary())

    def summary(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message

    def __str__(self) -> str:
        return self.summary()


class InvalidInput(RlctlError):
    """A value given by the user or a caller does not fit (shape, dtype, range, spec syntax)."""


class ConfigError(RlctlError):
    """A configuration file, override or value is wrong."""


class FeatureMismatch(InvalidInput):
    """A frame or dataset does not match the declared features."""


class DatasetError(RlctlError):
    """A dataset on disk is missing, corrupt, inconsistent, or of an unsupported version."""


class DatasetNotFound(DatasetError):
    """No dataset at the given location."""


class DatasetVersionError(DatasetError):
    """The dataset's codebase version is older or newer than rlctl reads."""


class CorruptDataset(DatasetError):
    """A file of the dataset cannot be read or disagrees with the others."""


class VideoError(RlctlError):
    """A video file cannot be encoded or decoded."""


class CalibrationError(RlctlError):
    """Calibration data is missing or does not fit the motors."""


class HardwareError(RlctlError):
    """A device (motor bus, camera) does not answer or answers wrongly."""


class NotSupported(RlctlError):
    """The request is valid but this build or adapter cannot serve it."""
