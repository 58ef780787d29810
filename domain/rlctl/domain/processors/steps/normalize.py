"""Normalise and unnormalise observations and actions, as LeRobot 0.6.1's steps do.

The mode is chosen per feature kind through `norm_map` (`{"VISUAL": "MEAN_STD", "STATE":
"MIN_MAX", ...}`); the formulas, their operation order and the epsilon handling follow LeRobot's
`NormalizerProcessorStep` exactly, because LeRobot checkpoints must reproduce LeRobot's outputs:

- MEAN_STD: `(x - mean) / (std + eps)`, back `x * std + mean`;
- MIN_MAX: `2 * (x - min) / span - 1`, back `(x + 1) / 2 * span + min`, where a zero span becomes
  eps (so a constant feature maps to -1 and back);
- QUANTILES (q01/q99) and QUANTILE10 (q10/q90): `2 * (x - lo) / span - 1`,
  back `(x + 1) * span / 2 + lo`.

The statistics are this step's state, flat keys `"<feature>.<stat>"` as in LeRobot's safetensors.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
from cattrs.gen import make_dict_unstructure_fn, override

from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.features import FeatureKind, FeatureSpec
from rlctl.domain.frames import Transition
from rlctl.domain.processors.arrays import (
    constant_like,
    ensure_floating,
    replace_zeros,
    require_array,
)
from rlctl.domain.processors.registry import register_step
from rlctl.domain.processors.serialization import converter, parse_feature_kind
from rlctl.domain.processors.step import Step

ACTION_KEY = "action"


class NormMode(enum.StrEnum):
    MEAN_STD = "MEAN_STD"
    MIN_MAX = "MIN_MAX"
    QUANTILES = "QUANTILES"
    QUANTILE10 = "QUANTILE10"
    IDENTITY = "IDENTITY"


def parse_norm_mode(value: Any) -> NormMode:
    try:
        return NormMode(str(value).upper())
    except ValueError:
        known = ", ".join(NormMode)
        raise ConfigError(f"unknown normalisation mode {value!r}; known modes: {known}") from None


converter.register_structure_hook(NormMode, lambda value, _: parse_norm_mode(value))

# The statistics each mode reads: (centre or low end, scale or high end).
REQUIRED_STATS: dict[NormMode, tuple[str, str]] = {
    NormMode.MEAN_STD: ("mean", "std"),
    NormMode.MIN_MAX: ("min", "max"),
    NormMode.QUANTILES: ("q01", "q99"),
    NormMode.QUANTILE10: ("q10", "q90"),
}


def _norm_map(value: Mapping[Any, Any]) -> dict[FeatureKind, NormMode]:
    return {parse_feature_kind(kind): parse_norm_mode(mode) for kind, mode in value.items()}


def _dims(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(value)


@attrs.frozen
class NormalizedFeature:
    """What the step knows of a feature: its kind picks the mode (LeRobot's PolicyFeature)."""

    type: FeatureKind = attrs.field(converter=parse_feature_kind)
    shape: tuple[int, ...] = attrs.field(default=(), converter=_dims)


def _features(value: Mapping[str, Any]) -> dict[str, NormalizedFeature]:
    return {
        key: feature if isinstance(feature, NormalizedFeature) else NormalizedFeature(**feature)
        for key, feature in value.items()
    }


def _eps(_: Any, __: Any, value: float) -> None:
    if not (np.isfinite(value) and value >= 0):
        raise ConfigError(
            f"eps must be a finite number >= 0, found {value!r}",
            where="eps",
            hint="LeRobot's default is 1e-8; the processor file was edited or is damaged",
        )


def _sorted_keys(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(sorted(value))


@attrs.frozen
class NormalizerConfig:
    """LeRobot's normaliser config, field for field: it (un)structures to the same JSON."""

    features: dict[str, NormalizedFeature] = attrs.field(factory=dict, converter=_features)
    norm_map: dict[FeatureKind, NormMode] = attrs.field(factory=dict, converter=_norm_map)
    eps: float = attrs.field(default=1e-8, validator=_eps)
    # Only these observation keys are normalised when set; None means every declared feature.
    normalize_observation_keys: tuple[str, ...] | None = attrs.field(
        default=None, converter=_sorted_keys
    )

    @classmethod
    def for_features(
        cls, specs: Mapping[str, FeatureSpec], norm_map: Mapping[Any, Any], **options: Any
    ) -> NormalizerConfig:
        """From a dataset's feature specs; each spec's kind picks its mode through `norm_map`.

        Image shapes are given channels first, as policies (and LeRobot's configs) see them.
        """
        features = {
            key: NormalizedFeature(spec.kind, _policy_shape(spec)) for key, spec in specs.items()
        }
        return cls(features=features, norm_map=norm_map, **options)


def _policy_shape(spec: FeatureSpec) -> tuple[int, ...]:
    if spec.is_visual and len(spec.shape) == 3:
        height, width, channels = spec.hwc
        return (channels, height, width)
    return spec.shape


# LeRobot omits `normalize_observation_keys` when unset; so do we, to write the same JSON.
converter.register_unstructure_hook(
    NormalizerConfig,
    make_dict_unstructure_fn(
        NormalizerConfig,
        converter,
        normalize_observation_keys=override(omit_if_default=True),
    ),
)


def _broadcasts(stat: tuple[int, ...], feature: tuple[int, ...]) -> bool:
    """Whether a statistic of shape `stat` broadcasts over values of shape `feature` without
    widening them: (C,1,1) per channel over an image, (1,) or () over any vector."""
    stat = tuple(stat)
    while len(stat) > len(feature) and stat[0] == 1:
        stat = stat[1:]
    if len(stat) > len(feature):
        return False
    return all(s in (1, f) for s, f in zip(reversed(stat), reversed(feature), strict=False))


def normalize_array(x: Any, stats: Mapping[str, Any], mode: NormMode, eps: float) -> Any:
    """Forward transform of one array; `stats` already has `x`'s array type."""
    low, high = (stats[name] for name in REQUIRED_STATS[mode])
    if mode is NormMode.MEAN_STD:
        return (x - low) / (high + eps)
    span = replace_zeros(high - low, eps)
    if mode is NormMode.MIN_MAX:
        return 2 * (x - low) / span - 1
    return 2.0 * (x - low) / span - 1.0


def unnormalize_array(x: Any, stats: Mapping[str, Any], mode: NormMode, eps: float) -> Any:
    """Inverse transform; MEAN_STD's inverse ignores eps, as LeRobot's does."""
    low, high = (stats[name] for name in REQUIRED_STATS[mode])
    if mode is NormMode.MEAN_STD:
        return x * high + low
    span = replace_zeros(high - low, eps)
    if mode is NormMode.MIN_MAX:
        return (x + 1) / 2 * span + low
    return (x + 1.0) * span / 2.0 + low


class _Normalization(Step[NormalizerConfig]):
    config_class = NormalizerConfig
    inverse: ClassVar[bool] = False

    def __init__(
        self,
        config: NormalizerConfig | None = None,
        stats: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__(config)
        self._stats: dict[str, dict[str, np.ndarray]] = {}
        if stats:
            self.set_stats(stats)

    @property
    def stats(self) -> Mapping[str, Mapping[str, np.ndarray]]:
        return self._stats

    def set_stats(self, stats: Mapping[str, Mapping[str, Any]]) -> None:
        """Replace the statistics: `{"observation.state": {"mean": ..., "std": ...}, ...}`."""
        self._stats = {
            key: {name: np.array(value, dtype=np.float32) for name, value in per_key.items()}
            for key, per_key in stats.items()
        }
        self._shape_visual_stats()

    def _shape_visual_stats(self) -> None:
        # Per-channel image stats given flat (C,) must broadcast over (..., C, H, W).
        for key, feature in self.config.features.items():
            if feature.type is FeatureKind.VISUAL and key in self._stats:
                per_key = self._stats[key]
                for name, value in per_key.items():
                    if value.ndim == 1:
                        per_key[name] = value.reshape(-1, 1, 1)

    def state_dict(self) -> dict[str, np.ndarray]:
        return {
            f"{key}.{name}": value.copy()
            for key, per_key in self._stats.items()
            for name, value in per_key.items()
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        stats: dict[str, dict[str, Any]] = {}
        for flat_key, value in state.items():
            key, dot, name = flat_key.rpartition(".")
            if not dot:
                raise ConfigError(
                    f"statistic name {flat_key!r} is not '<feature>.<stat>'", where=self.name
                )
            stats.setdefault(key, {})[name] = value
        self.set_stats(stats)
        self.check_stats()

    def check_stats(self) -> None:
        """Refuse statistics this step would (un)normalise with that cannot work: a statistic
        its mode needs missing, one that does not broadcast to the feature's shape, NaN or inf.
        Statistics of features the mode leaves alone (or that it has none of) are not read."""
        selected = self.config.normalize_observation_keys
        for key, feature in self.config.features.items():
            mode = self.config.norm_map.get(feature.type, NormMode.IDENTITY)
            if mode is NormMode.IDENTITY or key not in self._stats:
                continue
            observation = feature.type is not FeatureKind.ACTION
            if selected is not None and observation and key not in selected:
                continue
            available = self._stats[key]
            for name in REQUIRED_STATS[mode]:
                where = f"{key}.{name}"
                if name not in available:
                    raise ConfigError(
                        f"{mode} normalisation of {key} needs the {name} statistic, which is "
                        f"missing (have: {', '.join(sorted(available)) or 'none'})",
                        where=where,
                        hint="the state file is damaged or from another run: save or download "
                        "the checkpoint again, or recompute the dataset statistics",
                    )
                value = available[name]
                if feature.shape and not _broadcasts(value.shape, feature.shape):
                    raise ConfigError(
                        f"the statistic has shape {list(value.shape)}, which does not fit the "
                        f"feature's shape {list(feature.shape)}",
                        where=where,
                        hint="the state file does not belong to this policy's features: save or "
                        "download the checkpoint again",
                    )
                if not np.isfinite(value).all():
                    raise ConfigError(
                        f"the statistic holds NaN or inf: {mode} normalisation with it would "
                        "make the values non-finite",
                        where=where,
                        hint="recompute the dataset statistics and save the checkpoint again",
                    )

    def __call__(self, transition: Transition) -> Transition:
        observation = dict(transition.observation)
        selected = self.config.normalize_observation_keys
        for key, feature in self.config.features.items():
            if feature.type is FeatureKind.ACTION or key not in observation:
                continue
            if selected is not None and key not in selected:
                continue
            observation[key] = self.transform(observation[key], key, feature.type)
        action = transition.action
        if action is not None:
            if isinstance(action, Mapping):
                raise InvalidInput(
                    "the normaliser takes the action as one array, got a mapping of joints",
                    where=ACTION_KEY,
                    hint="stack the joint values into an array before this step",
                )
            action = self.transform(action, ACTION_KEY, FeatureKind.ACTION)
        return transition.evolve(observation=observation, action=action)

    def transform(self, x: Any, key: str, kind: FeatureKind) -> Any:
        """(Un)normalise one array of feature `key`; unknown keys and IDENTITY pass through."""
        mode = self.config.norm_map.get(kind, NormMode.IDENTITY)
        if mode is NormMode.IDENTITY or key not in self._stats:
            return x
        require_array(x, key)
        x = ensure_floating(x)
        stats = {name: constant_like(value, x) for name, value in self._stats_for(key, mode)}
        apply = unnormalize_array if self.inverse else normalize_array
        return apply(x, stats, mode, self.config.eps)

    def _stats_for(self, key: str, mode: NormMode) -> list[tuple[str, np.ndarray]]:
        available = self._stats[key]
        missing = [name for name in REQUIRED_STATS[mode] if name not in available]
        if missing:
            raise ConfigError(
                f"{mode} normalisation needs the {' and '.join(REQUIRED_STATS[mode])} statistics, "
                f"but {', '.join(missing)} is missing (have: {', '.join(sorted(available))})",
                where=key,
                hint="recompute the dataset statistics, or pick another mode in norm_map",
            )
        return [(name, available[name]) for name in REQUIRED_STATS[mode]]


@register_step("normalizer_processor")
class Normalizer(_Normalization):
    """Raw values -> normalised (pre-processing, before the policy)."""


@register_step("unnormalizer_processor")
class Unnormalizer(_Normalization):
    """Normalised values -> raw (post-processing of the policy's actions)."""

    inverse = True
