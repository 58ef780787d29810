"""Remote inference: what travels between a robot and a policy server, and the robot's settings.

The robot sends an observation stamped with the control tick it was taken at; the server answers
with a chunk whose action `i` applies at tick `timestep + i`. How the robot merges the chunks it
receives with the actions it still has queued is acting's (`rlctl.domain.acting.timed`).

Pure data and numpy: the transport (gRPC, its byte format) and the threads live in adapters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs
import numpy as np

from rlctl.domain.acting.timed import aggregation
from rlctl.domain.errors import HardwareError, InvalidInput, RlctlError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies.rtc import RTCConfig

# Bounds on the counts a request carries: past them a number is a mistake (or an attack), not a
# chunk. No policy predicts ten thousand actions at once; ticks stay exact in a JSON double.
MAX_CHUNK_STEPS = 10_000
MAX_TICK = 2**53


class NonFiniteChunk(RlctlError):
    """A policy answered an observation with NaN or infinite actions: none of them may reach an
    arm. The request failed, not the server: the next observation may be answered."""


# Why a chunk did not come, told apart by the acting engine (`rlctl.application.acting_engine`):
# each one holds the arm for a while, none of them is a reason to stop.


class ServerUnavailable(HardwareError):
    """The policy server cannot be reached (down, restarting, network lost)."""


class ChunkLate(HardwareError):
    """The server did not answer before the chunk's deadline."""


class ChunkUnusable(HardwareError):
    """The policy answered this observation with NaN or infinite actions (a server refused to
    send them, or they arrived anyway): no action of it may reach the arm. Like a late chunk,
    the robot holds and asks again with its next observation."""


class ServerBusy(HardwareError):
    """The server has as many requests in flight as it admits (from this host, or in all):
    asked again a little later, it answers. The robot holds meanwhile, as for a late chunk."""


class PolicyFailed(HardwareError):
    """The model running here raised while computing a chunk (out of memory, a bad tensor):
    the robot holds and asks again with its next observation; failing again and again stops."""


