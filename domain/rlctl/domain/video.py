"""Video vocabulary: encoder settings, what a video file holds, and where an episode sits in it.

LeRobot v3.0 concatenates many episodes into one mp4 per camera; each episode's rows in
`meta/episodes` give its span (`from_timestamp`, `to_timestamp`) inside the file, and the
feature's `info` block in `meta/info.json` records the stream and the encoder settings as
`video.*` keys. The classes here convert to and from those keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from rlctl.domain.depth import DEPTH_PIX_FMT, DepthQuantization, is_depth_map
from rlctl.domain.errors import InvalidInput, VideoError

SUPPORTED_CODECS = frozenset({"libsvtav1", "h264", "hevc"})
# info.json stores the stream's canonical codec name ("av1"); encoders are named differently.
_CODEC_ALIASES = {"av1": "libsvtav1", "libx264": "h264", "libx265": "hevc", "h265": "hevc"}
_STREAM_CODEC_NAMES = {"libsvtav1": "av1", "h264": "h264", "hevc": "hevc"}
# LeRobot's default preset for libsvtav1 (fastest); x264/x265 keep their own default.
LIBSVTAV1_DEFAULT_PRESET = 12
# The only encoding backend LeRobot records in `video.video_backend`.
ENCODING_BACKEND = "pyav"


class VideoTimestampError(VideoError):
    """A queried timestamp has no frame within the tolerance: the data, not the decoder, is off."""


def default_tolerance_s(fps: float) -> float:
    """LeRobot's tolerance between a queried timestamp and the frame it gets: 1/fps - 1e-4."""
    return 1.0 / fps - 1e-4


def canonical_codec(name: str) -> str:
    """The encoder name for `name`, accepting the stream names LeRobot writes ("av1")."""
    codec = _CODEC_ALIASES.get(name, name)
    if codec not in SUPPORTED_CODECS:
        raise InvalidInput(
            f"unsupported video codec {name!r}",
            where="video.codec",
            hint=f"use one of {', '.join(sorted(SUPPORTED_CODECS))}",
        )
    return codec


def pixel_channels(pix_fmt: str) -> int:
    """Channels of a decoded frame for a pixel format, as LeRobot counts them."""
    if any(tag in pix_fmt for tag in ("gray", "depth", "monochrome")):
        return 1
    if "rgba" in pix_fmt or "yuva" in pix_fmt:
        return 4
    if "rgb" in pix_fmt or "yuv" in pix_fmt:
        return 3
    raise VideoError(f"unknown pixel format {pix_fmt!r}", where="video.pix_fmt")


def _default_preset(encoding: VideoEncoding) -> str | None:
    return str(LIBSVTAV1_DEFAULT_PRESET) if encoding.codec == "libsvtav1" else None


# The fields below have one type each, so the config converter (cattrs) can build them from data;
# these converters accept the other spellings LeRobot's info.json uses.
def _preset_text(value: int | str | None) -> str | None:
    return None if value is None else str(value)


