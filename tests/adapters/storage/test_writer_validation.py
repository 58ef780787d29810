"""Bad frames and bad calls fail at once, with a message naming the key and what was wrong."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.storage.lerobot_v3.frame_validation import FrameValidator
from rlctl.adapters.storage.lerobot_v3.writer import LeRobotV3Writer, WriterOptions
from rlctl.domain.errors import FeatureMismatch, InvalidInput, NotSupported
from rlctl.domain.features import FeatureSpec
from rlctl.domain.frames import Frame

FEATURES = {
    "observation.state": FeatureSpec("observation.state", "float32", (3,)),
    "next.done": FeatureSpec("next.done", "bool", (1,)),
    "observation.images.cam": FeatureSpec(
        "observation.images.cam", "image", (4, 6, 3), names=["height", "width", "channels"]
    ),
    "language": FeatureSpec("language", "string", (1,)),
}


def good_frame(**changes):
    frame = {
        "observation.state": np.zeros(3, np.float32),
        "next.done": np.array([False]),
        "observation.images.cam": np.zeros((4, 6, 3), np.uint8),
        "language": "hello",
        "task": "pick",
    }
    frame.update(changes)
    return frame


validate = FrameValidator(FEATURES)


def test_a_good_frame_passes_and_keeps_its_task() -> None:
    valid = validate(good_frame())
    assert valid.task == "pick"
    assert valid.values["observation.state"].dtype == np.float32


@pytest.mark.parametrize(
    ("changes", "key", "words"),
    [
        ({"observation.state": np.zeros(4, np.float32)}, "observation.state", ["(3,)", "(4,)"]),
        (
            {"observation.state": np.zeros(3, np.complex64)},
            "observation.state",
            ["float32", "complex64"],
        ),
        ({"observation.state": "abc"}, "observation.state", ["float32"]),
        ({"next.done": np.array([1.0])}, "next.done", ["bool", "float64"]),
        (
            {"observation.images.cam": np.zeros((5, 6, 3), np.uint8)},
            "observation.images.cam",
            ["(4, 6, 3)", "(5, 6, 3)"],
        ),
        (
            {"observation.images.cam": np.zeros((4, 6, 3), np.int32)},
            "observation.images.cam",
            ["uint8", "int32"],
        ),
        ({"observation.images.cam": np.full((4, 6, 3), 2.0)}, "observation.images.cam", ["[0, 1]"]),
        ({"language": 3}, "language", ["str", "int"]),
        ({"task": 3}, "task", ["str"]),
    ],
)
def test_a_value_that_does_not_fit_names_the_key_expected_and_actual(changes, key, words) -> None:
    with pytest.raises(FeatureMismatch) as caught:
        validate(good_frame(**changes))
    message = str(caught.value)
    assert repr(key) in message
    for word in words:
        assert word in message


def test_missing_and_unknown_keys_are_listed() -> None:
    frame = good_frame(extra=1)
    del frame["language"]
    with pytest.raises(FeatureMismatch, match="missing language; unknown extra"):
        validate(frame)


def test_bookkeeping_keys_are_refused_with_the_reason() -> None:
    with pytest.raises(FeatureMismatch, match="timestamp"):
        validate(good_frame(timestamp=0.1))


def test_a_mapping_needs_a_task() -> None:
    frame = good_frame()
    del frame["task"]
    with pytest.raises(FeatureMismatch, match="no 'task'"):
        validate(frame)


def test_images_come_channels_last_or_first_uint8_or_float() -> None:
    hwc = np.arange(72, dtype=np.uint8).reshape(4, 6, 3)
    chw = np.ascontiguousarray(hwc.transpose(2, 0, 1))
    for image in (hwc, chw, hwc / 255.0, (hwc / 255.0).astype(np.float32)):
        stored = validate(good_frame(**{"observation.images.cam": image}))
        np.testing.assert_array_equal(stored.values["observation.images.cam"], hwc)


def test_friendly_conversions_are_accepted() -> None:
    valid = validate(
        Frame(
            values={
                "observation.state": [1, 2, 3],  # ints into a float feature
                "next.done": False,  # a scalar for a one-element feature
                "observation.images.cam": np.zeros((4, 6, 3), np.uint8),
                "language": "x",
            },
            task="push",
        )
    )
    assert valid.values["observation.state"].tolist() == [1.0, 2.0, 3.0]
    assert valid.values["next.done"].shape == (1,)
    assert valid.task == "push"


def _session(tmp_path: Path, **create):
    writer = LeRobotV3Writer(options=WriterOptions(encode_in_subprocess=False, durable=False))
    return writer.create(tmp_path / "ds", fps=10, features=FEATURES, **create)


def test_save_episode_needs_frames(tmp_path: Path) -> None:
    with _session(tmp_path) as session, pytest.raises(InvalidInput, match="no frames"):
        session.save_episode()


def test_a_rejected_frame_leaves_the_episode_as_it_was(tmp_path: Path) -> None:
    with _session(tmp_path) as session:
        session.add_frame(good_frame())
        with pytest.raises(FeatureMismatch):
            session.add_frame(good_frame(**{"observation.state": np.zeros(2, np.float32)}))
        assert session.episode_frames == 1
        assert session.save_episode().length == 1


def test_clear_episode_buffer_drops_the_frames(tmp_path: Path) -> None:
    with _session(tmp_path) as session:
        session.add_frame(good_frame(task="dropped"))
        session.clear_episode_buffer()
        session.add_frame(good_frame())
        record = session.save_episode()
        meta = session.flush()
    assert record.length == 1 and meta.tasks == ("pick",)


def test_create_refuses_a_folder_with_content(tmp_path: Path) -> None:
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "something").write_text("x")
    with pytest.raises(InvalidInput, match="already there"):
        _session(tmp_path)


@pytest.mark.parametrize(
    ("features", "error", "words"),
    [
        ({"x": FeatureSpec("x", "float32", (1, 2, 1, 2, 1, 2))}, NotSupported, "rank 5 at most"),
        ({"index": FeatureSpec("index", "float32", (1,))}, InvalidInput, "writer fills"),
        ({}, InvalidInput, "at least one feature"),
    ],
)
def test_create_refuses_features_it_cannot_write(tmp_path, features, error, words) -> None:
    writer = LeRobotV3Writer(options=WriterOptions(encode_in_subprocess=False))
    with pytest.raises(error, match=words):
        writer.create(tmp_path / "ds", fps=10, features=features)


def test_a_finalized_session_refuses_frames(tmp_path: Path) -> None:
    session = _session(tmp_path)
    session.finalize()
    with pytest.raises(InvalidInput, match="finalized"):
        session.add_frame(good_frame())
    session.finalize()  # idempotent
