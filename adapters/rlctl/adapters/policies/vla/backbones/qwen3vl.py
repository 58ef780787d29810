"""GR00T N1.7's vision-language backbone: a Qwen3-VL (Cosmos-Reason2-2B) cut after `select_layer`
decoder layers, as LeRobot 0.6.1's `Qwen3Backbone` runs it.

The model is `transformers`' `Qwen3VLForConditionalGeneration`, built from its config (the
weights come with the GR00T checkpoint), its unused lm_head tied to the input embeddings, the
decoder layers past `select_layer` removed. What the action head reads is the output of the
last kept decoder layer *before* the final norm (captured by a hook, as LeRobot does), the
attention mask, and which tokens are image tokens.

Positions are Qwen3-VL's multimodal (M-RoPE) ones with a fourth, text row in front, the layout
GR00T N1.7 was aligned with (LeRobot's `_ensure_legacy_qwen3_position_ids`).

`speed_paths`: the plain path runs the whole `Qwen3VLForConditionalGeneration` (its lm_head's
logits over the 151,936-token vocabulary included, as LeRobot does); the fast one runs the inner
`Qwen3VLModel`, whose hidden states are the same, and skips the logits nothing reads.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from rlctl.adapters.policies.vla.loading import require_transformers
from rlctl.domain.errors import ConfigError

# The Cosmos-Reason2-2B config LeRobot hard-codes (`_cosmos_reason2_qwen3_vl_config`).
COSMOS_REASON2 = "nvidia/Cosmos-Reason2-2B"
COSMOS_REASON2_CONFIG: dict[str, Any] = {
    "image_token_id": 151655,
    "video_token_id": 151656,
    "vision_start_token_id": 151652,
    "vision_end_token_id": 151653,
    "tie_word_embeddings": True,
    "text_config": {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "dtype": "bfloat16",
        "eos_token_id": 151645,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": 2048,
        "initializer_range": 0.02,
        "intermediate_size": 6144,
        "max_position_embeddings": 262144,
        "model_type": "qwen3_vl_text",
        "num_attention_heads": 16,
        "num_hidden_layers": 28,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-6,
        "rope_scaling": {
            "mrope_interleaved": True,
            "mrope_section": [24, 20, 20],
            "rope_type": "default",
        },
        "rope_theta": 5000000,
        "tie_word_embeddings": True,
        "use_cache": True,
        "vocab_size": 151936,
    },
    "vision_config": {
        "deepstack_visual_indexes": [5, 11, 17],
        "depth": 24,
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 1024,
        "in_channels": 3,
        "initializer_range": 0.02,
        "intermediate_size": 4096,
        "model_type": "qwen3_vl",
        "num_heads": 16,
        "num_position_embeddings": 2304,
        "out_hidden_size": 2048,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
}
BACKBONE_INPUTS = ("input_ids", "attention_mask", "pixel_values", "image_grid_thw")
OPTIONAL_INPUTS = ("mm_token_type_ids", "pixel_values_videos", "video_grid_thw")


def qwen3vl_config(model_name: str) -> Any:
    """The backbone's transformers config: Cosmos-Reason2's written out (as LeRobot does), or the
    one in a local folder or the Hub cache."""
    transformers = require_transformers("GR00T N1.7's Qwen3-VL backbone")
    if str(model_name).rstrip("/") == COSMOS_REASON2:
        return transformers.Qwen3VLConfig(**COSMOS_REASON2_CONFIG)
    try:
        return transformers.AutoConfig.from_pretrained(model_name)
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"cannot read the GR00T backbone's config {model_name!r}: {err}",
            where="model_name (the base model's config.json)",
            hint="give a local Qwen3-VL folder holding config.json, or a Hub id already in "
            "the Hub cache",
        ) from err


class Qwen3Backbone(nn.Module):
    """LeRobot's `Qwen3Backbone` (its parameters are `model.*`, LeRobot's names)."""

    speed_paths = True

    def __init__(
        self,
        config: Any,
        *,
        select_layer: int,
        tune_llm: bool = False,
        tune_visual: bool = False,
        tune_top_llm_layers: int = 0,
        attention: str = "sdpa",
    ) -> None:
        super().__init__()
        transformers = require_transformers("GR00T N1.7's Qwen3-VL backbone")
        self.model = transformers.Qwen3VLForConditionalGeneration._from_config(
            config, attn_implementation=attention
        ).eval()
        self.model.lm_head.weight = self.model.get_input_embeddings().weight
        layers = self.language_model.layers
        while len(layers) > select_layer:
            layers.pop(-1)
        self.select_layer = select_layer
        self.set_trainable_parameters(tune_llm, tune_visual, tune_top_llm_layers)

    @property
    def language_model(self) -> Any:
        return self.model.model.language_model

    @property
    def visual(self) -> Any:
        return self.model.model.visual

    def set_trainable_parameters(self, tune_llm: bool, tune_visual: bool, top_layers: int) -> None:
        self.tune_llm, self.tune_visual = tune_llm, tune_visual
        for parameter in self.parameters():
            parameter.requires_grad = True
        if not tune_llm:
            self.language_model.requires_grad_(False)
        if not tune_visual:
            self.visual.requires_grad_(False)
        if top_layers > 0:
            for layer in self.language_model.layers[-top_layers:]:
                layer.requires_grad_(True)

    def frozen_to_eval(self) -> None:
        """Frozen parts run without dropout while the rest trains (LeRobot's)."""
        if self.training:
            if not self.tune_llm:
                self.language_model.eval()
            if not self.tune_visual:
                self.visual.eval()

    def model_inputs(self, batch: Any) -> dict[str, Tensor]:
        inputs = {key: batch[key] for key in BACKBONE_INPUTS}
        inputs.update({key: batch[key] for key in OPTIONAL_INPUTS if key in batch})
        config = self.model.config
        if "mm_token_type_ids" not in inputs:
            ids = inputs["input_ids"]
            types = torch.zeros(ids.shape, dtype=torch.int32, device=ids.device)
            types[ids == config.image_token_id] = 1
            types[ids == config.video_token_id] = 2
            inputs["mm_token_type_ids"] = types
        positions = self.model.model.compute_3d_position_ids(
            input_ids=inputs["input_ids"],
            inputs_embeds=None,
            image_grid_thw=inputs.get("image_grid_thw"),
            video_grid_thw=inputs.get("video_grid_thw"),
            attention_mask=inputs["attention_mask"],
            mm_token_type_ids=inputs["mm_token_type_ids"],
        )
        if positions is not None and positions.ndim == 3 and positions.shape[0] == 3:
            positions = torch.cat([positions[:1], positions], dim=0)
        if positions is not None:
            inputs["position_ids"] = positions
        return inputs

    def forward(self, batch: Any) -> tuple[Tensor, Tensor, Tensor]:
        """(features (B, L, D) before the final norm, attention mask (B, L), image mask (B, L))."""
        self.frozen_to_eval()
        inputs = self.model_inputs(batch)
        captured: dict[str, Tensor] = {}

        def capture(_module: nn.Module, _inputs: Any, output: Any) -> None:
            captured["features"] = output if isinstance(output, Tensor) else output[0]

        hook = self.language_model.layers[-1].register_forward_hook(capture)
        try:
            if self.speed_paths:
                self.model.model(**inputs, use_cache=False)
            else:
                self.model(**inputs, output_hidden_states=True, use_cache=False)
        finally:
            hook.remove()
        ids = inputs["input_ids"]
        return (
            captured["features"],
            inputs["attention_mask"] == 1,
            ids == self.model.config.image_token_id,
        )
