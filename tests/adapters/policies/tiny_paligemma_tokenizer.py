"""Writes a tiny Gemma-style tokenizer folder offline, standing in for PaliGemma's
(`google/paligemma-3b-pt-224`) in π0 / π0.5 tests.

    python tiny_paligemma_tokenizer.py OUT [RESERVED]

Like Gemma's: `<pad>` is id 0, `<eos>` 1, `<bos>` 2, `<unk>` 3, every text starts with `<bos>`
and none ends with `<eos>`. The vocabulary is a byte-level BPE of a few hundred tokens trained
here on task strings and π0.5-style prompts (digits included), so any text tokenises; RESERVED
more ids (`<unused0>`...), never produced from text, end it, as Gemma's vocabulary ends with
reserved tokens (π0-FAST writes its action tokens there; with them "Action" is one token, as in
PaliGemma's).
"""

from __future__ import annotations

import sys
from pathlib import Path

TASKS = [
    "pick up the cube and place it in the box",
    "close the drawer",
    "push the t to the target",
    "put the bowl on the plate",
    "Task: open the drawer, State: 12 128 255 0 64;\nAction: ",
]
VOCAB = 320


def write_tiny_paligemma_tokenizer(
    out: Path, reserved: int = 0, *, vocab_size: int | None = None
) -> Path:
    """`reserved` unused tokens after the trained ones, or as many as fill `vocab_size` (a
    real-size model's: every id it can generate names a token, as in PaliGemma's)."""
    import json

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "<eos>", "<bos>", "<unk>"]
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # π0-FAST's tokenizer checks its generated text starts with the tokens "Action" and ":".
    texts = TASKS * 20 + (["Action: "] * 40 if reserved or vocab_size else [])
    bpe.train_from_iterator(texts, trainer)
    if reserved or vocab_size:
        data = json.loads(bpe.to_str())
        vocab = data["model"]["vocab"]
        first = len(vocab)
        if vocab_size:
            reserved = vocab_size - first
        vocab.update({f"<unused{i}>": first + i for i in range(reserved)})
        bpe = Tokenizer.from_str(json.dumps(data))
    bpe.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", 2)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
    )
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out)
    return out


if __name__ == "__main__":
    write_tiny_paligemma_tokenizer(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    print('{"written": true}')
