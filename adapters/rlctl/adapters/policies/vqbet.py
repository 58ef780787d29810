"""VQ-BeT (Lee et al. 2024, "Behavior Generation with Latent Actions"), compatible with
LeRobot 0.6.1's weights.

Training has two phases, decided by the saved `discretized` flag, as in LeRobot:

1. For `n_vqvae_training_steps` steps, a residual VQ-VAE learns to encode every window of
   `action_chunk_size` actions into two codes (a coarse and a fine one) and decode them back.
   Then its codebooks freeze.
2. A GPT reads, for each of the n_obs_steps observations, [camera tokens, state token, action
   query token], then n_action_pred_token - 1 more query tokens. From each query's output a head
   predicts the two codes (a classification, focal loss) and a continuous offset per code
   (L1 loss); the action chunk is the decoded codes plus their offsets.

    per step s:  image ─crop─ResNet─spatial softmax─► projector ─┐
                 state ───────────────────────────► projector ─┼─► [img, state, A_Q]
    GPT([...steps..., A_Q * (p-1)]) ─► features at the query tokens
        ─► code logits ─sample (softmax / temperature)─► codes ─► VQ decoder ─┐
        ─► offsets of every code ─ pick the sampled codes' ─────────────────┴─+─► action chunk

At inference only the current step's query is used: its chunk of action_chunk_size actions is
executed whole. Attribute names follow LeRobot's so that its `model.safetensors` loads as it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import structlog
import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from rlctl.adapters.policies.base import Batch, PolicyModel
from rlctl.adapters.policies.denoising import check_steps
from rlctl.adapters.policies.keypoint_encoder import KeypointEncoder
from rlctl.adapters.policies.min_gpt import GPT
from rlctl.adapters.policies.residual_vq import ResidualVQ
from rlctl.domain.errors import ConfigError
from rlctl.domain.policies import ACTION, OBS_STATE
from rlctl.domain.policies.vqbet import VQBeTConfig

log = structlog.get_logger(__name__)

# LeRobot fixes the residual VQ at two layers: a primary and a secondary code.
VQ_LAYERS = 2


class VQBeTPolicy(PolicyModel):
    config_class = VQBeTConfig
    config: VQBeTConfig

    def __init__(self, config: VQBeTConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        _check_features(config)
        self.vqbet = VQBeTModel(config, load_backbone_weights=load_backbone_weights)

    @property
    def discretized(self) -> bool:
        """Whether the first phase (the action quantiser) is over."""
        return bool(self.vqbet.action_head.vqvae_model.discretized)

    @property
    def history_keys(self) -> list[str]:
        return [*self.config.image_features, OBS_STATE]

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        head = self.vqbet.action_head
        if not self.discretized:
            return head.discretize(self.config.n_vqvae_training_steps, batch[ACTION])
        _, loss, parts = self.vqbet(self._with_images(batch), rollout=False)
        return loss, parts

    @torch.no_grad()
    def predict_chunk(self, batch: Batch, noise: Tensor | None = None) -> Tensor:
        """`(B, action_chunk_size, action_dim)` from `(B, n_obs_steps, ...)` histories; the codes
        are sampled from torch's global generator."""
        self.eval()
        if not self.discretized:
            log.warning(
                "this VQ-BeT has no trained action quantiser yet: its actions mean nothing",
                hint="train past --policy.n_vqvae_training_steps",
            )
        actions, _, _ = self.vqbet(self._with_images(batch), rollout=True)
        return actions

    def _with_images(self, batch: Batch) -> dict[str, Any]:
        check_steps(batch, self.config.n_obs_steps)
        out = dict(batch)
        # (B, S, N, C, H, W): every camera of every step.
        out["observation.images"] = torch.stack(
            [batch[key] for key in self.config.image_features], dim=-4
        )
        return out

    def parameter_groups(self) -> list[dict[str, Any]]:
        """LeRobot's groups: the GPT's decayed weights with the encoders and heads; the VQ-VAE
        at its own lr and weight decay; the GPT's biases and norms without decay."""
        model, head = self.vqbet, self.vqbet.action_head
        decay, no_decay = model.policy.decay_groups()
        bins = (
            [head.map_to_cbet_preds_primary_bin, head.map_to_cbet_preds_secondary_bin]
            if self.config.sequentially_select
            else [head.map_to_cbet_preds_bin]
        )
        decay = [
            *decay,
            *model.rgb_encoder.parameters(),
            *model.state_projector.parameters(),
            *model.rgb_feature_projector.parameters(),
            model.action_token,
            *head.map_to_cbet_preds_offset.parameters(),
            *(p for module in bins for p in module.parameters()),
        ]
        vqvae = head.vqvae_model
        return [
            {"params": decay},
            {
                "params": [*vqvae.encoder.parameters(), *vqvae.decoder.parameters()],
                "weight_decay": self.config.optimizer_vqvae_weight_decay,
                "lr": self.config.optimizer_vqvae_lr,
            },
            {"params": no_decay, "weight_decay": 0.0},
        ]


