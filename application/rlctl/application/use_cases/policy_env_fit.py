"""Does a policy fit an env? Its input features against what the env observes, its action
against what the env takes, checked before the first step.

A policy trained on another robot (a 6-joint arm with a `front` camera) evaluated in PushT would
otherwise fail inside the model with a tensor shape error. Here the comparison is made on the
declared features: the env's, after its feature map, its pre-processor and the rename map, against
the policy's `input_features`, after the policy's own renames. Every difference is reported at
once, with what the env does provide and how to make the two meet.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import attrs

from rlctl.domain.errors import FeatureMismatch
from rlctl.domain.features import FeatureKind, FeatureSpec

ACTION = "action"
# The feature types an env delivers as observations; the others (language, reward) come from
# elsewhere (the task text) or are not inputs at all.
OBSERVED_KINDS = (FeatureKind.STATE, FeatureKind.VISUAL, FeatureKind.ENV)


@attrs.frozen
class Missing:
    key: str
    shape: tuple[int, ...]


@attrs.frozen
class WrongShape:
    key: str
    wanted: tuple[int, ...]
    provided: tuple[int, ...]


@attrs.frozen
class FitReport:
    missing: list[Missing]
    wrong_shapes: list[WrongShape]
    # (policy action shape, env action shape) when they differ.
    action: tuple[tuple[int, ...], tuple[int, ...]] | None
    provided: dict[str, FeatureSpec]
    env_action: FeatureSpec | None
    # Policy key → env key, when the env has an unread feature of the same shape and kind.
    renames: dict[str, str]

    @property
    def fits(self) -> bool:
        return not (self.missing or self.wrong_shapes or self.action)


def _is_visual(spec: FeatureSpec) -> bool:
    return spec.is_visual or spec.key.startswith("observation.image")


def compare(
    inputs: Mapping[str, FeatureSpec],
    outputs: Mapping[str, FeatureSpec],
    provided: Mapping[str, FeatureSpec],
    env_action: FeatureSpec | None,
) -> FitReport:
    """What the policy reads that the env does not give, or gives in another shape."""
    missing: list[Missing] = []
    wrong: list[WrongShape] = []
    for key, feature in inputs.items():
        if feature.kind not in OBSERVED_KINDS:
            continue
        spec = provided.get(key)
        if spec is None:
            missing.append(Missing(key, tuple(feature.shape)))
        elif tuple(spec.shape) != tuple(feature.shape):
            wrong.append(WrongShape(key, tuple(feature.shape), tuple(spec.shape)))
    action = None
    policy_action = outputs.get(ACTION)
    if (
        policy_action is not None
        and env_action is not None
        and tuple(policy_action.shape) != tuple(env_action.shape)
    ):
        action = (tuple(policy_action.shape), tuple(env_action.shape))
    unread = {k: s for k, s in provided.items() if k not in inputs}
    renames: dict[str, str] = {}
    for item in missing:
        wanted_visual = inputs[item.key].kind is FeatureKind.VISUAL
        candidates = [
            k
            for k, s in unread.items()
            if tuple(s.shape) == item.shape and _is_visual(s) == wanted_visual
        ]
        if len(candidates) == 1 and candidates[0] not in renames.values():
            renames[item.key] = candidates[0]
    return FitReport(missing, wrong, action, dict(provided), env_action, renames)


def _shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(int(v)) for v in shape) + ("," if len(shape) == 1 else "") + ")"


def describe(report: FitReport) -> tuple[str, str]:
    """(message, hint) for a report that does not fit."""
    problems = [
        f"it reads {m.key} {_shape(m.shape)}, which the env does not provide"
        for m in report.missing
    ]
    problems += [
        f"it reads {w.key} as {_shape(w.wanted)}, the env provides {_shape(w.provided)}"
        for w in report.wrong_shapes
    ]
    if report.action is not None:
        wanted, takes = report.action
        problems.append(
            f"it outputs actions of shape {_shape(wanted)}, the env takes {_shape(takes)}"
        )
    message = "the policy does not fit this env: " + "; ".join(problems)

    env_side = ", ".join(f"{k} {_shape(s.shape)}" for k, s in report.provided.items()) or "nothing"
    takes_action = (
        f" and takes action {_shape(report.env_action.shape)}"
        if report.env_action is not None
        else ""
    )
    parts = [f"the env provides {env_side}{takes_action}"]
    only_names = (
        not report.wrong_shapes
        and report.action is None
        and len(report.renames) == len(report.missing)
    )
    if only_names:
        mapping = json.dumps({env: policy for policy, env in report.renames.items()})
        parts.append(f"the env has them under other names: pass --rename_map='{mapping}'")
    else:
        if report.renames:
            mapping = json.dumps({env: policy for policy, env in report.renames.items()})
            parts.append(f"--rename_map='{mapping}' maps the keys that only differ in name")
        else:
            parts.append(
                "when only the names differ, map them with "
                '--rename_map=\'{"<env key>": "<policy key>"}\''
            )
        parts.append(
            "otherwise evaluate the policy in the env (and robot) it was trained on, or evaluate "
            "a policy trained on this env's observations"
        )
    return message, "; ".join(parts)


def check_policy_fits_env(
    inputs: Mapping[str, FeatureSpec],
    outputs: Mapping[str, FeatureSpec],
    provided: Mapping[str, FeatureSpec],
    env_action: FeatureSpec | None,
    *,
    where: str | None = None,
) -> None:
    """Raise `FeatureMismatch` naming every difference when the policy does not fit the env."""
    report = compare(inputs, outputs, provided, env_action)
    if report.fits:
        return
    message, hint = describe(report)
    raise FeatureMismatch(message, where=where, hint=hint)
