"""The multi-task DiT's config: LeRobot's defaults, derived values and refusals."""

from __future__ import annotations

import pytest

from rlctl.domain.config import structure, unstructure
from rlctl.domain.errors import ConfigError
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import PolicyConfig, known_policy_types
from rlctl.domain.policies.multi_task_dit import MultiTaskDiTConfig


def cameras(*shapes: tuple[int, int, int]) -> dict:
    inputs = {"observation.state": typed_feature("STATE", (6,))}
    for index, shape in enumerate(shapes):
        inputs[f"observation.images.cam{index}"] = typed_feature("VISUAL", shape)
    return inputs


def test_lerobots_defaults_and_derived_values() -> None:
    config = MultiTaskDiTConfig()
    assert known_policy_types()["multi_task_dit"] is MultiTaskDiTConfig
    assert (config.n_obs_steps, config.horizon, config.n_action_steps) == (2, 32, 24)
    assert config.drop_n_last_frames == 32 - 24 - 2 + 1
    assert config.normalization_mapping == {
        "VISUAL": "MEAN_STD",
        "STATE": "MIN_MAX",
        "ACTION": "MIN_MAX",
    }
    assert config.observation_delta_indices == [-1, 0]
    assert config.action_delta_indices == list(range(-1, 31))
    optimizer, scheduler = config.optimizer_preset(), config.scheduler_preset()
    assert (optimizer.type, optimizer.lr, optimizer.betas) == ("adam", 2e-5, (0.95, 0.999))
    assert (scheduler.type, scheduler.name, scheduler.num_warmup_steps) == ("diffuser", "cosine", 0)
    assert not config.supports_rtc
    assert MultiTaskDiTConfig(objective="flow_matching").supports_rtc


def test_config_json_round_trips_and_keeps_an_explicit_drop() -> None:
    config = MultiTaskDiTConfig(horizon=16, n_action_steps=8, image_resize_shape=[36, 36])
    data = unstructure(config)
    assert data["drop_n_last_frames"] == 7 and list(data["image_resize_shape"]) == [36, 36]
    assert data["type"] == "multi_task_dit"
    assert structure(data, PolicyConfig) == config
    # A saved value wins over the formula (as LeRobot reads its config.json), null recomputes.
    saved = structure({**data, "drop_n_last_frames": 3}, PolicyConfig)
    assert isinstance(saved, MultiTaskDiTConfig) and saved.drop_n_last_frames == 3
    unset = structure({**data, "drop_n_last_frames": None}, PolicyConfig)
    assert isinstance(unset, MultiTaskDiTConfig) and unset.drop_n_last_frames == 7


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"objective": "consistency"}, "policy.objective"),
        ({"vision_encoder_name": "google/siglip-base"}, "policy.vision_encoder_name"),
        ({"text_encoder_name": "bert-base"}, "policy.text_encoder_name"),
        ({"hidden_dim": 30, "num_heads": 8}, "policy.hidden_dim"),
        ({"hidden_dim": 24, "num_heads": 8}, "policy.num_heads"),  # odd head size, rotary
        ({"dropout": 1.5}, "policy.dropout"),
        ({"noise_scheduler_type": "PNDM"}, "policy.noise_scheduler_type"),
        ({"prediction_type": "v_prediction"}, "policy.prediction_type"),
        ({"beta_start": 0.5, "beta_end": 0.1}, "policy.beta_start"),
        ({"num_inference_steps": 101}, "policy.num_inference_steps"),
        ({"objective": "flow_matching", "integration_method": "heun"}, "policy.integration_method"),
        ({"objective": "flow_matching", "sigma_min": 2.0}, "policy.sigma_min"),
        (
            {"objective": "flow_matching", "timestep_sampling_strategy": "logit"},
            "policy.timestep_sampling_strategy",
        ),
        ({"objective": "flow_matching", "timestep_sampling_s": 0.0}, "policy.timestep_sampling_s"),
        ({"tokenizer_padding": "do_not_pad"}, "policy.tokenizer_padding"),
        ({"timestep_embed_dim": 2}, "policy.timestep_embed_dim"),
        ({"n_obs_steps": 4, "horizon": 3, "n_action_steps": 1}, "policy.horizon"),
        ({"input_features": cameras((3, 32, 32), (3, 48, 48))}, "policy.input_features"),
    ],
)
def test_bad_settings_are_refused_with_the_field_named(fields: dict, where: str) -> None:
    with pytest.raises(ConfigError) as info:
        MultiTaskDiTConfig(**fields)
    assert info.value.where == where


def test_a_crop_that_does_not_fit_is_skipped_as_lerobot_skips_it() -> None:
    assert MultiTaskDiTConfig(input_features=cameras((3, 256, 256))).effective_crop_shape == (
        224,
        224,
    )
    assert MultiTaskDiTConfig(input_features=cameras((3, 96, 128))).effective_crop_shape is None
    # After a resize, the resized size is what the crop must fit.
    resized = MultiTaskDiTConfig(input_features=cameras((3, 96, 96)), image_resize_shape=(240, 240))
    assert resized.effective_crop_shape == (224, 224)
    small = MultiTaskDiTConfig(input_features=cameras((3, 480, 480)), image_resize_shape=(200, 200))
    assert small.effective_crop_shape is None
