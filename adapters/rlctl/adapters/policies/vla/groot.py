"""GR00T N1.7 (NVIDIA): a Qwen3-VL backbone and a flow-matching DiT action head with
per-embodiment projectors, as LeRobot 0.6.1's `GrootPolicy` builds and runs it.

    backbone:   images + prompt -> Qwen3-VL cut after `select_layer` layers -> tokens (B, L, D)
                -> LayerNorm (vlln) -> self-attention blocks (vl_self_attention)
    state:      state_encoder[embodiment](state)                         -> one token
    actions:    action_encoder[embodiment](x_t, bucket(t)) + positions   -> one token each
    DiT:        [state, actions] attending to the VL tokens (alternately text and image tokens,
                self-attention in between), conditioned on the time
    output:     action_decoder[embodiment](DiT's last tokens)            = velocity

"[embodiment]" is a `CategorySpecificLinear`: one weight matrix per embodiment id, picked per
batch row. Flow matching runs from noise (t = 0) to actions (t = 1), the velocity being
actions - noise, times discretised into `num_timestep_buckets`; rlctl's sampler
(`flow_matching.euler_integrate`) runs the other way (time 1 -> 0, velocity noise - actions), so
the head gives it the negated velocity at t = 1 - time: the same Euler steps.

Real-time chunking is GR00T's own (`rtc.overlap_blend`): the start of the chunk continues the
previous one's leftover. `speed_paths` (flow_matching's switch): the backbone skips the unused
lm_head's logits; the DiT's cross-attention keys and values are computed once per chunk, over
the tokens each block sees, instead of at every Euler step.

The architecture comes from the base model (`base_model_path`: its config.json over LeRobot's
N1.7 defaults, `GR00T_N1_7_DEFAULTS`); its weights, when the folder has them, are the starting
point of training. Parameter names are LeRobot's (`_groot_model.backbone.model...`,
`_groot_model.action_head...`), so a LeRobot `model.safetensors` loads as it is.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import attrs
import numpy as np
import structlog
import torch
import torch.nn.functional as F  # noqa: N812
from safetensors import SafetensorError, safe_open
from torch import Tensor, nn

from rlctl.adapters.policies.base import Batch, TrainingWindow
from rlctl.adapters.policies.processors import DeviceStep
from rlctl.adapters.policies.vla.backbones.qwen3vl import (
    Qwen3Backbone,
    qwen3vl_config,
)
from rlctl.adapters.policies.vla.dit import DiT, SelfAttentionTransformer
from rlctl.adapters.policies.vla.flow_matching import (
    FlowMatching,
    Velocity,
    euler_integrate,
    euler_times,
)
from rlctl.adapters.policies.vla.groot_checkpoint import (
    CheckpointAssets,
    base_folder,
    checkpoint_action_horizon,
    checkpoint_assets,
    model_version,
)
from rlctl.adapters.policies.vla.groot_processors import (
    DEFAULT_CROP_SIZE,
    DEFAULT_TARGET_SIZE,
    EMBODIMENT_MAPPING,
    DecodeConfig,
    EncodeConfig,
    GrootActionDecode,
    GrootActionUnpack,
    GrootPackInputs,
    GrootVLMEncode,
    PackConfig,
    UnpackConfig,
    relative_action_steps,
)
from rlctl.adapters.policies.vla.loading import built_dtypes, finish_meta_load, is_on_meta
from rlctl.adapters.policies.vla.policy import GuidedChunking
from rlctl.adapters.policies.vla.rtc import PrefixGuidance, overlap_blend, strengthened
from rlctl.domain.acting import ActionBuffer, ActionQueue
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import FeatureKind
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.policies.groot import (
    DECODE_LIBERO,
    GROOT_N1_7_BACKBONE_MODEL,
    N1_5_REMOVAL_GUIDANCE,
    NATIVE_ACTION_HORIZON,
    GrootConfig,
)
from rlctl.domain.processors import (
    AddBatchDimension,
    Normalizer,
    ProcessorStep,
    RenameObservations,
)

log = structlog.get_logger(__name__)

# LeRobot's `GR00T_N1_7_DEFAULTS`: NVIDIA's N1.7 architecture, under any base config.json.
GR00T_N1_7_DEFAULTS: dict[str, Any] = {
    "model_dtype": "bfloat16",
    "model_name": GROOT_N1_7_BACKBONE_MODEL,
    "backbone_model_type": "qwen",
    "tune_top_llm_layers": 0,
    "backbone_embedding_dim": 2048,
    "tune_llm": False,
    "tune_visual": False,
    "select_layer": 16,
    "use_flash_attention": False,
    "max_state_dim": 132,
    "max_action_dim": 132,
    "action_horizon": 40,
    "hidden_size": 1024,
    "input_embedding_dim": 1536,
    "state_history_length": 1,
    "add_pos_embed": True,
    "use_vlln": True,
    "max_seq_len": 1024,
    "use_alternate_vl_dit": True,
    "attend_text_every_n_blocks": 2,
    "diffusion_model_cfg": {
        "positional_embeddings": None,
        "num_layers": 32,
        "num_attention_heads": 32,
        "attention_head_dim": 48,
        "norm_type": "ada_norm",
        "dropout": 0.2,
        "final_dropout": True,
        "output_dim": 1024,
        "interleave_self_attention": True,
    },
    "vl_self_attention_cfg": {
        "positional_embeddings": None,
        "num_layers": 4,
        "num_attention_heads": 32,
        "attention_head_dim": 64,
        "dropout": 0.2,
        "final_dropout": True,
    },
    "num_inference_timesteps": 4,
    "noise_beta_alpha": 1.5,
    "noise_beta_beta": 1.0,
    "noise_s": 0.999,
    "num_timestep_buckets": 1000,
    "tune_projector": True,
    "tune_diffusion_model": True,
    "tune_vlln": True,
    "state_dropout_prob": 0.2,
    "max_num_embodiments": 32,
    "rtc_ramp_rate": 6.0,
}
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
PREFIX = "_groot_model."
OBS_STATE_KEY = "observation.state"
LIBERO_EXECUTION_HORIZON = 8
ACTION_KEY = "action"
LM_HEAD = "_groot_model.backbone.model.lm_head.weight"
EMBEDDINGS = "_groot_model.backbone.model.model.language_model.embed_tokens.weight"
# A language layer in NVIDIA's keys: those past `select_layer` are not part of GR00T's backbone.
CUT_LAYER = re.compile(r"^backbone\.model\.model\.language_model\.layers\.(\d+)\.")


# -- the base model ----------------------------------------------------------------------------


def _trained_horizon(
    config: GrootConfig, checkpoint_horizon: Callable[[GrootConfig], int | None]
) -> int:
    """The chunk trained on: the config's, at most the native 40, and at most a raw
    checkpoint's chunk for the embodiment (its pre-processor keeps no more)."""
    horizon = min(config.chunk_size, NATIVE_ACTION_HORIZON)
    given = checkpoint_horizon(config)
    return horizon if given is None or given < 1 else min(horizon, given)


