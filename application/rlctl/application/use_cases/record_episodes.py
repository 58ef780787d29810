"""`RecordEpisodes`: LeRobot's record loop, with the rules of what is kept made explicit.

Phases, each a loop at `fps` (observe → act → send → store):

- warm-up (`warmup_time_s`, once): the teleoperator drives, nothing is stored;
- episode (`episode_time_s`): every tick becomes a frame — the observation and the action
  *actually sent* (after the robot capped it), with the task text;
- reset (`reset_time_s`): the teleoperator drives while a person resets the scene; skipped
  after the last episode.

Controls (`RecordControls`): NEXT ends the phase early; RERECORD drops the episode (during its
reset too, as in LeRobot) and records it again; STOP keeps the episode under way and ends. A
simulator that ends its episode (success, time limit) ends the phase like NEXT.

What is kept: an episode is saved after its reset phase (so RERECORD can still drop it). Saving
hands it to the writer, whose encoding runs in the background, so the next episode starts at
once. On Ctrl-C the episode being recorded is dropped, a finished one waiting for its reset is
saved, and the session is finalized: every finished episode is on disk and readable. A run that
fails before its first episode is saved (a robot port or a camera that cannot open) removes the
dataset it created, so the same command can run again; a resumed dataset is never removed. With a
policy in control the policy acts during episodes and the teleoperator (if any) during resets.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import structlog

from rlctl.application.action_sources import ActionSource, PolicySource, TeleopSource
from rlctl.application.control_loop import (
    LoopStats,
    Ticker,
    loop_interpreter,
    progress_task,
    ticks_for,
)
from rlctl.application.devices import Calibrate, connect_devices, disconnect_devices
from rlctl.application.ports.clock import Clock
from rlctl.application.ports.control import Control, Interrupts, RecordControls
from rlctl.application.ports.dataset_writer import DatasetWriter, DatasetWriteSession
from rlctl.application.ports.live_display import LiveDisplay
from rlctl.application.ports.policy import Policy
from rlctl.application.ports.progress import Progress
from rlctl.application.ports.robot import ACTION_KEY, Robot
from rlctl.application.ports.teleoperator import Teleoperator
from rlctl.application.robot_features import as_images, check_action_match
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import FeatureMismatch, InvalidInput
from rlctl.domain.features import DEFAULT_FEATURE_KEYS, FeatureSpec
from rlctl.domain.video import VideoEncoding

log = structlog.get_logger(__name__)


@attrs.frozen(kw_only=True)
class RecordSettings:
    fps: int = 30
    num_episodes: int = 50
    episode_time_s: float = 60.0
    reset_time_s: float = 60.0
    warmup_time_s: float = 0.0
    # Stored with every frame; empty: the robot's own task text (a simulator's), if any.
    single_task: str = ""


@attrs.frozen(kw_only=True)
class DatasetTarget:
    root: Path = attrs.field(converter=Path)
    resume: bool = False
    # Cameras as videos (LeRobot's default) or as PNG images.
    video: bool = True
    encoding: VideoEncoding | None = None


@attrs.frozen(kw_only=True)
class RecordReport:
    root: Path
    saved_episodes: tuple[int, ...]
    frames: int
    rerecorded: int
    stopped: bool
    interrupted: bool
    total_episodes: int
    timing: LoopStats
    # The longest `save_episode` took: near zero when the next episode never waits on encoding.
    max_save_s: float
    finalize_s: float


@attrs.frozen
class _PhaseEnd:
    controls: frozenset[Control] = frozenset()
    ticks: int = 0

    @property
    def stop(self) -> bool:
        return Control.STOP in self.controls

    @property
    def rerecord(self) -> bool:
        return Control.RERECORD in self.controls

    def __or__(self, other: _PhaseEnd) -> _PhaseEnd:
        return _PhaseEnd(self.controls | other.controls, self.ticks + other.ticks)


class RecordEpisodes:
    def __init__(
        self,
        writer: DatasetWriter,
        robot: Robot,
        clock: Clock,
        controls: RecordControls | None = None,
        *,
        teleop: Teleoperator | None = None,
        policy: Policy | None = None,
        progress: Progress | None = None,
        calibrate: Calibrate | None = None,
        owns_process: bool = False,
        display: LiveDisplay | None = None,
        interrupts: Interrupts | None = None,
    ) -> None:
        """`interrupts`: Ctrl-C and SIGTERM handled so that a second one (uv sends each twice)
        never cuts the saving of the episode under way or the closing of the dataset."""
        if teleop is None and policy is None:
            raise InvalidInput(
                "nothing would drive the robot",
                where="record",
                hint="give a teleoperator (--teleop.type=...) or a policy (--policy.path=...)",
            )
        self._writer = writer
        self._robot = robot
        self._clock = clock
        self._controls = controls
        self._teleop = teleop
        self._progress = progress
        self._calibrate = calibrate
        # Every tick of every phase is shown (`--display_data=true`), stored or not.
        self._display = display
        # A command that owns its process (`rlctl record`) may tune the interpreter for the loop.
        self._owns_process = owns_process
        self._interrupts = interrupts
        self._features = {**robot.observation_features, **robot.action_features}
        # Looked up once: a robot may build its feature specs on every access.
        self._observation_keys = list(robot.observation_features)
        if teleop is not None:
            check_action_match(robot.action_features, teleop.action_features, what="the teleop")
        self._teleop_source: ActionSource | None = TeleopSource(teleop) if teleop else None
        self._episode_source: ActionSource = (
            PolicySource(policy, self._observation_keys)
            if policy is not None
            else TeleopSource(teleop)  # type: ignore[arg-type]
        )
        self._ticker: Ticker | None = None
        self._session: DatasetWriteSession | None = None

    def __call__(self, target: DatasetTarget, settings: RecordSettings) -> RecordReport:
        _check(settings)
        # The writer's and the cameras' threads share the interpreter lock with the loop.
        if self._interrupts is not None:
            self._interrupts.install()
        try:
            with loop_interpreter(self._robot.realtime, owns_process=self._owns_process):
                return self._record(target, settings)
        finally:
            if self._interrupts is not None:
                self._interrupts.uninstall()

    @contextlib.contextmanager
    def _shielded(self) -> Iterator[None]:
        """A save that a repeated Ctrl-C does not cut (see `Interrupts`)."""
        if self._interrupts is None:
            yield
            return
        with self._interrupts.saving():
            yield

    def _record(self, target: DatasetTarget, settings: RecordSettings) -> RecordReport:
        session = self._open(target, settings)
        self._session = session
        self._ticker = Ticker(self._clock, settings.fps, realtime=self._robot.realtime)
        saved: list[int] = []
        counts = {"rerecorded": 0, "max_save_s": 0.0}
        stopped = interrupted = failed = False
        finished_unsaved = False
        try:
            if self._display is not None:
                self._display.open(
                    self._features, fps=settings.fps, name="record", paced=self._robot.realtime
                )
            connect_devices(self._robot, self._teleop, self._calibrate)
            warmup = ticks_for(settings.warmup_time_s, settings.fps, what="warmup_time_s")
            if warmup:
                log.info("warming up", seconds=settings.warmup_time_s)
                stopped = self._phase("warm-up", warmup, self._teleop_source, settings).stop
            while not stopped and len(saved) < settings.num_episodes:
                index = session.num_episodes
                log.info("recording episode", episode=index)
                self._robot.reset()
                self._episode_source.reset()
                n = ticks_for(settings.episode_time_s, settings.fps, what="episode_time_s")
                end = self._phase(f"episode {index}", n, self._episode_source, settings, True)
                finished_unsaved = session.episode_frames > 0
                last = len(saved) == settings.num_episodes - 1
                resets = ticks_for(settings.reset_time_s, settings.fps, what="reset_time_s")
                if not end.stop and (not last or end.rerecord) and resets:
                    log.info("reset the environment", seconds=settings.reset_time_s)
                    end = end | self._phase("reset", resets, self._teleop_source, settings)
                stopped = end.stop
                if end.rerecord:
                    log.info("re-recording episode", episode=index)
                    session.clear_episode_buffer()
                    finished_unsaved = False
                    counts["rerecorded"] += 1
                    continue
                if finished_unsaved:
                    with self._shielded():
                        saved.append(self._save(session, counts))
                        finished_unsaved = False
                    if self._interrupts is not None:
                        self._interrupts.raise_pending()  # a Ctrl-C that came while saving
        except KeyboardInterrupt:
            interrupted = True
            log.warning("interrupted: keeping the finished episodes")
            if finished_unsaved:
                with self._shielded():
                    saved.append(self._save(session, counts))
        except Exception:
            failed = True
            # A device failing during a reset must not take the finished episode with it.
            if finished_unsaved:
                self._save_quietly(session, counts, saved)
            raise
        finally:
            started = time.perf_counter()
            try:
                with self._shielded():
                    meta = self._close(session, target, failed=failed)
            finally:
                finalize_s = time.perf_counter() - started
                disconnect_devices(self._robot, self._teleop)
                if self._controls is not None:
                    self._controls.close()
                if self._display is not None:
                    self._display.close()
        assert meta is not None  # only a failed run discards its dataset, and it raises
        return RecordReport(
            root=target.root,
            saved_episodes=tuple(saved),
            frames=sum(e.length for e in meta.episodes if e.index in saved),
            rerecorded=int(counts["rerecorded"]),
            stopped=stopped,
            interrupted=interrupted,
            total_episodes=meta.total_episodes,
            timing=self._ticker.stats(),
            max_save_s=float(counts["max_save_s"]),
            finalize_s=finalize_s,
        )

    # Opening the dataset

    def _open(self, target: DatasetTarget, settings: RecordSettings) -> DatasetWriteSession:
        features = as_images(self._features, video=target.video)
        if not target.resume:
            return self._writer.create(
                target.root,
                fps=settings.fps,
                features=features,
                robot_type=self._robot.robot_type,
                video=target.encoding,
            )
        session = self._writer.resume(target.root, video=target.encoding)
        try:
            _check_resumable(session, features, settings.fps)
        except Exception:
            session.finalize()
            raise
        log.info("resuming", root=str(target.root), episodes=session.num_episodes)
        return session

    def _close(
        self, session: DatasetWriteSession, target: DatasetTarget, *, failed: bool
    ) -> DatasetMeta | None:
        """Finalize; a dataset this run created, then failed before saving into, is removed."""
        if not failed or target.resume or session.num_episodes:
            return session.finalize()
        session.discard()
        log.info("nothing was recorded: the new dataset is removed", root=str(target.root))
        return None

    # One phase

    def _phase(
        self,
        name: str,
        n_ticks: int,
        source: ActionSource | None,
        settings: RecordSettings,
        record: bool = False,
    ) -> _PhaseEnd:
        assert self._ticker is not None and self._session is not None
        ticker, session, robot, display = self._ticker, self._session, self._robot, self._display
        ticker.restart()
        bar = progress_task(self._progress, name, n_ticks)
        try:
            for tick in range(n_ticks):
                ticker.tick()
                controls = self._controls.poll() if self._controls is not None else frozenset()
                if controls:
                    log.info("control", phase=name, controls=sorted(controls))
                    return _PhaseEnd(controls, tick)
                observation = robot.get_observation()
                task = settings.single_task or str(observation.get("task") or "")
                sent = None
                if source is not None:
                    sent = robot.send_action(source(observation, task))
                    if record:
                        self._add(session, self._frame(observation, sent, task))
                if display is not None:
                    display.log_frame(ticker.count - 1, observation, sent)
                bar.advance()
                if robot.episode_over:
                    return _PhaseEnd(frozenset(), tick + 1)
            return _PhaseEnd(frozenset(), n_ticks)
        finally:
            bar.close()

    def _add(self, session: DatasetWriteSession, frame: Mapping[str, Any]) -> None:
        """One frame to the episode, never half of one: a Ctrl-C that comes while the writer
        hands it to its video encoders waits for the end of that (the frame counts of the
        writer and of an encoder would disagree, and the last save would wait forever)."""
        with self._shielded():
            session.add_frame(frame)
        if self._interrupts is not None:
            self._interrupts.raise_pending()

    def _frame(self, observation: Mapping[str, Any], action: Any, task: str) -> dict[str, Any]:
        frame = {key: observation[key] for key in self._observation_keys}
        frame[ACTION_KEY] = action
        frame["task"] = task
        return frame

    def _save_quietly(
        self, session: DatasetWriteSession, counts: dict[str, Any], saved: list[int]
    ) -> None:
        try:
            saved.append(self._save(session, counts))
        except Exception as error:
            log.warning("could not save the finished episode", error=str(error))

    def _save(self, session: DatasetWriteSession, counts: dict[str, Any]) -> int:
        started = time.perf_counter()
        record = session.save_episode()
        counts["max_save_s"] = max(counts["max_save_s"], time.perf_counter() - started)
        log.info("episode saved", episode=record.index, frames=record.length)
        return record.index


def _check(settings: RecordSettings) -> None:
    if isinstance(settings.fps, bool) or not isinstance(settings.fps, int) or settings.fps <= 0:
        raise InvalidInput(
            f"fps must be a positive whole number, got {settings.fps!r}", where="fps"
        )
    if settings.num_episodes < 0:
        raise InvalidInput(
            f"num_episodes cannot be negative, got {settings.num_episodes}", where="num_episodes"
        )


def _check_resumable(
    session: DatasetWriteSession, features: Mapping[str, FeatureSpec], fps: int
) -> None:
    where = str(session.root)
    if session.fps != fps:
        raise InvalidInput(
            f"the dataset was recorded at {session.fps} fps, not {fps}",
            where=where,
            hint=f"resume with --dataset.fps={session.fps}",
        )
    theirs = {k: v for k, v in session.features.items() if k not in DEFAULT_FEATURE_KEYS}
    problems = [f"{k} is missing from the dataset" for k in features if k not in theirs]
    problems += [f"{k} is not produced by this robot" for k in theirs if k not in features]
    for key, spec in features.items():
        other = theirs.get(key)
        if other is None:
            continue
        if (spec.dtype, tuple(spec.shape)) != (other.dtype, tuple(other.shape)):
            problems.append(
                f"{key} is {other.dtype} {list(other.shape)} in the dataset, "
                f"{spec.dtype} {list(spec.shape)} from the robot"
            )
        elif not spec.is_visual and spec.names and other.names and spec.names != other.names:
            problems.append(f"{key} names {other.names} in the dataset, {spec.names} here")
    if problems:
        raise FeatureMismatch(
            "the robot does not fit the dataset being resumed: " + "; ".join(problems),
            where=where,
            hint="resume with the same robot, cameras and --dataset.video setting, or record "
            "into a new dataset",
        )
