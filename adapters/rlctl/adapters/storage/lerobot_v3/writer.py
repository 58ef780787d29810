"""Recording LeRobot v3.0 datasets: `LeRobotV3Writer` (the `DatasetWriter` port) and its session.

The recording thread only validates frames and appends them to the episode buffer; cameras are
encoded by one worker per camera while the episode is still running, and `save_episode` hands
the episode to a committer thread (see `commit.py` for the crash-safe order of the writes). So
`add_frame` and `save_episode` return in microseconds whatever the encoders are doing; `flush`
and `finalize` wait for them.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import shutil
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

import attrs
import structlog

from rlctl.adapters.storage.dataset_lock import LOCK_NAME, DatasetLock
from rlctl.adapters.storage.lerobot_v3.card import write_local_card
from rlctl.adapters.storage.lerobot_v3.commit import DatasetFiles, EpisodeCommitter, warm_up
from rlctl.adapters.storage.lerobot_v3.data_writer import (
    DataFileAppender,
    DataTableBuilder,
    check_writable,
)
from rlctl.adapters.storage.lerobot_v3.episode_buffer import EpisodeBuffer
from rlctl.adapters.storage.lerobot_v3.frame_validation import FrameValidator, dataset_features
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader, dataset_root
from rlctl.adapters.storage.lerobot_v3.meta_writer import (
    EpisodesMetaWriter,
    EpisodesSchema,
    new_info,
    stats_shapes,
    write_info,
)
from rlctl.adapters.storage.lerobot_v3.paths import DEFAULT_DATA_PATH, DEFAULT_VIDEO_PATH
from rlctl.adapters.storage.lerobot_v3.recovery import STAGING_DIR, RecoveredDataset, recover
from rlctl.adapters.storage.lerobot_v3.video_files import VideoFileAppender
from rlctl.adapters.storage.lerobot_v3.video_worker import (
    DEFAULT_BACKLOG_MB,
    DEFAULT_NICENESS,
    EpisodeEncoder,
    SubprocessEncoder,
    ThreadEncoder,
)
from rlctl.application.ports.video import VideoEncoder
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureSpec
from rlctl.domain.frames import Frame
from rlctl.domain.video import VideoEncoding

log = structlog.get_logger(__name__)

DEFAULT_CHUNKS_SIZE = 1000
DEFAULT_DATA_FILE_SIZE_IN_MB = 100
DEFAULT_VIDEO_FILE_SIZE_IN_MB = 200


@attrs.frozen
class WriterOptions:
    """How a session works; none of it changes what is written.

    `durable` flushes every committed file to the disk (survives power loss, not only a crash).
    `encode_in_subprocess` encodes each camera in a child process (see `video_worker.py`); off, the
    `VideoEncoder` given to the writer encodes in threads. `video_backlog_mb` bounds, per camera,
    the frames waiting for the encoder before `add_frame` waits. `encoder_niceness` lowers the
    encoder processes' CPU priority below the recording's (0: the same).
    """

    durable: bool = True
    encode_in_subprocess: bool = True
    encoder_threads: int | None = None
    video_backlog_mb: float = DEFAULT_BACKLOG_MB
    encoder_niceness: int = DEFAULT_NICENESS
    png_compress_level: int = 6
    png_workers: int = 2


def _default_video_encoder() -> VideoEncoder:
    from rlctl.adapters.video.pyav_encoder import PyAVVideoEncoder

    return PyAVVideoEncoder()


class LeRobotV3Writer:
    """`DatasetWriter` for LeRobot v3.0 folders on the local disk."""

    def __init__(
        self, video_encoder: VideoEncoder | None = None, options: WriterOptions | None = None
    ) -> None:
        self._video_encoder = video_encoder
        self._options = options or WriterOptions()

    def create(
        self,
        root: Path,
        *,
        fps: int,
        features: Mapping[str, FeatureSpec | Mapping[str, Any]],
        robot_type: str | None = None,
        video: VideoEncoding | None = None,
        chunks_size: int | None = None,
        data_files_size_in_mb: float | None = None,
        video_files_size_in_mb: float | None = None,
    ) -> LeRobotV3WriteSession:
        root = Path(root)
        # A lock file alone is another writer's: `DatasetLock` below names it.
        if root.exists() and (
            not root.is_dir() or any(child.name != LOCK_NAME for child in root.iterdir())
        ):
            raise InvalidInput(
                "a file or folder with content is already there",
                where=str(root),
                hint="choose a new folder, or resume the dataset that is there",
            )
        if isinstance(fps, bool) or not isinstance(fps, int) or fps <= 0:
            raise InvalidInput(f"fps must be a positive whole number, got {fps!r}", where="fps")
        specs = dataset_features(features)
        check_writable(specs)
        has_video = any(f.is_video for f in specs.values())
        info = new_info(
            fps=fps,
            features=specs,
            robot_type=robot_type,
            chunks_size=_positive(chunks_size, DEFAULT_CHUNKS_SIZE, "chunks_size"),
            data_files_size_in_mb=_positive_size(
                data_files_size_in_mb, DEFAULT_DATA_FILE_SIZE_IN_MB, "data_files_size_in_mb"
            ),
            video_files_size_in_mb=_positive_size(
                video_files_size_in_mb, DEFAULT_VIDEO_FILE_SIZE_IN_MB, "video_files_size_in_mb"
            ),
            data_path=DEFAULT_DATA_PATH,
            video_path=DEFAULT_VIDEO_PATH if has_video else None,
        )
        created = _missing_folders(root)
        root.mkdir(parents=True, exist_ok=True)
        lock = DatasetLock(root).acquire()
        try:
            return self._start_new(root, lock, info, specs, robot_type, video, created)
        except BaseException:
            lock.release()
            raise

    def _start_new(
        self,
        root: Path,
        lock: DatasetLock,
        info: dict[str, Any],
        specs: dict[str, FeatureSpec],
        robot_type: str | None,
        video: VideoEncoding | None,
        created: tuple[Path, ...],
    ) -> LeRobotV3WriteSession:
        # Looked at again under the lock: another `create` may have filled it since.
        if any(child.name != LOCK_NAME for child in root.iterdir()):
            raise InvalidInput(
                "another writer filled this folder while it was being created",
                where=str(root),
                hint="choose a new folder, or resume the dataset that is there",
            )
        write_info(root, info, self._options.durable)
        state = RecoveredDataset(
            info=info,
            layout=DatasetMeta(
                codebase_version=info["codebase_version"],
                fps=info["fps"],
                features=specs,
                total_episodes=0,
                total_frames=0,
                tasks=(),
                episodes=(),
                robot_type=robot_type,
                chunks_size=info["chunks_size"],
                data_files_size_in_mb=info["data_files_size_in_mb"],
                video_files_size_in_mb=info["video_files_size_in_mb"],
                data_path=info["data_path"],
                video_path=info["video_path"],
                info=info,
            ),
            features=specs,
            tasks=(),
            total_episodes=0,
            total_frames=0,
            stats=None,
            last_data_file=None,
            last_meta_file=None,
            last_video_files={k: None for k, f in specs.items() if f.is_video},
            removed=(),
        )
        return LeRobotV3WriteSession(
            root,
            state,
            video or VideoEncoding(),
            self._encoder(),
            self._options,
            lock=lock,
            created=created,
        )

    def resume(self, root: Path, *, video: VideoEncoding | None = None) -> LeRobotV3WriteSession:
        root = dataset_root(root)
        # Before `recover`: it cuts what an interrupted writer left, which a live one is writing.
        lock = DatasetLock(root).acquire()
        try:
            state = recover(root)
            check_writable(state.features)
            if video is None:
                video = _recorded_encoding(state.features)
            return LeRobotV3WriteSession(
                root, state, video, self._encoder(), self._options, lock=lock
            )
        except BaseException:
            lock.release()
            raise

    def _encoder(self) -> VideoEncoder:
        if self._video_encoder is None:
            self._video_encoder = _default_video_encoder()
        return self._video_encoder


def _missing_folders(root: Path) -> tuple[Path, ...]:
    """`root` and those of its parents that do not exist yet, deepest first."""
    missing = []
    for folder in (root, *root.parents):
        if folder.exists():
            break
        missing.append(folder)
    return tuple(missing)


def _positive(value: int | None, default: int, name: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInput(f"{name} must be a positive whole number, got {value!r}", where=name)
    return value


def _positive_size(value: float | None, default: int, name: str) -> float:
    """A file-size limit in MB: any positive number, fractions included, as LeRobot takes it."""
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidInput(f"{name} must be a positive number, got {value!r}", where=name)
    return value


def _recorded_encoding(features: Mapping[str, FeatureSpec]) -> VideoEncoding:
    for spec in features.values():
        if spec.is_video and spec.info and not spec.is_depth_map:  # depth cameras: their own
            return VideoEncoding.from_info(spec.info)
    return VideoEncoding()


class LeRobotV3WriteSession:
    """`DatasetWriteSession`: one dataset open for appending episodes."""

    def __init__(
        self,
        root: Path,
        state: RecoveredDataset,
        video: VideoEncoding,
        video_encoder: VideoEncoder,
        options: WriterOptions,
        *,
        lock: DatasetLock,
        created: tuple[Path, ...] | None = None,
    ) -> None:
        """`lock`: the dataset's write lock, held until the session ends. `created`: the folders
        `create` made (None for a resumed dataset), for `discard`."""
        self._root = root
        self._write_lock = lock
        self._created = created
        self._options = options
        self._features = state.features
        self._fps = int(state.info["fps"])
        self._video_encoding = video
        self._validate = FrameValidator(self._features)
        self._tasks = list(state.tasks)
        self._task_numbers = {task: i for i, task in enumerate(self._tasks)}
        self._num_episodes = state.total_episodes
        self._num_frames = state.total_frames
        self._staging = root / STAGING_DIR
        self._png_pool = ThreadPoolExecutor(options.png_workers, thread_name_prefix="rlctl-png")
        video_keys = [k for k, f in self._features.items() if f.is_video]
        self._encoders = {key: self._start_encoder(key, video_encoder) for key in video_keys}
        warm_up()  # here, not on the committer thread while the next episode is recorded
        self._committer = EpisodeCommitter(self._dataset_files(state, video_keys, video_encoder))
        self._episode: EpisodeBuffer | None = None
        self._finalized = False
        self._lock = threading.Lock()
        # A script that forgets finalize() still gets its saved episodes committed at exit.
        atexit.register(self._finalize_at_exit)

    def _start_encoder(self, key: str, video_encoder: VideoEncoder) -> EpisodeEncoder:
        if self._options.encode_in_subprocess:
            return SubprocessEncoder(
                key,
                threads=self._options.encoder_threads,
                backlog_mb=self._options.video_backlog_mb,
                niceness=self._options.encoder_niceness,
            )
        return ThreadEncoder(key, video_encoder, backlog_mb=self._options.video_backlog_mb)

    def _dataset_files(
        self, state: RecoveredDataset, video_keys: list[str], video_encoder: VideoEncoder
    ) -> DatasetFiles:
        info, layout = state.info, state.layout
        chunks_size = layout.chunks_size
        shapes = stats_shapes(self._features)
        builder = DataTableBuilder(self._features)
        durable = self._options.durable
        return DatasetFiles(
            root=self._root,
            info=info,
            table_builder=builder,
            data=DataFileAppender(
                self._root,
                layout.data_path,
                builder.schema,
                chunks_size=chunks_size,
                max_file_mb=float(layout.data_files_size_in_mb),
                dictionary_columns=[k for k in builder.specs if k not in builder.image_keys],
                last_file=state.last_data_file,
                durable=durable,
            ),
            episodes_meta=EpisodesMetaWriter(
                self._root,
                EpisodesSchema(video_keys, shapes),
                chunks_size=chunks_size,
                max_file_mb=float(layout.data_files_size_in_mb),
                last_file=state.last_meta_file,
            ),
            videos={
                key: VideoFileAppender(
                    self._root,
                    layout.video_path or DEFAULT_VIDEO_PATH,
                    key,
                    video_encoder,
                    chunks_size=chunks_size,
                    max_file_mb=float(layout.video_files_size_in_mb),
                    last_file=state.last_video_files.get(key),
                    durable=durable,
                )
                for key in video_keys
            },
            video_encoding=self._video_encoding,
            stats_shapes=shapes,
            stats=state.stats,
            tasks_written=len(state.tasks),
            durable=durable,
        )

    # --- the DatasetWriteSession port ---------------------------------------------------------

    @property
    def root(self) -> Path:
        return self._root

    @property
    def fps(self) -> int:
        return self._fps

    @property
    def features(self) -> Mapping[str, FeatureSpec]:
        return self._features

    @property
    def num_episodes(self) -> int:
        return self._num_episodes

    @property
    def num_frames(self) -> int:
        return self._num_frames

    @property
    def episode_frames(self) -> int:
        return self._episode.length if self._episode is not None else 0

    def add_frame(self, frame: Frame | Mapping[str, Any]) -> None:
        self._check_open()
        valid = self._validate(frame)
        if self._episode is None:
            self._episode = self._new_episode()
        self._episode.add(valid)

    def save_episode(self) -> EpisodeRecord:
        self._check_open()
        episode = self._episode
        if episode is None or episode.length == 0:
            raise InvalidInput(
                "the episode has no frames", where="save_episode", hint="add frames first"
            )
        job = episode.close(
            dataset_from_index=self._num_frames,
            task_index=self._task_number,
            all_tasks=lambda: tuple(self._tasks),
        )
        self._episode = None
        self._committer.submit(job)
        self._num_episodes += 1
        self._num_frames += job.length
        return EpisodeRecord(
            index=job.episode_index,
            length=job.length,
            tasks=job.tasks,
            dataset_from_index=job.dataset_from_index,
            dataset_to_index=job.dataset_from_index + job.length,
        )

    def clear_episode_buffer(self) -> None:
        if self._episode is not None:
            self._episode.discard()
            self._episode = None

    def flush(self) -> DatasetMeta:
        self._check_open()
        self._committer.wait()
        self._raise_failure()
        return LeRobotMetaReader().read_meta(self._root)

    def finalize(self) -> DatasetMeta:
        with self._lock:
            if not self._finalized:
                self._finalized = True
                self._shut_down(card=True)
        self._raise_failure()
        return LeRobotMetaReader().read_meta(self._root)

    def discard(self) -> None:
        if self._created is None or self._num_episodes:
            raise InvalidInput(
                "only a dataset this session created, with no episode saved, can be discarded",
                where=str(self._root),
            )
        with self._lock:
            if not self._finalized:
                self._finalized = True
                self._shut_down()
        # The root was empty or absent at `create`: everything in it is this session's.
        if self._root.is_dir():
            for child in self._root.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        for folder in self._created:
            with contextlib.suppress(OSError):  # not empty: something else put files there
                folder.rmdir()
        self._created = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if exc_type is None:
            self.finalize()
            return
        try:
            self.finalize()
        except Exception as err:  # the body's exception matters more
            log.error("finalizing after an error failed too", error=str(err))

    # --- internals --------------------------------------------------------------------------

    def _new_episode(self) -> EpisodeBuffer:
        return EpisodeBuffer(
            episode_index=self._num_episodes,
            features=self._features,
            fps=self._fps,
            encoders=self._encoders,
            encoding=self._video_encoding,
            staging=self._staging,
            png_pool=self._png_pool,
            png_compress_level=self._options.png_compress_level,
        )

    def _task_number(self, task: str) -> int:
        number = self._task_numbers.get(task)
        if number is None:
            number = self._task_numbers[task] = len(self._tasks)
            self._tasks.append(task)
        return number

    def _check_open(self) -> None:
        if self._finalized:
            raise InvalidInput(
                "the dataset was finalized", where=str(self._root), hint="resume it to add episodes"
            )
        self._raise_failure()

    def _raise_failure(self) -> None:
        if self._committer.failure is not None:
            raise self._committer.failure

    def _finalize_at_exit(self) -> None:
        try:
            self.finalize()
        except Exception as err:
            log.error(
                "could not finalize the dataset at exit", root=str(self._root), error=str(err)
            )

    def _shut_down(self, *, card: bool = False) -> None:
        try:
            self._stop_work()
            if card and self._committer.failure is None:
                # Inside the lock: another writer may resume the dataset as soon as it is free.
                write_local_card(self._root, LeRobotMetaReader().read_meta(self._root))
        finally:
            self._write_lock.release()

    def _stop_work(self) -> None:
        atexit.unregister(self._finalize_at_exit)
        if self._episode is not None:
            if self._episode.length:
                log.warning(
                    "dropping the unsaved episode",
                    episode=self._num_episodes,
                    frames=self._episode.length,
                )
            self.clear_episode_buffer()
        self._committer.wait()
        for encoder in self._encoders.values():
            encoder.close()
        self._committer.close()
        self._png_pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self._staging, ignore_errors=True)
