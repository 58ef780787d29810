"""Pick the video backend that works here: torchcodec when it loads and decodes, else PyAV.

torchcodec links against the system's ffmpeg, so it can import fine and still fail on a machine
without ffmpeg (or with an unsupported version); PyAV ships its own. The choice is made on first
use by decoding a tiny clip; a file torchcodec then fails on is decoded with PyAV from then on.
One warning is logged for the first fallback, the rest at debug level.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import structlog

from rlctl.adapters.video.errors import FFMPEG_HINT
from rlctl.adapters.video.pyav_decoder import PyAVVideoDecoder
from rlctl.application.ports.video import VideoDecoder
from rlctl.domain.errors import InvalidInput, VideoError
from rlctl.domain.video import VideoTimestampError

log = structlog.get_logger()

BACKENDS = ("auto", "torchcodec", "pyav")


def torchcodec_decoder() -> VideoDecoder:
    """A torchcodec decoder, or a `VideoError` saying why torchcodec cannot run here."""
    try:
        from rlctl.adapters.video.torchcodec_decoder import TorchCodecVideoDecoder
    except Exception as err:  # torchcodec raises RuntimeError/OSError when ffmpeg libs are absent
        raise VideoError(
            f"torchcodec cannot be loaded: {type(err).__name__}: {err}",
            where="torchcodec",
            hint=FFMPEG_HINT,
        ) from err
    return TorchCodecVideoDecoder()


def probe_decoder(decoder: VideoDecoder) -> None:
    """Decode a one-frame clip made on the spot, so a broken backend fails here, not mid-epoch."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rlctl-video-probe-") as folder:
        clip = Path(folder) / "probe.mp4"
        clip.write_bytes(_probe_clip())
        frames = decoder.decode(clip, [0.0], tolerance_s=0.05)
        decoder.close()
    if frames.shape != (1, 16, 16, 3):
        raise VideoError(f"probe decoded to shape {frames.shape}", where="video probe")


def _probe_clip() -> bytes:
    # mpeg4 is built into every ffmpeg, so the probe tests the backend, not optional codecs.
    import av

    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width = stream.height = 16
        stream.pix_fmt = "yuv420p"
        frame = av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24")
        container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return buffer.getvalue()


def _probed_torchcodec() -> VideoDecoder:
    decoder = torchcodec_decoder()
    try:
        probe_decoder(decoder)
    except VideoError:
        raise
    except Exception as err:
        raise VideoError(
            f"torchcodec failed its probe: {type(err).__name__}: {err}",
            where="torchcodec",
            hint=FFMPEG_HINT,
        ) from err
    return decoder


class AutoVideoDecoder:
    """`VideoDecoder` that prefers torchcodec and falls back to PyAV, per process and per file."""

    def __init__(
        self,
        preferred: Callable[[], VideoDecoder] | None = None,
        fallback: Callable[[], VideoDecoder] = PyAVVideoDecoder,
    ) -> None:
        """`preferred` defaults to torchcodec after a successful probe."""
        self._make_preferred = preferred or _probed_torchcodec
        self._fallback = fallback()
        self._preferred: VideoDecoder | None = None
        self._chosen = False
        self._lock = threading.Lock()
        self._fallback_paths: set[str] = set()
        self._warned = False

    @property
    def backend(self) -> str:
        """Which decoder serves files by default: 'preferred' or 'fallback', chosen on first use."""
        return "preferred" if self._primary() is not None else "fallback"

    def decode(self, path: Path, timestamps: Sequence[float], tolerance_s: float) -> np.ndarray:
        primary = self._primary()
        if primary is None or str(path) in self._fallback_paths:
            return self._fallback.decode(path, timestamps, tolerance_s)
        try:
            return primary.decode(path, timestamps, tolerance_s)
        except VideoTimestampError:
            raise  # the data is off; another backend finds the same frames
        except VideoError as err:
            frames = self._fallback.decode(path, timestamps, tolerance_s)
            self._fallback_paths.add(str(path))
            self._warn_once("video backend failed on a file, decoding it with pyav", err)
            return frames

    def close(self) -> None:
        self._fallback.close()
        if self._preferred is not None:
            self._preferred.close()

    def _primary(self) -> VideoDecoder | None:
        if not self._chosen:
            with self._lock:
                if not self._chosen:
                    try:
                        self._preferred = self._make_preferred()
                    except VideoError as err:
                        self._warn_once("torchcodec is unusable here, decoding with pyav", err)
                    self._chosen = True
        return self._preferred

    def _warn_once(self, event: str, err: VideoError) -> None:
        if self._warned:
            log.debug(event, error=str(err))
            return
        self._warned = True
        log.warning(event, error=str(err), hint=err.hint)


def video_decoder_for(backend: str) -> VideoDecoder:
    """The decoder named by `--dataset.video_backend`: 'auto' (default), 'torchcodec' or 'pyav'."""
    if backend == "auto":
        return AutoVideoDecoder()
    if backend == "pyav":
        return PyAVVideoDecoder()
    if backend == "torchcodec":
        return _probed_torchcodec()
    raise InvalidInput(
        f"unknown video backend {backend!r}",
        where="video_backend",
        hint=f"use one of {', '.join(BACKENDS)}",
    )