class BaseModel(NamedTuple):
    """A GR00T N1.7 base model: its settings (config.json over the N1.7 defaults) and, when the
    folder has them, its weight files."""

    settings: dict[str, Any]
    weights: list[Path]


def base_model(config: GrootConfig) -> BaseModel:
    """The base model `config.base_model_path` names: a local folder, a Hub id in the Hub cache,
    or NVIDIA's N1.7 (its architecture, random weights) when neither is at hand."""
    folder = base_folder(config.base_model_path)
    if folder is None:
        settings = copy.deepcopy(GR00T_N1_7_DEFAULTS)
        return BaseModel(_overridden(settings, config), [])
    path = folder / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"cannot read the GR00T base model's config: {err}",
            where=str(path),
            hint="the base model folder needs a GR00T N1.7 config.json",
        ) from err
    if not isinstance(data, dict):
        raise ConfigError("the GR00T base model's config.json is not an object", where=str(path))
    if model_version(data) == "n1.5":
        raise ConfigError(
            "the base model is a GR00T N1.5 checkpoint", where=str(path), hint=N1_5_REMOVAL_GUIDANCE
        )
    settings = copy.deepcopy(GR00T_N1_7_DEFAULTS)
    settings.update(data)
    return BaseModel(_overridden(settings, config), _weight_files(folder))


def _weight_files(folder: Path) -> list[Path]:
    if (folder / WEIGHTS_FILE).is_file():
        return [folder / WEIGHTS_FILE]
    index = folder / WEIGHTS_INDEX
    if index.is_file():
        mapping = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        return [folder / name for name in sorted(set(mapping.values()))]
    return []


def _overridden(settings: dict[str, Any], config: GrootConfig) -> dict[str, Any]:
    """The policy's own settings over the base model's, as LeRobot's `from_pretrained` passes
    them (the tuning switches; inference steps and RTC ramp only when set)."""
    for key in (
        "tune_llm",
        "tune_visual",
        "tune_projector",
        "tune_diffusion_model",
        "tune_vlln",
        "tune_top_llm_layers",
        "use_flash_attention",
    ):
        settings[key] = getattr(config, key)
    if config.num_inference_timesteps is not None:
        settings["num_inference_timesteps"] = config.num_inference_timesteps
    if config.rtc_ramp_rate is not None:
        settings["rtc_ramp_rate"] = config.rtc_ramp_rate
    return settings


def backbone_name(config: GrootConfig) -> str:
    """The folder the backbone's processor is read from: the base model's backbone."""
    return str(base_model(config).settings.get("model_name", GROOT_N1_7_BACKBONE_MODEL))


# -- the action head ---------------------------------------------------------------------------


