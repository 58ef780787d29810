"""`train_config.json`'s env section: the simulator the run evaluates in, as LeRobot writes it."""

from __future__ import annotations

from pathlib import Path

from rlctl.adapters.sim.envs.aloha import AlohaEnv
from rlctl.adapters.sim.envs.pusht import PushtEnv
from rlctl.adapters.training.lerobot_config import lerobot_train_config
from rlctl.domain.policies import MLPConfig, lerobot_config_data
from rlctl.domain.train_presets import resolve_optimization
from rlctl.domain.train_settings import TrainSettings


def train_config(env) -> dict:
    settings = TrainSettings(policy=MLPConfig(), output_dir="out", eval_freq=50)
    optimizer, scheduler = resolve_optimization(settings)
    return lerobot_train_config(
        settings,
        policy=lerobot_config_data(settings.policy),
        dataset_root=Path("data/sim"),
        optimizer=optimizer,
        scheduler=scheduler,
        video_backend=None,
        env=env,
    )


def test_the_env_section_is_the_env_config_under_its_type():
    data = train_config(PushtEnv(obs_type="environment_state_agent_pos", episode_length=50))
    env = data["env"]
    assert env["type"] == "pusht" and env["task"] == "PushT-v0" and env["fps"] == 10
    assert env["obs_type"] == "environment_state_agent_pos" and env["episode_length"] == 50
    # The features the env produces, derived ones included, as LeRobot's __post_init__ adds them.
    assert env["features"] == {
        "action": {"type": "ACTION", "shape": [2]},
        "agent_pos": {"type": "STATE", "shape": [2]},
        "environment_state": {"type": "ENV", "shape": [16]},
    }
    assert env["features_map"]["agent_pos"] == "observation.state"
    assert data["env_eval_freq"] == 50


def test_no_env_is_null_and_another_env_keeps_its_own_fields():
    assert train_config(None)["env"] is None
    env = train_config(AlohaEnv())["env"]
    assert env["type"] == "aloha" and env["features"]["pixels/top"]["type"] == "VISUAL"


def test_xvla_trains_with_lerobots_xvla_adamw_and_says_so():
    """LeRobot resumes an X-VLA run with its `XVLAAdamWConfig` only if train_config.json names
    it, with its fields, and the optimiser's groups are its three named ones."""
    from rlctl.domain.policies.xvla import XVLAConfig

    settings = TrainSettings(
        policy=XVLAConfig(optimizer_soft_prompt_warmup_lr_scale=0.01), output_dir="out"
    )
    optimizer, scheduler = resolve_optimization(settings)
    data = lerobot_train_config(
        settings,
        policy={},
        dataset_root=Path("data/sim"),
        optimizer=optimizer,
        scheduler=scheduler,
        video_backend=None,
        env=None,
    )
    assert data["optimizer"] == {
        "type": "xvla-adamw",
        "lr": 1e-4,
        "betas": [0.9, 0.99],
        "eps": 1e-8,
        "weight_decay": 0.0,
        "grad_clip_norm": 10.0,
        "soft_prompt_lr_scale": 1.0,
        "soft_prompt_warmup_lr_scale": 0.01,
    }
    assert optimizer.group_lr_scales()["soft_prompts"] == (0.01, 1.0)
    other = resolve_optimization(TrainSettings(policy=MLPConfig(), output_dir="o"))[0]
    assert other.group_lr_scales() == {}
