"""Encoding one camera's episodes away from the recording thread.

`add_frame` must never wait for an encoder, and encoding in a thread of the recording process
does not give that: PyAV takes the interpreter lock around every frame, so a busy control loop
slows the encoder (measured: 14x) and the encoder the loop. Each camera therefore gets a worker
that encodes episode after episode into temporary mp4 files:

- `SubprocessEncoder` (the default) runs `python -m rlctl.adapters.storage.lerobot_v3.video_worker`
  and streams raw frames to it through a pipe; a feeder thread does the blocking writes, so the
  caller only appends to a queue. A plain child process (not `multiprocessing`) because spawn and
  forkserver re-import the caller's `__main__`, which re-runs a recording script without a guard.
- `ThreadEncoder` drives any `VideoEncoder` port in a thread: for custom encoders and tests.

Both bound the frames waiting in memory (`backlog_mb`); only past that does `add_frame` block.
The workers also keep the shrunk frames the episode's image statistics come from and compute
them, so the recording process does no per-pixel work for its cameras.

The worker processes run at a lower CPU priority (`niceness`), and under the normal scheduling
policy even where the codec asks for a real-time one (`leave_realtime_scheduling`): on a machine
with few cores the encoders would otherwise take the cores from the control loop and the cameras
just when a tick is due. They still get every cycle the loop leaves idle, and the backlog absorbs
the gaps.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import struct
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any, BinaryIO, Protocol

import attrs
import numpy as np
import structlog

from rlctl.adapters.storage.lerobot_v3.image_sampling import FrameSampler
from rlctl.application.ports.video import VideoEncoder, VideoWriter
from rlctl.domain.errors import RlctlError, VideoError
from rlctl.domain.statistics import FeatureStats
from rlctl.domain.video import VideoEncoding, VideoStreamInfo

log = structlog.get_logger(__name__)

_HEADER = struct.Struct("<I")
DEFAULT_BACKLOG_MB = 128
# Below the recording process, not starved: the encoders must keep up on average.
DEFAULT_NICENESS = 10
_PIPE_BYTES = 1 << 20


@attrs.frozen
class EncodedEpisode:
    """One episode of one camera, encoded into its own temporary mp4, with its image stats."""

    path: Path
    frame_count: int
    stream: VideoStreamInfo
    stats: FeatureStats


class EpisodeEncoder(Protocol):
    """One camera's encoder: episodes in order, frames of one episode at a time."""

    def begin(self, path: Path, fps: int, encoding: VideoEncoding) -> None: ...

    def add_frame(self, frame: np.ndarray) -> None: ...

    def end(self) -> Future[EncodedEpisode]:
        """Close the episode; the future resolves once its file is complete."""
        ...

    def abort(self) -> None:
        """Drop the episode being encoded; its file is removed."""
        ...

    def close(self) -> None:
        """Finish pending work and stop the worker."""
        ...


class _Backlog:
    """Counts the bytes of frames not yet handed to the encoder; blocks producers past a limit."""

    def __init__(self, limit_bytes: int, name: str) -> None:
        self._limit = limit_bytes
        self._name = name
        self._bytes = 0
        self._changed = threading.Condition()
        self._warned = False

    def reserve(self, nbytes: int) -> None:
        with self._changed:
            if self._bytes and self._bytes + nbytes > self._limit:
                if not self._warned:
                    self._warned = True
                    log.warning(
                        "video encoder falls behind; recording waits for it",
                        camera=self._name,
                        backlog_mb=round(self._bytes / 2**20),
                        hint="lower fps or resolution, or choose a faster preset",
                    )
                self._changed.wait_for(
                    lambda: self._bytes + nbytes <= self._limit or not self._bytes
                )
            self._bytes += nbytes

    def release(self, nbytes: int) -> None:
        with self._changed:
            self._bytes -= nbytes
            self._changed.notify_all()


# --- the worker process ------------------------------------------------------------------------


