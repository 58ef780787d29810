"""ConvertImagesToVideo and ReencodeVideos: cameras encoded anew, everything else copied.

`ConvertImagesToVideo` is LeRobot's `convert_image_to_video_dataset`: every camera stored as
images (PNG, or raw depth TIFF) becomes a video feature, encoded by rlctl's encoder with
LeRobot's video settings (`VideoEncoding`, LeRobot's defaults: AV1, yuv420p, GOP 2, CRF 30;
depth cameras with `depth_encoding`, LeRobot's 12-bit HEVC). Unlike LeRobot it also takes a
dataset that already has video cameras (those are copied as they are), and it keeps the cameras'
statistics, which do not depend on how frames are stored.

`ReencodeVideos` is LeRobot's `reencode_dataset`: the RGB video cameras not already encoded with
the requested settings are decoded and encoded again, each episode on its own (so every episode
still starts on a keyframe); info.json records the new settings. Depth videos are left as they
are (their codes would have to be re-encoded losslessly; rlctl does not do that yet).

Both write a new folder, or edit in place (safely, under the dataset's lock) without one.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import structlog

from rlctl.application.episode_spec import parse_episode_spec
from rlctl.application.ports.dataset_tools import (
    EpisodeRef,
    FeatureChanges,
)
from rlctl.application.use_cases.dataset_rebuild import (
    DatasetTool,
    EditRequest,
    EditResult,
    edit_dataset,
)
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.depth import DepthQuantization
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec
from rlctl.domain.video import VideoEncoding, depth_video_encoding

log = structlog.get_logger(__name__)


def _video_spec(spec: FeatureSpec) -> FeatureSpec:
    """The camera as a video feature; `info` keeps what describes the data, not its storage."""
    info = {k: v for k, v in (spec.info or {}).items() if not k.startswith("video.")}
    return attrs.evolve(spec, dtype="video", info=info or None)


class ConvertImagesToVideo(DatasetTool):
    def __call__(
        self,
        location: str,
        output: str | None = None,
        *,
        encoding: VideoEncoding | None = None,
        depth_encoding: VideoEncoding | None = None,
        episodes: str | Sequence[int] | None = None,
        force: bool = False,
    ) -> EditResult:
        rgb = encoding or VideoEncoding()
        depth = depth_encoding or depth_video_encoding()
        if rgb.depth is not None:
            raise InvalidInput(
                "the RGB encoding has depth settings", where="encoding", hint="pass them as depth"
            )
        if depth.depth is None:
            depth = attrs.evolve(depth, depth=DepthQuantization())
        if output is None:
            with self._folders.lock(location):
                return self._convert(location, output, rgb, depth, episodes, force)
        return self._convert(location, output, rgb, depth, episodes, force)

    def _convert(
        self,
        location: str,
        output: str | None,
        rgb: VideoEncoding,
        depth: VideoEncoding,
        episodes: str | Sequence[int] | None,
        force: bool,
    ) -> EditResult:
        meta = self._meta_reader.read_meta(location)
        images = [k for k, f in meta.features.items() if f.is_image]
        if not images:
            raise InvalidInput(
                "the dataset has no camera stored as images",
                where=location,
                hint="its cameras are videos already; use `rlctl dataset reencode-videos` to "
                "change their settings",
            )
        chosen = (
            range(meta.total_episodes)
            if episodes is None
            else parse_episode_spec(episodes, meta.total_episodes)
        )
        encoded = {k: depth if meta.features[k].is_depth_map else rgb for k in images}
        features = {k: _video_spec(f) if k in encoded else f for k, f in meta.features.items()}
        log.info("converting cameras to video", cameras=images, episodes=len(chosen))
        return edit_dataset(
            self._rebuilder,
            self._folders,
            self._progress,
            location=location,
            output=output,
            template=attrs.evolve(meta, features=features),
            refs=[EpisodeRef(location, i) for i in chosen],
            description="encoding cameras as video",
            changes=FeatureChanges(encoded=encoded),
            request=EditRequest.of(
                "convert-images-to-video",
                meta,
                force,
                episodes=None if episodes is None else list(chosen),
                encoding=repr(rgb),
                depth_encoding=repr(depth),
            ),
        )


@attrs.frozen
class ReencodeResult:
    result: EditResult | None
    # The cameras re-encoded; empty when each already had the settings (nothing written).
    cameras: tuple[str, ...]
    skipped_depth: tuple[str, ...] = ()


class ReencodeVideos(DatasetTool):
    def __call__(
        self,
        location: str,
        encoding: VideoEncoding,
        output: str | None = None,
        *,
        force: bool = False,
    ) -> ReencodeResult:
        if encoding.depth is not None:
            raise InvalidInput(
                "depth settings are given, but rlctl re-encodes RGB videos only",
                where="encoding",
                hint="give an RGB encoding (no depth quantization)",
            )
        if output is None:
            with self._folders.lock(location):
                return self._reencode(location, encoding, output, force)
        return self._reencode(location, encoding, output, force)

    def _reencode(
        self, location: str, encoding: VideoEncoding, output: str | None, force: bool
    ) -> ReencodeResult:
        meta = self._meta_reader.read_meta(location)
        videos = list(meta.video_keys)
        if not videos:
            raise InvalidInput(
                "the dataset has no video camera",
                where=location,
                hint="cameras stored as images are encoded by `rlctl dataset "
                "convert-images-to-video`",
            )
        depth = tuple(k for k in videos if meta.features[k].is_depth_map)
        if depth:
            log.warning("depth videos are kept as they are", cameras=list(depth))
        todo = [k for k in videos if k not in depth and not _encoded_with(meta, k, encoding)]
        if not todo:
            log.warning("every video is already encoded with these settings; nothing to do")
            if output is None:
                return ReencodeResult(None, (), depth)
        features = {k: _video_spec(f) if k in todo else f for k, f in meta.features.items()}
        result = edit_dataset(
            self._rebuilder,
            self._folders,
            self._progress,
            location=location,
            output=output,
            template=attrs.evolve(meta, features=features),
            refs=[EpisodeRef(location, i) for i in range(meta.total_episodes)],
            description="re-encoding videos",
            changes=FeatureChanges(encoded={k: encoding for k in todo}) if todo else None,
            request=EditRequest.of("reencode-videos", meta, force, encoding=repr(encoding)),
        )
        return ReencodeResult(result, tuple(todo), depth)


def _encoded_with(meta: DatasetMeta, key: str, encoding: VideoEncoding) -> bool:
    info = meta.features[key].info
    if not info or "video.codec" not in info:
        return False
    try:
        current = VideoEncoding.from_info(info)
    except InvalidInput:
        return False
    return current == encoding and info.get("video.pix_fmt") == encoding.pix_fmt
