"""π0.5's settings: LeRobot 0.6.1's `PI05Config`, field for field.

π0.5 (Physical Intelligence 2025) is π0 with two changes: the robot state is no longer projected
into the expert but discretised into 256 bins and written into the prompt
(`Task: ..., State: 12 200 ...;\\nAction: `, the tokenizer side of the pre-processor), and the
flow-matching time conditions every norm of the action expert (adaptive RMSNorm: scale, shift and
a gate on each residual) instead of being mixed into the action tokens. Its statistics default to
quantiles, so the state lands in [-1, 1] before it is discretised.
"""

from __future__ import annotations

import attrs

from rlctl.domain.policies.config import PolicyConfig, norm_mapping
from rlctl.domain.policies.pi0 import PiConfig


def _pi05_norms() -> dict[str, str]:
    return {"VISUAL": "IDENTITY", "STATE": "QUANTILES", "ACTION": "QUANTILES"}


@PolicyConfig.register("pi05")
@attrs.frozen(kw_only=True)
class PI05Config(PiConfig):
    """π0.5 with LeRobot's defaults (PaliGemma 2B + a 300M action expert, 200-token prompts)."""

    normalization_mapping: dict[str, str] = attrs.field(factory=_pi05_norms, converter=norm_mapping)
    tokenizer_max_length: int = 200


attrs.resolve_types(PI05Config)
