"""Writes a tiny GR00T N1.7 checkpoint in NVIDIA's own layout (what `nvidia/GR00T-N1.7-3B` and
Isaac-GR00T fine-tunes hold), for rlctl's tests; LeRobot's own writer is `lerobot_groot.py raw`.

    write_raw_groot(tiny_dir, out, seed) -> out

    out/config.json                  tiny_dir/base/config.json (model_type "Gr00tN1d7")
    out/model-0000i-of-00002.safetensors + model.safetensors.index.json
                                     random weights under LeRobot's GR00TN17 key names
                                     (`backbone.model...`, `action_head...`), no lm_head (tied),
                                     plus a language layer past `select_layer` that the loader
                                     must skip, as transformers does
    out/processor_config.json        `processor_kwargs` for embodiment "tiny_arm": state groups
                                     arm (3), gripper (1), load (1); action groups arm (relative,
                                     per step) and gripper (absolute) over 6 steps; camera
                                     `front`; percentiles; `use_relative_action`; 32x32 images
    out/statistics.json              tiny_arm's group statistics (relative ones per step)
    out/embodiment_id.json           tiny_arm -> projector 5

The arm matches relative_arm_dataset.py (state 5, action 4, camera front).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

TAG = "tiny_arm"
EMBODIMENT_ID = 5
HORIZON = 6
SCALE = 0.05


def _stats(rng: np.random.Generator, dim: int, steps: int | None = None) -> dict[str, Any]:
    shape = (dim,) if steps is None else (steps, dim)
    low = rng.uniform(-1.5, -0.5, size=shape)
    high = low + rng.uniform(1.0, 3.0, size=shape)
    return {
        "min": low.tolist(),
        "max": high.tolist(),
        "q01": (low + 0.1).tolist(),
        "q99": (high - 0.1).tolist(),
        "mean": ((low + high) / 2).tolist(),
        "std": ((high - low) / 4).tolist(),
    }


def side_files(seed: int = 0, *, relative: bool = True) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    statistics = {
        TAG: {
            "state": {"arm": _stats(rng, 3), "gripper": _stats(rng, 1), "load": _stats(rng, 1)},
            "action": {"arm": _stats(rng, 3), "gripper": _stats(rng, 1)},
            "relative_action": {"arm": _stats(rng, 3, HORIZON)},
        },
        "other_robot": {"state": {}, "action": {}},
    }
    rep = "RELATIVE" if relative else "ABSOLUTE"
    modality = {
        "video": {"modality_keys": ["front"], "delta_indices": [0]},
        "state": {"modality_keys": ["arm", "gripper", "load"], "delta_indices": [0]},
        "action": {
            "modality_keys": ["arm", "gripper"],
            "delta_indices": list(range(HORIZON)),
            "action_configs": [
                {"rep": rep, "type": "NON_EEF", "format": "DEFAULT", "state_key": None},
                {"rep": "ABSOLUTE", "type": "NON_EEF", "format": "DEFAULT", "state_key": None},
            ],
        },
        "language": {"modality_keys": ["annotation.human.task_description"], "delta_indices": [0]},
    }
    processor = {
        "processor_class": "Gr00tN1d7Processor",
        "processor_kwargs": {
            "modality_configs": {TAG: modality},
            "use_percentiles": True,
            "use_relative_action": relative,
            "clip_outliers": True,
            "formalize_language": True,
            "image_target_size": [32, 32],
            "image_crop_size": [28, 28],
            "state_dropout_prob": 0.0,
            "use_albumentations": False,
            "max_action_horizon": 8,
        },
    }
    return {
        "processor_config.json": processor,
        "statistics.json": statistics,
        "embodiment_id.json": {TAG: EMBODIMENT_ID, "new_embodiment": 10},
    }


def write_raw_groot(tiny_dir: Path, out: Path, seed: int = 0, *, relative: bool = True) -> Path:
    import torch
    from safetensors.torch import save_file

    from rlctl.adapters.policies.vla.groot import GR00T_N1_7_DEFAULTS, GR00TN17

    out.mkdir(parents=True, exist_ok=True)
    config = json.loads((Path(tiny_dir) / "base" / "config.json").read_text())
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    settings = {**GR00T_N1_7_DEFAULTS, **config}
    torch.manual_seed(seed)
    model = GR00TN17(settings)
    state = {
        key: (torch.randn_like(value) * SCALE).to(torch.bfloat16).contiguous()
        for key, value in model.state_dict().items()
        if key != "backbone.model.lm_head.weight"  # tied to the input embeddings
    }
    # A layer the backbone cuts (select_layer): in NVIDIA's files when saved uncut.
    first = "backbone.model.model.language_model.layers.0.post_attention_layernorm.weight"
    cut = first.replace(".0.", f".{int(settings['select_layer'])}.")
    state[cut] = torch.ones_like(state[first])
    keys = sorted(state)
    halves = [keys[: len(keys) // 2], keys[len(keys) // 2 :]]
    weight_map = {}
    for index, names in enumerate(halves, start=1):
        name = f"model-{index:05d}-of-{len(halves):05d}.safetensors"
        save_file({k: state[k] for k in names}, str(out / name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(names, name))
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    write_side_files(out, seed, relative=relative)
    return out


def write_side_files(out: Path, seed: int = 0, *, relative: bool = True) -> Path:
    """Only the side files (and a config.json naming the model, when none is there)."""
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "config.json").exists():
        (out / "config.json").write_text(json.dumps({"model_type": "Gr00tN1d7"}), encoding="utf-8")
    for name, content in side_files(seed, relative=relative).items():
        (out / name).write_text(json.dumps(content, indent=2), encoding="utf-8")
    return out
