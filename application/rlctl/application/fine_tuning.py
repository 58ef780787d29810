"""Fine-tuning: does a pretrained policy fit the run that starts from it?

`--policy.pretrained_path=DIR_OR_REPO` starts from a checkpoint's weights (LeRobot's
`--policy.path`). The run trains the same kind of policy on features of the same shapes, or the
weights would not mean what they meant; everything else (schedule, statistics, relative
actions) may change. As in `lerobot-train`, the normalisation statistics are the new dataset's.
"""

from __future__ import annotations

from collections.abc import Mapping

from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureKind, FeatureSpec
from rlctl.domain.policies import PolicyConfig, dataset_policy_features

_LISTED = 6


def fine_tuned_config(pretrained: PolicyConfig, requested: PolicyConfig) -> PolicyConfig:
    """The config to train: `requested`, with the pretrained policy's features where it has
    none (a config built in code rather than from the checkpoint's config.json)."""
    if requested.input_features or requested.output_features:
        return requested
    return requested.with_features(pretrained.input_features, pretrained.output_features)


def check_pretrained(
    pretrained: PolicyConfig,
    requested: PolicyConfig,
    dataset_features: Mapping[str, FeatureSpec],
    *,
    where: str,
) -> None:
    """Refuse, in one message, a pretrained policy of another type or whose features the
    dataset does not provide at the same shapes; `where` is the pretrained config.json."""
    if pretrained.type_name != requested.type_name:
        raise ConfigError(
            f"the pretrained policy is {pretrained.type_name!r} but the run trains "
            f"{requested.type_name!r}",
            where=where,
            hint=f"drop --policy.type (the checkpoint's type is kept) or pass "
            f"--policy.type={pretrained.type_name}",
        )
    inputs, outputs = dataset_policy_features(dataset_features)
    problems = _differences(pretrained.input_features, inputs, images_may_resize=True)
    problems += _differences(pretrained.output_features, outputs, images_may_resize=False)
    if problems:
        shown = "; ".join(problems[:_LISTED])
        more = f" and {len(problems) - _LISTED} more" if len(problems) > _LISTED else ""
        raise ConfigError(
            f"the pretrained policy's features do not match the dataset: {shown}{more}",
            where=where,
            hint="fine-tune on a dataset with the same state, action and camera keys (and "
            "sizes) as the one the policy was trained on, or train from scratch",
        )


def _differences(
    wanted: Mapping[str, FeatureSpec],
    found: Mapping[str, FeatureSpec],
    *,
    images_may_resize: bool,
) -> list[str]:
    out = []
    for key, feature in wanted.items():
        have = found.get(key)
        if have is None:
            out.append(f"{key} is missing from the dataset")
        elif feature.kind is FeatureKind.VISUAL and images_may_resize:
            continue  # the image encoders take any size; the crop is checked by the config
        elif tuple(have.shape) != tuple(feature.shape):
            out.append(f"{key} is {list(feature.shape)} in the policy, {list(have.shape)} here")
    return out
