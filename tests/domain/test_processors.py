"""Pipelines: registry, saving as data + arrays, batch dicts, numpy/torch parity, LeRobot files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlctl.domain.errors import ConfigError
from rlctl.domain.frames import Transition
from rlctl.domain.processors import (
    STEP_REGISTRY,
    AbsoluteActions,
    AddBatchDimension,
    Clip,
    ClipConfig,
    NoConfig,
    Normalizer,
    NormalizerConfig,
    ProcessorPipeline,
    RelativeActions,
    RelativeActionsConfig,
    RenameConfig,
    RenameObservations,
    Step,
    StepRegistry,
    Unnormalizer,
    from_transition,
    pair_absolute_with_relative,
    register_step,
    state_key,
    to_transition,
)

NAMES = ("shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "gripper.pos")
NORMALIZER_CONFIG = NormalizerConfig(
    features={
        "observation.state": {"type": "STATE", "shape": [4]},
        "observation.images.front": {"type": "VISUAL", "shape": [3, 4, 5]},
        "action": {"type": "ACTION", "shape": [4]},
    },
    norm_map={"VISUAL": "MEAN_STD", "STATE": "MIN_MAX", "ACTION": "QUANTILES"},
)
STATS = {
    "observation.state": {"min": [-1.0, 0.0, 0.0, 2.0], "max": [1.0, 4.0, 0.0, 3.0]},
    "observation.images.front": {"mean": [0.4, 0.5, 0.6], "std": [0.2, 0.25, 0.3]},
    "action": {"q01": [-2.0, -1.0, 0.0, 0.0], "q99": [2.0, 3.0, 1.0, 1.0]},
}


def preprocessor() -> ProcessorPipeline:
    return ProcessorPipeline(
        [
            RenameObservations(
                RenameConfig({"observation.images.top": "observation.images.front"})
            ),
            RelativeActions(RelativeActionsConfig(action_names=NAMES)),
            Normalizer(NORMALIZER_CONFIG, stats=STATS),
            Clip(ClipConfig({"action": {"min": -1.5, "max": 1.5}})),
        ],
        name="policy_preprocessor",
    )


def postprocessor() -> ProcessorPipeline:
    # As in LeRobot, the post-processor declares only the action: the raw observation travels
    # beside it untouched, for the absolute-actions step to read the state from.
    only_action = attrs.evolve(
        NORMALIZER_CONFIG, features={"action": NORMALIZER_CONFIG.features["action"]}
    )
    return ProcessorPipeline(
        [
            Unnormalizer(only_action, stats=STATS),
            AbsoluteActions(RelativeActionsConfig(action_names=NAMES)),
        ],
        name="policy_postprocessor",
    )


floats = st.floats(-3, 3, allow_nan=False, width=32)


@st.composite
def raw_batches(draw):
    batch = draw(st.integers(1, 3))
    return {
        "observation.state": draw(hnp.arrays(np.float32, (batch, 4), elements=floats)),
        "observation.images.top": draw(
            hnp.arrays(np.float32, (batch, 3, 4, 5), elements=st.floats(0, 1, width=32))
        ),
        "action": draw(hnp.arrays(np.float32, (batch, 5, 4), elements=floats)),
        "action_is_pad": np.zeros((batch, 5), dtype=bool),
        "task": ["pick the cube"] * batch,
    }


def through_json(pipeline: ProcessorPipeline) -> ProcessorPipeline:
    data = json.loads(json.dumps(pipeline.to_data()))
    state = {
        key: {k: np.array(v) for k, v in arrays.items()} for key, arrays in pipeline.state().items()
    }
    return ProcessorPipeline.from_data(data, state=state)


def assert_same_batches(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            assert a[key].dtype == b[key].dtype, key
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        else:
            assert a[key] == b[key], key


# Saving and rebuilding.


@given(batch=raw_batches())
def test_a_rebuilt_pipeline_gives_identical_outputs(batch):
    pre, post = preprocessor(), postprocessor()
    rebuilt_pre = through_json(pre)
    # A saved absolute step records only `enabled`; loaders pair it with the relative step.
    rebuilt_post = pair_absolute_with_relative(rebuilt_pre, through_json(post))
    for original, rebuilt in ((pre, rebuilt_pre), (post, rebuilt_post)):
        assert rebuilt.to_data() == original.to_data()
        assert rebuilt.name == original.name
        assert [type(s) for s in rebuilt] == [type(s) for s in original]
        assert_same_batches(rebuilt.process_batch(batch), original.process_batch(batch))


def test_relative_action_steps_write_the_settings_lerobots_steps_take():
    relative = RelativeActionsConfig(exclude_joints=("gripper",), action_names=NAMES)
    pipeline = ProcessorPipeline([RelativeActions(relative), AbsoluteActions(relative)])
    written = [step["config"] for step in pipeline.to_data()["steps"]]
    assert written == [
        {"enabled": True, "exclude_joints": ["gripper"], "action_names": list(NAMES)},
        {"enabled": True},
    ]
    # LeRobot's steps always read observation.state; another state key is kept for rlctl.
    other = attrs.evolve(relative, state_key="observation.joints")
    pipeline = ProcessorPipeline([RelativeActions(other), AbsoluteActions(other)])
    assert [step["config"]["state_key"] for step in pipeline.to_data()["steps"]] == [
        "observation.joints",
        "observation.joints",
    ]


def test_a_loaded_absolute_step_measures_the_relative_steps_joints():
    relative = RelativeActionsConfig(exclude_joints=("wrist",), action_names=("arm", "wrist"))
    pre = ProcessorPipeline([RelativeActions(relative)])
    post = ProcessorPipeline([AbsoluteActions(RelativeActionsConfig(enabled=False))], name="post")
    paired = pair_absolute_with_relative(pre, post)
    assert paired.name == "post"
    assert paired[0].config == attrs.evolve(relative, enabled=False)
    # Without a relative step in the pre-processor the post-processor is left as it is.
    assert pair_absolute_with_relative(ProcessorPipeline([]), post) is post


def test_to_data_is_plain_json_and_state_is_keyed_by_step():
    pipeline = preprocessor()
    data = pipeline.to_data()
    assert json.loads(json.dumps(data)) == data
    assert [s["registry_name"] for s in data["steps"]] == [
        "rename_observations_processor",
        "relative_actions_processor",
        "normalizer_processor",
        "clip_processor",
    ]
    assert data["steps"][2]["config"] == {
        "eps": 1e-08,
        "features": {
            "observation.state": {"type": "STATE", "shape": [4]},
            "observation.images.front": {"type": "VISUAL", "shape": [3, 4, 5]},
            "action": {"type": "ACTION", "shape": [4]},
        },
        "norm_map": {"VISUAL": "MEAN_STD", "STATE": "MIN_MAX", "ACTION": "QUANTILES"},
    }
    state = pipeline.state()
    assert list(state) == [state_key(2, "normalizer_processor")] == ["step_2_normalizer_processor"]
    assert "observation.state.min" in state["step_2_normalizer_processor"]


def test_pre_and_post_processing_round_trip_to_the_raw_action():
    batch = {
        "observation.state": np.array([[0.5, 1.0, 0.0, 2.5]], dtype=np.float32),
        "action": np.array([[[0.25, 1.5, 0.5, 0.75]] * 3], dtype=np.float32),
    }
    normalized = preprocessor().process_batch(batch)
    back = postprocessor().process_batch(
        {"observation.state": batch["observation.state"], "action": normalized["action"]}
    )
    np.testing.assert_allclose(back["action"], batch["action"], atol=1e-6)


def test_from_data_reports_bad_entries_where_they_are():
    data = preprocessor().to_data()
    data["steps"][2]["config"]["eps"] = "small"
    with pytest.raises(ConfigError) as info:
        ProcessorPipeline.from_data(data)
    assert info.value.where == "policy_preprocessor.steps[2]"
    assert "eps" in str(info.value)

    with pytest.raises(ConfigError, match="registry_name"):
        ProcessorPipeline.from_data({"name": "p", "steps": [{"config": {}}]})
    with pytest.raises(ConfigError, match="list under 'steps'"):
        ProcessorPipeline.from_data({"name": "p"})
    with pytest.raises(ConfigError, match="does not have"):
        ProcessorPipeline.from_data(preprocessor().to_data(), state={"step_9_x": {}})
    with pytest.raises(ConfigError, match="no array state"):
        ProcessorPipeline.from_data(
            preprocessor().to_data(), state={"step_0_rename_observations_processor": {"a.b": [1]}}
        )


def test_lerobot_extras_in_step_entries_are_ignored():
    data = preprocessor().to_data()
    data["steps"][2]["state_file"] = "policy_preprocessor_step_2_normalizer_processor.safetensors"
    assert ProcessorPipeline.from_data(data).to_data() == preprocessor().to_data()


# The registry.


def test_an_unknown_step_name_lists_the_known_ones():
    with pytest.raises(ConfigError) as info:
        ProcessorPipeline.from_data({"name": "p", "steps": [{"registry_name": "resize_processor"}]})
    message = str(info.value)
    assert "resize_processor" in message
    for name in ("normalizer_processor", "unnormalizer_processor", "clip_processor"):
        assert name in message
    assert info.value.where == "p.steps[0].registry_name"


def test_steps_from_outside_the_domain_register_and_rebuild():
    registry = StepRegistry(base=STEP_REGISTRY)

    @attrs.frozen
    class ScaleConfig:
        factor: float = 1.0

    @registry.register("scale_processor")
    class Scale(Step[ScaleConfig]):
        config_class = ScaleConfig

        def __call__(self, transition: Transition) -> Transition:
            return transition.evolve(action=transition.action * self.config.factor)

    assert Scale.name == "scale_processor"
    assert "scale_processor" in registry and "scale_processor" not in STEP_REGISTRY
    assert "normalizer_processor" in registry.names()
    pipeline = ProcessorPipeline([Scale(ScaleConfig(2.0)), AddBatchDimension()])
    rebuilt = ProcessorPipeline.from_data(pipeline.to_data(), registry=registry)
    out = rebuilt(Transition(action=np.ones(2)))
    np.testing.assert_array_equal(out.action, [[2.0, 2.0]])
    with pytest.raises(ConfigError, match="unknown processor step 'scale_processor'"):
        ProcessorPipeline.from_data(pipeline.to_data())


def test_a_taken_name_cannot_be_reused_by_another_class():
    with pytest.raises(ConfigError, match="taken"):

        @register_step("normalizer_processor")
        class Impostor(Step[NoConfig]):
            pass


def test_an_unregistered_step_cannot_be_saved():
    class Anonymous(Step[NoConfig]):
        def __call__(self, transition):
            return transition

    with pytest.raises(ConfigError, match="no registry name") as info:
        ProcessorPipeline([Anonymous()]).to_data()
    assert "register_step" in info.value.hint


# Batch dicts.


def test_batch_keys_go_where_lerobot_puts_them():
    batch = {
        "observation.state": np.zeros(2),
        "observation.images.front": np.zeros((3, 2, 2)),
        "observation.state_is_pad": np.zeros(1, dtype=bool),
        "action": np.zeros(2),
        "action_is_pad": np.zeros(1, dtype=bool),
        "next.reward": 1.0,
        "next.done": True,
        "task": "pick",
        "index": 7,
        "episode_index": 1,
        "timestamp": 0.5,
    }
    transition = to_transition(batch)
    assert set(transition.observation) == {"observation.state", "observation.images.front"}
    assert transition.action is batch["action"]
    assert transition.reward == 1.0 and transition.done is True and transition.truncated is False
    assert set(transition.complementary_data) == {
        "observation.state_is_pad",
        "action_is_pad",
        "task",
        "index",
        "episode_index",
        "timestamp",
    }
    assert from_transition(transition) == batch


@given(batch=raw_batches())
def test_a_pipeline_without_steps_gives_the_batch_as_the_round_trip_does(batch):
    """An empty pipeline (a small model's training pre-processing) skips the transition but
    gives what going through it gives: a new dict with the same entries."""
    out = ProcessorPipeline().process_batch(batch)
    assert out is not batch
    assert_same_batches(out, from_transition(to_transition(batch)))


def test_a_transition_without_extras_gives_a_minimal_batch():
    assert from_transition(Transition(observation={"observation.state": 1})) == {
        "observation.state": 1
    }


# The same pipeline on torch tensors.


def test_numpy_and_torch_give_the_same_outputs():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    batch = {
        "observation.state": (rng.uniform(-1, 3, (2, 4)) * [1, 1, 0, 1]).astype(np.float32),
        "observation.images.top": rng.uniform(0, 1, (2, 3, 4, 5)).astype(np.float32),
        "action": rng.uniform(-2, 2, (2, 5, 4)).astype(np.float32),
        "task": ["a", "b"],
    }
    tensors = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in batch.items()}
    for pipeline in (preprocessor(), postprocessor()):
        expected = pipeline.process_batch(batch)
        got = pipeline.process_batch(tensors)
        assert expected.keys() == got.keys()
        for key, value in expected.items():
            if isinstance(value, np.ndarray):
                assert isinstance(got[key], torch.Tensor), key
                assert got[key].dtype == torch.float32, key
                np.testing.assert_allclose(got[key].numpy(), value, rtol=1e-6, atol=1e-6)
    # State dim 2 has min == max == 0: both take the eps path and map the constant to -1.
    state = preprocessor().process_batch(tensors)["observation.state"]
    np.testing.assert_array_equal(state[:, 2].numpy(), [-1.0, -1.0])


# LeRobot's own files.


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """A float32-only safetensors reader: the domain tests do not depend on the library."""
    raw = path.read_bytes()
    (header_size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_size])
    body = raw[8 + header_size :]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32"
        start, end = entry["data_offsets"]
        out[name] = np.frombuffer(body[start:end], dtype="<f4").reshape(entry["shape"])
    return out


@attrs.frozen
class FakeDeviceConfig:
    device: str = "cpu"
    float_dtype: str | None = None


@pytest.mark.parametrize("policy", ["act_tiny", "diffusion_tiny"])
@pytest.mark.parametrize("which", ["policy_preprocessor", "policy_postprocessor"])
def test_lerobot_processor_files_load_and_save_unchanged(fixtures_dir, policy, which):
    # `device_processor` is an adapter's step; a stand-in keeps this test inside the domain.
    registry = StepRegistry(base=STEP_REGISTRY)

    @registry.register("device_processor")
    class FakeDevice(Step[FakeDeviceConfig]):
        config_class = FakeDeviceConfig

        def __call__(self, transition):
            return transition

    folder = fixtures_dir / policy
    data = json.loads((folder / f"{which}.json").read_text())
    state = {
        entry["state_file"]
        .removeprefix(f"{which}_")
        .removesuffix(".safetensors"): read_safetensors(folder / entry["state_file"])
        for entry in data["steps"]
        if "state_file" in entry
    }
    pipeline = ProcessorPipeline.from_data(data, state=state, registry=registry)

    for entry in data["steps"]:
        entry.pop("state_file", None)
    assert pipeline.to_data() == data
    saved = pipeline.state()
    assert saved.keys() == state.keys()
    for key, arrays in state.items():
        assert saved[key].keys() == arrays.keys()
        for name, array in arrays.items():
            assert saved[key][name].shape == array.shape, name
            np.testing.assert_array_equal(saved[key][name], array, err_msg=name)


def test_lerobot_reference_inputs_normalise_by_the_saved_stats(fixtures_dir):
    folder = fixtures_dir / "act_tiny"
    stats = read_safetensors(folder / "policy_preprocessor_step_3_normalizer_processor.safetensors")
    data = json.loads((folder / "policy_preprocessor.json").read_text())
    config = NormalizerConfig(**data["steps"][3]["config"])
    normalizer = Normalizer(config)
    normalizer.load_state_dict(stats)
    reference = np.load(fixtures_dir / "act_tiny.reference.npz")
    state = reference["0/input/observation.state"]
    image = reference["0/input/observation.images.front"]
    out = normalizer(
        Transition(observation={"observation.state": state, "observation.images.front": image})
    )
    expected_state = (state - stats["observation.state.mean"]) / (
        stats["observation.state.std"] + 1e-8
    )
    np.testing.assert_array_equal(out.observation["observation.state"], expected_state)
    mean = stats["observation.images.front.mean"]
    std = stats["observation.images.front.std"]
    np.testing.assert_array_equal(
        out.observation["observation.images.front"], (image - mean) / (std + 1e-8)
    )
