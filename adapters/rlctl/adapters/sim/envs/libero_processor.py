"""LIBERO's env processor step, as LeRobot 0.6.1's `LiberoProcessorStep` does it, on numpy.

- Images (`observation.images.*`, batches of (channels, height, width)) are turned by 180
  degrees: robosuite renders LIBERO's cameras upside down, and the policies trained on LIBERO's
  datasets saw them turned.
- The robot state (`observation.state.eef_pos`, `.eef_quat`, `.gripper_qpos` … from the env's
  feature map) becomes one 8-value `observation.state`: end-effector position (3), its
  orientation as an axis-angle (3) and the two gripper joints (2). The other state pieces are
  dropped, as LeRobot drops them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlctl.domain.features import FeatureSpec
from rlctl.domain.frames import Transition
from rlctl.domain.processors.registry import register_step
from rlctl.domain.processors.step import NoConfig, Step

OBS_STATE = "observation.state"
OBS_IMAGES = "observation.images."
STATE_PREFIX = f"{OBS_STATE}."
STATE_DIM = 8
REGISTRY_NAME = "libero_processor"


def quat_to_axis_angle(quat: np.ndarray) -> np.ndarray:
    """(B, 4) quaternions (x, y, z, w) → (B, 3) axis-angle vectors; zero for no rotation."""
    quat = np.asarray(quat, dtype=np.float32).reshape(-1, 4)
    w = np.clip(quat[:, 3], -1.0, 1.0)
    sin_half = np.sqrt(np.maximum(1.0 - w * w, 0.0))
    out = np.zeros((quat.shape[0], 3), dtype=np.float32)
    turning = sin_half > 1e-10
    if turning.any():
        angle = 2.0 * np.arccos(w[turning])
        out[turning] = quat[turning, :3] / sin_half[turning, None] * angle[:, None]
    return out


@register_step(REGISTRY_NAME)
class LiberoObservation(Step[NoConfig]):
    """Turn LIBERO's images and assemble its 8-value state (see the module doc)."""

    def __call__(self, transition: Transition) -> Transition:
        observation = dict(transition.observation)
        for key, value in observation.items():
            if key.startswith(OBS_IMAGES):
                observation[key] = np.ascontiguousarray(np.asarray(value)[..., ::-1, ::-1])
        pieces = {k: observation.pop(k) for k in list(observation) if k.startswith(STATE_PREFIX)}
        if pieces:
            batch = np.asarray(pieces[f"{STATE_PREFIX}eef_pos"]).reshape(-1, 3)
            observation[OBS_STATE] = np.concatenate(
                [
                    batch.astype(np.float32),
                    quat_to_axis_angle(pieces[f"{STATE_PREFIX}eef_quat"]),
                    np.asarray(pieces[f"{STATE_PREFIX}gripper_qpos"], np.float32).reshape(-1, 2),
                ],
                axis=-1,
            )
        return transition.evolve(observation=observation)

    def transform_features(self, features: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]:
        out = {k: v for k, v in features.items() if not k.startswith(STATE_PREFIX)}
        if any(k.startswith(STATE_PREFIX) for k in features):
            out[OBS_STATE] = FeatureSpec(OBS_STATE, "float32", (STATE_DIM,))
        return out
