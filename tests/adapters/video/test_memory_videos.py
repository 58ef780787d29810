"""The in-memory video store behaves like the real encoder and decoder, minus the loss."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.video import InMemoryVideos
from rlctl.application.ports.video import VideoDecoder, VideoEncoder
from rlctl.domain.errors import VideoError
from rlctl.domain.video import VideoEncoding, VideoSegment, VideoTimestampError


def test_frames_come_back_exactly_at_their_timestamps(
    make_frames: Callable[..., np.ndarray],
) -> None:
    store = InMemoryVideos()
    encoder: VideoEncoder = store
    decoder: VideoDecoder = store
    frames = make_frames(5)
    path = Path("videos/cam/file-000.mp4")
    with encoder.begin(path, 10, VideoEncoding()) as writer:
        for frame in frames[:2]:
            writer.add_frame(frame)
        assert writer.end_segment() == VideoSegment(0.0, 0.2, 2)
        for frame in frames[2:]:
            writer.add_frame(frame)
    assert writer.segments[-1] == VideoSegment(0.2, 0.5, 3)
    np.testing.assert_array_equal(decoder.decode(path, [0.4, 0.0], 0.0999), frames[[4, 0]])
    assert encoder.probe(path).frame_count == 5
    with pytest.raises(VideoTimestampError):
        decoder.decode(path, [0.9], 0.0999)


def test_join_and_abort(make_frames: Callable[..., np.ndarray]) -> None:
    store = InMemoryVideos()
    for name in ("a", "b"):
        with store.begin(Path(name), 10, VideoEncoding()) as writer:
            for frame in make_frames(3):
                writer.add_frame(frame)
    segments = store.concatenate([Path("a"), Path("b")], Path("a"))
    assert segments[1] == VideoSegment(0.3, 0.6, 3)
    with pytest.raises(RuntimeError), store.begin(Path("c"), 10, VideoEncoding()) as writer:
        writer.add_frame(make_frames(1)[0])
        raise RuntimeError("interrupted")
    with pytest.raises(VideoError, match="not found"):
        store.probe(Path("c"))
