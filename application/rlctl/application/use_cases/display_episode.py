"""DisplayEpisode: a stored episode replayed frame by frame to a live display.

`rlctl dataset view ROOT --rerun --episode N` writes it to an `.rrd` file: the same entities a
recording shows live (each camera, `observation.state`, `action` … named per dimension), read
through the dataset viewer's ports and the video decoder, so a dataset looks in rerun as it did
while it was being recorded. Videos are decoded a batch of frames at a time, not whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from rlctl.application.ports.live_display import LiveDisplay
from rlctl.application.ports.video import VideoDecoder
from rlctl.application.use_cases.view_dataset import ViewDataset
from rlctl.domain.features import FeatureKind

ACTION = "action"
# Frames decoded per call: a few megabytes of pictures per camera at a time.
DECODE_BATCH = 32


@attrs.frozen
class DisplayedEpisode:
    episode: int
    frames: int
    cameras: tuple[str, ...]
    series: tuple[str, ...]


class DisplayEpisode:
    def __init__(self, view: ViewDataset, decoder: VideoDecoder, display: LiveDisplay) -> None:
        self._view = view
        self._decoder = decoder
        self._display = display

    def __call__(self, location: str, episode: int = 0) -> DisplayedEpisode:
        viewer = self._view(location)
        page = viewer.episode(episode)  # an episode that does not exist fails here, named
        meta = viewer.meta
        groups = [group.key for group in viewer.page.groups]
        images = list(viewer.page.image_cameras)
        cameras = [clip.key for clip in page.videos] + images
        features = {key: meta.features[key] for key in [*cameras, *groups]}
        root = Path(viewer.root)
        # Nearest frames only: half a frame's time either side of each timestamp.
        tolerance = 0.5 / meta.fps if meta.fps else 0.02
        name = f"{location.rstrip('/').split('/')[-1]}_episode_{episode}"
        self._display.open(features, fps=meta.fps, name=name, paced=False)
        try:
            for start in range(0, page.length, DECODE_BATCH):
                stop = min(page.length, start + DECODE_BATCH)
                times = page.timestamps[start:stop]
                pictures = {
                    clip.key: self._decoder.decode(
                        root / clip.file, [clip.start_s + float(t) for t in times], tolerance
                    )
                    for clip in page.videos
                }
                for i in range(start, stop):
                    observation: dict[str, Any] = {
                        key: page.series[key][i]
                        for key in groups
                        if meta.features[key].kind is not FeatureKind.ACTION
                    }
                    for key, frames in pictures.items():
                        observation[key] = frames[i - start]
                    for key in images:
                        observation[key] = viewer.frame_image(episode, key, i)
                    action = page.series[ACTION][i] if ACTION in page.series else None
                    self._display.log_frame(i, observation, action)
        finally:
            self._decoder.close()
            self._display.close()
        return DisplayedEpisode(
            episode=episode,
            frames=page.length,
            cameras=tuple(cameras),
            series=tuple(groups),
        )
