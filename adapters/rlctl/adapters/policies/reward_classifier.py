"""LeRobot's reward classifier: camera frames → the probability that they show success.

    each camera ─► frozen encoder (a Hugging Face image model) ─► spatial learned embeddings
              ─► dropout ─► linear ─► layer norm ─► tanh          (one such head per camera)
    concat ─► linear ─► dropout ─► layer norm ─► relu ─► linear ─► a logit (or num_classes)

As LeRobot 0.6.1 computes it, including what it freezes: the camera branches run under
`no_grad`, so training moves the classifier head only. One difference: the frozen encoder stays
in eval mode while training (see `train`). The parameter names are LeRobot's
(`encoder.*`, `encoders.<key>.*`, `classifier_head.*`), so the checkpoints are one format.

The encoder comes from `model_name` with transformers (`pip install 'rlctl[smolvla]'`): a
Hub name or a local folder of a Hugging Face image model (a ResNet's last stage gives the
4x4 feature map the spatial embedding expects, as a 128x128 frame through a ResNet gives).
Models with code of their own (`trust_remote_code`) are not run; LeRobot's default,
`lerobot/resnet10`, is one, and rlctl builds it itself (`resnet10.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies.reward_classifier import REWARD, RewardClassifierConfig

# The feature map the spatial embedding is sized for (LeRobot's constant).
EMBEDDING_HW = 4


class SpatialLearnedEmbeddings(nn.Module):
    def __init__(self, height: int, width: int, channel: int, num_features: int = 8) -> None:
        super().__init__()
        self.height, self.width, self.channel = height, width, channel
        self.num_features = num_features
        self.kernel = nn.Parameter(torch.empty(channel, height, width, num_features))
        nn.init.kaiming_normal_(self.kernel, mode="fan_in", nonlinearity="linear")

    def forward(self, features: Any) -> Tensor:
        features = getattr(features, "last_hidden_state", features)
        unbatched = features.dim() == 3
        if unbatched:
            features = features.unsqueeze(0)
        if tuple(features.shape[1:]) != (self.channel, self.height, self.width):
            raise ConfigError(
                f"the encoder gives feature maps of {tuple(features.shape[1:])}, the classifier "
                f"expects {(self.channel, self.height, self.width)}",
                where="policy.model_name",
                hint="feed frames the encoder turns into 4x4 maps (128x128 through a ResNet; "
                "crop and resize them with rlctl dataset crop-roi)",
            )
        out = (features.unsqueeze(-1) * self.kernel.unsqueeze(0)).sum(dim=(2, 3))
        out = out.view(out.size(0), -1)
        return out.squeeze(0) if unbatched else out


def load_encoder(config: RewardClassifierConfig, *, weights: bool) -> nn.Module:
    """The vision encoder `model_name` names; its architecture alone when weights follow."""
    from rlctl.adapters.policies.vision_encoders import load_vision_encoder

    model = load_vision_encoder(config.model_name, weights=weights, where="policy.model_name")
    vision = getattr(model, "vision_model", None)
    return vision if vision is not None else model


class RewardClassifier(PolicyModel):
    config_class = RewardClassifierConfig
    config: RewardClassifierConfig

    def __init__(
        self, config: RewardClassifierConfig, *, load_backbone_weights: bool = True
    ) -> None:
        super().__init__(config)
        self.encoder = load_encoder(config, weights=load_backbone_weights)
        self.is_cnn = config.model_type == "cnn"
        if self.is_cnn:
            self._setup_cnn_backbone()
        for parameter in self.encoder.parameters():
            parameter.requires_grad = False
        self.input_image_keys = config.image_keys
        self.image_keys = [key.replace(".", "_") for key in self.input_image_keys]
        if len(self.image_keys) != config.num_cameras:
            raise ConfigError(
                f"num_cameras is {config.num_cameras} but the inputs have "
                f"{len(self.image_keys)} image(s)",
                where="policy.num_cameras",
            )
        if self.is_cnn:
            self.encoders = nn.ModuleDict({key: self._camera_branch() for key in self.image_keys})
        self._build_classifier_head()

    def _setup_cnn_backbone(self) -> None:
        fc = getattr(self.encoder, "fc", None)
        if fc is not None:
            self.feature_dim = fc.in_features
            self.encoder = nn.Sequential(*list(self.encoder.children())[:-1])
            return
        sizes = getattr(getattr(self.encoder, "config", None), "hidden_sizes", None)
        if not sizes:
            raise ConfigError(
                f"{self.config.model_name!r} is not a CNN the classifier can read (no "
                "hidden_sizes in its config)",
                where="policy.model_name",
                hint="use a ResNet, or model_type=transformer for a vision transformer",
            )
        self.feature_dim = int(sizes[-1])

    def _camera_branch(self) -> nn.Module:
        c = self.config
        return nn.Sequential(
            self.encoder,
            SpatialLearnedEmbeddings(
                EMBEDDING_HW, EMBEDDING_HW, self.feature_dim, c.image_embedding_pooling_dim
            ),
            nn.Dropout(c.dropout_rate),
            nn.Linear(self.feature_dim * c.image_embedding_pooling_dim, c.latent_dim),
            nn.LayerNorm(c.latent_dim),
            nn.Tanh(),
        )

    def _build_classifier_head(self) -> None:
        c = self.config
        if self.is_cnn:
            input_dim = c.latent_dim
        else:
            hidden = getattr(getattr(self.encoder, "config", None), "hidden_size", None)
            if hidden is None:
                raise ConfigError(
                    f"{c.model_name!r} has no hidden_size: not a transformer encoder",
                    where="policy.model_type",
                    hint="use model_type=cnn for a ResNet",
                )
            input_dim = int(hidden)
        self.classifier_head = nn.Sequential(
            nn.Linear(input_dim * c.num_cameras, c.hidden_dim),
            nn.Dropout(c.dropout_rate),
            nn.LayerNorm(c.hidden_dim),
            nn.ReLU(),
            nn.Linear(c.hidden_dim, 1 if c.num_classes == 2 else c.num_classes),
        )

    def train(self, mode: bool = True) -> RewardClassifier:
        """The frozen encoder stays in eval mode: its batch norms keep the statistics it was
        pretrained with, so that training sees the features inference will see. (LeRobot lets
        them follow the training batches, and its classifier then meets other features once
        in eval mode; the outputs for the same weights are the same in both.)"""
        super().train(mode)
        self.encoder.eval()
        return self

    # --- inference ------------------------------------------------------------------------------

    def _encode(self, image: Tensor, key: str) -> Tensor:
        with torch.no_grad():
            if self.is_cnn:
                return self.encoders[key](image)
            return self.encoder(image).last_hidden_state[:, 0, :]

    def images(self, batch: Mapping[str, Tensor]) -> list[Tensor]:
        missing = [k for k in self.input_image_keys if k not in batch]
        if missing:
            raise ConfigError(
                f"the reward classifier reads {', '.join(self.input_image_keys)}; the frames "
                f"lack {', '.join(missing)}",
                where="observation",
            )
        return [batch[k] for k in self.input_image_keys]

    def predict(self, images: list[Tensor]) -> tuple[Tensor, Tensor]:
        """(logits, probabilities): sigmoid of one logit for two classes, softmax otherwise."""
        encoded = torch.hstack(
            [self._encode(x, key) for x, key in zip(images, self.image_keys, strict=True)]
        )
        logits = self.classifier_head(encoded)
        if self.config.num_classes == 2:
            logits = logits.squeeze(-1)
            return logits, torch.sigmoid(logits)
        return logits, torch.softmax(logits, dim=-1)

    @torch.no_grad()
    def success_probability(self, batch: Mapping[str, Tensor]) -> Tensor:
        """(B,) the probability of success (of the last class when there are more than two)."""
        self.eval()
        _, probabilities = self.predict(self.images(batch))
        return probabilities if probabilities.dim() == 1 else probabilities[:, -1]

    @torch.no_grad()
    def predict_reward(self, batch: Mapping[str, Tensor], threshold: float = 0.5) -> Tensor:
        """LeRobot's: 1.0 where the probability passes `threshold`; the class for more than two."""
        self.eval()
        _, probabilities = self.predict(self.images(batch))
        if self.config.num_classes == 2:
            return (probabilities > threshold).float()
        return torch.argmax(probabilities, dim=1)

    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        raise ConfigError(
            "the reward classifier tells success from frames; it does not act",
            where="policy.type",
            hint="use it as the success signal (rlctl.api / SuccessDetector), not as a policy",
        )

    # --- training -------------------------------------------------------------------------------

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        if REWARD not in batch:
            raise ConfigError(
                f"the reward classifier learns from the dataset's {REWARD!r} labels, and the "
                "batch has none",
                where="dataset",
                hint="label each frame's success in next.reward (1.0 success, 0.0 not)",
            )
        logits, _ = self.predict(self.images(batch))
        labels = batch[REWARD].reshape(logits.shape[0])
        if self.config.num_classes == 2:
            labels = labels.to(logits.dtype)
            loss = nn.functional.binary_cross_entropy_with_logits(logits, labels)
            predictions = (torch.sigmoid(logits) > 0.5).float()
        else:
            labels = labels.long()
            loss = nn.functional.cross_entropy(logits, labels)
            predictions = torch.argmax(logits, dim=1)
        correct = (predictions == labels).sum().item()
        total = labels.size(0)
        return loss, {"accuracy": 100.0 * correct / total, "correct": correct, "total": total}
