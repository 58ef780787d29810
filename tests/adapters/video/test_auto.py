"""The automatic backend: torchcodec when it works, PyAV when it does not, one warning."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from rlctl.adapters.video import auto
from rlctl.adapters.video.auto import AutoVideoDecoder, probe_decoder, video_decoder_for
from rlctl.adapters.video.pyav_decoder import PyAVVideoDecoder
from rlctl.domain.errors import InvalidInput, VideoError
from rlctl.domain.video import VideoTimestampError, default_tolerance_s

TOLERANCE = default_tolerance_s(10)


class _BrokenDecoder:
    """Stands in for a backend whose ffmpeg cannot read the files."""

    def __init__(self, error: VideoError | None = None) -> None:
        self.error = error or VideoError("decoder exploded", where="somewhere")
        self.calls: list[Path] = []

    def decode(self, path: Path, timestamps: Sequence[float], tolerance_s: float) -> np.ndarray:
        self.calls.append(path)
        raise self.error

    def close(self) -> None:
        pass


def _warnings(logs: list[dict]) -> list[dict]:
    return [entry for entry in logs if entry["log_level"] == "warning"]


def test_unusable_torchcodec_means_pyav_with_one_warning(
    front_mp4: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_torchcodec() -> None:
        raise VideoError("torchcodec cannot be loaded: no libavutil", where="torchcodec")

    monkeypatch.setattr(auto, "torchcodec_decoder", no_torchcodec)
    decoder = AutoVideoDecoder()
    with capture_logs() as logs:
        frames = decoder.decode(front_mp4, [0.0, 1.0], TOLERANCE)
        decoder.decode(front_mp4, [2.0], TOLERANCE)
    assert decoder.backend == "fallback"
    np.testing.assert_array_equal(
        frames, PyAVVideoDecoder().decode(front_mp4, [0.0, 1.0], TOLERANCE)
    )
    [warning] = _warnings(logs)
    assert "libavutil" in warning["error"]


def test_a_file_the_preferred_backend_fails_on_is_read_with_pyav(
    front_mp4: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "file-001.mp4"
    copy.write_bytes(front_mp4.read_bytes())
    broken = _BrokenDecoder()
    decoder = AutoVideoDecoder(preferred=lambda: broken)
    with capture_logs() as logs:
        for _ in range(2):
            assert decoder.decode(front_mp4, [7.4], TOLERANCE).shape == (1, 48, 64, 3)
        assert decoder.decode(copy, [7.4], TOLERANCE).shape == (1, 48, 64, 3)
    assert broken.calls == [front_mp4, copy]  # a failed file goes straight to PyAV afterwards
    assert len(_warnings(logs)) == 1


def test_timestamp_errors_are_not_retried(front_mp4: Path) -> None:
    broken = _BrokenDecoder(VideoTimestampError("no frame near 9 s", where=str(front_mp4)))
    decoder = AutoVideoDecoder(preferred=lambda: broken)
    with pytest.raises(VideoTimestampError):
        decoder.decode(front_mp4, [9.0], TOLERANCE)


def test_when_both_backends_fail_the_error_names_the_file(tmp_path: Path) -> None:
    bogus = tmp_path / "file-000.mp4"
    bogus.write_text("not a video")
    decoder = AutoVideoDecoder(preferred=_BrokenDecoder)
    with pytest.raises(VideoError) as caught:
        decoder.decode(bogus, [0.0], TOLERANCE)
    assert caught.value.where == str(bogus)


def test_the_probe_clip_decodes() -> None:
    probe_decoder(PyAVVideoDecoder())


def test_backends_by_name() -> None:
    assert isinstance(video_decoder_for("pyav"), PyAVVideoDecoder)
    assert isinstance(video_decoder_for("auto"), AutoVideoDecoder)
    with pytest.raises(InvalidInput, match="video backend"):
        video_decoder_for("opencv")


@pytest.mark.slow
def test_real_torchcodec_is_chosen_and_falls_back_when_it_breaks(
    front_mp4: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoder = AutoVideoDecoder()
    expected = decoder.decode(front_mp4, [3.0], TOLERANCE)
    assert decoder.backend == "preferred"

    from torchcodec.decoders import VideoDecoder

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated ffmpeg failure")

    monkeypatch.setattr(VideoDecoder, "get_frames_at", crash)
    with capture_logs() as logs:
        np.testing.assert_array_equal(decoder.decode(front_mp4, [3.0], TOLERANCE), expected)
    [warning] = _warnings(logs)
    assert "simulated ffmpeg failure" in warning["error"]