def _options(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(value)


def _number(value: float | None) -> float | None:
    """30.0 becomes 30, so the options ffmpeg parses and the JSON written match LeRobot's."""
    if value is None:
        return None
    return int(value) if float(value).is_integer() else float(value)


def _depth(value: DepthQuantization | Mapping[str, Any] | None) -> DepthQuantization | None:
    if value is None or isinstance(value, DepthQuantization):
        return value
    return DepthQuantization(**value)


def _preset_for_info(preset: str | None) -> int | str | None:
    # LeRobot writes svt-av1's numeric presets as numbers and x264's named ones as strings.
    return int(preset) if preset is not None and preset.lstrip("-").isdigit() else preset


@attrs.frozen
class VideoEncoding:
    """How frames are compressed; defaults are LeRobot's (AV1, GOP 2, CRF 30, preset 12).

    `depth` is set for a depth camera: frames are quantized by it and encoded as 12-bit gray
    (see `rlctl.domain.depth` and `depth_video_encoding`).
    """

    codec: str = attrs.field(default="libsvtav1", converter=canonical_codec)
    pix_fmt: str = "yuv420p"
    g: int | None = 2
    crf: float | None = attrs.field(default=30, converter=_number)
    preset: str | None = attrs.field(
        default=attrs.Factory(_default_preset, takes_self=True), converter=_preset_text
    )
    fast_decode: int = 0
    extra_options: Mapping[str, Any] = attrs.field(factory=dict, converter=_options, hash=False)
    depth: DepthQuantization | None = attrs.field(default=None, converter=_depth)

    def __attrs_post_init__(self) -> None:
        # libsvtav1 takes 4:2:0 only; x264 and x265 (h264, hevc) take yuv444p, as in LeRobot.
        if self.codec == "libsvtav1" and self.pix_fmt == "yuv444p":
            raise InvalidInput(
                f"{self.codec} cannot encode yuv444p",
                where="video.pix_fmt",
                hint="use pix_fmt yuv420p, or codec h264 or hevc for yuv444p",
            )

    @property
    def stream_codec(self) -> str:
        """The codec name a decoder reports for streams this encoding writes ("av1")."""
        return _STREAM_CODEC_NAMES[self.codec]

    def codec_options(self, threads: int | None = None) -> dict[str, str]:
        """ffmpeg encoder options, as LeRobot's `VideoEncoderConfig.get_codec_options` makes."""
        options: dict[str, str] = {}
        if self.g is not None:
            options["g"] = str(self.g)
        if self.crf is not None:
            options["crf"] = str(self.crf)
        if self.preset is not None:
            options["preset"] = self.preset
        if self.codec == "libsvtav1":
            params = [f"fast-decode={max(0, min(2, self.fast_decode))}"]
            if threads is not None:
                params.append(f"lp={threads}")
            options["svtav1-params"] = ":".join(params)
        else:
            if self.fast_decode:
                options["tune"] = "fastdecode"
            if threads is not None:
                options["threads"] = str(threads)
        # Extra options never override a structured field, as in LeRobot.
        for key, value in self.extra_options.items():
            options.setdefault(key, str(value))
        return options

    def to_info(self) -> dict[str, Any]:
        """The encoder keys of a video feature's `info` block; stream keys come from probing."""
        return {
            "video.g": self.g,
            "video.crf": self.crf,
            "video.preset": _preset_for_info(self.preset),
            "video.fast_decode": self.fast_decode,
            "video.video_backend": ENCODING_BACKEND,
            "video.extra_options": dict(self.extra_options),
            **(self.depth.to_info() if self.depth is not None else {}),
        }

    @classmethod
    def from_info(cls, info: Mapping[str, Any] | None) -> VideoEncoding:
        """Rebuild the settings from an `info` block; missing or null keys take the defaults
        (a depth map's: `depth_video_encoding`'s, as LeRobot's `DepthEncoderConfig`)."""
        info = info or {}
        if is_depth_map(info):
            return _depth_encoding_from_info(info)
        kwargs: dict[str, Any] = {}
        for key, name in _INFO_FIELDS:
            if info.get(key) is not None:
                kwargs[name] = info[key]
        return cls(**kwargs)


# `info` keys of a video feature and the `VideoEncoding` fields they hold.
_INFO_FIELDS = (
    ("video.codec", "codec"),
    ("video.pix_fmt", "pix_fmt"),
    ("video.g", "g"),
    ("video.crf", "crf"),
    ("video.preset", "preset"),
    ("video.fast_decode", "fast_decode"),
    ("video.extra_options", "extra_options"),
)


@attrs.frozen
class VideoStreamInfo:
    """What probing a video file finds: its picture size, rate, codec and length."""

    width: int
    height: int
    fps: float
    codec: str
    pix_fmt: str
    frame_count: int
    duration_s: float
    has_audio: bool = False

    @property
    def channels(self) -> int:
        return pixel_channels(self.pix_fmt)

    def to_info(self) -> dict[str, Any]:
        """The stream keys of a video feature's `info` block, in LeRobot's order."""
        fps: float | int = int(self.fps) if float(self.fps).is_integer() else self.fps
        return {
            "video.height": self.height,
            "video.width": self.width,
            "video.codec": self.codec,
            "video.pix_fmt": self.pix_fmt,
            "video.fps": fps,
            "video.channels": self.channels,
            "has_audio": self.has_audio,
        }


def depth_video_encoding(quantization: DepthQuantization | None = None) -> VideoEncoding:
    """LeRobot's `DepthEncoderConfig` defaults: HEVC, gray12le, lossless x265, GOP 2, CRF 30."""
    return VideoEncoding(
        codec="hevc",
        pix_fmt=DEPTH_PIX_FMT,
        extra_options={"x265-params": "lossless=1"},
        depth=quantization or DepthQuantization(),
    )


def _depth_encoding_from_info(info: Mapping[str, Any]) -> VideoEncoding:
    default = depth_video_encoding(DepthQuantization.from_info(info))
    changes: dict[str, Any] = {}
    for key, name in _INFO_FIELDS:
        # LeRobot reads an empty `extra_options` (what a merge of disagreeing files leaves) as
        # the default.
        if info.get(key) is not None and info.get(key) != {}:
            changes[name] = info[key]
    return attrs.evolve(default, **changes)


def video_feature_info(stream: VideoStreamInfo, encoding: VideoEncoding) -> dict[str, Any]:
    """The whole `info` block LeRobot writes for a video feature (`is_depth_map` last; a depth
    feature's `info` already holds it, with `depth_unit`, and keeps them first)."""
    return {**stream.to_info(), **encoding.to_info(), "is_depth_map": encoding.depth is not None}


@attrs.frozen
class VideoSegment:
    """One episode's frames inside a video file: LeRobot's `from_timestamp` / `to_timestamp`."""

    from_timestamp: float
    to_timestamp: float
    frame_count: int

    @property
    def duration_s(self) -> float:
        return self.to_timestamp - self.from_timestamp


# x264/x265's fast presets: eval videos are watched, not sampled at random, and encoding them at
# the default preset with a 2-frame GOP took more CPU than the simulation itself.
_VIEWING_PRESETS = {"h264": "veryfast", "hevc": "veryfast"}


def viewing_encoding(codec: str) -> VideoEncoding:
    """An encoding for videos people watch (eval rollouts): long GOP, fast preset, CRF 23."""
    codec = canonical_codec(codec)
    preset = _VIEWING_PRESETS.get(codec)
    if preset is None:
        return VideoEncoding(codec=codec, g=None)
    return VideoEncoding(codec=codec, g=None, crf=23, preset=preset)
