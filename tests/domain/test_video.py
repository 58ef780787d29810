"""Video settings convert to ffmpeg options and to LeRobot's `video.*` info keys as LeRobot does."""

from __future__ import annotations

import pytest

from rlctl.domain.errors import InvalidInput, VideoError
from rlctl.domain.video import (
    VideoEncoding,
    VideoSegment,
    VideoStreamInfo,
    default_tolerance_s,
    pixel_channels,
    video_feature_info,
    viewing_encoding,
)


def test_defaults_are_lerobots() -> None:
    encoding = VideoEncoding()
    assert (encoding.codec, encoding.pix_fmt, encoding.g, encoding.crf) == (
        "libsvtav1",
        "yuv420p",
        2,
        30,
    )
    assert encoding.preset == "12"
    assert encoding.codec_options() == {
        "g": "2",
        "crf": "30",
        "preset": "12",
        "svtav1-params": "fast-decode=0",
    }


def test_svtav1_threads_and_fast_decode_go_into_its_params() -> None:
    options = VideoEncoding(fast_decode=5).codec_options(threads=4)
    assert options["svtav1-params"] == "fast-decode=2:lp=4"


def test_x264_options() -> None:
    encoding = VideoEncoding(codec="h264", fast_decode=1, extra_options={"crf": 1, "bf": 0})
    assert encoding.preset is None
    assert encoding.codec_options(threads=2) == {
        "g": "2",
        "crf": "30",  # extra options never override a structured field
        "tune": "fastdecode",
        "threads": "2",
        "bf": "0",
    }


def test_videos_to_watch_use_a_long_gop_and_a_fast_preset() -> None:
    assert viewing_encoding("libx264").codec_options() == {"crf": "23", "preset": "veryfast"}
    assert viewing_encoding("hevc").preset == "veryfast"
    # AV1 keeps LeRobot's fastest preset; only the 2-frame GOP (for random access) goes.
    assert viewing_encoding("av1").codec_options() == {
        "crf": "30",
        "preset": "12",
        "svtav1-params": "fast-decode=0",
    }


@pytest.mark.parametrize(("name", "codec"), [("av1", "libsvtav1"), ("libx264", "h264")])
def test_stream_names_are_accepted_as_codecs(name: str, codec: str) -> None:
    assert VideoEncoding(codec=name).codec == codec


def test_unsupported_settings_are_refused() -> None:
    with pytest.raises(InvalidInput, match="vp9"):
        VideoEncoding(codec="vp9")
    with pytest.raises(InvalidInput, match="yuv444p"):
        VideoEncoding(pix_fmt="yuv444p")


@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_x264_and_x265_take_yuv444p_as_in_lerobot(codec: str) -> None:
    assert VideoEncoding(codec=codec, pix_fmt="yuv444p").pix_fmt == "yuv444p"


@pytest.mark.parametrize(
    "encoding",
    [
        VideoEncoding(),
        VideoEncoding(codec="hevc", g=4, crf=23, preset="fast", fast_decode=1),
        VideoEncoding(codec="h264", extra_options={"tune": "film"}),
    ],
)
def test_info_round_trip(encoding: VideoEncoding) -> None:
    info = {"video.codec": encoding.stream_codec, "video.pix_fmt": encoding.pix_fmt}
    info.update(encoding.to_info())
    assert VideoEncoding.from_info(info) == encoding


def test_null_info_values_mean_the_defaults_as_in_lerobot() -> None:
    assert VideoEncoding.from_info({"video.g": None, "video.crf": None}) == VideoEncoding()
    assert VideoEncoding.from_info(None) == VideoEncoding()


def test_feature_info_has_lerobots_keys() -> None:
    stream = VideoStreamInfo(64, 48, 10.0, "av1", "yuv420p", frame_count=75, duration_s=7.5)
    info = video_feature_info(stream, VideoEncoding())
    assert info == {
        "video.height": 48,
        "video.width": 64,
        "video.codec": "av1",
        "video.pix_fmt": "yuv420p",
        "video.fps": 10,
        "video.channels": 3,
        "has_audio": False,
        "video.g": 2,
        "video.crf": 30,
        "video.preset": 12,
        "video.fast_decode": 0,
        "video.video_backend": "pyav",
        "video.extra_options": {},
        "is_depth_map": False,
    }
    assert isinstance(info["video.fps"], int)


def test_pixel_channels() -> None:
    assert [pixel_channels(f) for f in ("gray", "yuv420p", "rgba", "yuva420p")] == [1, 3, 4, 4]
    with pytest.raises(VideoError):
        pixel_channels("bayer_rggb8")


def test_tolerance_and_segments() -> None:
    assert default_tolerance_s(10) == pytest.approx(0.0999)
    assert VideoSegment(2.0, 4.5, 25).duration_s == 2.5


def test_settings_structure_from_config_data() -> None:
    from rlctl.domain.config import structure, unstructure

    data = {"codec": "h264", "crf": 23.0, "preset": "fast", "extra_options": {"tune": "film"}}
    encoding = structure(data, VideoEncoding)
    assert encoding == VideoEncoding(
        codec="h264", crf=23, preset="fast", extra_options=data["extra_options"]
    )
    assert structure(unstructure(encoding), VideoEncoding) == encoding
    assert structure({"preset": 8}, VideoEncoding).codec_options()["preset"] == "8"
    assert hash(encoding) == hash(structure(unstructure(encoding), VideoEncoding))
