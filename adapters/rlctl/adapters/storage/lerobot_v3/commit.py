"""Committing saved episodes to disk, one after the other, on a background thread.

The order of the steps is what makes a crash harmless:

1. the episode's videos go into the camera files and its rows into the data file. Readers only
   look at what `meta/` places, so frames and rows past the last committed episode are never read
   (and `resume` removes them);
2. tasks.parquet, stats.json, the episodes file and last info.json are written under temporary
   names, then renamed over the old ones back to back. info.json's totals are the commit point.

A failed commit stops the committer: later episodes are dropped (their temporary files removed)
and the error is raised to the recording thread at its next call. Earlier episodes stay intact.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pyarrow as pa
import structlog

from rlctl.adapters.storage.lerobot_v3.atomic_files import StagedReplace
from rlctl.adapters.storage.lerobot_v3.data_writer import DataFileAppender, DataTableBuilder
from rlctl.adapters.storage.lerobot_v3.image_sampling import FrameSampler
from rlctl.adapters.storage.lerobot_v3.meta_writer import (
    EpisodeEntry,
    EpisodesMetaWriter,
    stage_info,
    stage_stats,
    stage_tasks,
    with_totals,
)
from rlctl.adapters.storage.lerobot_v3.video_files import VideoFileAppender
from rlctl.adapters.storage.lerobot_v3.video_worker import EncodedEpisode
from rlctl.domain.dataset_meta import EpisodeRecord
from rlctl.domain.depth import is_depth_map
from rlctl.domain.errors import DatasetError, RlctlError
from rlctl.domain.statistics import FeatureStats, RunningStats, aggregate_stats
from rlctl.domain.video import VideoEncoding, video_feature_info

log = structlog.get_logger(__name__)

# Episodes saved but not yet on disk, at most: a disk (or encoder) slower than the recording
# makes `save_episode` wait rather than pile up episodes a crash or power cut would lose.
MAX_PENDING_EPISODES = 2


@attrs.frozen(eq=False)
class CommitJob:
    """A saved episode waiting to be committed: its columns, and the futures of its media."""

    episode_index: int
    dataset_from_index: int
    length: int
    tasks: tuple[str, ...]
    all_tasks: tuple[str, ...]
    # Data-file columns, images excepted: key -> (N, ...) array or list of str.
    columns: Mapping[str, Any]
    # Values the statistics are computed from where they differ from the stored column
    # (timestamps: float64 as LeRobot computes them).
    stats_columns: Mapping[str, np.ndarray]
    images: Mapping[str, list[Future[bytes]]]
    videos: Mapping[str, Future[EncodedEpisode]]
    samplers: Mapping[str, FrameSampler]
    # The unit of each depth camera's frames ("mm" or "m"), for info.json's `depth_unit`.
    depth_units: Mapping[str, str] = attrs.field(factory=dict)

    def discard(self) -> None:
        """Drop the media of an episode that will not be committed."""
        for futures in self.images.values():
            for future in futures:
                future.cancel()
        for video in self.videos.values():
            video.add_done_callback(_remove_encoded_file)


def _remove_encoded_file(future: Future[EncodedEpisode]) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().path.unlink(missing_ok=True)


def episode_stats(
    job: CommitJob,
    stats_keys: Mapping[str, tuple[int, ...]],
    videos: Mapping[str, EncodedEpisode],
) -> dict[str, FeatureStats]:
    """Per-feature statistics of one episode, in `stats_keys` order, as LeRobot computes them."""
    stats: dict[str, FeatureStats] = {}
    for key in stats_keys:
        if key in videos:
            stats[key] = videos[key].stats
            continue
        if key in job.samplers:
            stats[key] = job.samplers[key].stats()
            continue
        values = job.stats_columns.get(key)
        if values is None:
            values = job.columns[key]
        values = np.asarray(values)
        running = RunningStats.for_numeric(values.ndim - 1)
        running.update(values)
        stats[key] = running.result()
    return stats


def warm_up() -> None:
    """Take the first-call costs of a commit before any episode is recorded.

    An import holds the interpreter lock: numpy imports `numpy.ma` at the first quantile it takes
    (0.2 s), pyarrow looks for pandas at the first array it converts (and imports it where it is
    installed). On the committer thread they would stall the first ticks of the second episode.
    """
    running = RunningStats()
    running.update(np.zeros((2, 1), dtype=np.float32))
    running.result()
    pa.array(np.zeros(1, dtype=np.float32))


@attrs.define
class DatasetFiles:
    """Everything the committer writes to, and the running state of `meta/`."""

    root: Path
    info: dict[str, Any]
    table_builder: DataTableBuilder
    data: DataFileAppender
    episodes_meta: EpisodesMetaWriter
    videos: dict[str, VideoFileAppender]
    video_encoding: VideoEncoding
    stats_shapes: dict[str, tuple[int, ...]]
    stats: dict[str, FeatureStats] | None
    tasks_written: int
    durable: bool = True

    def commit(self, job: CommitJob) -> EpisodeRecord:
        encoded = {key: future.result() for key, future in job.videos.items()}
        ep_stats = episode_stats(job, self.stats_shapes, encoded)
        placements = {}
        for key, unit in job.depth_units.items():
            self._record_depth_unit(key, unit)
        for key, episode in encoded.items():
            self._record_video_info(key, episode)
            placements[key] = self.videos[key].append(episode)
        columns = dict(job.columns)
        for key, futures in job.images.items():
            columns[key] = [future.result() for future in futures]
        data_chunk, data_file = self.data.append(self.table_builder.build(columns))

        entry = EpisodeEntry(
            episode_index=job.episode_index,
            tasks=job.tasks,
            length=job.length,
            data_chunk_index=data_chunk,
            data_file_index=data_file,
            dataset_from_index=job.dataset_from_index,
            dataset_to_index=job.dataset_from_index + job.length,
            videos=placements,
            stats=ep_stats,
        )
        stats = ep_stats if self.stats is None else aggregate_stats([self.stats, ep_stats])
        info = with_totals(
            self.info,
            episodes=job.episode_index + 1,
            frames=job.dataset_from_index + job.length,
            tasks=len(job.all_tasks),
        )
        staged = StagedReplace(self.durable)
        try:
            if len(job.all_tasks) > self.tasks_written:
                stage_tasks(staged, self.root, job.all_tasks)
            stage_stats(staged, self.root, stats)
            meta_chunk, meta_file = self.episodes_meta.stage(staged, entry)
            stage_info(staged, self.root, info)
            staged.publish()
        except BaseException:
            staged.discard()
            raise
        self.info, self.stats, self.tasks_written = info, stats, len(job.all_tasks)
        return EpisodeRecord(
            index=entry.episode_index,
            length=entry.length,
            tasks=entry.tasks,
            dataset_from_index=entry.dataset_from_index,
            dataset_to_index=entry.dataset_to_index,
            columns=entry.row(with_stats=False, meta_file=(meta_chunk, meta_file)),
        )

    def _record_video_info(self, key: str, encoded: EncodedEpisode) -> None:
        # LeRobot fills a video feature's `info` block from its first encoded file; a depth
        # camera's starts with `is_depth_map` and `depth_unit`, which keep their places.
        feature = self.info["features"][key]
        info = feature.get("info") or {}
        depth = is_depth_map(info)
        if (info and not depth) or "video.codec" in info:
            return
        encoding = VideoEncoding.from_info(info) if depth else self.video_encoding
        self._set_info(key, {**info, **video_feature_info(encoded.stream, encoding)})

    def _record_depth_unit(self, key: str, unit: str) -> None:
        info = self.info["features"][key].get("info") or {}
        if info.get("depth_unit") is None:
            self._set_info(key, {**info, "depth_unit": unit})

    def _set_info(self, key: str, info: dict[str, Any]) -> None:
        features = dict(self.info["features"])
        features[key] = {**features[key], "info": info}
        self.info = {**self.info, "features": features}


class EpisodeCommitter:
    """Runs `DatasetFiles.commit` for queued jobs in order, on its own thread; at most
    `max_pending` wait (`submit` blocks beyond)."""

    def __init__(
        self,
        files: DatasetFiles,
        on_commit: Callable[[EpisodeRecord], None] | None = None,
        *,
        max_pending: int = MAX_PENDING_EPISODES,
    ) -> None:
        self._files = files
        self._on_commit = on_commit
        # One more slot than pending episodes: the stop marker never waits behind them.
        self._jobs: queue.Queue[CommitJob | None] = queue.Queue(maxsize=max_pending + 1)
        self._max_pending = max_pending
        self._pending = threading.Semaphore(max_pending)
        self._failure: DatasetError | None = None
        self._thread = threading.Thread(target=self._run, name="rlctl-commit", daemon=True)
        self._thread.start()

    @property
    def files(self) -> DatasetFiles:
        return self._files

    @property
    def failure(self) -> DatasetError | None:
        return self._failure

    def submit(self, job: CommitJob) -> None:
        if not self._pending.acquire(blocking=False):
            log.info(
                "the disk is behind: waiting for an earlier episode to be written",
                episode=job.episode_index,
                pending=self._max_pending,
            )
            self._pending.acquire()
        self._jobs.put(job)

    def wait(self) -> None:
        """Block until every submitted job is committed or dropped."""
        self._jobs.join()

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                if self._failure is not None:
                    job.discard()
                    continue
                record = self._files.commit(job)
                log.debug("episode written", episode=record.index, frames=record.length)
                if self._on_commit is not None:
                    self._on_commit(record)
            except BaseException as err:
                job.discard()
                self._failure = _as_dataset_error(err, job.episode_index, self._files.root)
                log.error("episode not saved", episode=job.episode_index, error=str(self._failure))
            finally:
                self._pending.release()
                self._jobs.task_done()
        self._jobs.task_done()


def _as_dataset_error(err: BaseException, episode_index: int, root: Path) -> DatasetError:
    hint = (
        "episodes before it are saved; fix the cause, then reopen the dataset with resume "
        "to record more"
    )
    if isinstance(err, RlctlError):
        cause, where = err.message, err.where or str(root)
        hint = f"{err.hint}; {hint}" if err.hint else hint
    else:
        cause, where = f"{type(err).__name__}: {err}", str(root)
    error = DatasetError(
        f"episode {episode_index} could not be saved: {cause}", where=where, hint=hint
    )
    error.__cause__ = err
    return error
