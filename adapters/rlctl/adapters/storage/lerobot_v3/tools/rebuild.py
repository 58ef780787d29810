"""`DatasetRebuilder` on LeRobot v3.0 folders: a new dataset made of episodes of existing ones.

Merge, split, delete-episodes and convert all come down to this: copy chosen episodes, in a
chosen order, into a fresh folder. Each episode's rows are re-indexed (`episode_index`, `index`,
`task_index`; `frame_index` and `timestamp` stay), its video spans are copied packet for packet
into the new files, and its statistics are kept, those of the re-indexed columns recomputed. The
metadata is written when the work is done, info.json last: until then the folder is no dataset.

Cameras named in `FeatureChanges.cropped` have each frame cropped and resized on the way
(`frame_crop`): a video camera is decoded and encoded anew, a camera stored as images gets new
PNGs; their statistics are computed from the new frames (LeRobot's sampling).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import structlog

from rlctl.adapters.storage.dataset_lock import LOCK_NAME, DatasetLock
from rlctl.adapters.storage.episode_source import (
    EpisodeSource,
    SourceEpisode,
    VideoSpan,
    open_source,
)
from rlctl.adapters.storage.lerobot_v3 import language_columns
from rlctl.adapters.storage.lerobot_v3.atomic_files import StagedReplace, fsync_file
from rlctl.adapters.storage.lerobot_v3.data_writer import (
    IMAGE_STRUCT,
    DataTableBuilder,
    check_writable,
)
from rlctl.adapters.storage.lerobot_v3.frame_validation import dataset_features
from rlctl.adapters.storage.lerobot_v3.image_sampling import sample_indices
from rlctl.adapters.storage.lerobot_v3.images import ImageColumn, decode_image
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.adapters.storage.lerobot_v3.meta_writer import (
    EpisodeEntry,
    new_info,
    stage_stats,
    stage_tasks,
    stats_shapes,
    with_totals,
    write_info,
)
from rlctl.adapters.storage.lerobot_v3.paths import DEFAULT_DATA_PATH, DEFAULT_VIDEO_PATH
from rlctl.adapters.storage.lerobot_v3.png import encode_png
from rlctl.adapters.storage.lerobot_v3.recovery import STAGING_DIR
from rlctl.adapters.storage.lerobot_v3.table import numeric_column
from rlctl.adapters.storage.lerobot_v3.tools.episodes_file import EpisodesFile
from rlctl.adapters.storage.lerobot_v3.tools.frame_crop import crop_resize
from rlctl.adapters.storage.lerobot_v3.tools.packers import DataPacker, VideoPacker
from rlctl.adapters.storage.lerobot_v3.tools.video_spans import (
    VideoFacts,
    iter_span_frames,
    reencode_span,
    starts_on_keyframe,
    video_facts,
)
from rlctl.application.dataset_compat import edited_differences
from rlctl.application.ports.dataset_tools import EpisodeEdit, EpisodeRef, FeatureChanges
from rlctl.domain.dataset_meta import DatasetMeta, EpisodeRecord
from rlctl.domain.depth import infer_depth_unit
from rlctl.domain.errors import CorruptDataset, FeatureMismatch, InvalidInput, NotSupported
from rlctl.domain.features import FeatureSpec
from rlctl.domain.statistics import FeatureStats, RunningStats, aggregate_stats, image_stats
from rlctl.domain.video import VideoEncoding, video_feature_info

log = structlog.get_logger(__name__)

# Columns whose values change when episodes move: their statistics are recomputed.
REINDEXED = ("episode_index", "index", "task_index")
# info.json keys of older formats that a v3.0 dataset does not have.
_LEGACY_INFO_KEYS = frozenset({"total_chunks", "total_videos", "total_videos_size"})


class LeRobotRebuilder:
    """Starts rebuilds into local folders."""

    def start(
        self, output: str | Path, template: DatasetMeta, changes: FeatureChanges | None = None
    ) -> LeRobotRebuild:
        return LeRobotRebuild(Path(output), template, changes)


class LeRobotRebuild:
    """`DatasetRebuild`: one new dataset folder being filled episode by episode."""

    def __init__(
        self, root: Path, template: DatasetMeta, changes: FeatureChanges | None = None
    ) -> None:
        # A lock file alone is another writer's: `DatasetLock` below names it.
        if root.exists() and (
            not root.is_dir() or any(child.name != LOCK_NAME for child in root.iterdir())
        ):
            raise InvalidInput(
                "a file or folder with content is already there",
                where=str(root),
                hint="choose a new folder for the output",
            )
        self._root = root
        self._template = template
        self._changes = changes or FeatureChanges()
        self._features = dataset_features(template.features)
        check_writable(self._features)
        self._fps = template.fps
        self._builder = DataTableBuilder(self._features)
        self._stats_shapes = stats_shapes(self._features)
        self._video_keys = [k for k, f in self._features.items() if f.is_video]
        root.mkdir(parents=True, exist_ok=True)
        # The new folder is written from here to `finish`: a second tool given the same output
        # stops at once instead of interleaving its files with these.
        self._lock = DatasetLock(root).acquire()
        if any(child.name != LOCK_NAME for child in root.iterdir()):
            self._lock.release()
            raise InvalidInput(
                "another writer put files in the output folder meanwhile",
                where=str(root),
                hint="choose a new folder for the output",
            )
        self._facts: dict[Path, VideoFacts] = {}
        self._data = DataPacker(
            root,
            self._builder.schema,
            chunks_size=template.chunks_size,
            max_file_mb=template.data_files_size_in_mb,
            dictionary_columns=[
                k for k in self._builder.specs if k not in self._builder.image_keys
            ],
        )
        self._videos = {
            key: VideoPacker(
                root,
                key,
                self._fps,
                chunks_size=template.chunks_size,
                max_file_mb=template.video_files_size_in_mb,
                facts=self._video_facts,
            )
            for key in self._video_keys
        }
        self._episodes = EpisodesFile(self._video_keys, self._stats_shapes)
        self._episode_stats: list[dict[str, FeatureStats]] = []
        self._tasks: list[str] = []
        self._task_numbers: dict[str, int] = {}
        self._sources: dict[str, EpisodeSource] = {}
        self._frames = 0
        self._reencoded = 0
        # Files encoded for this rebuild, removed once their spans are copied into the output.
        self._staged: set[Path] = set()
        self._depth_units: dict[str, str] = {}
        added = {k: self._features[k] for k in self._changes.added}
        self._added = DataTableBuilder(added) if added else None
        # The cropped cameras' sampled new frames of the episode being added, for its stats.
        self._cropped_samples: dict[str, list[np.ndarray]] = {}

    # --- the DatasetRebuild port --------------------------------------------------------------

    def add_episode(self, ref: EpisodeRef, edit: EpisodeEdit | None = None) -> EpisodeRecord:
        source = self._source(ref.location)
        episode = source.episode(ref.episode)
        new_index = len(self._episode_stats)
        self._cropped_samples = {}
        rows = source.rows(ref.episode)
        table = self._reindexed(source, episode, rows, new_index, edit)
        data_chunk, data_file = self._data.add(table)
        placements = {
            key: self._videos[key].add(self._span(source, episode, rows, key), episode.length)
            for key in self._video_keys
        }
        self._drop_copied_staging()
        stats = self._stats_of(episode, table)
        retasked = edit is not None and (edit.task is not None or edit.tasks)
        entry = EpisodeEntry(
            episode_index=new_index,
            tasks=self._row_tasks(table) if retasked else episode.tasks or self._row_tasks(table),
            length=episode.length,
            data_chunk_index=data_chunk,
            data_file_index=data_file,
            dataset_from_index=self._frames,
            dataset_to_index=self._frames + episode.length,
            videos=placements,
            stats=stats,
        )
        row = self._episodes.add(entry)
        self._episode_stats.append(stats)
        self._frames += episode.length
        return EpisodeRecord(
            index=new_index,
            length=entry.length,
            tasks=entry.tasks,
            dataset_from_index=entry.dataset_from_index,
            dataset_to_index=entry.dataset_to_index,
            columns=row,
        )

    def finish(self, stats: Mapping[str, FeatureStats] | None = None) -> DatasetMeta:
        if not self._episode_stats:
            raise InvalidInput(
                "a dataset needs at least one episode", where=str(self._root), hint="keep some"
            )
        self._close_files()
        template = self._template
        self._episodes.write(
            self._root,
            chunks_size=template.chunks_size,
            max_file_mb=template.data_files_size_in_mb,
        )
        aggregated = aggregate_stats(self._episode_stats)
        aggregated = {k: v for k, v in aggregated.items() if k in self._features}
        aggregated.update(dict(stats or {}))
        staged = StagedReplace(durable=False)
        stage_tasks(staged, self._root, self._tasks)
        stage_stats(staged, self._root, aggregated)
        staged.publish()
        shutil.rmtree(self._root / STAGING_DIR, ignore_errors=True)
        _sync_tree(self._root)
        write_info(self._root, self._info(), durable=True)
        self._lock.release()
        return LeRobotMetaReader().read_meta(self._root)

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self._close_files()
        self._lock.release()
        shutil.rmtree(self._root, ignore_errors=True)

    # --- sources --------------------------------------------------------------------------------

    def _source(self, location: str) -> EpisodeSource:
        source = self._sources.get(location)
        if source is None:
            source = open_source(location)
            differences = edited_differences(self._template, source.meta, self._changes)
            if differences and not self._changes.empty:
                raise FeatureMismatch(
                    "the dataset does not have the features this edit starts from: "
                    + "; ".join(differences),
                    where=str(source.root),
                    hint="read the dataset's features with `rlctl dataset info`",
                )
            if differences:
                raise FeatureMismatch(
                    "the dataset cannot join the others: " + "; ".join(differences),
                    where=str(source.root),
                    hint="only datasets with the same fps and features can be merged",
                )
            self._sources[location] = source
        return source

    # --- rows -------------------------------------------------------------------------------

    def _task_number(self, task: str) -> int:
        number = self._task_numbers.get(task)
        if number is None:
            number = self._task_numbers[task] = len(self._tasks)
            self._tasks.append(task)
        return number

    def _new_task_indices(
        self,
        source: EpisodeSource,
        episode: SourceEpisode,
        old: np.ndarray,
        edit: EpisodeEdit | None = None,
    ) -> np.ndarray:
        tasks = source.meta.tasks
        used = np.unique(old)
        if len(used) and (used[0] < 0 or used[-1] >= len(tasks)):
            raise CorruptDataset(
                f"episode {episode.index} has rows with task_index {used.tolist()} but the "
                f"dataset lists {len(tasks)} task(s)",
                where=f"{episode.data_file}: task_index",
                hint="run `rlctl dataset check` on the source to list every problem",
            )
        if edit is not None and edit.task is not None:
            return np.full(len(old), self._task_number(edit.task), dtype=np.int64)
        renames = edit.tasks if edit is not None else {}
        # Tasks are numbered by first use, in the source's order within an episode.
        lookup = np.zeros(max(len(tasks), 1), dtype=np.int64)
        for value in used.tolist():
            task = tasks[value]
            lookup[value] = self._task_number(renames.get(task, task))
        return lookup[old]

    def _reindexed(
        self,
        source: EpisodeSource,
        episode: SourceEpisode,
        rows: pa.Table,
        new_index: int,
        edit: EpisodeEdit | None = None,
    ) -> pa.Table:
        schema = self._builder.schema
        added = self._added_columns(episode, rows.num_rows, edit)
        missing = [
            name for name in schema.names if name not in rows.column_names and name not in added
        ]
        if missing:
            raise CorruptDataset(
                f"the data of episode {episode.index} has no column {', '.join(missing)}",
                where=f"{episode.data_file}: {missing[0]}",
                hint="the data and meta/info.json disagree; run `rlctl dataset check` on it",
            )
        count = rows.num_rows
        old_tasks = rows.column("task_index").to_numpy().astype(np.int64)
        replaced = {
            "episode_index": np.full(count, new_index, dtype=np.int64),
            "index": np.arange(self._frames, self._frames + count, dtype=np.int64),
            "task_index": self._new_task_indices(source, episode, old_tasks, edit),
        }
        arrays = []
        for field in schema:
            if field.name in added:
                arrays.append(added[field.name])
                continue
            if field.name in replaced:
                arrays.append(pa.array(replaced[field.name], field.type))
                continue
            spec = self._features.get(field.name)
            if (
                field.name in self._changes.cropped
                and not source.meta.features[field.name].is_video
            ):
                arrays.append(self._cropped_images(source, episode, rows, field.name))
                continue
            if spec is not None and spec.is_language:  # any layout LeRobot's tools leave
                arrays.append(language_columns.canonical(rows.column(field.name), field.name))
                continue
            try:
                arrays.append(rows.column(field.name).cast(field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                raise CorruptDataset(
                    f"column {field.name!r} of episode {episode.index} cannot be stored as "
                    f"{field.type}: {err}",
                    where=f"{episode.data_file}: {field.name}",
                    hint="the data and meta/info.json disagree on the feature's dtype or shape",
                ) from err
        return pa.Table.from_arrays(arrays, schema=schema)

    def _cropped_images(
        self, source: EpisodeSource, episode: SourceEpisode, rows: pa.Table, key: str
    ) -> pa.Array:
        """A camera stored as images, each frame cropped, resized and stored as a new PNG."""
        column = ImageColumn(
            key, rows.column(key).combine_chunks(), source.root, str(episode.data_file)
        )
        encoding = VideoEncoding()  # unused by the image decoder beyond its depth flag
        frames = self._cropped(self._image_frames(column, rows.num_rows, key, encoding), key)
        data = [encode_png(frame) for frame in frames]
        paths = [f"frame-{i:06d}.png" for i in range(len(data))]
        return pa.StructArray.from_arrays(
            [pa.array(data, pa.binary()), pa.array(paths, pa.string())],
            fields=list(IMAGE_STRUCT),
        )

    def _cropped(self, frames: Any, key: str) -> Any:
        """`frames` cropped and resized; LeRobot's sample of them kept for the statistics."""
        crop = self._changes.cropped[key]
        kept = self._cropped_samples.setdefault(key, [])
        for frame in frames:
            new = crop_resize(np.asarray(frame), crop)
            kept.append(new)
            yield new

    def _added_columns(
        self, episode: SourceEpisode, count: int, edit: EpisodeEdit | None
    ) -> dict[str, pa.Array]:
        """The added features' values for the episode's rows, as the data file stores them."""
        if self._added is None:
            return {}
        values = dict(edit.columns) if edit is not None else {}
        for key in self._changes.added:
            if key not in values:
                raise InvalidInput(
                    f"no values of the added feature {key!r} for episode {episode.index}",
                    where=key,
                    hint="give one value per frame of every episode",
                )
            if len(values[key]) != count:
                raise InvalidInput(
                    f"{len(values[key])} values of {key!r} for episode {episode.index}, which "
                    f"has {count} frames",
                    where=key,
                    hint="give one value per frame of every episode",
                )
        table = self._added.build(values)
        return {name: table.column(name).combine_chunks() for name in table.column_names}

    def _row_tasks(self, table: pa.Table) -> tuple[str, ...]:
        numbers = dict.fromkeys(table.column("task_index").to_pylist())
        return tuple(self._tasks[n] for n in numbers)

    # --- statistics ---------------------------------------------------------------------------

    def _stats_of(self, episode: SourceEpisode, table: pa.Table) -> dict[str, FeatureStats]:
        """The episode's own statistics, those of the re-indexed columns recomputed; numeric
        features whose statistics the source lacks are computed from the rows."""
        stats: dict[str, FeatureStats] = {}
        for key in self._stats_shapes:
            spec = self._features[key]
            if key in self._changes.cropped:
                stats[key] = self._cropped_stats(key, episode)
            elif key in episode.stats and key not in REINDEXED:
                stats[key] = episode.stats[key]
            elif not spec.is_visual:
                stats[key] = _column_stats(table, spec, f"{episode.data_file}: {key}")
        return stats

    def _cropped_stats(self, key: str, episode: SourceEpisode) -> FeatureStats:
        frames = self._cropped_samples.get(key, [])
        if len(frames) != episode.length:
            raise CorruptDataset(
                f"{len(frames)} frames of {key!r} cropped for episode {episode.index}, which "
                f"has {episode.length} rows",
                where=str(episode.data_file),
                hint="the data and meta/episodes disagree; run `rlctl dataset check` on it",
            )
        chosen = np.stack([frames[i] for i in sample_indices(len(frames))])
        return image_stats(chosen)

    # --- videos -------------------------------------------------------------------------------

    def _video_facts(self, path: Path) -> VideoFacts:
        facts = self._facts.get(path)
        if facts is None:
            facts = self._facts[path] = video_facts(path)
        return facts

    def _span(
        self, source: EpisodeSource, episode: SourceEpisode, rows: pa.Table, key: str
    ) -> VideoSpan:
        encoding = self._changes.encoded.get(key)
        if key in self._changes.cropped:
            encoding = encoding or self._own_encoding(key)
        if encoding is None:
            return self._copyable_span(episode, key)
        return self._encoded_span(source, episode, rows, key, encoding)

    def _own_encoding(self, key: str) -> VideoEncoding:
        """The settings a video camera was encoded with (LeRobot's defaults when unknown)."""
        info = self._template.features[key].info or {}
        try:
            return VideoEncoding.from_info(info) if "video.codec" in info else VideoEncoding()
        except InvalidInput:
            return VideoEncoding()

    def _staging_file(self, name: str) -> Path:
        staging = self._root / STAGING_DIR
        staging.mkdir(parents=True, exist_ok=True)
        self._reencoded += 1
        path = staging / f"{name}-{self._reencoded:06d}.mp4"
        self._staged.add(path)
        return path

    def _encoded_span(
        self,
        source: EpisodeSource,
        episode: SourceEpisode,
        rows: pa.Table,
        key: str,
        encoding: VideoEncoding,
    ) -> VideoSpan:
        """The episode's frames of `key` (stored as images, or as video) encoded anew."""
        from rlctl.adapters.video.pyav_encoder import encode_frames

        spec = source.meta.features[key]
        if spec.is_video:
            if spec.is_depth_map:
                raise NotSupported(
                    "rlctl re-encodes RGB videos only; this camera is a depth video",
                    where=key,
                    hint="leave the depth camera out of the re-encoding",
                )
            frames: Any = iter_span_frames(episode.videos[key], self._fps)
        else:
            column = ImageColumn(
                key, rows.column(key).combine_chunks(), source.root, str(episode.data_file)
            )
            frames = self._image_frames(column, rows.num_rows, key, encoding)
        if key in self._changes.cropped:
            frames = self._cropped(frames, key)
        output = self._staging_file("encoded")
        info = encode_frames(output, frames, self._fps, encoding)
        if info.frame_count != episode.length:
            raise CorruptDataset(
                f"{info.frame_count} frames of {key!r} encoded for episode {episode.index}, "
                f"which has {episode.length} rows",
                where=str(episode.data_file),
                hint="the data and meta/episodes disagree; run `rlctl dataset check` on it",
            )
        return VideoSpan(output, 0.0, info.duration_s)

    def _image_frames(
        self, column: ImageColumn, count: int, key: str, encoding: VideoEncoding
    ) -> Any:
        for row in range(count):
            try:
                frame = decode_image(column.encoded(row))
            except CorruptDataset:
                raise
            except Exception as err:
                raise CorruptDataset(
                    f"image of row {row} cannot be decoded: {type(err).__name__}: {err}",
                    where=key,
                    hint="the stored image is damaged; rewrite the episode",
                ) from err
            if encoding.depth is not None:
                self._depth_units.setdefault(key, infer_depth_unit(frame.dtype))
            yield frame

    def _drop_copied_staging(self) -> None:
        pending = set().union(*(packer.pending for packer in self._videos.values()))
        for path in [p for p in self._staged if p not in pending]:
            path.unlink(missing_ok=True)
            self._staged.discard(path)
            self._facts.pop(path, None)

    def _copyable_span(self, episode: SourceEpisode, key: str) -> VideoSpan:
        span = episode.videos[key]
        if starts_on_keyframe(span, self._fps):
            return span
        # Another tool re-encoded the file whole: this episode's frames must be re-encoded.
        log.warning(
            "video span does not start on a keyframe; re-encoding it",
            file=str(span.path),
            episode=episode.index,
            key=key,
        )
        output = self._staging_file("reencoded")
        encoding = VideoEncoding.from_info(self._features[key].info)
        return reencode_span(span, self._fps, encoding, output)

    # --- closing ------------------------------------------------------------------------------

    def _close_files(self) -> None:
        self._data.close()
        for packer in self._videos.values():
            packer.close()

    def _info(self) -> dict[str, Any]:
        template = self._template
        features = {
            key: self._feature_with_stream(key, spec) for key, spec in self._features.items()
        }
        info = new_info(
            fps=self._fps,
            features=features,
            robot_type=template.robot_type,
            chunks_size=template.chunks_size,
            data_files_size_in_mb=template.data_files_size_in_mb,
            video_files_size_in_mb=template.video_files_size_in_mb,
            data_path=DEFAULT_DATA_PATH,
            video_path=DEFAULT_VIDEO_PATH if self._video_keys else None,
        )
        # Keys a later LeRobot may add are carried over; older formats' own keys are not.
        for key, value in template.info.items():
            if key not in info and key not in _LEGACY_INFO_KEYS:
                info[key] = value
        return with_totals(
            info, episodes=len(self._episode_stats), frames=self._frames, tasks=len(self._tasks)
        )

    def _feature_with_stream(self, key: str, spec: FeatureSpec) -> FeatureSpec:
        encoding = self._changes.encoded.get(key)
        if encoding is None and key in self._changes.cropped and spec.is_video:
            encoding = self._own_encoding(key)
        if encoding is not None:
            return self._encoded_feature(key, spec, encoding)
        if not spec.is_video or spec.info:
            return spec
        # A source without the `info` block (some v2.0 datasets): describe the first file.
        from rlctl.adapters.video.pyav_probe import probe

        first = self._root / DEFAULT_VIDEO_PATH.format(video_key=key, chunk_index=0, file_index=0)
        return spec.with_info(video_feature_info(probe(first), VideoEncoding()))

    def _encoded_feature(self, key: str, spec: FeatureSpec, encoding: VideoEncoding) -> FeatureSpec:
        """The stream of the camera's first new file and the settings that made it; the keys
        that describe the data (`is_depth_map`, `depth_unit`) keep their places."""
        from rlctl.adapters.video.pyav_probe import probe

        first = self._root / DEFAULT_VIDEO_PATH.format(video_key=key, chunk_index=0, file_index=0)
        kept = {k: v for k, v in (spec.info or {}).items() if not k.startswith("video.")}
        if encoding.depth is not None and kept.get("depth_unit") is None:
            kept["depth_unit"] = self._depth_units.get(key, "mm")
        return spec.with_info({**kept, **video_feature_info(probe(first), encoding)})


def _column_stats(table: pa.Table, spec: FeatureSpec, where: str) -> FeatureStats:
    values = numeric_column(table.column(spec.key), spec, where)
    running = RunningStats.for_numeric(len(spec.shape))
    running.update(values.astype(np.float64) if spec.key == "timestamp" else values)
    return running.result()


def _sync_tree(root: Path) -> None:
    """Flush every file to the disk before info.json makes the dataset whole."""
    for folder, _, files in os.walk(root):
        for name in files:
            fsync_file(Path(folder) / name)
