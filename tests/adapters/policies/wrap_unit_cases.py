"""A tiny model of each policy type that declares FSDP wrap units, with a processed training
batch (tensors only, as a worker process can read them back from a safetensors file)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from rlctl.adapters.policies.loaded_policy import create_policy
from rlctl.domain.policies import PolicyConfig

Case = tuple[PolicyConfig, dict[str, torch.Tensor]]


def tensors(batch: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {k: v.contiguous() for k, v in batch.items() if isinstance(v, torch.Tensor)}


def smolvla(request: pytest.FixtureRequest) -> Case:
    from . import test_smolvla as t

    config = t.tiny_config(request.getfixturevalue("tiny_smolvlm"))
    policy = create_policy(config, t.stats())
    raw = t.raw_batch()
    raw["action"] = np.random.default_rng(2).normal(size=(2, 4, t.ACTION)).astype(np.float32)
    return config, tensors(policy.preprocessor.process_batch(raw))


def pi0_fast(request: pytest.FixtureRequest) -> Case:
    from . import test_pi0_fast as t

    # The tokenizer named by its folder: a worker process builds the model from the config.
    text = request.getfixturevalue("tiny_fast_text_tokenizer")
    config = t.tiny_config(
        request.getfixturevalue("tiny_fast_tokenizer_dir"), text_tokenizer_name=str(text)
    )
    policy = create_policy(config, t.stats())
    return config, tensors(policy.preprocessor.process_batch(t.raw_batch(action=True)))


def groot(request: pytest.FixtureRequest) -> Case:
    from . import test_groot as t

    config = t.tiny_config(request.getfixturevalue("tiny_groot"))
    policy = create_policy(config, t.stats())
    rng = np.random.default_rng(0)
    action = rng.normal(size=(2, t.HORIZON, t.ACTION)).astype(np.float32)
    return config, tensors(
        policy._preprocess({**t.observation(), "action": torch.from_numpy(action)})
    )


def xvla(request: pytest.FixtureRequest) -> Case:
    from . import test_xvla as t

    config = t.tiny_config(request.getfixturevalue("tiny_bart_tokenizer"))
    policy = create_policy(config)
    observation = {k: v if k == "task" else torch.as_tensor(v) for k, v in t.observation().items()}
    action = torch.from_numpy(np.random.default_rng(0).uniform(size=(2, 4, 7)).astype(np.float32))
    return config, tensors(policy._preprocess({**observation, "action": action}))


def multi_task_dit(request: pytest.FixtureRequest) -> Case:
    from . import test_multi_task_dit as t

    config = t.make_config(request.getfixturevalue("tiny_clip"), dropout=0.0)
    policy = create_policy(config, t.STATS)
    rng = np.random.default_rng(0)
    action = torch.from_numpy(rng.uniform(-1, 1, size=(2, 8, 4)).astype(np.float32))
    batch = policy._preprocess(
        {**t.observation(), "action": action, "action_is_pad": torch.zeros(2, 8)}
    )
    batch["action_is_pad"] = batch["action_is_pad"].bool()
    return config, tensors(batch)


def diffusion(request: pytest.FixtureRequest) -> Case:
    from . import test_policy_models as t

    config = t.tiny_diffusion(
        input_features={**t.INPUTS, **t.IMAGE}, use_group_norm=True, n_obs_steps=1, horizon=4,
        n_action_steps=2, use_separate_rgb_encoder_per_camera=False,
    )  # fmt: skip
    torch.manual_seed(5)
    return config, tensors(t.training_batch(4, steps=1, images=True))


CASES: dict[str, Callable[[pytest.FixtureRequest], Case]] = {
    "smolvla": smolvla,
    "pi0_fast": pi0_fast,
    "groot": groot,
    "xvla": xvla,
    "multi_task_dit": multi_task_dit,
    "diffusion": diffusion,
}
