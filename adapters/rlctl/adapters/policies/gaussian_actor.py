"""SAC's actor (LeRobot's `gaussian_actor`): an observation encoder and a tanh-squashed Gaussian.

    each camera ─ 4 conv (7/5/3/3, stride 2) ─ spatial embeddings ─ Linear ─ LayerNorm ─ tanh ┐
    observation.environment_state ─ Linear ─ LayerNorm ─ tanh                                 ├ cat
    observation.state ─ Linear ─ LayerNorm ─ tanh                                             ┘
        ──► MLP (Linear ─ LayerNorm ─ SiLU …) ──► mean, log std ──► tanh(N(mean, std))

With `num_discrete_actions`, a discrete critic (its own MLP on the same encoding) picks the last
action dimension (a gripper: close, stay, open) by its argmax. Acting samples from the Gaussian,
as LeRobot's `select_action` does (the learner's SAC counts on that exploration); the module
names are LeRobot's, so its `model.safetensors` loads as it is and ours loads in LeRobot. The
critics and the temperature live in the learner (`rlctl.adapters.rl.sac`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn
from torch.distributions.multivariate_normal import _batch_mahalanobis, _batch_mv

from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl.domain.acting import ActionBuffer, ActionQueue
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import OBS_ENV_STATE, OBS_STATE
from rlctl.domain.policies.gaussian_actor import (
    CriticNetworkConfig,
    GaussianActorConfig,
    is_image_feature,
)

Observations = dict[str, Tensor]
ImageFeatures = dict[str, Tensor]


class GaussianActorPolicy(PolicyModel):
    config_class = GaussianActorConfig
    config: GaussianActorConfig

    def __init__(self, config: GaussianActorConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        config.validate_features()
        self.shared_encoder = config.shared_encoder
        self.encoder_critic = ObservationEncoder(config, pretrained=load_backbone_weights)
        self.encoder_actor = (
            self.encoder_critic
            if self.shared_encoder
            else ObservationEncoder(config, pretrained=load_backbone_weights)
        )
        head = config.policy_kwargs
        self.actor = GaussianHead(
            encoder=self.encoder_actor,
            network=MLP(
                self.encoder_actor.output_dim,
                config.actor_network_kwargs.hidden_dims,
                activate_final=config.actor_network_kwargs.activate_final,
            ),
            action_dim=config.action_dim,
            std_min=head.std_min,
            std_max=head.std_max,
            init_final=head.init_final,
            use_tanh_squash=head.use_tanh_squash,
            encoder_is_shared=self.shared_encoder,
        )
        self.discrete_critic: DiscreteCritic | None = None
        if config.num_discrete_actions is not None:
            self.unprocessed_action_tail = 1
            self.discrete_critic = DiscreteCritic(
                self.encoder_critic,
                self.encoder_critic.output_dim,
                config.num_discrete_actions,
                config.discrete_critic_network_kwargs,
            )

    def actor_parameters(self) -> list[nn.Parameter]:
        """What the actor's optimiser moves: the shared encoder learns through the critics."""
        return [
            p
            for n, p in self.actor.named_parameters()
            if not n.startswith("encoder") or not self.shared_encoder
        ]

    @torch.no_grad()
    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        """One sampled action per row, `(batch, 1, action_dim)` (LeRobot's `select_action`)."""
        if self.training:  # once: walking every module each step cost more than the MLP
            self.eval()
        observations = dict(batch)
        cached = None
        if self.shared_encoder and self.actor.encoder.has_images:
            cached = self.actor.encoder.image_features(observations)
        actions = self.actor.act(observations, cached)
        if self.config.num_discrete_actions is not None:
            if self.discrete_critic is not None:
                values = self.discrete_critic(observations, cached)
                discrete = torch.argmax(values, dim=-1, keepdim=True)
            else:
                discrete = torch.ones((*actions.shape[:-1], 1), device=actions.device)
            actions = torch.cat([actions, discrete.to(actions.dtype)], dim=-1)
        return actions.unsqueeze(1)

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        raise ConfigError(
            "the Gaussian actor learns online, from its critics: rlctl train cannot train it",
            where="policy.type",
            hint="train it with `rlctl rl learn` and `rlctl rl act` (see docs/guides/rl.md)",
        )

    def action_buffer(self) -> ActionBuffer:
        return ActionQueue(1)

    @property
    def history_keys(self) -> list[str]:
        return []

    def sample(
        self, observations: Observations, cached: ImageFeatures | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """(actions, log-probabilities, means) with gradients: what the learner trains."""
        return self.actor(observations, cached)  # type: ignore[no-any-return]


class ObservationEncoder(nn.Module):
    """Cameras, environment state and robot state, each to `latent_dim`, concatenated."""

    def __init__(self, config: GaussianActorConfig, *, pretrained: bool = True) -> None:
        """`pretrained`: read a pretrained vision encoder's weights (False when a checkpoint's
        weights follow)."""
        super().__init__()
        self.config = config
        features = config.input_features
        self.image_keys = [k for k in features if is_image_feature(k)]
        self.has_images = bool(self.image_keys)
        latent = config.latent_dim
        if self.has_images:
            shape = tuple(features[self.image_keys[0]].shape)
            for key in self.image_keys[1:]:
                if tuple(features[key].shape) != shape:
                    raise ConfigError(
                        f"the cameras differ in shape: {self.image_keys[0]} is {shape}, "
                        f"{key} {tuple(features[key].shape)}; the Gaussian actor encodes them "
                        "in one batch",
                        where="policy.input_features",
                        hint="resize the cameras to one size (crop_dataset_roi, the env's resize)",
                    )
            self.image_encoder: DefaultImageEncoder | PretrainedImageEncoder = (
                DefaultImageEncoder(shape[0], config.image_encoder_hidden_dim)
                if config.vision_encoder_name is None
                else PretrainedImageEncoder(config.vision_encoder_name, weights=pretrained)
            )
            if config.freeze_vision_encoder:
                for param in self.image_encoder.parameters():
                    param.requires_grad = False
            channels, height, width = self.image_encoder.output_shape(shape, self.image_keys[0])
            self.spatial_embeddings = nn.ModuleDict()
            self.post_encoders = nn.ModuleDict()
            for key in self.image_keys:
                name = key.replace(".", "_")
                self.spatial_embeddings[name] = SpatialLearnedEmbeddings(
                    height, width, channels, config.image_embedding_pooling_dim
                )
                self.post_encoders[name] = nn.Sequential(
                    nn.Dropout(0.1),
                    nn.Linear(channels * config.image_embedding_pooling_dim, latent),
                    nn.LayerNorm(latent),
                    nn.Tanh(),
                )
        self.has_env = OBS_ENV_STATE in features
        self.has_state = OBS_STATE in features
        if self.has_env:
            self.env_encoder = _vector_encoder(features[OBS_ENV_STATE].shape[0], latent)
        if self.has_state:
            self.state_encoder = _vector_encoder(features[OBS_STATE].shape[0], latent)
        self.output_dim = latent * (len(self.image_keys) + int(self.has_env) + int(self.has_state))

    def forward(
        self, obs: Observations, cache: ImageFeatures | None = None, detach: bool = False
    ) -> Tensor:
        parts = []
        if self.has_images:
            if cache is None:
                cache = self.image_features(obs)
            parts.append(self._encode_images(cache, detach))
        if self.has_env:
            parts.append(self.env_encoder(obs[OBS_ENV_STATE]))
        if self.has_state:
            parts.append(self.state_encoder(obs[OBS_STATE]))
        return torch.cat(parts, dim=-1)

    def image_features(self, obs: Observations) -> ImageFeatures:
        """Every camera through the CNN in one batch (LeRobot's `get_cached_image_features`)."""
        batched = torch.cat([obs[k] for k in self.image_keys], dim=0)
        out = self.image_encoder(batched)
        return dict(
            zip(self.image_keys, torch.chunk(out, len(self.image_keys), dim=0), strict=True)
        )

    def _encode_images(self, cache: ImageFeatures, detach: bool) -> Tensor:
        feats = []
        for key, feat in cache.items():
            name = key.replace(".", "_")
            x = self.post_encoders[name](self.spatial_embeddings[name](feat))
            feats.append(x.detach() if detach else x)
        return torch.cat(feats, dim=-1)


def _vector_encoder(dim: int, latent: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(dim, latent), nn.LayerNorm(latent), nn.Tanh())


class MLP(nn.Module):
    """LeRobot's SAC MLP: Linear, then LayerNorm and SiLU (the last layer's only when
    `activate_final`, with `final_activation` in place of SiLU when named)."""

    def __init__(
        self,
        input_dim: int,
        hidden_dims: tuple[int, ...],
        *,
        activate_final: bool = False,
        final_activation: str | None = None,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = input_dim
        for index, out_dim in enumerate(hidden_dims):
            layers.append(nn.Linear(width, out_dim))
            last = index == len(hidden_dims) - 1
            if not last or activate_final:
                layers.append(nn.LayerNorm(out_dim))
                layers.append(
                    _activation(final_activation) if last and final_activation else nn.SiLU()
                )
            width = out_dim
        self.net = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)  # type: ignore[no-any-return]


def _activation(name: str) -> nn.Module:
    cls = getattr(nn, name, None)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ConfigError(
            f"unknown activation {name!r}", where="final_activation", hint="a torch.nn name: Tanh"
        )
    return cls()


def _uniform_or_orthogonal(layer: nn.Linear, init_final: float | None) -> None:
    if init_final is not None:
        nn.init.uniform_(layer.weight, -init_final, init_final)
        nn.init.uniform_(layer.bias, -init_final, init_final)
    else:
        nn.init.orthogonal_(layer.weight, gain=1.0)


class DiscreteCritic(nn.Module):
    def __init__(
        self,
        encoder: ObservationEncoder,
        input_dim: int,
        output_dim: int,
        network: CriticNetworkConfig,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.output_dim = output_dim
        self.net = MLP(
            input_dim,
            network.hidden_dims,
            activate_final=network.activate_final,
            final_activation=network.final_activation,
        )
        self.output_layer = nn.Linear(network.hidden_dims[-1], output_dim)
        _uniform_or_orthogonal(self.output_layer, None)

    def forward(self, observations: Observations, cache: ImageFeatures | None = None) -> Tensor:
        return self.output_layer(self.net(self.encoder(observations, cache=cache)))  # type: ignore[no-any-return]


class GaussianHead(nn.Module):
    """LeRobot's `Policy`: the encoder, an MLP, and the Gaussian's mean and std layers."""

    def __init__(
        self,
        *,
        encoder: ObservationEncoder,
        network: MLP,
        action_dim: int,
        std_min: float,
        std_max: float,
        init_final: float | None,
        use_tanh_squash: bool,
        encoder_is_shared: bool,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.network = network
        self.action_dim = action_dim
        self.std_min = std_min
        self.std_max = std_max
        self.use_tanh_squash = use_tanh_squash
        self.encoder_is_shared = encoder_is_shared
        out_features = next(
            layer.out_features for layer in reversed(network.net) if isinstance(layer, nn.Linear)
        )
        self.mean_layer = nn.Linear(out_features, action_dim)
        _uniform_or_orthogonal(self.mean_layer, init_final)
        self.std_layer = nn.Linear(out_features, action_dim)
        _uniform_or_orthogonal(self.std_layer, init_final)

    def forward(
        self, observations: Observations, cache: ImageFeatures | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        means, std = self._gaussian(observations, cache)
        # LeRobot squashes with tanh whatever `use_tanh_squash` says; so does rlctl.
        actions, log_probs = tanh_gaussian_sample(means, std)
        return actions, log_probs, means

    def act(self, observations: Observations, cache: ImageFeatures | None = None) -> Tensor:
        """`forward`'s actions alone (the same draw), without their log-probability."""
        means, std = self._gaussian(observations, cache)
        return _tanh_gaussian_draw(means, std)[0]

    def _gaussian(
        self, observations: Observations, cache: ImageFeatures | None
    ) -> tuple[Tensor, Tensor]:
        # A shared encoder learns through the critics only: detached on the actor's side.
        encoded = self.encoder(observations, cache=cache, detach=self.encoder_is_shared)
        outputs = self.network(encoded)
        means = self.mean_layer(outputs)
        std = torch.clamp(torch.exp(self.std_layer(outputs)), self.std_min, self.std_max)
        return means, std


_LOG_TWO_PI = math.log(2 * math.pi)
_LOG_TWO = math.log(2.0)


def tanh_gaussian_sample(means: Tensor, std: Tensor) -> tuple[Tensor, Tensor]:
    """A sample of `TransformedDistribution(MultivariateNormal(means, diag_embed(std)),
    [TanhTransform()])` (LeRobot's: `std` is the covariance's diagonal) and its log-probability,
    bit for bit what those objects give (the same draw from the generator, the same Cholesky
    factor, solve and tanh log-Jacobian `2 (log 2 - x - softplus(-2x))`), without building and
    argument-checking three distribution objects per call (most of an acting step's time)."""
    actions, pre_tanh, scale_tril = _tanh_gaussian_draw(means, std)
    log_jacobian = 2.0 * (_LOG_TWO - pre_tanh - F.softplus(-2.0 * pre_tanh))
    mahalanobis = _batch_mahalanobis(scale_tril, pre_tanh - means)
    half_log_det = scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    gaussian = -0.5 * (means.shape[-1] * _LOG_TWO_PI + mahalanobis) - half_log_det
    return actions, (0.0 - log_jacobian.sum(-1)) + gaussian


def _tanh_gaussian_draw(means: Tensor, std: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(actions, their values before tanh, the Cholesky factor): `rsample`'s arithmetic."""
    scale_tril = torch.linalg.cholesky(torch.diag_embed(std))
    noise = torch.empty(means.shape, dtype=means.dtype, device=means.device).normal_()
    pre_tanh = means + _batch_mv(scale_tril, noise)
    return pre_tanh.tanh(), pre_tanh, scale_tril


class DefaultImageEncoder(nn.Module):
    def __init__(self, in_channels: int, hidden: int) -> None:
        super().__init__()
        self.image_enc_layers = nn.Sequential(
            nn.Conv2d(in_channels, hidden, kernel_size=7, stride=2),
            nn.ReLU(),
            nn.Conv2d(hidden, hidden, kernel_size=5, stride=2),
            nn.ReLU(),
            nn.Conv2d(hidden, hidden, kernel_size=3, stride=2),
            nn.ReLU(),
            nn.Conv2d(hidden, hidden, kernel_size=3, stride=2),
            nn.ReLU(),
        )

    def output_shape(self, shape: tuple[int, ...], key: str) -> tuple[int, int, int]:
        height, width = shape[1], shape[2]
        for kernel in (7, 5, 3, 3):
            height, width = (height - kernel) // 2 + 1, (width - kernel) // 2 + 1
            if height < 1 or width < 1:
                raise ConfigError(
                    f"the camera {key} of {shape[1]}x{shape[2]} pixels is too small for the "
                    "Gaussian actor's image encoder (four strided convolutions)",
                    where="policy.input_features",
                    hint="give images of at least 61x61 pixels (resize or crop less)",
                )
        return int(self.image_enc_layers[0].out_channels), height, width

    def forward(self, x: Tensor) -> Tensor:
        return self.image_enc_layers(x)  # type: ignore[no-any-return]


class PretrainedImageEncoder(nn.Module):
    """A pretrained CNN as LeRobot's SAC names it (`vision_encoder_name`), its feature map the
    last hidden state. HIL-SERL's ResNet-10 (`lerobot/resnet10`, code of its own on the Hub
    that LeRobot runs) is built by rlctl; other Hugging Face image models load with
    transformers, never with code from the Hub."""

    def __init__(self, name: str, *, weights: bool) -> None:
        super().__init__()
        from rlctl.adapters.policies.vision_encoders import load_vision_encoder

        self.image_enc_layers = load_vision_encoder(
            name, weights=weights, where="policy.vision_encoder_name"
        )
        self._name = name

    def output_shape(self, shape: tuple[int, ...], key: str) -> tuple[int, int, int]:
        with torch.no_grad():
            try:
                out = self(torch.zeros(1, *shape))
            except RuntimeError as err:
                raise ConfigError(
                    f"the camera {key} of shape {tuple(shape)} does not go through "
                    f"{self._name!r}: {str(err).splitlines()[0]}",
                    where="policy.input_features",
                    hint="give the encoder the channels and size it was trained on",
                ) from err
        _, channels, height, width = out.shape
        return int(channels), int(height), int(width)

    def forward(self, x: Tensor) -> Tensor:
        return self.image_enc_layers(x).last_hidden_state  # type: ignore[no-any-return]


class SpatialLearnedEmbeddings(nn.Module):
    def __init__(self, height: int, width: int, channel: int, num_features: int = 8) -> None:
        super().__init__()
        self.height, self.width, self.channel = height, width, channel
        self.num_features = num_features
        self.kernel = nn.Parameter(torch.empty(channel, height, width, num_features))
        nn.init.kaiming_normal_(self.kernel, mode="fan_in", nonlinearity="linear")

    def forward(self, features: Tensor) -> Tensor:
        out = (features.unsqueeze(-1) * self.kernel.unsqueeze(0)).sum(dim=(2, 3))
        return out.view(out.size(0), -1)
