"""Mixed precision: autocast on CUDA in bf16 (fp16 with loss scaling where bf16 is missing);
float32 everywhere else, with a warning when it was asked for."""

from __future__ import annotations

import attrs
import structlog
import torch

log = structlog.get_logger(__name__)


@attrs.frozen
class Precision:
    enabled: bool = False
    dtype: torch.dtype = torch.float32

    @property
    def scaled(self) -> bool:
        """fp16 gradients underflow without loss scaling; bf16 ones do not."""
        return self.enabled and self.dtype == torch.float16


def precision_for(requested: bool, device: torch.device) -> Precision:
    if not requested:
        return Precision()
    if device.type != "cuda":
        log.warning("mixed precision applies on CUDA only; training in float32", device=str(device))
        return Precision()
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return Precision(True, dtype)


def grad_scaler(precision: Precision, device: torch.device) -> torch.amp.GradScaler:
    return torch.amp.GradScaler(device.type, enabled=precision.scaled)
