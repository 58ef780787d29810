"""Depth quantization and the depth video encoding: LeRobot 0.6.1's numbers and info.json keys."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.depth import (
    DEPTH_QMAX,
    DepthQuantization,
    depth_frame,
    infer_depth_unit,
    is_depth_map,
    unit_factor,
)
from rlctl.domain.errors import FeatureMismatch, InvalidInput, RlctlError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.video import (
    VideoEncoding,
    VideoStreamInfo,
    depth_video_encoding,
    video_feature_info,
)


def dequantize(codes: np.ndarray, q: DepthQuantization) -> np.ndarray:
    """LeRobot's inverse, in metres (float64 here: the test only bounds the error)."""
    scale, offset = q.scale_offset()
    values = codes * scale + offset
    if q.use_log:
        values = np.exp(values) - q.shift
    return np.clip(values, q.depth_min, q.depth_max)


def test_the_range_maps_onto_the_twelve_bit_codes():
    q = DepthQuantization()
    metres = np.array([[0.0, 0.01, 10.0, 25.0]], dtype=np.float32)
    assert q.quantize(metres).tolist() == [[0, 0, DEPTH_QMAX, DEPTH_QMAX]]
    # Millimetres (integers) land on the same codes as the same depth in metres.
    mm = np.array([[10, 500, 2000, 10_000]], dtype=np.uint16)
    np.testing.assert_array_equal(q.quantize(mm), q.quantize((mm / 1000).astype(np.float32)))
    linear = DepthQuantization(depth_min=0.0, depth_max=4.095, use_log=False)
    assert linear.quantize(np.array([[0.0, 1.0, 4.095]], np.float32)).tolist() == [[0, 1000, 4095]]


@given(st.floats(0.01, 10.0), st.booleans())
def test_a_depth_comes_back_within_half_a_code(depth: float, use_log: bool) -> None:
    q = DepthQuantization(use_log=use_log)
    code = q.quantize(np.array([[depth]], dtype=np.float32))
    back = dequantize(code.astype(np.float64), q)[0, 0]
    neighbour = dequantize(np.clip(code.astype(np.float64) + 1, 0, DEPTH_QMAX), q)[0, 0]
    below = dequantize(np.clip(code.astype(np.float64) - 1, 0, DEPTH_QMAX), q)[0, 0]
    step = max(neighbour - back, back - below)
    # The codes are computed in float32: allow its rounding.
    float32_rounding = 4 * float(np.finfo(np.float32).eps) * depth
    assert abs(back - np.float32(depth)) <= step / 2 + 1e-6 + float32_rounding


def test_settings_come_from_and_go_to_info_json():
    q = DepthQuantization(depth_min=0.1, depth_max=5, shift=2.0, use_log=False)
    assert q.to_info() == {
        "video.depth_min": 0.1,
        "video.depth_max": 5.0,
        "video.shift": 2.0,
        "video.use_log": False,
    }
    assert DepthQuantization.from_info(q.to_info()) == q
    assert DepthQuantization.from_info({"video.depth_max": None}) == DepthQuantization()
    with pytest.raises(InvalidInput, match="exceed"):
        DepthQuantization(depth_min=2.0, depth_max=1.0)
    with pytest.raises(InvalidInput, match="depth_min \\+ shift"):
        DepthQuantization(depth_min=0.01, shift=-1.0)


def test_the_depth_encoding_is_lerobots_depth_encoder_config():
    encoding = depth_video_encoding()
    assert (encoding.codec, encoding.pix_fmt, encoding.g, encoding.crf) == (
        "hevc",
        "gray12le",
        2,
        30,
    )
    assert encoding.preset is None
    assert encoding.codec_options() == {"g": "2", "crf": "30", "x265-params": "lossless=1"}
    assert encoding.to_info() == {
        "video.g": 2,
        "video.crf": 30,
        "video.preset": None,
        "video.fast_decode": 0,
        "video.video_backend": "pyav",
        "video.extra_options": {"x265-params": "lossless=1"},
        "video.depth_min": 0.01,
        "video.depth_max": 10.0,
        "video.shift": 3.5,
        "video.use_log": True,
    }
    # Through a process boundary (attrs.asdict + JSON) and back from info.json.
    assert VideoEncoding(**attrs.asdict(encoding)) == encoding
    info = {"is_depth_map": True, "video.codec": "hevc", **encoding.to_info()}
    assert VideoEncoding.from_info(info) == encoding
    # Missing keys take the depth defaults; an empty extra_options (left by merges) too.
    assert VideoEncoding.from_info({"is_depth_map": True}) == encoding
    assert VideoEncoding.from_info({"is_depth_map": True, "video.extra_options": {}}) == encoding
    tuned = VideoEncoding.from_info({"is_depth_map": True, "video.depth_max": 4.0})
    assert tuned.depth == DepthQuantization(depth_max=4.0)
    assert VideoEncoding.from_info({"video.codec": "av1"}).depth is None


def test_depth_maps_are_recognised_as_lerobot_does():
    assert is_depth_map({"is_depth_map": True})
    assert is_depth_map({"video.is_depth_map": True})
    assert is_depth_map(None, {"video.is_depth_map": True})
    assert not is_depth_map({"is_depth_map": False}) and not is_depth_map(None)
    spec = FeatureSpec.from_info(
        "cam", {"dtype": "video", "shape": [8, 8, 1], "video_info": {"video.is_depth_map": True}}
    )
    assert spec.is_depth_map
    assert not FeatureSpec("x", "float32", (1,), info={"is_depth_map": True}).is_depth_map
    stream = VideoStreamInfo(32, 16, 10.0, "hevc", "gray12le", 4, 0.4)
    info = {"is_depth_map": True, "depth_unit": "mm"}
    info = {**info, **video_feature_info(stream, depth_video_encoding())}
    # LeRobot's order: the depth keys the feature came with first, then stream, encoder, quantizer.
    assert list(info)[:4] == ["is_depth_map", "depth_unit", "video.height", "video.width"]
    assert list(info)[-1] == "video.use_log" and info["is_depth_map"] is True
    assert info["video.channels"] == 1


def test_units_and_frames():
    assert infer_depth_unit(np.uint16) == "mm" and infer_depth_unit(np.float32) == "m"
    assert unit_factor("m", "mm") == 1000.0 and unit_factor("mm", "m") == 0.001
    assert unit_factor("mm", "mm") == 1.0
    for shape in ((4, 6), (4, 6, 1), (1, 4, 6)):
        assert depth_frame("d", np.zeros(shape, np.uint16), 4, 6).shape == (4, 6, 1)
    with pytest.raises(FeatureMismatch, match="got float64 values"):
        depth_frame("d", np.zeros((4, 6)), 4, 6)
    with pytest.raises(FeatureMismatch, match="of shape \\(6, 4\\)"):
        depth_frame("d", np.zeros((6, 4), np.uint16), 4, 6)


@pytest.mark.parametrize(("word", "value"), [("false", False), ("No", False), ("true", True)])
def test_use_log_from_a_datasets_info_reads_words_as_they_mean(word, value):
    assert DepthQuantization.from_info({"video.use_log": word}).use_log is value


def test_use_log_refuses_a_word_that_is_not_yes_or_no():
    with pytest.raises(RlctlError, match="'ture' is not a yes/no value"):
        DepthQuantization.from_info({"video.use_log": "ture"})