def check_count(value: Any, name: str, *, where: str, upper: int, hint: str | None = None) -> int:
    """`value` as a whole number within [0, upper], or an `InvalidInput` naming it."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise InvalidInput(f"{name} must be a whole number, got {value!r}", where=where, hint=hint)
    if not 0 <= value <= upper:
        raise InvalidInput(
            f"{name} must be between 0 and {upper}, got {value}", where=where, hint=hint
        )
    return int(value)


def first_non_finite(arrays: Mapping[str, Any]) -> str | None:
    """The key of the first float array holding NaN or infinity, or None."""
    for key, value in arrays.items():
        array = np.asarray(value)
        # min and max carry any NaN or infinity through, in two passes without a temporary.
        if (
            array.dtype.kind in "fc"
            and array.size
            and not (np.isfinite(array.min()) and np.isfinite(array.max()))
        ):
            return key
    return None


def largest_magnitude(arrays: Mapping[str, Any]) -> tuple[str, float] | None:
    """The float array reaching furthest from zero, and how far: what to name when a policy
    answers garbage to values far outside anything it was trained on."""
    found: tuple[str, float] | None = None
    for key, value in arrays.items():
        array = np.asarray(value)
        if array.dtype.kind != "f" or not array.size:
            continue
        reach = float(max(abs(float(array.min())), abs(float(array.max()))))
        if found is None or reach > found[1]:
            found = (key, reach)
    return found


AggregateName = Literal["latest_only", "average", "weighted_average", "conservative"]
OnStall = Literal["hold", "safe_action"]


def parse_address(address: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:PORT` for IPv6) → (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInput(
            f"a policy server address is HOST:PORT, got {address!r}",
            where="policy.server",
            hint="e.g. --policy.server=127.0.0.1:8080",
        )
    return host.strip("[]"), int(port)


@attrs.frozen(kw_only=True)
class RemotePolicySettings:
    """A policy served by `rlctl policy serve`: where it is, and how the robot acts from it."""

    # HOST:PORT of `rlctl policy serve`; set, the policy runs there instead of here.
    server: str | None = None
    # Which of the server's policies (its name there); empty: the only one it serves.
    server_policy: str = ""
    # A file holding the server's token (the server's --token-file).
    token_file: str | None = None
    # The server's TLS certificate (PEM), or the CA that signed it; unset: no TLS.
    tls_cert: str | None = None
    # How an arriving chunk merges with the actions still queued for the same ticks.
    aggregate: AggregateName = "weighted_average"
    # Ask for the next chunk when the queue holds at most this fraction of a chunk.
    chunk_size_threshold: float = 0.5
    # Actions kept from each chunk; 0: all the policy predicts.
    actions_per_chunk: int = 0
    # A chunk not received this long after its observation was sent is abandoned (and asked again).
    chunk_deadline_s: float = 1.0
    # When the queue runs dry: hold the last commanded action, or send `safe_action`.
    on_stall: OnStall = "hold"
    # The action sent while stalled with on_stall=safe_action (and before any chunk arrived).
    safe_action: tuple[float, ...] | None = None
    # How long to wait for a server (first chunk, reconnection) before giving up.
    connect_timeout_s: float = 30.0
    # The longest pause between reconnection attempts (they back off from 50 ms).
    reconnect_max_s: float = 2.0
    # Real-time chunking for flow-matching policies (smolvla): each chunk is generated
    # following the actions still queued. Unset: a saved policy's own rtc_config; a served one
    # without. E.g. --policy.rtc_config.enabled=true --policy.rtc_config.execution_horizon=10.
    rtc_config: RTCConfig | None = None
    # Ticks the robot acts on queued actions while a chunk is computed. Unset: measured for a
    # served policy; 0 for one running here (the loop waits for its chunks; set, it emulates it).
    rtc_inference_delay: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.server is not None:
            parse_address(self.server)
        aggregation(self.aggregate)
        if not 0.0 <= self.chunk_size_threshold <= 1.0:
            raise InvalidInput(
                f"chunk_size_threshold must be within [0, 1], got {self.chunk_size_threshold}",
                where="policy.chunk_size_threshold",
            )
        check_count(
            self.actions_per_chunk,
            "actions_per_chunk",
            where="policy.actions_per_chunk",
            upper=MAX_CHUNK_STEPS,
            hint="0 keeps every action of each chunk",
        )
        if self.chunk_deadline_s <= 0 or self.connect_timeout_s <= 0:
            raise InvalidInput("deadlines must be positive", where="policy.chunk_deadline_s")
        if self.rtc_inference_delay is not None:
            check_count(
                self.rtc_inference_delay,
                "rtc_inference_delay",
                where="policy.rtc_inference_delay",
                upper=MAX_CHUNK_STEPS,
            )
        if self.on_stall == "safe_action" and self.safe_action is None:
            raise InvalidInput(
                "on_stall=safe_action needs a safe_action",
                where="policy.safe_action",
                hint="e.g. --policy.safe_action='[0, 0, 0, 0, 0, 0]'",
            )


@attrs.frozen(kw_only=True)
class ChunkRequest:
    """One observation batch sent for a chunk. Arrays only, plus the task text per batch row."""

    observation: Mapping[str, np.ndarray]
    task: tuple[str, ...] = ()
    # The control tick the observation was taken at; the chunk's first action applies there.
    timestep: int = 0
    policy: str = ""
    # At most this many actions back; 0: the whole predicted chunk.
    max_actions: int = 0
    # Real-time chunking: the raw actions still queued from `timestep` on `(batch, steps,
    # action_dim)`, the ticks the robot acts on them while waiting, and how to follow them.
    committed: np.ndarray | None = None
    inference_delay: int = 0
    rtc: RTCConfig | None = None

    def __attrs_post_init__(self) -> None:
        check_count(self.timestep, "timestep", where="request.timestep", upper=MAX_TICK)
        check_count(
            self.max_actions,
            "max_actions",
            where="request.max_actions",
            upper=MAX_CHUNK_STEPS,
            hint="0 asks for the whole chunk; N > 0 for its first N actions",
        )
        check_count(
            self.inference_delay,
            "inference_delay",
            where="request.inference_delay",
            upper=MAX_CHUNK_STEPS,
        )


@attrs.frozen(kw_only=True)
class ChunkReply:
    # (batch, steps, action_dim) raw actions; action i applies at tick `timestep + i`.
    actions: np.ndarray
    timestep: int = 0
    inference_s: float = 0.0


@attrs.frozen(kw_only=True)
class PolicyDescription:
    """What a robot needs to know about a served policy, as plain data (a config as a dict)."""

    name: str
    config: dict[str, Any]
    actions_per_chunk: int
    # The policy's view of the features the robot offered (its renames applied), if it offered.
    observation_features: dict[str, FeatureSpec] = attrs.field(factory=dict)
