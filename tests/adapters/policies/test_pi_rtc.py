"""Real-time chunking on π0 and π0.5: the same guidance as SmolVLA's (`rtc.guided`) wraps their
velocity field, so committed actions pull a chunk's first steps onto them."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="π0 needs the pi extra")

from rlctl.adapters.policies.loaded_policy import create_policy
from rlctl.domain.policies.rtc import CommittedActions, RTCConfig

# The tiny π0 / π0.5 sizes, statistics and batch of test_pi0.py.
PI0 = runpy.run_path(str(Path(__file__).with_name("test_pi0.py")))
ACTION, raw_batch, stats, tiny_config = (
    PI0[name] for name in ("ACTION", "raw_batch", "stats", "tiny_config")
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pi0", "pi05"])
def test_committed_actions_pull_the_first_steps_of_a_chunk(
    kind: str, tiny_paligemma_tokenizer: Path
) -> None:
    torch.manual_seed(0)
    # Ten Euler steps: fewer, larger ones overshoot under a large guidance weight.
    policy = create_policy(tiny_config(kind, num_inference_steps=10), stats())
    with torch.no_grad():
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    assert type(policy.config).supports_rtc
    chunk = policy.config.chunk_size  # type: ignore[attr-defined]
    max_dim = policy.config.max_action_dim  # type: ignore[attr-defined]
    noise = np.random.default_rng(1).normal(size=(2, chunk, max_dim)).astype(np.float32)
    free = policy.predict_chunk(raw_batch(), noise=noise).actions.numpy()
    leftover = free[:, :3] + 2.0
    committed = CommittedActions(
        actions=leftover, inference_delay=2, rtc=RTCConfig(execution_horizon=3)
    )
    guided = policy.predict_chunk(raw_batch(), noise=noise, committed=committed).actions.numpy()
    assert guided.shape == free.shape == (2, chunk, ACTION)
    before = np.abs(free[:, :2] - leftover[:, :2]).mean()
    assert np.abs(guided[:, :2] - leftover[:, :2]).mean() < 0.2 * before