class CategorySpecificLinear(nn.Module):
    """One linear layer per embodiment: row b uses the weights of `ids[b]`."""

    def __init__(self, categories: int, inputs: int, outputs: int) -> None:
        super().__init__()
        self.W = nn.Parameter(0.02 * torch.randn(categories, inputs, outputs))
        self.b = nn.Parameter(torch.zeros(categories, outputs))

    def forward(self, x: Tensor, ids: Tensor) -> Tensor:
        return torch.bmm(x, self.W[ids]) + self.b[ids].unsqueeze(1)


class CategorySpecificMLP(nn.Module):
    def __init__(self, categories: int, inputs: int, hidden: int, outputs: int) -> None:
        super().__init__()
        self.layer1 = CategorySpecificLinear(categories, inputs, hidden)
        self.layer2 = CategorySpecificLinear(categories, hidden, outputs)

    def forward(self, x: Tensor, ids: Tensor) -> Tensor:
        return self.layer2(F.relu(self.layer1(x, ids)), ids)


def bucket_encoding(timesteps: Tensor, dim: int) -> Tensor:
    """LeRobot's `SinusoidalPositionalEncoding` of discretised times (B, T) -> (B, T, dim)."""
    timesteps = timesteps.float()
    half = dim // 2
    exponent = -torch.arange(half, dtype=torch.float, device=timesteps.device) * (
        torch.log(torch.tensor(10000.0)) / half
    )
    freqs = timesteps.unsqueeze(-1) * exponent.exp()
    return torch.cat([torch.sin(freqs), torch.cos(freqs)], dim=-1)


class MultiEmbodimentActionEncoder(nn.Module):
    def __init__(self, action_dim: int, hidden: int, categories: int) -> None:
        super().__init__()
        self.W1 = CategorySpecificLinear(categories, action_dim, hidden)
        self.W2 = CategorySpecificLinear(categories, 2 * hidden, hidden)
        self.W3 = CategorySpecificLinear(categories, hidden, hidden)
        self.hidden = hidden

    def forward(self, actions: Tensor, buckets: Tensor, ids: Tensor) -> Tensor:
        horizon = actions.shape[1]
        embedded = self.W1(actions, ids)
        times = bucket_encoding(buckets.unsqueeze(1).expand(-1, horizon), self.hidden)
        mixed = self.W2(torch.cat([embedded, times.to(embedded.dtype)], dim=-1), ids)
        return self.W3(mixed * torch.sigmoid(mixed), ids)


class GrootInputs(NamedTuple):
    """One batch as the action head reads it."""

    features: Tensor  # (B, L, D) the VL tokens after vlln and the VL self-attention
    attention_mask: Tensor  # (B, L) bool: a token, not padding
    image_mask: Tensor  # (B, L) bool: an image token
    state_features: Tensor  # (B, 1, E)
    embodiment: Tensor  # (B,) long


