"""Random-access decode speed of the video backends, in frames per second.

Each query asks for the frames a LeRobot item with `delta_timestamps` [-1, 0] frames needs: the
frame of a random index and the one before it, inside the index's episode. Compared:

- `lerobot-style pyav`: what LeRobot 0.6.1's `decode_video_frames_pyav` does per item (open the
  file, seek, decode and convert every frame up to the last query, close),
- `lerobot-style torchcodec`: its default backend (a cached decoder in approximate seek mode,
  `get_frames_at(round(t * fps))`, the frames scaled to float32 as LeRobot returns them),
- `rlctl pyav`, `rlctl torchcodec`, `rlctl auto`: this repository's decoders (uint8 frames).

Backends take turns over rounds of queries and the best round counts, so that other work on the
machine disturbs the comparison less.

Usage: python benchmarks/video_decode.py [--video FILE] [--queries N] [--generate]
Without --video it reads the LeRobot fixture when present, else (or with --generate) it encodes
a 240x320 AV1 file of 20 episodes x 50 frames at 30 fps with LeRobot's settings.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import av
import numpy as np

from rlctl.adapters.video.auto import AutoVideoDecoder
from rlctl.adapters.video.pyav_decoder import PyAVVideoDecoder
from rlctl.adapters.video.pyav_encoder import PyAVVideoEncoder
from rlctl.domain.video import VideoEncoding, VideoSegment, default_tolerance_s

SIM_VIDEO = Path(__file__).resolve().parents[2] / "shared/fixtures/lerobot-0.6.1/sim_video"
FIXTURE = SIM_VIDEO / "videos/observation.images.front/chunk-000/file-000.mp4"
FIXTURE_EPISODES = [
    VideoSegment(0.0, 2.0, 20),
    VideoSegment(2.0, 4.5, 25),
    VideoSegment(4.5, 7.5, 30),
]

Decode = Callable[[Path, Sequence[float], float], np.ndarray]


def lerobot_style_pyav(path: Path, timestamps: Sequence[float], tolerance_s: float) -> np.ndarray:
    """LeRobot 0.6.1's PyAV path, reduced to its cost: per-call open, seek, convert all frames."""
    first, last = min(timestamps), max(timestamps)
    frames, times = [], []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        container.seek(int(first * av.time_base), backward=True)
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            current = float(frame.pts * stream.time_base)
            frames.append(frame.to_ndarray(format="rgb24"))
            times.append(current)
            if current >= last:
                break
    distance = np.abs(np.asarray(timestamps)[:, None] - np.asarray(times)[None, :])
    nearest = distance.argmin(axis=1)
    assert (distance.min(axis=1) < tolerance_s).all()
    return np.stack([frames[i] for i in nearest])


def lerobot_style_torchcodec() -> Decode:
    """LeRobot 0.6.1's torchcodec path: one cached decoder per file, frame index round(t * fps)."""
    import torch
    from torchcodec.decoders import VideoDecoder

    # As in a DataLoader worker: torch's thread pool only adds waits to these tiny tensor ops.
    torch.set_num_threads(1)
    decoders: dict[str, VideoDecoder] = {}

    def decode(path: Path, timestamps: Sequence[float], tolerance_s: float) -> np.ndarray:
        decoder = decoders.get(str(path))
        if decoder is None:
            decoder = decoders[str(path)] = VideoDecoder(str(path), seek_mode="approximate")
        fps = decoder.metadata.average_fps
        batch = decoder.get_frames_at(indices=[round(t * fps) for t in timestamps])
        distance = torch.cdist(
            torch.tensor(timestamps)[:, None], batch.pts_seconds[:, None].float()
        )
        assert (distance.min(1).values < tolerance_s).all()
        return (batch.data / 255.0).type(torch.float32).numpy()

    return decode


def generate_video(folder: Path, episodes: int = 20, length: int = 50, fps: int = 30) -> tuple:
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:240, 0:320]
    writer = PyAVVideoEncoder().begin(folder / "bench.mp4", fps, VideoEncoding())
    segments = []
    for _ in range(episodes):
        phase = rng.uniform(0, 6)
        for i in range(length):
            t = phase + i * 0.05
            frame = np.stack(
                [
                    127 + 100 * np.sin(x / 17 + t),
                    127 + 100 * np.cos(y / 13 - t),
                    (x + y + 10 * i) % 256,
                ],
                axis=-1,
            )
            writer.add_frame(frame.astype(np.uint8))
        segments.append(writer.end_segment())
    writer.finish()
    return folder / "bench.mp4", segments, fps


def item_queries(segments: Sequence[VideoSegment], fps: int, count: int) -> list[list[float]]:
    """For random items: the timestamps of the frame before (clamped) and of the item itself."""
    rng = random.Random(0)
    queries = []
    for _ in range(count):
        segment = rng.choice(segments)
        i = rng.randrange(segment.frame_count)
        queries.append(
            [segment.from_timestamp + max(i - 1, 0) / fps, segment.from_timestamp + i / fps]
        )
    return queries


def measure(
    decoders: dict[str, Decode], path: Path, queries: list[list[float]], tol: float, rounds: int
) -> dict[str, float]:
    """Best frames/s of each decoder over `rounds` interleaved rounds of the queries."""
    best = dict.fromkeys(decoders, 0.0)
    for decode in decoders.values():
        decode(path, queries[0], tol)  # open the file and warm caches outside the timing
    for _ in range(rounds):
        for name, decode in decoders.items():
            start = time.perf_counter()
            frames = sum(len(decode(path, timestamps, tol)) for timestamps in queries)
            best[name] = max(best[name], frames / (time.perf_counter() - start))
    return best


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--video", type=Path, help="an mp4 with one episode spanning it all")
    parser.add_argument("--fps", type=int, default=30, help="frame rate of --video")
    parser.add_argument("--queries", type=int, default=1000, help="queries per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--generate", action="store_true", help="benchmark a generated 240x320 AV1")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as folder:
        if args.video:
            info = PyAVVideoEncoder().probe(args.video)
            path, fps = args.video, round(info.fps)
            segments = [VideoSegment(0.0, info.duration_s, info.frame_count)]
        elif FIXTURE.is_file() and not args.generate:
            path, segments, fps = FIXTURE, FIXTURE_EPISODES, 10
        else:
            path, segments, fps = generate_video(Path(folder))
        info = PyAVVideoEncoder().probe(path)
        print(f"{path.name}: {info.width}x{info.height} {info.codec} {info.frame_count} frames")
        queries = item_queries(segments, fps, args.queries)
        tol = default_tolerance_s(fps)

        decoders: dict[str, Decode] = {"lerobot-style pyav": lerobot_style_pyav}
        try:
            from rlctl.adapters.video.torchcodec_decoder import TorchCodecVideoDecoder

            decoders["lerobot-style torchcodec"] = lerobot_style_torchcodec()
        except Exception as err:  # a machine without ffmpeg still gets the PyAV figures
            print(f"torchcodec unavailable: {err}", file=sys.stderr)
        else:
            decoders["rlctl torchcodec"] = TorchCodecVideoDecoder().decode
        decoders["rlctl pyav"] = PyAVVideoDecoder().decode
        decoders["rlctl auto"] = AutoVideoDecoder().decode

        rates = measure(decoders, path, queries, tol, args.rounds)
        baseline = rates["lerobot-style pyav"]
        for name, rate in rates.items():
            print(f"{name:26s} {rate:8.0f} frames/s  {rate / baseline:5.1f}x lerobot-style pyav")


if __name__ == "__main__":
    main()