def _write_message(
    pipe: IO[bytes], header: dict[str, Any], payload: bytes | memoryview = b""
) -> None:
    encoded = json.dumps(header).encode()
    pipe.write(_HEADER.pack(len(encoded)) + encoded)
    if payload:
        pipe.write(payload)


def _read_exact(pipe: BinaryIO, size: int) -> bytes | None:
    chunks, missing = [], size
    while missing:
        chunk = pipe.read(missing)
        if not chunk:
            return None
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


def _read_message(pipe: BinaryIO) -> tuple[dict[str, Any], bytes] | None:
    raw = _read_exact(pipe, _HEADER.size)
    if raw is None:
        return None
    header_bytes = _read_exact(pipe, _HEADER.unpack(raw)[0])
    if header_bytes is None:
        return None
    header = json.loads(header_bytes)
    payload = b""
    if header.get("nbytes"):
        payload = _read_exact(pipe, header["nbytes"]) or b""
    return header, payload


def _error_reply(err: BaseException) -> dict[str, Any]:
    if isinstance(err, RlctlError):
        return {"op": "error", "message": err.message, "where": err.where, "hint": err.hint}
    return {"op": "error", "message": f"{type(err).__name__}: {err}", "where": None, "hint": None}


def lower_priority(niceness: int) -> None:
    """Raise this process's niceness by `niceness` (where the system allows)."""
    if niceness > 0:
        with contextlib.suppress(AttributeError, OSError):  # not on Windows
            os.nice(niceness)


def leave_realtime_scheduling() -> None:
    """Move every thread of this process that runs under a real-time policy back to the normal
    one, and every thread to this thread's niceness at least.

    SVT-AV1 (LeRobot's codec) starts its threads, and switches the calling one, to SCHED_FIFO at
    priority 99 wherever it may: as root, as in most containers. Real-time threads run before
    any normal one, so the encoders took the CPU from the control loop, the cameras and the
    motor bus whenever they had work, whatever their niceness.
    """
    if not hasattr(os, "sched_getscheduler"):
        return
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    realtime = (os.SCHED_FIFO, os.SCHED_RR)
    for task in Path("/proc/self/task").iterdir():
        tid = int(task.name)
        with contextlib.suppress(OSError):  # a thread that has just ended
            if os.sched_getscheduler(tid) in realtime:
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
            if os.getpriority(os.PRIO_PROCESS, tid) < niceness:
                os.setpriority(os.PRIO_PROCESS, tid, niceness)


def worker_main(stdin: BinaryIO, stdout: BinaryIO, threads: int | None, niceness: int = 0) -> None:
    """The child's loop: begin / frame / end / abort messages in, one reply per `end` out."""
    lower_priority(niceness)  # before the encoder library starts its own threads
    from rlctl.adapters.video.pyav_encoder import PyAVVideoEncoder

    encoder = PyAVVideoEncoder(threads=threads)
    writer: VideoWriter | None = None
    failure: BaseException | None = None
    sampler = FrameSampler()
    while (message := _read_message(stdin)) is not None:
        header, payload = message
        op = header["op"]
        if op == "begin":
            encoding = VideoEncoding(**header["encoding"])
            writer = encoder.begin(Path(header["path"]), header["fps"], encoding)
            failure, sampler = None, FrameSampler()
        elif op == "frame" and writer is not None and failure is None:
            try:
                dtype = np.dtype(header.get("dtype", "|u1"))  # depth maps: uint16 or float32
                frame = np.frombuffer(payload, dtype=dtype).reshape(tuple(header["shape"]))
                writer.add_frame(frame)
                if sampler.frame_count == 0:  # the codec has just started its threads
                    leave_realtime_scheduling()
                sampler.add(frame)
            except Exception as err:  # reported at the episode's end
                failure = err
                writer.abort()
        elif op == "end" and writer is not None:
            reply: dict[str, Any]
            try:
                if failure is not None:
                    raise failure
                stream = writer.finish()
                reply = {
                    "op": "done",
                    "path": header["path"],
                    "frames": sampler.frame_count,
                    "stream": attrs.asdict(stream),
                    "stats": sampler.stats().to_json(),
                }
            except Exception as err:
                writer.abort()
                reply = _error_reply(err)
            writer = None
            stdout.write((json.dumps(reply) + "\n").encode())
            stdout.flush()
        elif op == "abort" and writer is not None:
            writer.abort()
            writer = None