class GrootActionHead(FlowMatching):
    """LeRobot's `GR00TN17ActionHead` (`_groot_model.action_head`)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__()
        self.config = settings
        s = settings
        self.model = DiT(
            s["diffusion_model_cfg"],
            cross_attention_dim=s["backbone_embedding_dim"],
            alternate_vl=bool(s["use_alternate_vl_dit"]),
            attend_text_every_n_blocks=int(s["attend_text_every_n_blocks"]),
        )
        self.action_dim = int(s["max_action_dim"])
        self.action_horizon = int(s["action_horizon"])
        categories = int(s["max_num_embodiments"])
        self.state_encoder = CategorySpecificMLP(
            categories,
            int(s["max_state_dim"]) * int(s["state_history_length"]),
            int(s["hidden_size"]),
            int(s["input_embedding_dim"]),
        )
        self.action_encoder = MultiEmbodimentActionEncoder(
            self.action_dim, int(s["input_embedding_dim"]), categories
        )
        self.action_decoder = CategorySpecificMLP(
            categories, int(s["hidden_size"]), int(s["hidden_size"]), self.action_dim
        )
        width = int(s["backbone_embedding_dim"])
        self.vlln: nn.Module = nn.LayerNorm(width) if s["use_vlln"] else nn.Identity()
        vl_settings = s.get("vl_self_attention_cfg") or {}
        self.vl_self_attention: nn.Module = (
            SelfAttentionTransformer(vl_settings)
            if vl_settings.get("num_layers", 0) > 0
            else nn.Identity()
        )
        if s["add_pos_embed"]:
            self.position_embedding = nn.Embedding(
                int(s["max_seq_len"]), int(s["input_embedding_dim"])
            )
            nn.init.normal_(self.position_embedding.weight, mean=0.0, std=0.02)
        self.set_trainable_parameters(
            bool(s["tune_projector"]), bool(s["tune_diffusion_model"]), bool(s["tune_vlln"])
        )

    def set_trainable_parameters(self, projector: bool, diffusion: bool, vlln: bool) -> None:
        self.tune_projector, self.tune_diffusion_model, self.tune_vlln = projector, diffusion, vlln
        for parameter in self.parameters():
            parameter.requires_grad = True
        for module, tuned in self._tuned_parts():
            if not tuned:
                module.requires_grad_(False)

    def _tuned_parts(self) -> list[tuple[nn.Module, bool]]:
        parts = [
            (self.state_encoder, self.tune_projector),
            (self.action_encoder, self.tune_projector),
            (self.action_decoder, self.tune_projector),
            (self.model, self.tune_diffusion_model),
            (self.vlln, self.tune_vlln),
            (self.vl_self_attention, self.tune_vlln),
        ]
        if self.config["add_pos_embed"]:
            parts.append((self.position_embedding, self.tune_projector))
        return parts

    def frozen_to_eval(self) -> None:
        if self.training:
            for module, tuned in self._tuned_parts():
                if not tuned:
                    module.eval()

    @property
    def euler_steps(self) -> int:
        return int(self.config["num_inference_timesteps"])

    def encode(
        self,
        features: Tensor,
        attention_mask: Tensor,
        image_mask: Tensor,
        state: Tensor,
        embodiment: Tensor,
    ) -> GrootInputs:
        features = self.vl_self_attention(self.vlln(features))
        if state.shape[1] != self.config["state_history_length"]:
            raise ConfigError(
                f"the state has {state.shape[1]} steps, the base model reads "
                f"{self.config['state_history_length']}",
                where="state",
            )
        state_features = self.state_encoder(state.view(state.shape[0], 1, -1), embodiment)
        return GrootInputs(features, attention_mask, image_mask, state_features, embodiment)

    def predict_velocity(
        self, inputs: GrootInputs, x: Tensor, buckets: Tensor, prepared: Any = None
    ) -> Tensor:
        """The head's prediction (actions - noise direction) at noisy actions `x` and
        discretised times `buckets` (B,)."""
        actions = self.action_encoder(x, buckets, inputs.embodiment)
        if self.config["add_pos_embed"]:
            positions = torch.arange(actions.shape[1], dtype=torch.long, device=actions.device)
            actions = actions + self.position_embedding(positions).unsqueeze(0)
        tokens = torch.cat((inputs.state_features, actions), dim=1)
        out = self.model(
            tokens,
            inputs.features,
            buckets,
            image_mask=inputs.image_mask,
            attention_mask=inputs.attention_mask,
            prepared=prepared,
        )
        prediction: Tensor = self.action_decoder(out, inputs.embodiment)
        return prediction[:, -x.shape[1] :]

    def _field(self, inputs: GrootInputs, prepared: Any) -> Velocity:
        steps = self.euler_steps
        buckets = int(self.config["num_timestep_buckets"])

        def velocity(x_t: Tensor, time: Tensor) -> Tensor:
            # rlctl's time 1 -> 0 is GR00T's 0 -> 1; the step index gives LeRobot's bucket.
            step = round((1.0 - float(time.reshape(-1)[0])) * steps)
            bucket = int(step / float(steps) * buckets)
            t = torch.full((x_t.shape[0],), bucket, device=x_t.device)
            return -self.predict_velocity(inputs, x_t, t, prepared)

        return velocity

    def plain_velocity_field(self, inputs: Any, times: list[Tensor]) -> Velocity:
        return self._field(inputs, None)

    def fast_velocity_field(self, inputs: Any, times: list[Tensor]) -> Velocity:
        prepared = self.model.context(inputs.features, inputs.image_mask, inputs.attention_mask)
        return self._field(inputs, prepared)

    @torch.no_grad()
    def sample_actions(
        self, inputs: Any, noise: Tensor, guidance: PrefixGuidance | None = None
    ) -> Tensor:
        """Euler steps from `noise`; with `guidance`, GR00T's overlap with the leftover."""
        blend = None
        if guidance is not None:
            blend = overlap_blend(noise, guidance, float(self.config["rtc_ramp_rate"]))
        start, strength = blend if blend is not None else (noise, None)
        steps = self.euler_steps
        times = euler_times(noise, steps)
        velocity = strengthened(self.velocity_field(inputs, times), strength)
        return euler_integrate(velocity, start, steps, times)

    def sample_time(self, batch: int, device: torch.device) -> Tensor:
        beta = torch.distributions.Beta(
            torch.tensor(float(self.config["noise_beta_alpha"])),
            torch.tensor(float(self.config["noise_beta_beta"])),
            validate_args=False,
        )
        sample = beta.sample(torch.Size([batch])).to(device)
        return (1 - sample) * float(self.config["noise_s"])

    def loss(self, inputs: GrootInputs, actions: Tensor, action_mask: Tensor) -> Tensor:
        """GR00T's masked flow-matching loss on one batch (state dropout while training)."""
        state_features = inputs.state_features
        drop = float(self.config["state_dropout_prob"])
        if self.training and drop > 0:
            dropped = torch.rand(state_features.shape[0], device=state_features.device) < drop
            state_features = state_features * (1 - dropped[:, None, None].to(state_features.dtype))
        noise = torch.randn(actions.shape, device=actions.device, dtype=actions.dtype)
        t = self.sample_time(actions.shape[0], actions.device).to(actions.dtype)[:, None, None]
        noisy = (1 - t) * noise + t * actions
        velocity = actions - noise
        buckets = (t[:, 0, 0] * int(self.config["num_timestep_buckets"])).long()
        prediction = self.predict_velocity(
            inputs._replace(state_features=state_features), noisy, buckets
        )
        errors = F.mse_loss(prediction, velocity, reduction="none") * action_mask
        return errors.sum() / (action_mask.sum() + 1e-6)


