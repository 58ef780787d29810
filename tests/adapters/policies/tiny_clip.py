"""Writes a tiny CLIP folder offline, for multi-task DiT tests: the config (a CLIPConfig with
tiny text and vision towers), seeded random weights (what `from_pretrained` loads) and a CLIP
tokenizer whose vocabulary is CLIP's byte alphabet (each byte alone and at a word's end, `</w>`)
plus a few merges learned from task strings, and CLIP's start and end tokens last, so the end
token has the highest id as in CLIP's own vocabulary.

    python tiny_clip.py OUT [--hidden N --layers N --image N --patch N]

The folder's name contains "clip" (LeRobot's config insists on it); LeRobot 0.6.1 builds its
multi-task DiT on the same folder.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

TASKS = [
    "pick the cube",
    "place the cube",
    "close the drawer",
    "push the t to the target",
    "put the bowl on the plate",
]


def _byte_alphabet() -> list[str]:
    # GPT-2's (and CLIP's) bytes_to_unicode: printable bytes as themselves, the rest shifted.
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = [], 0
    for byte in range(256):
        if byte in printable:
            chars.append(chr(byte))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def _merges(words: list[str], count: int) -> list[tuple[str, str]]:
    """A few BPE merges, most frequent pair first, over the task words (CLIP's `</w>` ends)."""
    split = [[*word[:-1], word[-1] + "</w>"] for word in words]
    merges: list[tuple[str, str]] = []
    for _ in range(count):
        pairs: dict[tuple[str, str], int] = {}
        for symbols in split:
            for pair in itertools.pairwise(symbols):
                pairs[pair] = pairs.get(pair, 0) + 1
        if not pairs:
            break
        best = max(sorted(pairs), key=lambda p: pairs[p])
        merges.append(best)
        for symbols in split:
            i = 0
            while i < len(symbols) - 1:
                if (symbols[i], symbols[i + 1]) == best:
                    symbols[i : i + 2] = [symbols[i] + symbols[i + 1]]
                i += 1
    return merges


def write_tiny_clip(
    out: Path,
    *,
    hidden: int = 32,
    layers: int = 2,
    image: int = 32,
    patch: int = 8,
    text: dict[str, Any] | None = None,
    vision: dict[str, Any] | None = None,
) -> Path:
    """The folder `out`; `text` and `vision` override the towers' config fields (the benchmark
    writes CLIP ViT-B/16's sizes this way, with this tokenizer)."""
    import torch
    from transformers import CLIPConfig, CLIPModel

    out.mkdir(parents=True, exist_ok=True)
    alphabet = _byte_alphabet()
    merges = _merges([w for task in TASKS for w in task.split()], 24)
    tokens = alphabet + [c + "</w>" for c in alphabet] + [a + b for a, b in merges]
    tokens += ["<|startoftext|>", "<|endoftext|>"]
    vocab = {token: index for index, token in enumerate(tokens)}
    (out / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    lines = ["#version: 0.2", *(f"{a} {b}" for a, b in merges)]
    (out / "merges.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    special = {
        "tokenizer_class": "CLIPTokenizer",
        "model_max_length": 77,
        "bos_token": "<|startoftext|>",
        "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
    }
    (out / "tokenizer_config.json").write_text(json.dumps(special), encoding="utf-8")
    config = CLIPConfig(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": hidden,
            "intermediate_size": 2 * hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": 4,
            "max_position_embeddings": 77,
            "bos_token_id": vocab["<|startoftext|>"],
            "eos_token_id": vocab["<|endoftext|>"],
            "pad_token_id": vocab["<|endoftext|>"],
            **(text or {}),
        },
        vision_config={
            "hidden_size": hidden,
            "intermediate_size": 2 * hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": 4,
            "image_size": image,
            "patch_size": patch,
            **(vision or {}),
        },
        projection_dim=hidden,
    )
    torch.manual_seed(0)
    CLIPModel(config).save_pretrained(out)
    return out


if __name__ == "__main__":
    args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    sizes = {k.lstrip("-"): int(v) for k, v in args.items()}
    write_tiny_clip(Path(sys.argv[1]), **sizes)
    print('{"written": true}')
