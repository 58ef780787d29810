"""Writes a tiny SmolVLM folder offline, for SmolVLA tests: config, tokenizer, seeded random
weights (what `load_vlm_weights=True` loads) and, with `--processor` (LeRobot reads it; it needs
`num2words`), SmolVLM's processor.

    python tiny_smolvlm.py OUT [--processor]

The tokenizer is a small byte-level BPE trained here on a few task strings, carrying SmolVLM's
special tokens (image, fake image token, global image, end of utterance), which SmolVLA reads by
attribute. The text model is a 4-layer llama of width 64, the vision model a 2-layer SigLIP on
64-pixel images: LeRobot 0.6.1 builds its SmolVLA on the same folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

TASKS = [
    "pick up the cube and place it in the box",
    "close the drawer",
    "push the t to the target",
    "put the bowl on the plate",
]
IMAGE = 64


def write_tiny_smolvlm(
    out: Path, *, hidden: int = 64, layers: int = 4, processor: bool = False
) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        PreTrainedTokenizerFast,
        SmolVLMConfig,
        SmolVLMForConditionalGeneration,
        SmolVLMImageProcessor,
        SmolVLMProcessor,
        SmolVLMVideoProcessor,
    )

    special = ["<|endoftext|>", "<image>", "<fake_token_around_image>", "<global-img>",
               "<end_of_utterance>", "<|im_start|>"]  # fmt: skip
    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(TASKS * 20, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|im_start|>",
        eos_token="<end_of_utterance>",
        pad_token="<|endoftext|>",
        additional_special_tokens=special[1:],
        extra_special_tokens={
            "fake_image_token": "<fake_token_around_image>",
            "image_token": "<image>",
            "end_of_utterance_token": "<end_of_utterance>",
            "global_image_token": "<global-img>",
        },
    )
    text = {
        "model_type": "llama",
        "vocab_size": len(tokenizer),
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
    }
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": IMAGE,
        "patch_size": 16,
    }
    config = SmolVLMConfig(
        text_config=text,
        vision_config=vision,
        scale_factor=2,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
    )
    out.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(out)
    torch.manual_seed(0)
    SmolVLMForConditionalGeneration(config).save_pretrained(out)
    if not processor:
        tokenizer.save_pretrained(out)
        return out
    images = SmolVLMImageProcessor(
        size={"longest_edge": IMAGE}, max_image_size={"longest_edge": IMAGE}
    )
    SmolVLMProcessor(
        image_processor=images,
        tokenizer=tokenizer,
        video_processor=SmolVLMVideoProcessor(),
        image_seq_len=((IMAGE // 16) // 2) ** 2,
    ).save_pretrained(out)
    return out


if __name__ == "__main__":
    write_tiny_smolvlm(Path(sys.argv[1]), processor="--processor" in sys.argv[2:])
    print('{"written": true}')
