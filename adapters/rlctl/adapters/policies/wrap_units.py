"""What the policies' `fsdp_units` are made of (see `PolicyModel.fsdp_units`).

Sharded training gathers a unit's parameters when the unit's `forward` is called. Library
models (transformers' SigLIP, CLIP, BART, Qwen3-VL) call each layer's `forward`, so a layer is a
unit. Where rlctl runs a decoder layer by its parts (SmolVLA's two streams, π0-FAST's Gemma
layers: the projections, norms and MLP called one by one, not the layer's `forward`), the unit
is the tuple of those parts: FSDP gathers the group when the first of them runs and frees it
once each has run.
"""

from __future__ import annotations

from torch import nn

Unit = nn.Module | tuple[nn.Module, ...]
LAYER_LISTS = ("layers", "blocks", "transformer_blocks")


def layer_stacks(module: nn.Module) -> list[nn.Module]:
    """The members of every layer list (`layers`, `blocks`, `transformer_blocks`) inside
    `module`, the outermost list where lists nest (of a list of lists, the inner members)."""
    found: list[nn.Module] = []
    taken: list[str] = []
    for name, child in module.named_modules():
        if not isinstance(child, nn.ModuleList) or name.rsplit(".", 1)[-1] not in LAYER_LISTS:
            continue
        if any(name.startswith(prefix + ".") for prefix in taken):
            continue
        taken.append(name)
        for member in child:  # a list of stages, each a list of blocks: the blocks
            found.extend(member if isinstance(member, nn.ModuleList) else [member])
    return found


def decoder_layer_parts(*layers: nn.Module) -> tuple[nn.Module, ...]:
    """The parts of Llama/Gemma-style decoder layers that run when the layer is driven part by
    part: input norm, q/k/v/o projections, post-attention norm, MLP (of each layer given)."""
    parts: list[nn.Module] = []
    for layer in layers:
        attn = layer.self_attn
        parts += [layer.input_layernorm, attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj]
        parts += [layer.post_attention_layernorm, layer.mlp]
    return tuple(parts)
