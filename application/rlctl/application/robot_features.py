"""Dataset features of robots and teleoperators, as LeRobot's `hw_to_dataset_features` makes them.

Joints become one float32 vector named joint by joint (`shoulder_pan.pos`); cameras become
`observation.images.<name>` of shape (height, width, 3) (and a depth camera also
`observation.images.<name>_depth`, (height, width, 1)); the action is one float32 vector.
`check_action_match` is what every loop checks before a teleoperator drives a robot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rlctl.application.ports.robot import ACTION_KEY
from rlctl.domain.errors import FeatureMismatch
from rlctl.domain.features import FeatureSpec

STATE_KEY = "observation.state"
IMAGES_PREFIX = "observation.images."
IMAGE_NAMES = ["height", "width", "channels"]
# A depth camera's feature is its colour feature's name with this after it, as LeRobot's.
DEPTH_SUFFIX = "_depth"


def joint_names(motors: Iterable[str], suffix: str = ".pos") -> list[str]:
    return [f"{motor}{suffix}" for motor in motors]


def state_feature(names: Iterable[str]) -> FeatureSpec:
    names = list(names)
    return FeatureSpec(STATE_KEY, "float32", (len(names),), names=names)


def action_feature(names: Iterable[str]) -> FeatureSpec:
    names = list(names)
    return FeatureSpec(ACTION_KEY, "float32", (len(names),), names=names)


def camera_feature(camera: str, height: int, width: int, *, video: bool = True) -> FeatureSpec:
    return FeatureSpec(
        f"{IMAGES_PREFIX}{camera}",
        "video" if video else "image",
        (height, width, 3),
        names=list(IMAGE_NAMES),
    )


def depth_feature(camera: str, height: int, width: int, *, video: bool = True) -> FeatureSpec:
    """A depth camera's feature, as LeRobot's robots declare one (`<camera>_depth`, one
    channel) and its `hw_to_dataset_features` marks it (`is_depth_map`): stored as the 12-bit
    depth video (or 16-bit images) the dataset side writes."""
    return FeatureSpec(
        f"{IMAGES_PREFIX}{camera}{DEPTH_SUFFIX}",
        "video" if video else "image",
        (height, width, 1),
        names=list(IMAGE_NAMES),
        info={"is_depth_map": True},
    )


def as_images(features: Mapping[str, FeatureSpec], *, video: bool) -> dict[str, FeatureSpec]:
    """The same features with cameras stored as videos (`video=True`) or PNG images."""
    dtype = "video" if video else "image"
    return {
        key: FeatureSpec(key, dtype, spec.shape, names=spec.names, info=spec.info)
        if spec.is_visual
        else spec
        for key, spec in features.items()
    }


def check_action_match(
    robot: Mapping[str, FeatureSpec], source: Mapping[str, FeatureSpec], *, what: str
) -> None:
    """Raise when `what` (a teleoperator, a policy, a dataset) makes actions that the robot
    cannot take: another size, or the same size for other joints."""
    ours, theirs = robot.get(ACTION_KEY), source.get(ACTION_KEY)
    if ours is None or theirs is None:
        raise FeatureMismatch(
            f"{'the robot' if ours is None else what} declares no {ACTION_KEY!r} feature",
            where=ACTION_KEY,
        )
    if tuple(ours.shape) != tuple(theirs.shape):
        raise FeatureMismatch(
            f"{what} makes actions of shape {tuple(theirs.shape)}, the robot takes "
            f"{tuple(ours.shape)}",
            where=ACTION_KEY,
            hint="pair a teleoperator (or dataset) with the robot it was made for",
        )
    if ours.names and theirs.names and list(ours.names) != list(theirs.names):
        raise FeatureMismatch(
            f"{what} names its actions {list(theirs.names)}, the robot {list(ours.names)}",
            where=ACTION_KEY,
            hint="pair a teleoperator (or dataset) with the robot it was made for",
        )