def _check_features(config: VQBeTConfig) -> None:
    where = "policy.input_features"
    if config.robot_state_feature is None:
        raise ConfigError("VQ-BeT needs the robot state 'observation.state'", where=where)
    images = config.image_features
    if len(images) != 1:
        raise ConfigError(
            f"VQ-BeT reads exactly one camera, got {len(images)}"
            + (f" ({', '.join(images)})" if images else ""),
            where=where,
            hint="train on a dataset with one camera, or rename/drop cameras (--rename_map)",
        )
    others = [k for k in config.input_features if k != OBS_STATE and k not in images]
    if others:
        # LeRobot counts every input as one token per step; it builds tokens only for the
        # state and the cameras, so any other input would misplace its query tokens.
        raise ConfigError(
            f"VQ-BeT reads the state and one camera only, not {', '.join(others)}",
            where=where,
            hint="use a dataset without these features, or another policy (diffusion, act)",
        )
    tokens = config.n_obs_steps * (len(images) + 2) + config.n_action_pred_token - 1
    if tokens > config.gpt_block_size:
        raise ConfigError(
            f"the GPT reads {tokens} tokens but gpt_block_size is {config.gpt_block_size}",
            where="policy.gpt_block_size",
            hint=f"set --policy.gpt_block_size={tokens} or more",
        )