class GR00TN17(nn.Module):
    """LeRobot's `GR00TN17` (`_groot_model`): the backbone and the action head."""

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__()
        attention = "sdpa"
        if settings.get("use_flash_attention"):
            log.warning("flash attention is not used by rlctl's GR00T; SDPA runs instead")
        self.backbone = Qwen3Backbone(
            qwen3vl_config(str(settings["model_name"])),
            select_layer=int(settings["select_layer"]),
            tune_llm=bool(settings["tune_llm"]),
            tune_visual=bool(settings["tune_visual"]),
            tune_top_llm_layers=int(settings["tune_top_llm_layers"]),
            attention=attention,
        )
        self.action_head = GrootActionHead(settings)


def _image_geometry(assets: CheckpointAssets | None) -> dict[str, Any]:
    """LeRobot's: the raw checkpoint's image sizing when its processor config gives a target
    size, else the geometry N1.7's backbone was trained on."""
    if assets is None or assets.image_target_size is None:
        return {
            "image_crop_size": list(DEFAULT_CROP_SIZE),
            "image_target_size": list(DEFAULT_TARGET_SIZE),
            "use_albumentations": assets.use_albumentations if assets else False,
            "letter_box_transform": assets.letter_box_transform if assets else False,
        }
    return {
        "image_crop_size": assets.image_crop_size,
        "image_target_size": assets.image_target_size,
        "shortest_image_edge": assets.shortest_image_edge,
        "crop_fraction": assets.crop_fraction,
        "use_albumentations": assets.use_albumentations,
        "letter_box_transform": assets.letter_box_transform,
    }


# -- the policy --------------------------------------------------------------------------------


DECAY_EXCLUDED = re.compile(r"bias|layernorm|rmsnorm|(?:^|\.)norm(?:$|\.)|_norm(?:$|\.)")


