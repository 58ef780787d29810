"""Nothing non-finite is trained on or saved: the statistics a run normalises with are checked
before its first step; a step that went NaN or inf is explained (which data rows, which
features, which parameters); weights are checked before a checkpoint is written.

The per-step test itself is in `session` (one device sync for the loss and the gradient norm,
which reporting them needed anyway); what is here runs once, or only on the failure path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from rlctl.application.ports.training import NonFinite
from rlctl.domain.errors import DatasetError
from rlctl.domain.processors import Normalizer, ProcessorPipeline, Unnormalizer
from rlctl.domain.processors.steps.normalize import REQUIRED_STATS, NormMode

_LISTED = 3
# Batch keys that say which dataset rows the samples are (LeRobot's item keys).
_ROW_KEY, _EPISODE_KEY = "index", "episode_index"


def check_statistics(
    pipelines: Iterable[ProcessorPipeline],
    *,
    where: str,
    hint: str,
    names: Mapping[str, Any] | None = None,
) -> None:
    """Refuse statistics a (un)normaliser would use that are NaN or inf: every value it
    produced would be NaN. A zero std or span is fine (an epsilon or LeRobot's replacement
    handles it), as are statistics of features the mode leaves alone."""
    for pipeline in pipelines:
        for step in pipeline.steps:
            if not isinstance(step, Normalizer | Unnormalizer):
                continue
            config = step.config
            for key, feature in config.features.items():
                mode = config.norm_map.get(feature.type, NormMode.IDENTITY)
                if mode is NormMode.IDENTITY or key not in step.stats:
                    continue
                for name in REQUIRED_STATS[mode]:
                    value = step.stats[key].get(name)
                    if value is None:
                        continue
                    bad = np.flatnonzero(~np.isfinite(np.asarray(value, dtype=np.float64)))
                    if bad.size:
                        shown = ", ".join(
                            _element(int(i), (names or {}).get(key)) for i in bad[:_LISTED]
                        )
                        raise DatasetError(
                            f"the {name} statistic of {key} is not finite (NaN or inf at "
                            f"element {shown}{' …' if bad.size > _LISTED else ''}): normalising "
                            f"with it ({mode}) would make every value NaN",
                            where=f"{where}: {key}.{name}",
                            hint=hint,
                        )


def _element(index: int, names: Any) -> str:
    """`1 (y)` when the feature names its elements (a flat list, as LeRobot writes them)."""
    if isinstance(names, list | tuple) and index < len(names) and isinstance(names[index], str):
        return f"{index} ({names[index]})"
    return str(index)


def nonfinite_features(batch: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Feature -> a per-sample mask of the samples holding NaN or inf, for every floating
    tensor of the batch that has any."""
    found = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.ndim > 0:
            finite = torch.isfinite(value.detach()).reshape(value.shape[0], -1).all(dim=1)
            if not bool(finite.all()):
                found[key] = ~finite.cpu()
    return found


def _rows(raw: Mapping[str, Any], samples: torch.Tensor) -> str:
    """`dataset rows 13, 14 (episode 1)` for the masked samples, when the batch says."""
    rows, episodes = raw.get(_ROW_KEY), raw.get(_EPISODE_KEY)
    if not isinstance(rows, torch.Tensor) or rows.shape[:1] != samples.shape:
        return f"{int(samples.sum())} sample(s) of the batch"
    picked = rows.reshape(rows.shape[0], -1)[samples, 0].tolist()
    shown = ", ".join(str(int(r)) for r in picked[:_LISTED]) + (
        " …" if len(picked) > _LISTED else ""
    )
    text = f"the samples drawn at dataset row {shown}"
    if isinstance(episodes, torch.Tensor) and episodes.shape[:1] == samples.shape:
        eps = sorted({int(e) for e in episodes.reshape(episodes.shape[0], -1)[samples, 0]})
        text += f" of episode {', '.join(map(str, eps[:_LISTED]))}"
    return text


def diagnose(raw: Mapping[str, Any], processed: Mapping[str, Any], model: nn.Module) -> NonFinite:
    """Where a non-finite step saw NaN or inf first: the data, the pre-processing, or (inputs
    finite) the gradients."""
    in_data = nonfinite_features(raw)
    data = tuple(f"{key} ({_rows(raw, samples)})" for key, samples in in_data.items())
    processed_bad = tuple(k for k in nonfinite_features(processed) if k not in in_data)
    gradients: tuple[str, ...] = ()
    if not data and not processed_bad:
        gradients = tuple(nonfinite_tensors((n, p.grad) for n, p in model.named_parameters()))
    return NonFinite(data=data, processed=processed_bad, gradients=gradients[:_LISTED])


def nonfinite_tensors(named: Iterable[tuple[str, torch.Tensor | None]]) -> list[str]:
    """The names of the floating tensors holding NaN or inf (one device sync for all)."""
    names, checks = [], []
    for name, tensor in named:
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
            names.append(name)
            checks.append(torch.isfinite(tensor.detach()).all())
    if not checks:
        return []
    device = checks[0].device
    finite = torch.stack([c.to(device) for c in checks]).cpu().tolist()
    return [name for name, ok in zip(names, finite) if not ok]


def nonfinite_weights(models: Iterable[nn.Module]) -> list[str]:
    """The parameters and buffers of `models` that hold NaN or inf."""
    out: list[str] = []
    for model in models:
        out += nonfinite_tensors(model.state_dict().items())
    return out
