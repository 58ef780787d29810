"""What the lerobot_*.py interop scripts share; like them, run by LeRobot 0.6.1's own Python
(RLCTL_LEROBOT_PYTHON), which finds this module next to the script it runs (the script's folder
is the first entry of sys.path). Standard library, numpy, torch and LeRobot only."""

import json
import sys

import numpy as np
import torch
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.processor import PolicyProcessorPipeline
from lerobot.processor.converters import (
    batch_to_transition,
    policy_action_to_transition,
    transition_to_batch,
    transition_to_policy_action,
)

KINDS = {
    "observation.state": FeatureType.STATE,
    "observation.environment_state": FeatureType.ENV,
}


def tensor(values):
    return torch.tensor(values, dtype=torch.float32)


def input_features(shapes):
    """{key: shape} -> LeRobot's features, in the same order: the state and environment state by
    their keys, anything else a camera."""
    return {
        key: PolicyFeature(type=KINDS.get(key, FeatureType.VISUAL), shape=tuple(shape))
        for key, shape in shapes.items()
    }


def action_features(dim):
    return {"action": PolicyFeature(type=FeatureType.ACTION, shape=(dim,))}


def config_fields(fields):
    """JSON gives lists; LeRobot's configs save their (height, width) pairs only as tuples."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}


def min_max_stats(rng, dims):
    """Min-max statistics drawn from `rng` for each (key, dim), in order."""
    stats = {}
    for key, dim in dims:
        low = rng.uniform(-2, 0, size=dim)
        stats[key] = {"min": tensor(low), "max": tensor(low + rng.uniform(0.5, 3, size=dim))}
    return stats


def mean_std_stats(rng, cameras):
    """Per-channel mean-std statistics drawn from `rng` for each camera key, in order."""
    return {
        key: {
            "mean": tensor(rng.uniform(0.3, 0.6, size=(3, 1, 1))),
            "std": tensor(rng.uniform(0.1, 0.3, size=(3, 1, 1))),
        }
        for key in cameras
    }


def randomise(module, scale, skip=()):
    """Every weight (but those whose name starts with one of `skip`) drawn from torch's generator
    times `scale`, so that no zero or identity hides a mismatch."""
    with torch.no_grad():
        for name, param in module.named_parameters():
            if not name.startswith(tuple(skip)):
                param.copy_(torch.randn_like(param) * scale)


def save(out, model, *processors):
    """The model and its processors, in LeRobot's format, to the folder `out`."""
    model.save_pretrained(out)
    for processor in processors:
        processor.save_pretrained(out)


def load_processors(folder):
    """A checkpoint's pre- and post-processor pipelines, as LeRobot's policy server reads them."""
    pre = PolicyProcessorPipeline.from_pretrained(
        folder,
        config_filename="policy_preprocessor.json",
        to_transition=batch_to_transition,
        to_output=transition_to_batch,
    )
    post = PolicyProcessorPipeline.from_pretrained(
        folder,
        config_filename="policy_postprocessor.json",
        to_transition=policy_action_to_transition,
        to_output=transition_to_policy_action,
    )
    return pre, post


def load(policy_class, folder):
    """(policy in eval mode, pre-processor, post-processor) of a checkpoint folder."""
    policy = policy_class.from_pretrained(folder)
    policy.eval()
    return (policy, *load_processors(folder))


def read_tensors(path, skip=()):
    """An .npz file's arrays as tensors (those named in `skip` left out)."""
    data = np.load(path)
    return {k: torch.from_numpy(data[k]) for k in data.files if k not in skip}


def as_list(values):
    return values.detach().cpu().double().tolist()


def chunk_commands(key, policy_class, make, predict):
    """`make OUT ...` (`make(OUT, ...)`) and `predict CHECKPOINT ...` (`predict(policy, pre,
    post, ...)` on the loaded checkpoint), each printing the chunk it returns under `key`."""
    return {
        "make": lambda *args: {key: as_list(make(*args))},
        "predict": lambda folder, *args: {
            key: as_list(predict(*load(policy_class, folder), *args))
        },
    }


def main(commands, deterministic=True):
    """Runs `commands[argv[1]](*argv[2:])` and prints what it returns as one JSON line."""
    if deterministic:
        torch.use_deterministic_algorithms(True)
    command, *args = sys.argv[1:]
    if command not in commands:
        raise SystemExit(f"unknown mode {command!r}: one of {', '.join(commands)}")
    print(json.dumps(commands[command](*args)))
