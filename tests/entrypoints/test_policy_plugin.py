"""A policy from another distribution, installed, then trained and evaluated as a user types it.

`tests/plugins/toy_policy` is what an outside package ships: a config class (with its optimiser
preset), a model module, and their entry points in the groups `rlctl.policies` and
`rlctl.policy_models`. It is installed into a folder of its own the way an installer lays a wheel
out (the `install_plugin` fixture: the package, and a `.dist-info` with its `METADATA` and the
`entry_points.txt` written from its pyproject.toml), which the `rlctl` processes get on their
path; nothing in rlctl names it, so the types are found only through `importlib.metadata`'s entry
points, as a `pip install`ed package's are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlctl.api

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "toy_policy"
RLCTL = Path(sys.executable).with_name("rlctl")


@pytest.fixture(scope="module")
def plugin_site(install_plugin, tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("toy_policy_site")
    assert install_plugin(PLUGIN, site).name == "rlctl_toy_policy-0.1.0.dist-info"
    return site


def rlctl_cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "RLCTL_PROGRESS": "silent"}
    return subprocess.run([str(RLCTL), *args], capture_output=True, text=True, timeout=600, env=env)


def state_dataset(root: Path) -> Path:
    """Three episodes of a 2-d point walking towards the origin: action = the next state."""
    features = {
        "observation.state": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
        "action": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
    }
    session = rlctl.api.create_dataset(root, fps=10, features=features)
    rng = np.random.default_rng(0)
    for _ in range(3):
        state = rng.uniform(100, 400, size=2).astype(np.float32)
        for _ in range(20):
            target = (0.8 * state + 0.2 * 256).astype(np.float32)
            session.add_frame({"observation.state": state, "action": target, "task": "push"})
            state = target
        session.save_episode()
    session.finalize()
    return root


@pytest.mark.slow  # three CLI processes that import torch
def test_a_plugin_policy_trains_and_evaluates_through_the_cli(plugin_site, tmp_path):
    dataset = state_dataset(tmp_path / "points")
    out = tmp_path / "run"

    listed = rlctl_cli(plugin_site, "train", "--policy.type=toy", "--print-config")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["policy"]["hidden_dim"] == 16

    trained = rlctl_cli(
        plugin_site, "train", f"--dataset.root={dataset}", "--policy.type=toy",
        "--policy.hidden_dim=8", "--steps=30", "--batch_size=8", "--num_workers=0",
        "--save_freq=30", "--log_freq=10", f"--output_dir={out}",
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    checkpoint = out / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["type"] == "toy" and config["hidden_dim"] == 8
    # The optimiser is the preset the plugin's config gives.
    optimizer = json.loads((checkpoint / "train_config.json").read_text())["optimizer"]
    assert (optimizer["type"], optimizer["lr"]) == ("adamw", 3e-3)
    losses = [
        json.loads(line)["loss"]
        for line in (out / "metrics.jsonl").read_text().splitlines()
        if "loss" in json.loads(line)
    ]
    assert losses[-1] < losses[0]

    evaluated = rlctl_cli(
        plugin_site, "eval", f"--policy.path={checkpoint}", "--env.type=pusht",
        "--env.obs_type=environment_state_agent_pos", "--eval.n_episodes=2",
        "--eval.batch_size=2", "--eval.use_async_envs=false", "--eval.max_episode_steps=8",
        "--eval.max_episodes_rendered=0", f"--output_dir={tmp_path / 'eval'}",
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    info = json.loads((tmp_path / "eval" / "eval_info.json").read_text())
    assert info["overall"]["n_episodes"] == 2


def test_without_the_plugin_its_type_is_unknown_with_the_known_ones_listed(tmp_path):
    result = subprocess.run(
        [str(RLCTL), "train", "--policy.type=toy", "--print-config"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "unknown policy type 'toy'" in result.stderr + result.stdout
    assert "act" in result.stderr + result.stdout
