"""Tiny X-VLA parts for tests, made offline: a Florence-2 config a few layers deep and a
BART-style tokenizer standing in for `facebook/bart-large`.

    python tiny_xvla.py OUT      writes the tokenizer folder to OUT

Like BART's tokenizer: `<s>` is id 0, `<pad>` 1, `</s>` 2, `<unk>` 3, and every text is wrapped in
`<s> … </s>`. The vocabulary is a byte-level BPE of a few hundred tokens trained here on task
strings, so any text tokenises. `TINY_FLORENCE` is a config both LeRobot and rlctl build
(transformers' native Florence-2 fields); `tiny_florence(image_size)` sizes its position table.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

TASKS = [
    "pick up the cube and place it in the box",
    "close the drawer",
    "push the t to the target",
    "put the bowl on the plate",
    "open the top drawer and put the bowl inside",
]
VOCAB = 320


def tiny_florence(max_positions: int = 16) -> dict[str, Any]:
    """Two DaViT stages (widths 16 and 32, strides 4 and 2) and a one-layer BART encoder."""
    return {
        "vision_config": {
            "embed_dim": [16, 32],
            "depths": [1, 1],
            "num_heads": [2, 4],
            "num_groups": [2, 4],
            "patch_size": [7, 3],
            "patch_stride": [4, 2],
            "patch_padding": [3, 1],
            "patch_prenorm": [False, True],
            "window_size": 2,
            "projection_dim": 24,
            "max_position_embeddings": max_positions,
            "max_temporal_embeddings": 4,
            "drop_path_rate": 0.1,
        },
        "text_config": {
            "model_type": "bart",
            "vocab_size": VOCAB,
            "d_model": 24,
            "encoder_layers": 1,
            "decoder_layers": 1,
            "encoder_attention_heads": 2,
            "decoder_attention_heads": 2,
            "encoder_ffn_dim": 48,
            "decoder_ffn_dim": 48,
            "max_position_embeddings": 128,
        },
    }


def write_tiny_bart_tokenizer(out: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<s>", "<pad>", "</s>", "<unk>"]
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(TASKS * 20, trainer)
    bpe.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
    )
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out)
    return out


if __name__ == "__main__":
    write_tiny_bart_tokenizer(Path(sys.argv[1]))
    print('{"written": true}')