# --- the recording side ------------------------------------------------------------------------


class SubprocessEncoder:
    """`EpisodeEncoder` in a child process fed through its stdin."""

    def __init__(
        self,
        name: str,
        *,
        threads: int | None = None,
        backlog_mb: float = DEFAULT_BACKLOG_MB,
        niceness: int = DEFAULT_NICENESS,
    ) -> None:
        self._name = name
        command = [sys.executable, "-m", __name__, f"--niceness={niceness}"]
        if threads is not None:
            command.append(f"--threads={threads}")
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._stdin = self._process.stdin
        with contextlib.suppress(AttributeError, OSError):  # Linux only; a speed-up, not a need
            # A frame in a few large writes rather than many 64 kB ones.
            fcntl.fcntl(self._stdin.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        self._backlog = _Backlog(int(backlog_mb * 2**20), name)
        self._outbox: collections.deque[tuple[dict[str, Any], Any] | None] = collections.deque()
        self._outbox_ready = threading.Semaphore(0)
        self._pending: collections.deque[Future[EncodedEpisode]] = collections.deque()
        self._pending_lock = threading.Lock()
        self._path: Path | None = None
        self._feeder = threading.Thread(target=self._feed, name=f"feed-{name}", daemon=True)
        self._reader = threading.Thread(target=self._read_replies, name=f"read-{name}", daemon=True)
        self._feeder.start()
        self._reader.start()

    def _send(self, header: dict[str, Any], payload: Any = None) -> None:
        self._outbox.append((header, payload))
        self._outbox_ready.release()

    def begin(self, path: Path, fps: int, encoding: VideoEncoding) -> None:
        self._path = path
        self._send(
            {"op": "begin", "path": str(path), "fps": fps, "encoding": attrs.asdict(encoding)}
        )

    def add_frame(self, frame: np.ndarray) -> None:
        frame = np.ascontiguousarray(frame)
        self._backlog.reserve(frame.nbytes)
        header = {"op": "frame", "shape": list(frame.shape), "nbytes": frame.nbytes}
        if frame.dtype != np.uint8:
            header["dtype"] = frame.dtype.str
        self._send(header, frame)

    def end(self) -> Future[EncodedEpisode]:
        future: Future[EncodedEpisode] = Future()
        with self._pending_lock:
            if self._process.poll() is not None:
                future.set_exception(self._died())
                return future
            self._pending.append(future)
        self._send({"op": "end", "path": str(self._path)})
        return future

    def abort(self) -> None:
        self._send({"op": "abort"})

    def close(self) -> None:
        self._outbox.append(None)
        self._outbox_ready.release()
        self._feeder.join()
        self._reader.join()
        self._process.wait()

    def _feed(self) -> None:
        while True:
            self._outbox_ready.acquire()
            item = self._outbox.popleft()
            if item is None:
                break
            header, payload = item
            try:
                _write_message(
                    self._stdin,
                    header,
                    memoryview(payload).cast("B") if payload is not None else b"",
                )
            except (BrokenPipeError, OSError):
                pass  # the reader reports the dead process to whoever waits
            finally:
                if payload is not None:
                    self._backlog.release(payload.nbytes)
        with contextlib.suppress(OSError):
            self._stdin.close()

    def _read_replies(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            reply = json.loads(line)
            with self._pending_lock:
                future = self._pending.popleft()
            if reply["op"] == "done":
                stream = VideoStreamInfo(**reply["stream"])
                stats = FeatureStats.from_json(reply["stats"])
                future.set_result(
                    EncodedEpisode(Path(reply["path"]), reply["frames"], stream, stats)
                )
            else:
                future.set_exception(
                    VideoError(reply["message"], where=reply["where"], hint=reply["hint"])
                )
        self._process.wait()
        with self._pending_lock:
            while self._pending:
                self._pending.popleft().set_exception(self._died())

    def _died(self) -> VideoError:
        return VideoError(
            f"the video encoder process for {self._name} stopped "
            f"(exit code {self._process.poll()})",
            where=self._name,
            hint="see the encoder's messages above; run again with a different codec if it repeats",
        )


class ThreadEncoder:
    """`EpisodeEncoder` driving a `VideoEncoder` port in a background thread."""

    def __init__(
        self, name: str, encoder: VideoEncoder, *, backlog_mb: float = DEFAULT_BACKLOG_MB
    ) -> None:
        self._encoder = encoder
        self._backlog = _Backlog(int(backlog_mb * 2**20), name)
        self._inbox: collections.deque[tuple[str, Any] | None] = collections.deque()
        self._inbox_ready = threading.Semaphore(0)
        self._thread = threading.Thread(target=self._run, name=f"encode-{name}", daemon=True)
        self._thread.start()

    def _post(self, item: tuple[str, Any] | None) -> None:
        self._inbox.append(item)
        self._inbox_ready.release()

    def begin(self, path: Path, fps: int, encoding: VideoEncoding) -> None:
        self._post(("begin", (path, fps, encoding)))

    def add_frame(self, frame: np.ndarray) -> None:
        self._backlog.reserve(frame.nbytes)
        self._post(("frame", frame))

    def end(self) -> Future[EncodedEpisode]:
        future: Future[EncodedEpisode] = Future()
        self._post(("end", future))
        return future

    def abort(self) -> None:
        self._post(("abort", None))

    def close(self) -> None:
        self._post(None)
        self._thread.join()

    def _run(self) -> None:
        writer: VideoWriter | None = None
        path: Path | None = None
        failure: BaseException | None = None
        sampler = FrameSampler()
        while True:
            self._inbox_ready.acquire()
            item = self._inbox.popleft()
            if item is None:
                break
            op, value = item
            if op == "begin":
                path, fps, encoding = value
                writer, failure = self._encoder.begin(path, fps, encoding), None
                sampler = FrameSampler()
            elif op == "frame":
                try:
                    if writer is not None and failure is None:
                        writer.add_frame(value)
                        sampler.add(value)
                except Exception as err:
                    failure = err
                    if writer is not None:
                        writer.abort()
                finally:
                    self._backlog.release(value.nbytes)
            elif op == "end" and writer is not None and path is not None:
                try:
                    if failure is not None:
                        raise failure
                    stream = writer.finish()
                    value.set_result(
                        EncodedEpisode(path, sampler.frame_count, stream, sampler.stats())
                    )
                except BaseException as err:  # whoever waits must hear of it, whatever it is
                    writer.abort()
                    value.set_exception(err)
                writer = None
            elif op == "abort" and writer is not None:
                writer.abort()
                writer = None


def _options(argv: list[str]) -> dict[str, int]:
    """`--threads=N --niceness=N`, as `SubprocessEncoder` passes them."""
    options = {}
    for arg in argv:
        name, _, value = arg.removeprefix("--").partition("=")
        options[name] = int(value)
    return options


if __name__ == "__main__":
    # Frames arrive raw on stdin; nothing but replies may go to stdout.
    options = _options(sys.argv[1:])
    worker_main(
        sys.stdin.buffer,
        sys.stdout.buffer,
        threads=options.get("threads"),
        niceness=options.get("niceness", 0),
    )
    os._exit(0)
