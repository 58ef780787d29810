"""A LeRobot v3.0 dataset of demonstrations as transitions for the learner's offline buffer.

Frames are read as training reads them (videos decoded, cameras `(C, H, W)` floats in [0, 1]);
`next.reward` is required (a dataset recorded for RL has it), `next.done` used when present, and
`complementary_info.*` columns (`is_intervention`, `discrete_penalty`) kept, as LeRobot's
`ReplayBuffer.from_lerobot_dataset` reads them. Observations the policy does not read are left
out (`keys`: the observation features wanted; None: every state, environment state and camera).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from rlctl.adapters.storage.torch_dataset import LeRobotTorchDataset
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureKind, FeatureSpec
from rlctl.domain.rl.replay import TransitionBatch, demonstration_transitions

REWARD = "next.reward"
DONE = "next.done"
COMPLEMENTARY = "complementary_info."


class Demonstrations:
    def __init__(self, root: str | Path) -> None:
        self.dataset = LeRobotTorchDataset(root)
        self.meta = self.dataset.meta

    @property
    def features(self) -> dict[str, FeatureSpec]:
        return dict(self.meta.features)

    @property
    def stats(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v) for k, v in (self.meta.stats or {}).items()}

    def transitions(self, keys: Iterable[str] | None = None) -> TransitionBatch:
        features = self.meta.features
        if REWARD not in features:
            raise InvalidInput(
                f"the demonstrations have no {REWARD} column: SAC needs their rewards",
                where=str(self.dataset.root),
                hint="record the demonstrations with rewards (an RL env or a reward classifier)",
            )
        wanted = (
            list(keys)
            if keys is not None
            else [
                k
                for k, f in features.items()
                if f.kind in (FeatureKind.STATE, FeatureKind.ENV, FeatureKind.VISUAL)
            ]
        )
        missing = [k for k in wanted if k not in features]
        if missing:
            raise InvalidInput(
                f"the demonstrations lack {', '.join(missing)}, which the policy reads",
                where=str(self.dataset.root),
            )
        if "action" not in features:
            raise InvalidInput(
                "the demonstrations have no action column: SAC needs the actions taken",
                where=str(self.dataset.root),
                hint="record the demonstrations with the robot's actions",
            )
        extra = [k for k in features if k.startswith(COMPLEMENTARY)]
        columns: dict[str, list[np.ndarray]] = {k: [] for k in [*wanted, *extra]}
        actions, rewards, dones, episodes = [], [], [], []
        for index in range(len(self.dataset)):
            item = self.dataset[index]
            for key in columns:
                columns[key].append(_vector(item[key], features[key]))
            # A one-number feature (a 1-D action, say) is read as a scalar: back to (1,).
            actions.append(np.asarray(item["action"], dtype=np.float32).reshape(-1))
            rewards.append(float(np.asarray(item[REWARD]).reshape(-1)[0]))
            if DONE in item:
                dones.append(bool(np.asarray(item[DONE]).reshape(-1)[0]))
            episodes.append(int(np.asarray(item["episode_index"]).reshape(-1)[0]))
        return demonstration_transitions(
            {k: np.stack(columns[k]) for k in wanted},
            np.stack(actions),
            np.asarray(rewards, dtype=np.float32),
            np.asarray(episodes),
            np.asarray(dones) if DONE in features else None,
            {k[len(COMPLEMENTARY) :]: np.stack(columns[k]).reshape(-1) for k in extra},
        )


def _vector(value: Any, feature: FeatureSpec) -> np.ndarray:
    array = np.asarray(value, dtype=np.float32)
    return array if feature.is_visual else array.reshape(-1)
