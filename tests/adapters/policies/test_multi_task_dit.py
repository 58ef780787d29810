"""The multi-task DiT at tiny size: both objectives, the speed paths against LeRobot's arithmetic,
its checkpoint, real-time chunking with flow matching, and the inputs it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="the multi-task DiT needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.adapters.policies.multi_task_dit import MultiTaskDiTPolicy
from rlctl.adapters.policies.vla.rtc import PrefixGuidance
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.multi_task_dit import MultiTaskDiTConfig
from rlctl.domain.policies.rtc import CommittedActions, RTCConfig

CAMERA = (3, 40, 48)


def make_config(clip: Path, cameras: int = 2, **fields: Any) -> MultiTaskDiTConfig:
    inputs = {"observation.state": typed_feature("STATE", (6,))}
    for index in range(cameras):
        inputs[f"observation.images.cam{index}"] = typed_feature("VISUAL", CAMERA)
    settings: dict[str, Any] = {
        "hidden_dim": 32,
        "num_layers": 2,
        "num_heads": 4,
        "timestep_embed_dim": 16,
        "horizon": 8,
        "n_action_steps": 4,
        "num_train_timesteps": 10,
        "num_integration_steps": 4,
        "image_resize_shape": (36, 36),
        "image_crop_shape": (32, 32),
        "tokenizer_max_length": 16,
        "device": "cpu",
        **fields,
    }
    return MultiTaskDiTConfig(
        input_features=inputs,
        output_features={"action": typed_feature("ACTION", (4,))},
        vision_encoder_name=str(clip),
        text_encoder_name=str(clip),
        **settings,
    )


STATS = {
    "observation.state": {"min": -np.ones(6), "max": np.ones(6)},
    "action": {"min": -2 * np.ones(4), "max": 2 * np.ones(4)},
    "observation.images.cam0": {"mean": np.full((3, 1, 1), 0.5), "std": np.full((3, 1, 1), 0.2)},
    "observation.images.cam1": {"mean": np.full((3, 1, 1), 0.4), "std": np.full((3, 1, 1), 0.3)},
}


def randomised(config: MultiTaskDiTConfig):
    torch.manual_seed(0)
    policy = create_policy(config, STATS)
    with torch.no_grad():
        for param in policy.model.parameters():
            param.copy_(torch.randn_like(param) * 0.1)
    return policy


def observation(cameras: int = 2, steps: int = 2, task: Any = ("pick the cube", "")) -> dict:
    rng = np.random.default_rng(1)
    obs: dict[str, Any] = {
        "observation.state": rng.uniform(-1, 1, (2, steps, 6)).astype(np.float32),
        "task": list(task),
    }
    for index in range(cameras):
        obs[f"observation.images.cam{index}"] = rng.uniform(size=(2, steps, *CAMERA)).astype(
            np.float32
        )
    return obs


def chunk(policy, obs: dict, seed: int = 3, **options: Any) -> np.ndarray:
    torch.manual_seed(seed)
    return policy.predict_chunk(obs, **options).actions.numpy()


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"objective": "diffusion", "clip_sample": False}, marks=pytest.mark.slow),
        pytest.param(
            {"objective": "diffusion", "noise_scheduler_type": "DDIM", "use_rope": False},
            marks=pytest.mark.slow,
        ),
        {"objective": "flow_matching"},
        pytest.param(
            {"objective": "flow_matching", "integration_method": "rk4", "sigma_min": 0.1},
            marks=pytest.mark.slow,
        ),
    ],
)
def test_the_speed_paths_give_lerobots_chunks_and_a_checkpoint_keeps_them(
    tiny_clip: Path, tmp_path: Path, fields: dict
) -> None:
    policy = randomised(make_config(tiny_clip, **fields))
    obs = observation()
    fast = chunk(policy, obs)
    assert fast.shape == (2, 4, 4) and np.ptp(fast) > 1e-3
    policy.model.speed_paths = False
    plain = chunk(policy, obs)
    np.testing.assert_allclose(fast, plain, rtol=1e-4, atol=1e-5)

    loaded = load_policy_folder(policy.save(tmp_path / "model"))
    np.testing.assert_allclose(chunk(loaded, obs), fast, rtol=1e-5, atol=1e-6)
    # The text encoder stays frozen after loading; the vision encoder learns at its own rate.
    model: MultiTaskDiTPolicy = loaded.model  # type: ignore[assignment]
    text = model.observation_encoder.text_encoder
    assert not any(p.requires_grad for p in text.text_encoder.parameters())
    groups = model.parameter_groups()
    assert groups[1]["lr"] == pytest.approx(2e-5 * 0.1) and groups[1]["params"]
    assert not any(p is q for q in text.text_encoder.parameters() for p in groups[0]["params"])


@pytest.mark.slow
def test_one_observation_step_takes_single_frames_and_an_empty_task(tiny_clip: Path) -> None:
    policy = randomised(make_config(tiny_clip, cameras=1, n_obs_steps=1, horizon=6))
    obs = observation(cameras=1, steps=1)
    single = {k: v[:, 0] if isinstance(v, np.ndarray) else v for k, v in obs.items()}
    np.testing.assert_allclose(chunk(policy, single), chunk(policy, obs), atol=1e-6)
    assert chunk(policy, {**single, "task": ["", ""]}).shape == (2, 4, 4)
    no_task = {k: v for k, v in single.items() if k != "task"}
    assert np.isfinite(chunk(policy, no_task)).all()


def test_without_cameras_it_reads_state_and_task(tiny_clip: Path) -> None:
    policy = randomised(make_config(tiny_clip, cameras=0, objective="flow_matching"))
    assert chunk(policy, observation(cameras=0)).shape == (2, 4, 4)


def test_a_short_horizon_gives_the_actions_it_has(tiny_clip: Path) -> None:
    # horizon - n_obs_steps + 1 = 3 actions from the current step on (LeRobot's slice).
    policy = randomised(make_config(tiny_clip, cameras=0, horizon=4, n_action_steps=4))
    assert policy.config.drop_n_last_frames == -1
    assert chunk(policy, observation(cameras=0)).shape == (2, 3, 4)


def test_inputs_it_cannot_read_are_refused_clearly(tiny_clip: Path) -> None:
    policy = randomised(make_config(tiny_clip))
    obs = observation()
    with pytest.raises(InvalidInput, match=r"observation\.images\.cam1") as info:
        chunk(policy, {k: v for k, v in obs.items() if k != "observation.images.cam1"})
    assert "rename_map" in (info.value.hint or "")
    with pytest.raises(InvalidInput, match="2 observation steps"):
        chunk(policy, {k: v[:, :1] if isinstance(v, np.ndarray) else v for k, v in obs.items()})
    batch = policy._preprocess(obs)
    del batch["observation.language.tokens"]
    with pytest.raises(InvalidInput, match="task tokens"):
        policy.model.predict_chunk(batch)
    with pytest.raises(InvalidInput, match="noise"):
        policy.model.predict_chunk(policy._preprocess(obs), noise=torch.zeros(2, 3, 4))


def test_cameras_that_do_not_reach_clips_size_are_refused_before_building(tiny_clip: Path) -> None:
    config = make_config(tiny_clip, image_resize_shape=None, image_crop_shape=None)
    with pytest.raises(ConfigError, match="32x32") as info:
        MultiTaskDiTPolicy(config)
    assert "image_resize_shape=[32,32]" in (info.value.hint or "")
    with pytest.raises(ConfigError, match="cannot read the CLIP vision model"):
        MultiTaskDiTPolicy(make_config(tiny_clip.parent / "no-clip-here"))
    with pytest.raises(ConfigError, match=r"observation\.state"):
        MultiTaskDiTPolicy(
            MultiTaskDiTConfig(output_features={"action": typed_feature("ACTION", (4,))})
        )


@pytest.mark.slow
def test_training_steps_learn_and_freeze_the_text_encoder(tiny_clip: Path) -> None:
    for objective in ("diffusion", "flow_matching"):
        policy = create_policy(make_config(tiny_clip, objective=objective, dropout=0.0), STATS)
        model = policy.model.train()
        batch = policy._preprocess(
            {**observation(), "action": torch.rand(2, 8, 4), "action_is_pad": torch.zeros(2, 8)}
        )
        batch["action_is_pad"] = batch["action_is_pad"].bool()
        frozen = {k: v.clone() for k, v in model.state_dict().items() if "text_model" in k}
        optimizer = torch.optim.Adam(model.parameter_groups(), lr=1e-3)
        losses = []
        torch.manual_seed(0)
        for _ in range(12):
            loss, info = model(batch)
            assert info["loss"] == pytest.approx(loss.item())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert np.mean(losses[-4:]) < np.mean(losses[:4]), (objective, losses)
        after = model.state_dict()
        assert all(torch.equal(after[k], v) for k, v in frozen.items())


@pytest.mark.slow
def test_real_time_chunking_follows_the_leftover_with_flow_matching(tiny_clip: Path) -> None:
    config = make_config(
        tiny_clip, objective="flow_matching", n_obs_steps=3, horizon=10, num_integration_steps=10
    )
    policy = randomised(config)
    obs = observation(steps=3)
    free = chunk(policy, obs)
    leftover = np.full((2, 3, 4), 1.5, np.float32)
    rtc = RTCConfig(execution_horizon=3, prefix_attention_schedule="ONES", max_guidance_weight=50)
    torch.manual_seed(3)
    followed = policy.predict_chunk(
        obs, committed=CommittedActions(actions=leftover, inference_delay=2, rtc=rtc)
    ).actions
    followed = followed.numpy()
    # Pulled towards the leftover where it is committed (from the current step on), not after.
    assert np.abs(followed[:, :3] - 1.5).mean() < 0.5 * np.abs(free[:, :3] - 1.5).mean()

    diffusion = randomised(make_config(tiny_clip))
    assert not diffusion.config.supports_rtc
    batch = diffusion._preprocess(observation())
    guidance = PrefixGuidance(torch.zeros(2, 3, 4), 1, rtc)
    with pytest.raises(ConfigError, match="flow matching"):
        diffusion.model.predict_guided_chunk(batch, guidance)
