"""Writes a tiny GR00T N1.7 base model folder offline, for tests and benchmarks on both sides.

    python tiny_groot.py OUT [--real-size]

GR00T N1.7 reads its architecture from its base model (`base_model_path`, NVIDIA's
`nvidia/GR00T-N1.7-3B`) and its vision-language backbone, tokenizer and image processor from
the backbone's folder (`nvidia/Cosmos-Reason2-2B`, a Qwen3-VL). Neither can be downloaded here,
so this writes stand-ins:

    OUT/backbone/   a Qwen3-VL config, a byte-level BPE tokenizer trained on a few task strings
                    (with Qwen's special tokens and a Qwen3-VL-style chat template), and the
                    Qwen2-VL image and Qwen3-VL video processor configs (Cosmos-Reason2's:
                    16-pixel patches merged 2x2, mean and std 0.5)
    OUT/base/       the GR00T N1.7 config.json (model_type "Gr00tN1d7") naming OUT/backbone

`--real-size` keeps Cosmos-Reason2-2B's and GR00T N1.7's real sizes (about 3 B parameters) and
only the token ids of the tiny tokenizer. No weights are written: a tool that wants base weights
(LeRobot always loads them) saves its own random ones into OUT/base.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TASKS = [
    "pick up the cube and place it in the box",
    "close the drawer",
    "push the t to the target",
    "put the bowl on the plate",
    "open the top drawer of the cabinet",
    "perform the task",
]
SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
VOCAB = 400
# Qwen3-VL's template, as far as GR00T's one-user-message prompts reach it.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for content in message['content'] %}"
    "{%- if content['type'] == 'image' %}{{- '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif content['type'] == 'text' %}{{- content['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

TINY_TEXT = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "rope_scaling": {"mrope_interleaved": True, "mrope_section": [2, 1, 1], "rope_type": "default"},
}
TINY_VISION = {
    "depth": 2,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_heads": 2,
    "out_hidden_size": 32,
    "deepstack_visual_indexes": [0],
    "num_position_embeddings": 256,
}
TINY_GROOT = {
    "backbone_embedding_dim": 32,
    "select_layer": 2,
    "hidden_size": 32,
    "input_embedding_dim": 48,
    "action_horizon": 8,
    "max_state_dim": 16,
    "max_action_dim": 16,
    "max_num_embodiments": 12,
    "max_seq_len": 64,
    "diffusion_model_cfg": {
        "positional_embeddings": None,
        "num_layers": 4,
        "num_attention_heads": 4,
        "attention_head_dim": 12,
        "norm_type": "ada_norm",
        "dropout": 0.2,
        "final_dropout": True,
        "output_dim": 32,
        "interleave_self_attention": True,
    },
    "vl_self_attention_cfg": {
        "positional_embeddings": None,
        "num_layers": 2,
        "num_attention_heads": 4,
        "attention_head_dim": 8,
        "dropout": 0.2,
        "final_dropout": True,
    },
}
# Cosmos-Reason2-2B (LeRobot's `_cosmos_reason2_qwen3_vl_config`).
REAL_TEXT = {
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rope_scaling": {
        "mrope_interleaved": True,
        "mrope_section": [24, 20, 20],
        "rope_type": "default",
    },
    "vocab_size": 151936,
}
REAL_VISION = {
    "depth": 24,
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_heads": 16,
    "out_hidden_size": 2048,
    "deepstack_visual_indexes": [5, 11, 17],
    "num_position_embeddings": 2304,
}


def write_tokenizer(out: Path) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(TASKS * 20, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL[1:],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    # Older and newer transformers read the template from either file.
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    return tokenizer


def write_processors(out: Path) -> None:
    image = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "do_resize": True,
        "do_rescale": True,
        "do_normalize": True,
        "do_convert_rgb": True,
        "resample": 3,
        "rescale_factor": 1 / 255,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    }
    video = {
        "video_processor_type": "Qwen3VLVideoProcessor",
        "do_resize": True,
        "do_rescale": True,
        "do_normalize": True,
        "do_convert_rgb": True,
        "resample": 3,
        "rescale_factor": 1 / 255,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "size": {"longest_edge": 25165824, "shortest_edge": 4096},
        "fps": 2,
        "do_sample_frames": True,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(image, indent=2), encoding="utf-8")
    (out / "video_preprocessor_config.json").write_text(
        json.dumps(video, indent=2), encoding="utf-8"
    )


def backbone_config(tokenizer: Any, *, real_size: bool) -> dict[str, Any]:
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL}
    text = dict(REAL_TEXT if real_size else TINY_TEXT)
    text.setdefault("vocab_size", len(tokenizer))
    text.update(
        {
            "model_type": "qwen3_vl_text",
            "hidden_act": "silu",
            "rms_norm_eps": 1e-6,
            "rope_theta": 5000000,
            "max_position_embeddings": 4096,
            "attention_bias": False,
            "tie_word_embeddings": True,
            "bos_token_id": ids["<|im_start|>"],
            "eos_token_id": ids["<|im_end|>"],
        }
    )
    vision = dict(REAL_VISION if real_size else TINY_VISION)
    vision.update(
        {
            "model_type": "qwen3_vl",
            "hidden_act": "gelu_pytorch_tanh",
            "in_channels": 3,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        }
    )
    return {
        "model_type": "qwen3_vl",
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "tie_word_embeddings": True,
        "text_config": text,
        "vision_config": vision,
    }


def groot_config(backbone: Path, *, real_size: bool) -> dict[str, Any]:
    sizes = {} if real_size else dict(TINY_GROOT)
    return {
        "model_type": "Gr00tN1d7",
        "architectures": ["GR00TN17"],
        "model_name": str(backbone),
        "backbone_model_type": "qwen",
        **sizes,
    }


def write_tiny_groot(out: Path, *, real_size: bool = False) -> Path:
    backbone = out / "backbone"
    base = out / "base"
    backbone.mkdir(parents=True, exist_ok=True)
    base.mkdir(parents=True, exist_ok=True)
    tokenizer = write_tokenizer(backbone)
    write_processors(backbone)
    config = backbone_config(tokenizer, real_size=real_size)
    (backbone / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    groot = groot_config(backbone.resolve(), real_size=real_size)
    (base / "config.json").write_text(json.dumps(groot, indent=2), encoding="utf-8")
    return out


if __name__ == "__main__":
    write_tiny_groot(Path(sys.argv[1]), real_size="--real-size" in sys.argv[2:])
    print('{"written": true}')
