"""The reward classifier's settings: LeRobot 0.6.1's `RewardClassifierConfig`, field for field.

A classifier of camera frames (success or not, or one of `num_classes` classes) on a frozen
pretrained vision encoder (`model_name`: a Hugging Face image model, a local folder offline),
trained on a dataset whose `next.reward` labels each frame. It acts on nothing: an RL actor asks
it whether a frame shows success (`rlctl.application.ports.success.SuccessDetector`).

LeRobot trains it with `--reward_model.type=reward_classifier`; rlctl with
`rlctl train --policy.type=reward_classifier`. Its config.json holds LeRobot's reward-model
fields only, so each tool reads the other's checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import attrs

from rlctl.domain.features import FeatureSpec
from rlctl.domain.optimization import OptimizerSpec
from rlctl.domain.policies.config import PolicyConfig, norm_mapping, require

REWARD = "next.reward"
OBS_IMAGE = "observation.image"
# PreTrainedConfig fields LeRobot's reward-model configs do not have (left out of config.json).
NOT_REWARD_MODEL_FIELDS = (
    "n_obs_steps",
    "n_action_steps",
    "use_amp",
    "use_peft",
    "use_relative_actions",
    "relative_exclude_joints",
    "action_feature_names",
)


def _visual_only() -> dict[str, str]:
    return {"VISUAL": "MEAN_STD"}


@PolicyConfig.register("reward_classifier")
@attrs.frozen(kw_only=True)
class RewardClassifierConfig(PolicyConfig):
    lerobot_omits: ClassVar[tuple[str, ...]] = NOT_REWARD_MODEL_FIELDS
    acts: ClassVar[bool] = False

    name: str = "reward_classifier"
    num_classes: int = 2
    hidden_dim: int = 256
    latent_dim: int = 256
    image_embedding_pooling_dim: int = 8
    dropout_rate: float = 0.1
    # LeRobot's default, HIL-SERL's ResNet-10 (built by rlctl, never its Hub code), or a
    # Hugging Face image model (microsoft/resnet-18), or a local folder of one.
    model_name: str = "lerobot/resnet10"
    device: str | None = "cpu"
    model_type: str = "cnn"
    num_cameras: int = 2
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    grad_clip_norm: float = 1.0
    normalization_mapping: dict[str, str] = attrs.field(
        factory=_visual_only, converter=norm_mapping
    )

    def __attrs_post_init__(self) -> None:
        require(self.num_classes >= 2, "num_classes must be at least 2", "num_classes")
        require(
            self.model_type in ("cnn", "transformer"),
            f"model_type must be cnn or transformer, got {self.model_type!r}",
            "model_type",
        )
        require(self.num_cameras >= 1, "num_cameras must be at least 1", "num_cameras")
        require(0.0 <= self.dropout_rate < 1.0, "dropout_rate must be in [0, 1)", "dropout_rate")
        images = self.image_keys
        require(
            not self.input_features or len(images) == self.num_cameras,
            f"num_cameras is {self.num_cameras} but the inputs have {len(images)} image(s) "
            f"({', '.join(images) or 'none'})",
            "num_cameras",
            hint="set --policy.num_cameras to the number of cameras the classifier reads",
        )

    @property
    def image_keys(self) -> list[str]:
        """The inputs the classifier reads, in order: those whose key starts `observation.image`."""
        return [k for k in self.input_features if k.startswith(OBS_IMAGE)]

    def optimizer_preset(self) -> OptimizerSpec:
        return OptimizerSpec(
            type="adamw",
            lr=self.learning_rate,
            weight_decay=self.weight_decay,
            grad_clip_norm=self.grad_clip_norm,
        )

    def with_features(
        self,
        input_features: Mapping[str, FeatureSpec],
        output_features: Mapping[str, FeatureSpec],
    ) -> PolicyConfig:
        """The cameras only (LeRobot's classifier reads nothing else), and no output feature:
        its target is the dataset's `next.reward`, which is not normalised."""
        images = {k: f for k, f in input_features.items() if k.startswith(OBS_IMAGE)}
        require(
            bool(images),
            "the reward classifier reads camera frames, and the inputs have none",
            "input_features",
            hint="train it on a dataset with cameras (observation.images.*)",
        )
        return attrs.evolve(self, input_features=images, output_features={})


attrs.resolve_types(RewardClassifierConfig)