class GrootPolicy(GuidedChunking):
    """GR00T N1.7 on batches its pack and encode steps prepared."""

    config_class: ClassVar[type[GrootConfig]] = GrootConfig
    config: GrootConfig
    # True once `compute_in_float32` ran (`vla.compute_dtype`): no bfloat16 autocast.
    float32_compute = False
    # LeRobot's GR00T acts without a state too (its pack step fills one in).
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"observation.state"})

    def __init__(self, config: GrootConfig, *, load_backbone_weights: bool = True) -> None:
        super().__init__(config)
        if not config.image_features:
            raise ConfigError(
                "GR00T reads at least one camera; the policy has no visual input feature",
                where="policy.input_features",
                hint="train on a dataset with a camera (observation.images.*)",
            )
        base = base_model(config)
        self.settings = base.settings
        # A raw checkpoint's chunk for this embodiment bounds the chunk given back, and its
        # embodiment ids (embodiment_id.json) pick the projectors (LeRobot's).
        self._checkpoint_horizon = checkpoint_action_horizon(config)
        assets = checkpoint_assets(config)
        self._embodiments = (
            assets.embodiment_mapping
            if assets and assets.embodiment_mapping
            else EMBODIMENT_MAPPING
        )
        self._check_sizes()
        # With base weights (or a checkpoint) to follow, the model is built on the meta device.
        from_file = not load_backbone_weights or bool(base.weights)
        with torch.device("meta") if from_file else nullcontext():
            self._groot_model = GR00TN17(self.settings)
        if not config.model_params_fp32:
            self._groot_model.to(torch.bfloat16)
        if load_backbone_weights and base.weights:
            self._load_base_weights(base.weights)
        elif load_backbone_weights:
            log.warning(
                "the GR00T base model has no weights here: the policy starts from random ones",
                base_model_path=config.base_model_path,
            )

    def _check_sizes(self) -> None:
        s, config = self.settings, self.config
        for key in ("max_state_dim", "max_action_dim"):
            if int(s[key]) != getattr(config, key):
                raise ConfigError(
                    f"policy.{key} ({getattr(config, key)}) differs from the base model's "
                    f"({s[key]}): its projectors are that wide",
                    where=f"policy.{key}",
                    hint=f"set --policy.{key}={s[key]}",
                )
        horizon = min(config.chunk_size, NATIVE_ACTION_HORIZON)
        if s["add_pos_embed"] and horizon > int(s["max_seq_len"]):
            raise ConfigError(
                f"chunk_size {config.chunk_size} exceeds the base model's max_seq_len "
                f"({s['max_seq_len']})",
                where="policy.chunk_size",
            )
        identity = self._embodiments.get(config.embodiment_tag, 0)
        if identity >= int(s["max_num_embodiments"]):
            raise ConfigError(
                f"embodiment {config.embodiment_tag!r} has id {identity}, but the base model "
                f"has projectors for {s['max_num_embodiments']} embodiments",
                where="policy.embodiment_tag",
                hint=f"use one of: {', '.join(sorted(self._embodiments))}",
            )

    def _load_base_weights(self, files: list[Path]) -> None:
        """The base model's weights (NVIDIA's keys: `backbone...`, `action_head...`), as
        transformers loads them into LeRobot's `GR00TN17`: language layers past `select_layer`
        (cut from the backbone) are skipped, the lm_head may be left to its tie; any other key
        missing or too many is refused with its name."""
        cut = int(self.settings["select_layer"])
        state: dict[str, Tensor] = {}
        for path in files:
            try:
                with safe_open(str(path), framework="pt") as handle:
                    for key in handle.keys():  # noqa: SIM118 (safe_open is no mapping)
                        layer = CUT_LAYER.match(key)
                        if layer is not None and int(layer.group(1)) >= cut:
                            continue
                        state[PREFIX + key] = handle.get_tensor(key)
            except (OSError, ValueError, RuntimeError, SafetensorError) as err:
                raise ConfigError(
                    f"cannot read the GR00T base model's weights: {err}",
                    where=str(path),
                    hint="the base model folder needs its safetensors files, as the "
                    "checkpoint's index (model.safetensors.index.json) lists them",
                ) from err
        expected = {*self.state_dict(), EMBEDDINGS}
        given = set(state)
        missing = sorted(
            expected - given - ({LM_HEAD, EMBEDDINGS} if given & {LM_HEAD, EMBEDDINGS} else set())
        )
        unexpected = sorted(given - expected)
        if missing or unexpected:
            parts = []
            for label, keys in (("missing", missing), ("unknown", unexpected)):
                if keys:
                    named = ", ".join(k.removeprefix(PREFIX) for k in keys[:4])
                    parts.append(f"{len(keys)} {label} ({named})")
            raise ConfigError(
                "the GR00T base model's weights do not fit its config.json: " + "; ".join(parts),
                where=str(files[0].parent),
                hint="the weights must be a GR00T N1.7 checkpoint's (keys backbone.model... and "
                "action_head..., as Isaac-GR00T and LeRobot save them) for the architecture "
                "its config.json describes",
            )
        self.load_state_dict(state, strict=True)

    @classmethod
    def training_window(cls, config: PolicyConfig) -> TrainingWindow:
        """The config's window cut to the chunk a raw checkpoint gives this embodiment (its
        pre-processor would cut the rest, so those frames are not read), the tail dropped
        with it: what `trained_action_horizon` reports once loaded."""
        window = super().training_window(config)
        assert isinstance(config, GrootConfig) and window.action_indices is not None
        indices = window.action_indices[: _trained_horizon(config, checkpoint_action_horizon)]
        return TrainingWindow(indices, max(0, len(indices) - 1))

    @property
    def trained_action_horizon(self) -> int:
        """The chunk this model trains on: the config's (at most the native 40), bounded by a
        raw checkpoint's chunk for the embodiment."""
        return _trained_horizon(self.config, lambda _: self._checkpoint_horizon)

    def action_buffer(self) -> ActionBuffer:
        """LeRobot's `_resolve_action_queue_steps`: at most `n_action_steps` of a chunk, and of a
        raw checkpoint's chunk for this embodiment; on `libero_sim`, 8 (NVIDIA's LIBERO rollout
        replans after 8 of its 16 actions)."""
        steps = [self.config.n_action_steps]
        if self._checkpoint_horizon is not None:
            steps.append(self._checkpoint_horizon)
            if self.config.embodiment_tag == "libero_sim":
                steps.append(min(self._checkpoint_horizon, LIBERO_EXECUTION_HORIZON))
        return ActionQueue(min(steps))

    @property
    def model(self) -> GrootActionHead:
        """The flow-matching head (`policy.model.speed_paths = False`: the reference path)."""
        return self._groot_model.action_head

    # -- weights --------------------------------------------------------------------------------

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        """LeRobot's keys; of the tied lm_head and input embeddings, the one LeRobot's files
        keep (the lm_head)."""
        state = super().state_dict(*args, **kwargs)
        prefix = kwargs.get("prefix", "")
        state.pop(prefix + EMBEDDINGS, None)
        return state

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        state = dict(state_dict)
        if LM_HEAD in state and EMBEDDINGS not in state:
            state[EMBEDDINGS] = state[LM_HEAD]
        elif EMBEDDINGS in state and LM_HEAD not in state:
            state[LM_HEAD] = state[EMBEDDINGS]
        on_meta = is_on_meta(self)
        dtypes = {**built_dtypes(self), EMBEDDINGS: self._embeddings.weight.dtype}
        result = super().load_state_dict(state, strict=strict, assign=assign or on_meta)
        backbone = self._groot_model.backbone.model
        backbone.lm_head.weight = backbone.get_input_embeddings().weight
        if on_meta:
            finish_meta_load(self, dtypes, "groot")
        return result

    @property
    def _embeddings(self) -> nn.Module:
        embeddings: nn.Module = self._groot_model.backbone.model.get_input_embeddings()
        return embeddings

    def parameter_groups(self) -> list[dict[str, Any]]:
        """Isaac-GR00T's: no weight decay on biases and norms."""
        decay, no_decay = [], []
        norms = {name for name, module in self.named_modules() if isinstance(module, nn.LayerNorm)}
        for name, parameter in self.named_parameters():
            if not parameter.requires_grad:
                continue
            owner = name.rsplit(".", 1)[0]
            if owner in norms or DECAY_EXCLUDED.search(name.lower()):
                no_decay.append(parameter)
            else:
                decay.append(parameter)
        return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]

    @property
    def dtype(self) -> torch.dtype:
        return torch.float32

    # -- running --------------------------------------------------------------------------------

    def computes_in_bfloat16(self) -> bool:
        # Float32 parameters under bfloat16 autocast (`use_bf16`), as LeRobot runs it.
        return (self.config.use_bf16 and not self.float32_compute) or super().computes_in_bfloat16()

    def _autocast(self) -> AbstractContextManager[Any]:
        if not self.config.use_bf16 or self.float32_compute:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def _inputs(self, batch: Batch) -> GrootInputs:
        features, attention_mask, image_mask = self._groot_model.backbone(batch)
        head = self._groot_model.action_head
        state = batch.get("state")
        rows = features.shape[0]
        if state is None:
            state = features.new_zeros(rows, 1, int(self.settings["max_state_dim"]))
        state = state.to(dtype=head.state_encoder.layer1.W.dtype)
        embodiment = batch.get("embodiment_id")
        if embodiment is None:
            identity = self._embodiments.get(self.config.embodiment_tag, 0)
            embodiment = torch.full((rows,), identity, device=features.device)
        return head.encode(features, attention_mask, image_mask, state, embodiment.long())

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, float]]:
        head = self._groot_model.action_head
        head.frozen_to_eval()
        with self._autocast():
            inputs = self._inputs(batch)
            actions = batch["action"].to(head.state_encoder.layer1.W.dtype)
            loss = head.loss(inputs, actions, batch["action_mask"].to(actions.dtype))
        return loss, {"loss": loss.item()}

    @torch.no_grad()
    def predict_guided_chunk(
        self, batch: Batch, guidance: PrefixGuidance | None, noise: Tensor | None = None
    ) -> Tensor:
        head = self._groot_model.action_head
        if guidance is not None and self.config.use_relative_actions:
            # LeRobot's: a leftover is relative to an older state (and step), so it is no prefix.
            log.debug("GR00T's RTC prefix is not used with relative actions")
            guidance = None
        with self._autocast():
            inputs = self._inputs(batch)
            shape = (inputs.features.shape[0], head.action_horizon, head.action_dim)
            if noise is None:
                noise = torch.randn(shape, dtype=inputs.features.dtype, device=self.device)
            noise = noise.to(device=self.device, dtype=inputs.features.dtype)
            actions = head.sample_actions(inputs, noise, guidance)
        limits = [actions.shape[1], self.config.chunk_size, self.config.n_action_steps]
        if self._checkpoint_horizon is not None:
            limits.append(self._checkpoint_horizon)
        horizon = max(1, min(limits))
        return actions[:, :horizon, : self.config.action_dim]

    # -- processors -----------------------------------------------------------------------------

    @classmethod
    def arrange_processors(
        cls, config: GrootConfig, pre: list[ProcessorStep], post: list[ProcessorStep]
    ) -> tuple[list[ProcessorStep], list[ProcessorStep]]:
        """LeRobot's GR00T pipelines: rename, batch, pack (min-max with the dataset's min/max),
        encode, device; unpack, device. No normaliser: GR00T normalises in its pack step.

        From a raw NVIDIA checkpoint folder (`groot_checkpoint`), its side files set the pack
        and encode steps as in LeRobot (prompt, cameras, horizons, image geometry, state
        dropout, embodiment ids), and when they hold statistics for the embodiment, those
        normalise (group by group) and decode the actions instead of the dataset's, relative
        to the state where the checkpoint says so (`use_relative_action`)."""
        normalizer = next(step for step in pre if isinstance(step, Normalizer))
        stats = {key: dict(per) for key, per in normalizer.stats.items()}
        keep = (RenameObservations, AddBatchDimension)
        front = [step for step in pre if isinstance(step, keep)]
        device = [step for step in pre if isinstance(step, DeviceStep)]
        action = config.action_feature
        env_action_dim = int(action.shape[0]) if action is not None and action.shape else 0
        assets = checkpoint_assets(config)
        native = assets is not None and assets.has_stats
        if config.use_relative_actions and native:
            raise ConfigError(
                "the raw GR00T checkpoint has its own statistics for embodiment "
                f"{config.embodiment_tag!r}, and --policy.use_relative_actions=true asks for "
                "relative actions from the dataset's (LeRobot then falls back to its generic "
                "relative step, which rlctl does not offer for GR00T)",
                where="policy.use_relative_actions",
                hint="drop --policy.use_relative_actions (the checkpoint's processor_config says "
                "whether its actions are relative), or train a new embodiment "
                "(--policy.embodiment_tag=new_embodiment)",
            )
        horizon = min(config.chunk_size, NATIVE_ACTION_HORIZON)
        if assets is not None and assets.max_action_horizon is not None:
            horizon = assets.max_action_horizon
        valid = horizon
        if assets is not None and assets.valid_action_horizon is not None:
            valid = assets.valid_action_horizon
        pack_config = PackConfig(
            action_horizon=horizon,
            valid_action_horizon=valid,
            max_state_dim=config.max_state_dim,
            max_action_dim=config.max_action_dim,
            embodiment_tag=config.embodiment_tag,
        )
        if assets is not None:
            pack_config = attrs.evolve(
                pack_config,
                video_horizon=assets.video_horizon,
                formalize_language=assets.formalize_language,
                embodiment_mapping=assets.embodiment_mapping,
                state_dropout_prob=assets.state_dropout_prob,
                clip_outliers=assets.clip_outliers,
                video_modality_keys=assets.video_modality_keys,
                raw_stats=assets.raw_stats or None,
                use_percentiles=assets.use_percentiles,
                modality_config=assets.modality_config or None,
            )
        pack_stats: dict[str, Any] = stats
        if native:
            assert assets is not None
            pack_stats = {
                key: {n: np.asarray(v, np.float32) for n, v in per.items()}
                for key, per in assets.stats.items()
            }
        elif not stats.get(OBS_STATE_KEY) and not stats.get(ACTION_KEY) and assets is not None:
            raise ConfigError(
                f"the raw GR00T checkpoint {config.base_model_path!r} has no statistics for "
                f"embodiment {config.embodiment_tag!r}, and no dataset statistics were given",
                where="policy.embodiment_tag",
                hint="train on a dataset (its statistics normalise the actions), or use an "
                "embodiment the checkpoint's statistics.json holds",
            )
        pack = GrootPackInputs(pack_config, pack_stats)
        pack.training = True  # a policy built here is one about to train (LeRobot's dataset_meta)
        geometry = _image_geometry(assets)
        encode = GrootVLMEncode(
            EncodeConfig(model_name=backbone_name(config), device=config.device, **geometry)
        )
        encode.training = True
        unpack: ProcessorStep
        if native:
            assert assets is not None
            unpack = GrootActionDecode(
                DecodeConfig(
                    env_action_dim=env_action_dim,
                    raw_stats=assets.raw_stats,
                    modality_config=assets.modality_config,
                    use_percentiles=assets.use_percentiles,
                    use_relative_action=assets.use_relative_action,
                    action_decode_transform=config.action_decode_transform,
                )
            )
        else:
            unpack = GrootActionUnpack(
                UnpackConfig(
                    env_action_dim=env_action_dim,
                    normalize_min_max=True,
                    clip_normalized_action=True,
                    libero_gripper_action=config.action_decode_transform == DECODE_LIBERO,
                ),
                stats,
            )
        out_device = [step for step in post if isinstance(step, DeviceStep)]
        if config.use_relative_actions:
            pack, unpack = relative_action_steps(config, stats, pack)
            pack.training = True
        return [*front, pack, encode, *device], [unpack, *out_device]

    @property
    def history_keys(self) -> list[str]:
        return [
            key
            for key, feature in self.config.input_features.items()
            if feature.kind in (FeatureKind.STATE, FeatureKind.VISUAL)
        ]

    def fsdp_units(self) -> list[nn.Module | tuple[nn.Module, ...]]:
        """Qwen3-VL's vision blocks and language layers, the VL refiner's and the DiT's
        transformer blocks."""
        from rlctl.adapters.policies.wrap_units import layer_stacks

        return list(layer_stacks(self._groot_model))
