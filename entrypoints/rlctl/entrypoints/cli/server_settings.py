"""Settings the gRPC servers (`rlctl policy serve`, `rlctl rl learn`) check alike."""

from __future__ import annotations

import math

# The servers wait up to a year (their bound for every wait).
MAX_MESSAGE_TIMEOUT_S = 86_400.0 * 365


def check_message_timeout(seconds: float) -> None:
    """`--message_timeout_s`: positive and finite; 0 would cut every call off, inf none."""
    from rlctl.domain.errors import ConfigError  # lazily: the CLI's start-up stays light

    if not (
        isinstance(seconds, int | float)
        and not isinstance(seconds, bool)
        and math.isfinite(seconds)
        and 0 < seconds <= MAX_MESSAGE_TIMEOUT_S
    ):
        raise ConfigError(
            f"message_timeout_s must be a positive, finite number of seconds (at most a year), "
            f"got {seconds!r}",
            where="--message_timeout_s",
            hint="e.g. --message_timeout_s=30 (the default): longer than the clients' own call "
            "deadlines, short enough that a stalled client frees its slots",
        )
