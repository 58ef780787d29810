"""Tiny stand-ins for LeRobot's G1 locomotion policies: one-layer ONNX models exported with
torch.onnx (the legacy exporter: the new one needs onnxscript), Holosoma's with its gains in the
model's metadata as LeRobot's carries them."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

HOLOSOMA_KP = [100.0 + i for i in range(29)]
HOLOSOMA_KD = [1.0 + 0.1 * i for i in range(29)]


def export(path, inputs, outputs, *, seed, metadata=None):
    """A one-layer policy (tanh of a fixed linear map) as ONNX, with `metadata` props; returns
    the same policy in torch, to compute what the ONNX one must give."""
    import onnx
    import torch

    gen = torch.Generator().manual_seed(seed)
    layer = torch.nn.Linear(inputs, outputs)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(outputs, inputs, generator=gen) * 0.1)
        layer.bias.copy_(torch.randn(outputs, generator=gen) * 0.1)
    model = torch.nn.Sequential(layer, torch.nn.Tanh()).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            model, (torch.zeros(1, inputs),), str(path), input_names=["obs"],
            output_names=["action"], dynamo=False,
        )  # fmt: skip
    if metadata:
        proto = onnx.load(str(path))
        for key, value in metadata.items():
            entry = proto.metadata_props.add()
            entry.key, entry.value = key, value
        onnx.save(proto, str(path))

    def run(obs):
        with torch.no_grad():
            return model(torch.as_tensor(obs, dtype=torch.float32)[None]).numpy()[0]

    return run


HOLOSOMA_KP = [100.0 + i for i in range(29)]
HOLOSOMA_KD = [1.0 + 0.1 * i for i in range(29)]


def write_policies(folder: Path) -> dict:
    """LeRobot's three policy files under `folder` (GR00T's two, Holosoma's FastSAC)."""
    from rlctl.adapters.robots.g1_locomotion import GrootLocomotion, HolosomaLocomotion

    balance = export(folder / GrootLocomotion.files[0], 516, 15, seed=1)
    walk = export(folder / GrootLocomotion.files[1], 516, 15, seed=2)
    meta = {"kp": json.dumps(HOLOSOMA_KP), "kd": json.dumps(HOLOSOMA_KD)}
    holosoma = export(folder / HolosomaLocomotion.files[0], 100, 29, seed=3, metadata=meta)
    return {"balance": balance, "walk": walk, "holosoma": holosoma}