class VQBeTModel(nn.Module):
    def __init__(self, config: VQBeTConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__()
        self.config = config
        self.rgb_encoder = vqbet_rgb_encoder(config, load_backbone_weights=load_backbone_weights)
        self.num_images = len(config.image_features)
        self.action_token = nn.Parameter(torch.randn(1, 1, config.gpt_input_dim))
        state_dim = config.robot_state_feature.shape[0]  # type: ignore[union-attr]
        self.state_projector = MLP(state_dim, [config.gpt_input_dim])
        self.rgb_feature_projector = MLP(self.rgb_encoder.feature_dim, [config.gpt_input_dim])
        self.policy = GPT(config)
        self.action_head = VQBeTHead(config)
        # Row i: the actions that query token i predicts (a window of action_chunk_size).
        n_queries = config.n_action_pred_token + config.n_obs_steps - 1
        rows = [torch.arange(i, i + config.action_chunk_size) for i in range(n_queries)]
        self.register_buffer("select_target_actions_indices", torch.stack(rows))

    def forward(self, batch: Batch, *, rollout: bool) -> tuple[Tensor, Tensor, dict[str, float]]:
        """Rollout: the current step's chunk `(B, action_chunk_size, action_dim)`. Training:
        the head's outputs and the loss with its parts."""
        config = self.config
        state = batch[OBS_STATE]
        batch_size, n_steps = state.shape[:2]
        images = batch["observation.images"]  # (B, S, N, C, H, W)
        features = self.rgb_encoder(images.flatten(0, 2)).view(
            batch_size, n_steps, self.num_images, -1
        )
        rgb_tokens = self.rgb_feature_projector(features)
        per_step = [
            *(rgb_tokens[:, :, i] for i in range(self.num_images)),
            self.state_projector(state),
            self.action_token.expand(batch_size, n_steps, -1),
        ]
        tokens = torch.stack(per_step, dim=2).flatten(1, 2)  # (B, S * tokens_per_step, D)
        n_future = config.n_action_pred_token - 1
        future = self.action_token.repeat(batch_size, n_future, 1)
        outputs = self.policy(torch.cat([tokens, future], dim=1))

        tokens_per_step = self.num_images + 2
        queries = np.arange(n_steps) * tokens_per_step + tokens_per_step - 1
        query_outputs = [outputs[:, queries]]
        if n_future > 0:
            query_outputs.append(outputs[:, -n_future:])
        head_out = self.action_head(torch.cat(query_outputs, dim=1))
        predicted = head_out["predicted_action"]  # (B, queries, chunk * action_dim)
        if rollout:
            current = predicted[:, n_steps - 1].reshape(batch_size, config.action_chunk_size, -1)
            return current, torch.zeros(()), {}
        targets = batch[ACTION][:, self.select_target_actions_indices]  # (B, Q, chunk, A)
        loss, parts = self.action_head.loss(head_out, targets)
        return predicted, loss, parts


class VQBeTHead(nn.Module):
    """Code logits and offsets from the GPT's features; the VQ-VAE that decodes codes."""

    def __init__(self, config: VQBeTConfig) -> None:
        super().__init__()
        self.config = config
        self.vqvae_model = VqVae(config)
        n_embed = config.vqvae_n_embed
        in_dim = config.gpt_output_dim
        if config.sequentially_select:
            self.map_to_cbet_preds_primary_bin = MLP(in_dim, [n_embed])
            # The secondary code is predicted knowing the primary one (one-hot).
            self.map_to_cbet_preds_secondary_bin = MLP(in_dim + n_embed, [n_embed])
        else:
            self.map_to_cbet_preds_bin = MLP(in_dim, [VQ_LAYERS * n_embed])
        offsets = VQ_LAYERS * n_embed * config.action_chunk_size * config.action_dim
        self.map_to_cbet_preds_offset = MLP(in_dim, [offsets])

    def discretize(self, n_steps: int, actions: Tensor) -> tuple[Tensor, dict[str, float]]:
        """One step of the first phase on every window of action_chunk_size actions."""
        chunk = self.config.action_chunk_size
        windows = actions.unfold(1, chunk, 1)  # (B, windows, A, chunk)
        windows = windows.permute(1, 0, 3, 2).flatten(0, 1)  # window-major, as LeRobot's cat
        loss, recon_error, codes = self.vqvae_model.vqvae_forward(windows)
        parts = {
            "n_different_codes": float(
                sum(len(torch.unique(codes[:, i])) for i in range(VQ_LAYERS))
            ),
            "n_different_combinations": float(len(torch.unique(codes, dim=0))),
            "recon_l1_error": float(recon_error),
        }
        vqvae = self.vqvae_model
        vqvae.optimized_steps += 1
        if vqvae.optimized_steps >= n_steps:
            vqvae.discretized.fill_(True)
            vqvae.vq_layer.freeze_codebook.fill_(True)
            vqvae.eval()
            log.info("VQ-BeT's action quantiser is trained; the GPT trains from now on")
        return loss, parts

    def forward(self, features: Tensor) -> dict[str, Tensor]:
        config = self.config
        batch, n_queries, _ = features.shape
        x = features.flatten(0, 1)  # (NT, D)
        n = x.shape[0]
        offsets = self.map_to_cbet_preds_offset(x).view(n, VQ_LAYERS, config.vqvae_n_embed, -1)
        temperature = config.bet_softmax_temperature
        if config.sequentially_select:
            primary_logits = self.map_to_cbet_preds_primary_bin(x)
            primary = torch.multinomial(torch.softmax(primary_logits / temperature, -1), 1)[:, 0]
            one_hot = F.one_hot(primary, num_classes=config.vqvae_n_embed)
            secondary_logits = self.map_to_cbet_preds_secondary_bin(torch.cat((x, one_hot), 1))
            secondary = torch.multinomial(torch.softmax(secondary_logits / temperature, -1), 1)
            codes = torch.stack((primary, secondary[:, 0]), dim=1)
            logits = torch.stack([primary_logits, secondary_logits], dim=1)
        else:
            logits = self.map_to_cbet_preds_bin(x).view(n, VQ_LAYERS, config.vqvae_n_embed)
            probs = torch.softmax(logits / temperature, dim=-1)
            codes = torch.multinomial(probs.view(-1, config.vqvae_n_embed), 1).view(n, VQ_LAYERS)

        rows = torch.arange(n, device=x.device).unsqueeze(1)
        layers = torch.arange(VQ_LAYERS, device=x.device).unsqueeze(0)
        offset = offsets[rows, layers, codes].sum(dim=1)  # (NT, chunk * A)
        with torch.no_grad():
            decoded = self.vqvae_model.decode(self.vqvae_model.vq_layer.embeddings_of(codes))
        predicted = decoded + offset.view(n, config.action_chunk_size, -1)
        return {
            "cbet_logits": logits,
            "predicted_action": predicted.reshape(batch, n_queries, -1),
            "sampled_centers": codes,
            "decoded_action": decoded,
        }

    def loss(self, out: dict[str, Tensor], targets: Tensor) -> tuple[Tensor, dict[str, float]]:
        """`targets` `(B, Q, chunk, A)`: focal losses on the two codes the VQ-VAE gives the true
        chunk, L1 on the chunk itself."""
        config = self.config
        actions = targets.flatten(0, 1)  # (NT, chunk, A)
        predicted = out["predicted_action"].reshape(actions.shape)
        with torch.no_grad():
            true_codes = self.vqvae_model.codes_of(actions)
        offset_loss = F.l1_loss(actions, predicted)
        logits = out["cbet_logits"]
        code_loss = (
            focal_loss(logits[:, 0], true_codes[:, 0]) * config.primary_code_loss_weight
            + focal_loss(logits[:, 1], true_codes[:, 1]) * config.secondary_code_loss_weight
        )
        loss = code_loss + config.offset_loss_weight * offset_loss
        sampled = out["sampled_centers"]
        error = (actions - predicted).abs()
        parts = {
            "classification_loss": code_loss.item(),
            "offset_loss": offset_loss.item(),
            "equal_primary_code_rate": (true_codes[:, 0] == sampled[:, 0]).float().mean().item(),
            "equal_secondary_code_rate": (true_codes[:, 1] == sampled[:, 1]).float().mean().item(),
            "vq_action_error": (actions - out["decoded_action"]).abs().mean().item(),
            "offset_action_error": error.mean().item(),
            "action_error_max": error.max().item(),
            "action_mse_error": ((actions - predicted) ** 2).mean().item(),
        }
        return loss, parts


def focal_loss(logits: Tensor, target: Tensor, gamma: float = 2.0) -> Tensor:
    """Cross-entropy down-weighting the codes already predicted well: -(1 - p)^gamma log p."""
    log_p = F.log_softmax(logits, dim=-1).gather(-1, target.view(-1, 1)).view(-1)
    return (-((1 - log_p.exp()) ** gamma) * log_p).mean()


class VqVae(nn.Module):
    """Action chunks `(N, chunk, A)` ⇄ latent vectors, quantised by a two-layer residual VQ."""

    def __init__(self, config: VQBeTConfig) -> None:
        super().__init__()
        self.config = config
        # Saved: a checkpoint past the first phase starts (or resumes) in the second.
        self.register_buffer("discretized", torch.tensor(False))
        # Steps of the first phase taken in this process (not saved, as in LeRobot).
        self.optimized_steps = 0
        self.vq_layer = ResidualVQ(
            dim=config.vqvae_embedding_dim,
            num_quantizers=VQ_LAYERS,
            codebook_size=config.vqvae_n_embed,
        )
        flat = config.action_dim * config.action_chunk_size
        hidden, embedding = config.vqvae_enc_hidden_dim, config.vqvae_embedding_dim
        self.encoder = MLP(flat, [hidden, hidden, embedding])
        self.decoder = MLP(embedding, [hidden, hidden, flat])

    def decode(self, latent: Tensor) -> Tensor:
        return self.decoder(latent).view(latent.shape[0], self.config.action_chunk_size, -1)

    def codes_of(self, chunks: Tensor) -> Tensor:
        """`(N, chunk, A)` -> codes `(N, 2)`."""
        _, codes, _ = self.vq_layer(self.encoder(chunks.flatten(1)))
        return codes

    def vqvae_forward(self, chunks: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The first phase's loss: L1 reconstruction + 5 * the commitment losses; also the
        reconstruction error and the codes."""
        flat = chunks.flatten(1)
        quantized, codes, commitment = self.vq_layer(self.encoder(flat))
        reconstruction = (flat - self.decoder(quantized)).abs().mean()
        loss = reconstruction + commitment.sum() * 5
        return loss, reconstruction.detach(), codes


class MLP(nn.Sequential):
    """Linear layers with ReLUs between them (none after the last)."""

    def __init__(self, in_dim: int, dims: list[int]) -> None:
        layers: list[nn.Module] = []
        for dim in dims[:-1]:
            layers += [nn.Linear(in_dim, dim), nn.ReLU()]
            in_dim = dim
        layers.append(nn.Linear(in_dim, dims[-1]))
        super().__init__(*layers)


def vqbet_rgb_encoder(
    config: VQBeTConfig, *, load_backbone_weights: bool = True
) -> KeypointEncoder:
    """One image `(B, C, H, W)` -> `(B, 2 * keypoints)`: crop, ResNet trunk, spatial softmax."""
    return KeypointEncoder(
        config, crop_shape=config.crop_shape, load_backbone_weights=load_backbone_weights
    )
