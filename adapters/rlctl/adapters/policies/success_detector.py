"""A trained reward classifier (rlctl's or LeRobot's checkpoint) as a `SuccessDetector`.

The observation's frames go through the checkpoint's pre-processor (the normalisation it was
trained with) and the classifier; the answer is the probability of success. Frames may come
as a robot gives them, `(height, width, 3)` uint8, or as a policy reads them, `(3, height,
width)` floats in [0, 1]; the classifier's other inputs are ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from rlctl.adapters.policies.checkpoint import checkpoint_folder, read_config, read_model
from rlctl.adapters.policies.processors import read_pipeline
from rlctl.adapters.policies.reward_classifier import RewardClassifier
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.processors import ProcessorPipeline

# rlctl saves the pre-processor under a policy's name; LeRobot's reward-model training under
# this one. A folder with neither (LeRobot's `Classifier.save_pretrained` alone) feeds the
# frames as they are, as LeRobot's `RewardClassifierProcessorStep` does.
PREPROCESSOR_NAMES = ("policy_preprocessor", "classifier_preprocessor")


def _preprocessor(folder: Any, device: str) -> ProcessorPipeline:
    for name in PREPROCESSOR_NAMES:
        if (folder / f"{name}.json").is_file():
            return read_pipeline(folder, name, device=device)
    return ProcessorPipeline(name="classifier_preprocessor")


def frame_tensor(value: Any, key: str) -> torch.Tensor:
    """One frame as a (1, 3, H, W) float tensor in [0, 1]."""
    array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if array.ndim == 4 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 3 or 3 not in (array.shape[0], array.shape[-1]):
        raise InvalidInput(
            f"a camera frame must be (height, width, 3) or (3, height, width), got {array.shape}",
            where=key,
        )
    if array.dtype == np.uint8:
        array = array.astype(np.float32) / 255.0
    if array.shape[-1] == 3 and array.shape[0] != 3:
        array = np.moveaxis(array, -1, 0)
    if not np.isfinite(array).all():
        raise InvalidInput("a camera frame holds NaN or infinite values", where=key)
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))[None]


class ClassifierSuccessDetector:
    def __init__(self, model: RewardClassifier, preprocessor: Any, threshold: float = 0.5) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ConfigError(f"threshold must be in [0, 1], got {threshold}", where="threshold")
        self.model = model.eval()
        self.preprocessor = preprocessor
        self._threshold = float(threshold)

    @classmethod
    def load(
        cls, location: str | os.PathLike[str], *, threshold: float = 0.5, device: str = "cpu"
    ) -> ClassifierSuccessDetector:
        folder = checkpoint_folder(location)
        config = read_config(folder)
        if config.type_name != "reward_classifier":
            raise ConfigError(
                f"{folder} holds a {config.type_name!r} policy, not a reward classifier",
                where=str(folder),
                hint="give the folder of a model trained with --policy.type=reward_classifier",
            )
        model = read_model(folder, config, device=device)
        assert isinstance(model, RewardClassifier)
        return cls(model, _preprocessor(folder, device), threshold)

    @property
    def threshold(self) -> float:
        return self._threshold

    def success_probability(self, observation: Mapping[str, Any]) -> float:
        keys = self.model.input_image_keys
        missing = [k for k in keys if k not in observation]
        if missing:
            raise InvalidInput(
                f"the reward classifier reads {', '.join(keys)}; the observation lacks "
                f"{', '.join(missing)}",
                where="observation",
            )
        batch = self.preprocessor.process_batch({k: frame_tensor(observation[k], k) for k in keys})
        device = self.model.device
        frames = {k: torch.as_tensor(batch[k]).to(device=device, dtype=torch.float32) for k in keys}
        return float(self.model.success_probability(frames)[0])

    def is_success(self, observation: Mapping[str, Any]) -> bool:
        return self.success_probability(observation) > self._threshold
