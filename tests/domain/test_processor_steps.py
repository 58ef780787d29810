"""The built-in processor steps, one by one, on numpy arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.features import FeatureKind, FeatureSpec
from rlctl.domain.frames import Transition
from rlctl.domain.processors import (
    AbsoluteActions,
    AddBatchDimension,
    Clip,
    ClipConfig,
    Normalizer,
    NormalizerConfig,
    NormMode,
    RelativeActions,
    RelativeActionsConfig,
    RenameConfig,
    RenameObservations,
    Unnormalizer,
    joint_mask,
)

DIM = 4
STAT_NAMES = {
    NormMode.MEAN_STD: ("mean", "std"),
    NormMode.MIN_MAX: ("min", "max"),
    NormMode.QUANTILES: ("q01", "q99"),
    NormMode.QUANTILE10: ("q10", "q90"),
}

values = st.floats(-100, 100, allow_nan=False, width=32)
batches = hnp.arrays(np.float64, st.tuples(st.integers(1, 3), st.just(DIM)), elements=values)
centres = hnp.arrays(np.float64, DIM, elements=values)
spans = hnp.arrays(np.float64, DIM, elements=st.floats(0.5, 100, width=32))


def stats_for(mode: NormMode, centre: np.ndarray, span: np.ndarray) -> dict[str, np.ndarray]:
    if mode is NormMode.IDENTITY:
        return {"mean": centre, "std": span}
    low_name, high_name = STAT_NAMES[mode]
    if mode is NormMode.MEAN_STD:
        return {low_name: centre, high_name: span}
    return {low_name: centre, high_name: centre + span}


def pair(mode: NormMode, stats: dict[str, np.ndarray]) -> tuple[Normalizer, Unnormalizer]:
    config = NormalizerConfig(
        features={"observation.state": {"type": "STATE", "shape": [DIM]}},
        norm_map={"STATE": mode, "ACTION": mode},
    )
    all_stats = {"observation.state": stats, "action": stats}
    return Normalizer(config, stats=all_stats), Unnormalizer(config, stats=all_stats)


@pytest.mark.parametrize("mode", list(NormMode))
@given(x=batches, centre=centres, span=spans)
def test_unnormalize_undoes_normalize(mode, x, centre, span):
    normalizer, unnormalizer = pair(mode, stats_for(mode, centre, span))
    transition = Transition(observation={"observation.state": x}, action=x[:, ::-1].copy())
    back = unnormalizer(normalizer(transition))
    np.testing.assert_allclose(back.observation["observation.state"], x, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(back.action, transition.action, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("mode", [NormMode.MEAN_STD, NormMode.MIN_MAX, NormMode.QUANTILE10])
@given(x=batches, centre=centres, span=spans)
def test_formulas_are_lerobots(mode, x, centre, span):
    stats = stats_for(mode, centre, span)
    # Stats are held as float32 (LeRobot's state) and take the input's dtype before any arithmetic.
    low, high = (stats[name].astype(np.float32).astype(x.dtype) for name in STAT_NAMES[mode])
    expected = {
        NormMode.MEAN_STD: lambda: (x - low) / (high + 1e-8),
        NormMode.MIN_MAX: lambda: 2 * (x - low) / (high - low) - 1,
        NormMode.QUANTILE10: lambda: 2.0 * (x - low) / (high - low) - 1.0,
    }[mode]()
    normalizer, _ = pair(mode, stats)
    out = normalizer(Transition(observation={"observation.state": x}))
    np.testing.assert_array_equal(out.observation["observation.state"], expected)


def test_min_max_maps_the_range_to_minus_one_one():
    normalizer, _ = pair(NormMode.MIN_MAX, {"min": np.full(DIM, -2.0), "max": np.full(DIM, 6.0)})
    x = np.array([[-2.0, 2.0, 6.0, 4.0]], dtype=np.float32)
    out = normalizer(Transition(action=x)).action
    np.testing.assert_allclose(out, [[-1.0, 0.0, 1.0, 0.5]])
    assert out.dtype == np.float32


@pytest.mark.parametrize("mode", [NormMode.MIN_MAX, NormMode.QUANTILES, NormMode.QUANTILE10])
def test_a_constant_feature_maps_to_minus_one_and_back(mode):
    low, high = STAT_NAMES[mode]
    constant = np.full(DIM, 3.0)
    normalizer, unnormalizer = pair(mode, {low: constant, high: constant})
    x = np.full((2, DIM), 3.0, dtype=np.float32)
    normalized = normalizer(Transition(action=x)).action
    np.testing.assert_array_equal(normalized, -1.0)
    np.testing.assert_array_equal(unnormalizer(Transition(action=normalized)).action, x)


def test_mode_is_chosen_per_feature_kind():
    config = NormalizerConfig(
        features={
            "observation.state": {"type": "STATE", "shape": [2]},
            "observation.images.front": {"type": "VISUAL", "shape": [3, 2, 2]},
            "action": {"type": "ACTION", "shape": [2]},
        },
        norm_map={"VISUAL": "MEAN_STD", "STATE": "MIN_MAX"},
    )
    stats = {
        "observation.state": {"min": [0.0, 0.0], "max": [2.0, 4.0], "mean": [9.0, 9.0]},
        "observation.images.front": {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.5, 1.0]},
        "action": {"mean": [1.0, 1.0], "std": [2.0, 2.0]},
    }
    normalizer = Normalizer(config, stats=stats)
    image = np.full((1, 3, 2, 2), 1.0, dtype=np.float32)
    action = np.array([[5.0, 5.0]], dtype=np.float32)
    out = normalizer(
        Transition(
            observation={
                "observation.state": np.array([[1.0, 1.0]]),
                "observation.images.front": image,
            },
            action=action,
        )
    )
    np.testing.assert_allclose(out.observation["observation.state"], [[0.0, -0.5]])
    # Flat (C,) image stats broadcast per channel over (B, C, H, W).
    np.testing.assert_allclose(out.observation["observation.images.front"][0, :, 0, 0], [2, 1, 0.5])
    # ACTION has no mode in the map: IDENTITY.
    assert out.action is action


def test_keys_without_stats_or_outside_the_selection_pass_through():
    config = NormalizerConfig(
        features={
            "observation.state": {"type": "STATE"},
            "observation.environment_state": {"type": "ENV"},
        },
        norm_map={"STATE": "MEAN_STD", "ENV": "MEAN_STD"},
        normalize_observation_keys=["observation.environment_state"],
    )
    stats = {k: {"mean": [1.0], "std": [1.0]} for k in config.features}
    state, env, other = np.array([3.0]), np.array([3.0]), np.array([3.0])
    out = Normalizer(config, stats=stats)(
        Transition(
            observation={
                "observation.state": state,
                "observation.environment_state": env,
                "observation.other": other,
            }
        )
    )
    assert out.observation["observation.state"] is state
    assert out.observation["observation.other"] is other
    np.testing.assert_allclose(out.observation["observation.environment_state"], [2.0])


def test_a_missing_statistic_names_the_feature_and_mode():
    normalizer, _ = pair(NormMode.QUANTILES, {"min": np.zeros(DIM), "max": np.ones(DIM)})
    with pytest.raises(ConfigError, match="q01 and q99") as info:
        normalizer(Transition(action=np.zeros(DIM)))
    assert info.value.where == "action"


def test_integer_inputs_are_normalised_as_floats():
    normalizer, _ = pair(NormMode.MIN_MAX, {"min": np.zeros(DIM), "max": np.full(DIM, 254.0)})
    out = normalizer(Transition(action=np.full(DIM, 127, dtype=np.uint8))).action
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, 0.0)


def test_non_array_inputs_are_refused():
    normalizer, _ = pair(NormMode.MIN_MAX, {"min": np.zeros(DIM), "max": np.ones(DIM)})
    with pytest.raises(InvalidInput, match="numpy array or a torch tensor"):
        normalizer(Transition(action=[0.0] * DIM))
    with pytest.raises(InvalidInput, match="mapping"):
        normalizer(Transition(action={"shoulder_pan.pos": 0.0}))


def test_state_is_named_like_lerobots_safetensors():
    config = NormalizerConfig(
        features={"observation.images.top": {"type": "VISUAL", "shape": [3, 4, 4]}},
        norm_map={"VISUAL": "MEAN_STD"},
    )
    stats = {
        "observation.images.top": {"mean": [0.1, 0.2, 0.3], "std": [1, 1, 1], "count": [7]},
        "observation.state": {"mean": [0.0, 1.0]},
    }
    state = Normalizer(config, stats=stats).state_dict()
    assert set(state) == {
        "observation.images.top.mean",
        "observation.images.top.std",
        "observation.images.top.count",
        "observation.state.mean",
    }
    assert state["observation.images.top.mean"].shape == (3, 1, 1)
    assert state["observation.images.top.count"].shape == (1, 1, 1)
    assert all(v.dtype == np.float32 for v in state.values())

    reloaded = Unnormalizer(config)
    reloaded.load_state_dict(state)
    assert reloaded.state_dict().keys() == state.keys()
    for key, value in reloaded.state_dict().items():
        np.testing.assert_array_equal(value, state[key])

    with pytest.raises(ConfigError, match=r"<feature>\.<stat>"):
        reloaded.load_state_dict({"mean": np.zeros(2)})


def test_config_from_feature_specs_uses_each_kind():
    specs = {
        "observation.state": FeatureSpec("observation.state", "float32", (6,)),
        "observation.images.front": FeatureSpec("observation.images.front", "video", (48, 64, 3)),
        "action": FeatureSpec("action", "float32", (6,)),
    }
    config = NormalizerConfig.for_features(specs, {"VISUAL": "MEAN_STD", "ACTION": "min_max"})
    assert config.features["observation.images.front"].type is FeatureKind.VISUAL
    assert config.features["observation.images.front"].shape == (3, 48, 64)
    assert config.features["action"].type is FeatureKind.ACTION
    assert config.norm_map == {
        FeatureKind.VISUAL: NormMode.MEAN_STD,
        FeatureKind.ACTION: NormMode.MIN_MAX,
    }
    with pytest.raises(ConfigError, match="known modes"):
        NormalizerConfig(norm_map={"STATE": "z_score"})
    with pytest.raises(ConfigError, match="known types"):
        NormalizerConfig(norm_map={"JOINTS": "MEAN_STD"})


# Relative and absolute actions.

NAMES = ("shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "Gripper.pos")


@st.composite
def actions_and_state(draw):
    lead = draw(st.lists(st.integers(1, 3), min_size=0, max_size=1).map(tuple))
    chunk = draw(st.sampled_from([(), (draw(st.integers(1, 5)),)]))
    state_dim = draw(st.integers(len(NAMES), len(NAMES) + 2))
    actions = draw(hnp.arrays(np.float32, (*lead, *chunk, len(NAMES)), elements=values))
    state = draw(hnp.arrays(np.float32, (*lead, state_dim), elements=values))
    return actions, state


def relative_pair(**options):
    config = RelativeActionsConfig(action_names=NAMES, **options)
    return RelativeActions(config), AbsoluteActions(config)


@given(data=actions_and_state())
def test_absolute_undoes_relative(data):
    actions, state = data
    relative, absolute = relative_pair()
    transition = Transition(observation={"observation.state": state}, action=actions)
    moved = relative(transition)
    back = absolute(moved)
    np.testing.assert_allclose(back.action, actions, atol=1e-4)
    assert back.action.shape == actions.shape


@given(data=actions_and_state())
def test_excluded_joints_are_untouched_and_others_are_offsets(data):
    actions, state = data
    relative, _ = relative_pair()
    out = relative(Transition(observation={"observation.state": state}, action=actions)).action
    np.testing.assert_array_equal(out[..., 3], actions[..., 3])
    offset = state[..., None, :3] if actions.ndim > state.ndim else state[..., :3]
    np.testing.assert_array_equal(out[..., :3], actions[..., :3] - offset)


def test_joint_mask_matches_substrings_case_insensitively():
    assert joint_mask(4, NAMES, ["gripper"]).tolist() == [True, True, True, False]
    assert joint_mask(5, NAMES, ["PAN", "elbow"]).tolist() == [False, True, False, True, True]
    assert joint_mask(2, None, ["gripper"]).tolist() == [True, True]
    assert joint_mask(3, NAMES, []).tolist() == [True, True, True]


def test_relative_steps_pass_through_when_disabled_or_without_inputs():
    relative, absolute = relative_pair(enabled=False)
    transition = Transition(action=np.ones(4, dtype=np.float32))
    assert relative(transition) is transition
    assert absolute(transition) is transition
    relative, absolute = relative_pair()
    assert relative(transition) is transition
    with pytest.raises(InvalidInput, match="state") as info:
        absolute(transition)
    assert info.value.where == "observation.state"


def test_a_state_history_is_measured_from_its_last_step():
    # Policies reading n_obs_steps > 1 train on (B, S, D) states; the current one is the last.
    relative, absolute = relative_pair()
    history = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    chunk = np.ones((2, 5, 4), dtype=np.float32)
    out = relative(Transition(observation={"observation.state": history}, action=chunk)).action
    np.testing.assert_array_equal(out[..., :3], chunk[..., :3] - history[:, None, -1, :3])
    step = relative(Transition(observation={"observation.state": history}, action=chunk[:, 0]))
    np.testing.assert_array_equal(step.action, out[:, 0])
    # One unbatched state serves a batch of chunks (an unbatched observation at inference).
    back = absolute(Transition(observation={"observation.state": history[0, -1]}, action=out[:1]))
    np.testing.assert_allclose(back.action, chunk[:1])


def test_relative_actions_refuse_shapes_that_do_not_fit():
    relative, _ = relative_pair()
    state = np.zeros((2, 4), dtype=np.float32)
    with pytest.raises(InvalidInput, match="does not fit"):
        relative(
            Transition(observation={"observation.state": state}, action=np.zeros((2, 3, 5, 4)))
        )
    with pytest.raises(InvalidInput, match="fewer"):
        relative(
            Transition(observation={"observation.state": state[:, :2]}, action=np.zeros((2, 4)))
        )


# Rename, clip, batch.


def test_rename_renames_observations_and_features():
    step = RenameObservations(RenameConfig({"observation.images.top": "observation.images.front"}))
    image, state = np.zeros((3, 2, 2)), np.zeros(2)
    out = step(
        Transition(observation={"observation.images.top": image, "observation.state": state})
    )
    assert out.observation == {"observation.images.front": image, "observation.state": state}
    specs = {"observation.images.top": FeatureSpec("observation.images.top", "video", (2, 2, 3))}
    renamed = step.transform_features(specs)
    assert list(renamed) == ["observation.images.front"]
    assert renamed["observation.images.front"].key == "observation.images.front"


def test_clip_bounds_each_dimension():
    step = Clip(
        ClipConfig(
            {"action": {"min": [-1, 0], "max": [1, 0.5]}, "observation.state": {"min": 0, "max": 1}}
        )
    )
    out = step(
        Transition(
            observation={"observation.state": np.array([-3.0, 0.5, 3.0])},
            action=np.array([[2.0, 2.0], [-2.0, -2.0], [0.5, 0.25]], dtype=np.float32),
        )
    )
    np.testing.assert_array_equal(out.action, [[1, 0.5], [-1, 0], [0.5, 0.25]])
    assert out.action.dtype == np.float32
    np.testing.assert_array_equal(out.observation["observation.state"], [0, 0.5, 1])
    with pytest.raises(ConfigError, match="exceeds"):
        ClipConfig({"action": {"min": [1.0], "max": [0.0]}})
    with pytest.raises(ConfigError, match="values"):
        ClipConfig({"action": {"min": [0.0, 0.0], "max": [1.0]}})


def test_to_batch_adds_a_leading_axis_to_single_samples_only():
    step = AddBatchDimension()
    out = step(
        Transition(
            observation={
                "observation.state": np.zeros(6),
                "observation.images.front": np.zeros((3, 4, 5)),
                "observation.images.batched": np.zeros((2, 3, 4, 5)),
            },
            action=np.zeros(6),
            complementary_data={"task": "pick", "index": np.array(3)},
        )
    )
    assert out.observation["observation.state"].shape == (1, 6)
    assert out.observation["observation.images.front"].shape == (1, 3, 4, 5)
    assert out.observation["observation.images.batched"].shape == (2, 3, 4, 5)
    assert out.action.shape == (1, 6)
    assert out.complementary_data["task"] == ["pick"]
    assert out.complementary_data["index"].shape == (1,)


def test_loaded_statistics_must_fit_the_feature_be_finite_and_complete():
    config = NormalizerConfig(
        features={
            "observation.images.top": {"type": "VISUAL", "shape": [3, 4, 4]},
            "observation.state": {"type": "STATE", "shape": [3]},
        },
        norm_map={"VISUAL": "MEAN_STD", "STATE": "MEAN_STD"},
    )
    good = {
        "observation.images.top.mean": np.zeros((3, 1, 1), np.float32),  # LeRobot's, per channel
        "observation.images.top.std": np.ones(3, np.float32),  # flat per channel
        "observation.images.top.count": np.ones((1, 1, 1), np.float32),
        "observation.state.mean": np.zeros(3, np.float32),
        "observation.state.std": np.ones(1, np.float32),  # broadcast, as torch does in LeRobot
    }
    Normalizer(config).load_state_dict(good)
    for key, value, complaint in [
        ("observation.state.std", np.ones(5), "shape"),
        ("observation.state.std", np.ones((4, 4)), "shape"),
        ("observation.images.top.mean", np.zeros(4), "shape"),
        ("observation.state.mean", np.array([np.nan, 0, 0]), "NaN or inf"),
        ("observation.state.std", np.array([np.inf, 1, 1]), "NaN or inf"),
        ("observation.state.std", None, "needs the std statistic"),
    ]:
        state = {**good, key: value}
        if value is None:
            del state[key]
        with pytest.raises(ConfigError, match=complaint) as raised:
            Normalizer(config).load_state_dict(state)
        assert raised.value.where == key


def test_a_negative_epsilon_is_refused():
    with pytest.raises(ConfigError, match="eps"):
        NormalizerConfig(eps=-1.0)
