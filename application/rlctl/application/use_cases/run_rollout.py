"""`RunRollout`: a trained policy deployed on a robot, watched, corrected, and recorded
(`rlctl rollout`, LeRobot 0.6.1's `lerobot-rollout`).

One loop at `fps` (observe → act → send → store), whatever the strategy:

- `base`: the policy acts until `duration_s` or Esc; nothing is stored.
- `sentry`: every tick is stored; the recording is cut into episodes whose videos have just
  crossed their size target, uploaded every `upload_every_n_episodes`.
- `highlight`: the last seconds wait in a ring buffer (memory-bounded); SAVE stores them and
  records on until SAVE again (one episode); UPLOAD uploads.
- `dagger`: PAUSE_RESUME pauses the policy (the arm holds) and resumes it; CORRECTION lets a
  person drive with the teleoperator. A person's frames are tagged `intervention=True`
  (LeRobot's column); corrections alone are stored, one episode each, unless
  `record_autonomous` (then every tick, cut as sentry cuts it).
- `episodic`: `rlctl record` with the policy in control: episodes with reset phases, NEXT,
  RERECORD, STOP.

What is stored is what the robot was sent: every action goes through the robot's guard
(finite, in range, bounded step), and the frame holds the guarded command. Whether the policy
runs in the tick (`sync`) or in the acting engine's worker (`async`, `rtc`, a policy server) is
the `Policy` given; with the engine the tick never waits for the model, and a tick without a
fresh action holds the arm and says so (counted in the report).

Hand-overs: before a person takes over, an actuated leader arm is driven to where the follower
is (`ActuatedTeleoperator`); otherwise the follower is slid to the leader over a second. At the
end the arm goes back to where it started (`return_to_initial_position`).

What is kept: episodes are committed whole by the writer, in the background; a crash or
Ctrl-C keeps every saved episode and saves the one under way (shielded from a second Ctrl-C).
Uploads run in a worker: it waits for the commits, then uploads; an episode that ends meanwhile
is saved once the upload is done (the loop goes on), so an upload never reads a half-written
episode.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import structlog

from rlctl.application.acting_engine import AsyncActing
from rlctl.application.action_sources import PolicySource, TeleopSource
from rlctl.application.control_loop import LoopStats, Ticker, loop_interpreter, progress_task
from rlctl.application.devices import Calibrate, connect_devices, disconnect_devices
from rlctl.application.ports.clock import Clock
from rlctl.application.ports.control import Interrupts, RolloutControls, RolloutEvent
from rlctl.application.ports.dataset_writer import DatasetWriter, DatasetWriteSession
from rlctl.application.ports.live_display import LiveDisplay
from rlctl.application.ports.policy import Policy
from rlctl.application.ports.progress import Progress, ProgressTask
from rlctl.application.ports.robot import ACTION_KEY, Robot
from rlctl.application.ports.teleoperator import ActuatedTeleoperator, Teleoperator
from rlctl.application.robot_features import STATE_KEY, as_images, check_action_match
from rlctl.application.use_cases.record_episodes import DatasetTarget, _check_resumable
from rlctl.domain.dataset_meta import DatasetMeta
from rlctl.domain.errors import ConfigError, FeatureMismatch, InvalidInput
from rlctl.domain.features import FeatureKind, FeatureSpec
from rlctl.domain.rollout import (
    INTERVENTION,
    INTERVENTION_KEY,
    DAggerEvent,
    DAggerPhase,
    DAggerStrategyConfig,
    EpisodicStrategyConfig,
    HighlightStrategyConfig,
    RingBuffer,
    RolloutStrategyConfig,
    SentryStrategyConfig,
    dagger_next,
    episode_seconds_for_video,
    smooth_path,
)

log = structlog.get_logger(__name__)

Upload = Callable[[Path], Any]
# Keys the live display shows beside the robot's: who drove each tick, and whether the policy's
# action was fresh (0: the arm held because the model had nothing new).
DISPLAY_HUMAN = "rollout.human"
DISPLAY_FRESH = "rollout.fresh"
# The timeline a report draws is cut to about this many points (a 24/7 sentry has millions).
TIMELINE_POINTS = 5000


class Driver(enum.StrEnum):
    POLICY = "policy"
    HUMAN = "human"
    HOLD = "hold"  # paused, or the leader being brought to the follower
    MOVE = "move"  # the follower slid to the leader, or back to where it started


@attrs.frozen(kw_only=True)
class RolloutSettings:
    fps: int = 30
    # Seconds the rollout lasts (0: until Esc or Ctrl-C).
    duration_s: float = 0.0
    # Stored with every frame and given to the policy; empty: the robot's own task text.
    task: str = ""
    # Episodic (and DAgger corrections when the strategy does not say).
    num_episodes: int = 50
    episode_time_s: float = 60.0
    reset_time_s: float = 60.0
    # At the end, the arm goes back to where it started (over `return_s`).
    return_to_initial_position: bool = True
    return_s: float = 3.0
    # Hand-overs: an actuated leader is brought to the follower over `leader_handover_s`, or the
    # follower slid to the leader over `follower_handover_s` (LeRobot's 2 s and 1 s).
    leader_handover_s: float = 2.0
    follower_handover_s: float = 1.0


@attrs.frozen
class Timeline:
    """Per tick: when it started (s from the first), who drove, whether the action was fresh,
    and the largest joint change from the previous command (the action's units)."""

    starts: tuple[float, ...] = ()
    drivers: tuple[str, ...] = ()
    fresh: tuple[bool, ...] = ()
    jumps: tuple[float, ...] = ()

    def to_info(self, points: int = TIMELINE_POINTS) -> dict[str, Any]:
        """The timeline for `rollout_info.json`, every k-th tick so it stays small."""
        step = max(1, -(-len(self.starts) // max(1, points)))
        return {
            "every": step,
            "start_s": [round(v, 5) for v in self.starts[::step]],
            "driver": list(self.drivers[::step]),
            "fresh": list(self.fresh[::step]),
            "jump": [round(v, 5) for v in self.jumps[::step]],
        }


@attrs.frozen(kw_only=True)
class RolloutReport:
    strategy: str
    root: Path | None
    saved_episodes: tuple[int, ...]
    frames: int
    total_episodes: int
    uploads: int
    stopped: bool
    interrupted: bool
    timing: LoopStats
    ticks: int
    policy_ticks: int
    human_ticks: int
    # Ticks the policy drove without a fresh action (the engine held the arm).
    held_ticks: int
    # (first tick, last tick) of each span a person drove.
    interventions: tuple[tuple[int, int], ...]
    # The largest change of any joint between two consecutive commands while the policy drove.
    max_policy_jump: float
    timeline: Timeline

    def to_info(self) -> dict[str, Any]:
        """`rollout_info.json` (`--report_path`): the figures, the spans a person drove, and a
        thinned timeline; plain JSON for a notebook or a dashboard."""
        t = self.timing
        return {
            "strategy": self.strategy,
            "dataset": str(self.root) if self.root is not None else None,
            "saved_episodes": list(self.saved_episodes),
            "frames": self.frames,
            "total_episodes": self.total_episodes,
            "uploads": self.uploads,
            "stopped": self.stopped,
            "interrupted": self.interrupted,
            "ticks": self.ticks,
            "policy_ticks": self.policy_ticks,
            "human_ticks": self.human_ticks,
            "held_ticks": self.held_ticks,
            "interventions": [list(span) for span in self.interventions],
            "max_policy_jump": self.max_policy_jump,
            "timing": {
                "target_s": t.target_s,
                "p50_s": t.p50_s,
                "p95_s": t.p95_s,
                "max_s": t.max_s,
                "late_ticks": t.late_ticks,
                "realtime": t.realtime,
            },
            "timeline": self.timeline.to_info(),
        }


class RunRollout:
    def __init__(
        self,
        robot: Robot,
        clock: Clock,
        *,
        policy: Policy,
        teleop: Teleoperator | None = None,
        writer: DatasetWriter | None = None,
        controls: RolloutControls | None = None,
        progress: Progress | None = None,
        display: LiveDisplay | None = None,
        interrupts: Interrupts | None = None,
        upload: Upload | None = None,
        calibrate: Calibrate | None = None,
        owns_process: bool = False,
    ) -> None:
        """`upload(root)`: push the dataset (sentry's periodic uploads, the upload key); None:
        no upload during the rollout. `interrupts`: a second Ctrl-C never cuts a save."""
        if teleop is not None:
            check_action_match(robot.action_features, teleop.action_features, what="the teleop")
        self.robot = robot
        self.clock = clock
        self.policy = policy
        self.teleop = teleop
        self.writer = writer
        self.controls = controls
        self.progress = progress
        self.display = display
        self.interrupts = interrupts
        self.upload = upload
        self.calibrate = calibrate
        self.owns_process = owns_process

    def __call__(
        self,
        strategy: RolloutStrategyConfig,
        settings: RolloutSettings,
        target: DatasetTarget | None = None,
    ) -> RolloutReport:
        try:
            _check(strategy, settings, target, self)
        except BaseException:
            # Refused before anything started: what was handed over is let go all the same.
            if isinstance(self.policy, AsyncActing):
                self.policy.close()
            if self.controls is not None:
                self.controls.close()
            raise
        if self.interrupts is not None:
            self.interrupts.install()
        try:
            with loop_interpreter(self.robot.realtime, owns_process=self.owns_process):
                return _Rollout(self, strategy, settings, target).run()
        finally:
            if self.interrupts is not None:
                self.interrupts.uninstall()


def _check(
    strategy: RolloutStrategyConfig,
    settings: RolloutSettings,
    target: DatasetTarget | None,
    use_case: RunRollout,
) -> None:
    if isinstance(settings.fps, bool) or not isinstance(settings.fps, int) or settings.fps <= 0:
        raise InvalidInput(
            f"fps must be a positive whole number, got {settings.fps!r}", where="fps"
        )
    if settings.duration_s < 0:
        raise InvalidInput("a duration cannot be negative", where="duration")
    name = strategy.type_name
    if strategy.records and (target is None or use_case.writer is None):
        raise ConfigError(
            f"the {name} strategy records a dataset: say where",
            where="dataset",
            hint="give --dataset.repo_id=user/rollout_name or --dataset.root=PATH",
        )
    if not strategy.records and target is not None:
        raise ConfigError(
            "the base strategy records nothing",
            where="dataset",
            hint="drop --dataset.*, or record with --strategy.type=sentry|highlight|dagger|"
            "episodic",
        )
    _check_policy_fits_robot(use_case.policy, use_case.robot)
    if isinstance(strategy, DAggerStrategyConfig) and use_case.teleop is None:
        raise ConfigError(
            "the dagger strategy needs a teleoperator for the corrections",
            where="teleop.type",
            hint="e.g. --teleop.type=so101_leader --teleop.port=/dev/ttyACM1 --teleop.id=blue",
        )


def _shape(shape: Any) -> str:
    return "(" + ", ".join(str(int(v)) for v in shape) + ("," if len(shape) == 1 else "") + ")"


def _check_policy_fits_robot(policy: Policy, robot: Robot) -> None:
    """Refuse, before anything moves and naming every difference, a policy trained on another
    robot: a vector it reads missing or of another size, a camera it reads missing, an action
    of another size. (A camera's size is the policy's to judge: most resize.)"""
    provided = dict(robot.observation_features)
    seen = policy.observation_features(provided)
    history = policy.config.n_obs_steps
    problems: list[str] = []
    for key, feature in policy.config.input_features.items():
        spec = seen.get(key)
        wanted = tuple(feature.shape)
        if feature.kind in (FeatureKind.STATE, FeatureKind.ENV):
            if spec is None:
                problems.append(f"it reads {key} {_shape(wanted)}, which the robot lacks")
            elif tuple(spec.shape) not in (wanted, (history, *wanted)):
                problems.append(
                    f"it reads {key} as {_shape(wanted)}, the robot gives {_shape(spec.shape)}"
                )
        elif feature.kind is FeatureKind.VISUAL and spec is None:
            problems.append(f"it reads camera {key}, which the robot lacks")
    action = policy.config.output_features.get(ACTION_KEY)
    robot_action = robot.action_features.get(ACTION_KEY)
    if (
        action is not None
        and robot_action is not None
        and tuple(action.shape)[-1:] != tuple(robot_action.shape)[-1:]
    ):
        problems.append(
            f"it outputs actions of shape {_shape(action.shape)}, the robot takes "
            f"{_shape(robot_action.shape)}"
        )
    if problems:
        given = ", ".join(f"{k} {_shape(f.shape)}" for k, f in provided.items()) or "nothing"
        raise FeatureMismatch(
            "the policy does not fit this robot: " + "; ".join(problems),
            where="policy.path",
            hint=f"the robot gives {given}; deploy a policy trained on this robot (its joints "
            "and cameras, named as in the dataset it learned from: --robot.cameras names them)",
        )


class _Uploads:
    """One upload at a time, in a worker: wait for the commits, then push."""

    def __init__(self, upload: Upload | None, session: DatasetWriteSession | None) -> None:
        self._upload = upload
        self._session = session
        self._thread: threading.Thread | None = None
        self.done = 0
        self.failed = 0

    @property
    def available(self) -> bool:
        return self._upload is not None and self._session is not None

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> bool:
        if not self.available or self.busy:
            return False
        self._thread = threading.Thread(target=self._run, name="rollout-upload", daemon=True)
        self._thread.start()
        return True

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        assert self._upload is not None and self._session is not None
        try:
            # No episode is saved while this runs (saves wait for it), so what is committed
            # when the flush returns is what is uploaded, whole.
            self._session.flush()
            if self._session.num_episodes == 0:
                log.info("nothing to upload yet: no episode saved")
                return
            self._upload(self._session.root)
            self.done += 1
            log.info("dataset uploaded", episodes=self._session.num_episodes)
        except Exception as error:  # an upload failing must not stop the robot
            self.failed += 1
            log.warning("upload failed; the dataset stays here", error=str(error))


class _Stop(Exception):
    """Esc, or the duration is over."""


class _Rollout:
    def __init__(
        self,
        use_case: RunRollout,
        strategy: RolloutStrategyConfig,
        settings: RolloutSettings,
        target: DatasetTarget | None,
    ) -> None:
        self.u = use_case
        self.strategy = strategy
        self.settings = settings
        self.target = target
        robot = use_case.robot
        self.observation_keys = list(robot.observation_features)
        self.tagged = isinstance(strategy, DAggerStrategyConfig)
        self.features = {**robot.observation_features, **robot.action_features}
        if self.tagged:
            self.features[INTERVENTION_KEY] = INTERVENTION
        self.policy_source = PolicySource(use_case.policy, self.observation_keys)
        self.teleop_source = TeleopSource(use_case.teleop) if use_case.teleop else None
        self.ticker = Ticker(use_case.clock, settings.fps, realtime=robot.realtime)
        self.limit = round(settings.duration_s * settings.fps) if settings.duration_s else None
        self.session: DatasetWriteSession | None = None
        self.uploads = _Uploads(None, None)
        self.saved: list[int] = []
        self.pending_save = False
        self.last_sent: np.ndarray | None = None
        self.initial: np.ndarray | None = None
        self.stopped = False
        self.meta: DatasetMeta | None = None
        self.bar: ProgressTask = progress_task(None, "", None)
        # The timeline.
        self.starts: list[float] = []
        self.drivers: list[str] = []
        self.fresh: list[bool] = []
        self.jumps: list[float] = []

    # --- the run ---------------------------------------------------------------------------

    def run(self) -> RolloutReport:
        u, target = self.u, self.target
        interrupted = failed = False
        finalize_error: BaseException | None = None
        try:
            if target is not None and u.writer is not None:
                self.session = self._open(u.writer, target)
                self.uploads = _Uploads(u.upload, self.session)
            if u.display is not None:
                shown = {
                    **self.features,
                    DISPLAY_HUMAN: FeatureSpec(DISPLAY_HUMAN, "float32", (1,)),
                    DISPLAY_FRESH: FeatureSpec(DISPLAY_FRESH, "float32", (1,)),
                }
                u.display.open(shown, fps=self.settings.fps, name="rollout", paced=u.robot.realtime)
            connect_devices(u.robot, u.teleop, u.calibrate)
            u.robot.reset()  # a simulator sets its scene; hardware does nothing
            self.initial = self._present_position(u.robot.get_observation())
            self.bar = progress_task(u.progress, f"rollout ({self.strategy.type_name})", self.limit)
            with contextlib.suppress(_Stop):
                self._strategy()
        except KeyboardInterrupt:
            interrupted = True
            log.warning("interrupted: keeping what was recorded")
        except Exception:
            failed = True
            raise
        finally:
            self.bar.close()
            try:
                self._wind_down(failed=failed)
            except BaseException as error:  # raised below, after letting go
                finalize_error = error
            finally:
                self._let_go(interrupted=interrupted, failed=failed)
        if finalize_error is not None:
            raise finalize_error
        return self._report(interrupted)

    def _strategy(self) -> None:
        strategy = self.strategy
        if isinstance(strategy, SentryStrategyConfig):
            self._continuous(strategy.upload_every_n_episodes, self._episode_ticks(strategy))
        elif isinstance(strategy, HighlightStrategyConfig):
            self._highlight(strategy)
        elif isinstance(strategy, DAggerStrategyConfig):
            self._dagger(strategy)
        elif isinstance(strategy, EpisodicStrategyConfig):
            self._episodic(strategy)
        else:
            self._continuous(None, None)

    def _wind_down(self, *, failed: bool) -> None:
        """Save what is under way (shielded), wait for an upload, close the dataset."""
        session = self.session
        if session is None:
            return
        with self._shielded():
            if session.episode_frames:
                self.uploads.wait()
                try:
                    self._save_now()
                except Exception as error:
                    if not failed:
                        raise
                    log.warning("could not save the episode under way", error=str(error))
            self.uploads.wait()
            self.meta = session.finalize()

    def _let_go(self, *, interrupted: bool, failed: bool) -> None:
        u = self.u
        try:
            if (
                not failed
                and self.settings.return_to_initial_position
                and self.initial is not None
                and u.robot.is_connected
            ):
                self.limit = None  # the way back is not part of the duration
                with contextlib.suppress(Exception, KeyboardInterrupt):
                    self._move_follower(self.initial, self.settings.return_s, poll=False)
        finally:
            disconnect_devices(u.robot, u.teleop)
            if isinstance(u.policy, AsyncActing):
                u.policy.close()  # its worker, and its connection to a server
            if u.controls is not None:
                u.controls.close()
            if u.display is not None:
                u.display.close()

    # --- strategies ------------------------------------------------------------------------

    def _continuous(self, upload_every: int | None, episode_ticks: int | None) -> None:
        """Base (nothing stored) and sentry (every tick stored, cut into episodes)."""
        self.u.policy.reset()
        since_upload = 0
        while True:
            events = self._poll()
            if RolloutEvent.STOP in events:
                raise _Stop
            if RolloutEvent.UPLOAD in events:
                self._upload_now()
            self._tick(Driver.POLICY, store=self.session is not None)
            self._save_if_pending()
            if self._scene_over() and self._save():
                since_upload += 1
            session = self.session
            if (
                episode_ticks
                and session is not None
                and not self.pending_save
                and session.episode_frames >= episode_ticks
            ):
                if self._save():
                    since_upload += 1
                if upload_every and since_upload >= upload_every and self.uploads.start():
                    since_upload = 0

    def _highlight(self, strategy: HighlightStrategyConfig) -> None:
        self._require_session()
        ring = RingBuffer(
            strategy.ring_buffer_seconds, self.settings.fps, strategy.ring_buffer_max_memory_mb
        )
        live = False
        self.u.policy.reset()
        log.info(
            "highlight: the last seconds are kept in memory",
            seconds=strategy.ring_buffer_seconds,
            save_key=strategy.save_key,
            push_key=strategy.push_key,
        )
        while True:
            events = self._poll()
            if RolloutEvent.STOP in events:
                raise _Stop
            if RolloutEvent.UPLOAD in events:
                self._upload_now()
            if RolloutEvent.SAVE in events:
                if not live:
                    self._wait_for_pending_save()
                    frames = ring.drain()
                    log.info(
                        "highlight: storing the last seconds, recording on", frames=len(frames)
                    )
                    for frame in frames:
                        self._add(frame)
                    live = True
                else:
                    live = False
                    self._save()
            self._save_if_pending()
            self._tick(Driver.POLICY, store=live, sink=None if live else ring.append)
            if self._scene_over() and live:
                live = False
                self._save()

    def _dagger(self, strategy: DAggerStrategyConfig) -> None:
        self._require_session()
        record_all = strategy.record_autonomous
        wanted = strategy.num_episodes or self.settings.num_episodes
        episode_ticks = self._episode_ticks(strategy) if record_all else None
        phase = DAggerPhase.AUTONOMOUS
        corrections = since_upload = 0
        span_frames = 0
        self.u.policy.reset()
        log.info(
            "dagger: the policy drives",
            record="every tick" if record_all else "corrections only",
            corrections=None if record_all else wanted,
        )
        while record_all or corrections < wanted:
            events = self._poll()
            if RolloutEvent.STOP in events:
                raise _Stop
            if RolloutEvent.UPLOAD in events:
                if phase is DAggerPhase.CORRECTING:
                    log.info("upload skipped: a correction is under way")
                else:
                    self._upload_now()
            for event in (RolloutEvent.PAUSE_RESUME, RolloutEvent.CORRECTION):
                if event not in events:
                    continue
                following = dagger_next(phase, DAggerEvent(event.value))
                if following is None:
                    log.info("dagger: key ignored here", phase=phase.value, key=event.value)
                    continue
                self._dagger_handover(strategy, phase, following)
                log.info("dagger", phase=following.value)
                if phase is DAggerPhase.CORRECTING and not record_all and self._save():
                    corrections += 1
                    span_frames = 0
                    log.info("correction saved", corrections=f"{corrections}/{wanted}")
                phase = following
            if not record_all and corrections >= wanted:
                break
            if phase is DAggerPhase.CORRECTING:
                if not record_all and span_frames == 0:
                    self._wait_for_pending_save()
                self._tick(Driver.HUMAN, store=True, intervention=True)
                span_frames += 1
            elif phase is DAggerPhase.PAUSED:
                self._tick(Driver.HOLD)
            else:
                self._tick(Driver.POLICY, store=record_all, intervention=False)
            self._save_if_pending()
            if self._scene_over() and record_all:
                self._save()
            session = self.session
            if (
                episode_ticks
                and session is not None
                and phase is not DAggerPhase.CORRECTING
                and not self.pending_save
                and session.episode_frames >= episode_ticks
            ):
                if self._save():
                    since_upload += 1
                if since_upload >= strategy.upload_every_n_episodes and self.uploads.start():
                    since_upload = 0

    def _dagger_handover(
        self, strategy: DAggerStrategyConfig, old: DAggerPhase, new: DAggerPhase
    ) -> None:
        teleop = self.u.teleop
        actuated = isinstance(teleop, ActuatedTeleoperator)
        if old is DAggerPhase.AUTONOMOUS and new is DAggerPhase.PAUSED:
            if strategy.smooth_handover and actuated and self.last_sent is not None:
                self._move_leader(self.last_sent, self.settings.leader_handover_s)
        elif old is DAggerPhase.PAUSED and new is DAggerPhase.CORRECTING:
            if strategy.smooth_handover and not actuated and self.last_sent is not None:
                self._slide_to_leader()
            if isinstance(teleop, ActuatedTeleoperator):
                teleop.disable_torque()
        elif old is DAggerPhase.CORRECTING and new is DAggerPhase.PAUSED:
            if isinstance(teleop, ActuatedTeleoperator):
                teleop.enable_torque()
        elif new is DAggerPhase.AUTONOMOUS:
            self.u.policy.reset()
            if isinstance(teleop, ActuatedTeleoperator):
                teleop.disable_torque()

    def _episodic(self, strategy: EpisodicStrategyConfig) -> None:
        session = self._require_session()
        settings = self.settings
        fps = settings.fps
        recorded = 0
        first = True
        while recorded < settings.num_episodes:
            if not first:  # the first scene was set at connection
                self.u.robot.reset()
            first = False
            self.u.policy.reset()
            log.info("recording episode", episode=session.num_episodes)
            ends = {self._phase(round(settings.episode_time_s * fps), Driver.POLICY, store=True)}
            last = recorded == settings.num_episodes - 1
            if RolloutEvent.STOP not in ends and (not last or RolloutEvent.RERECORD in ends):
                resets = round(settings.reset_time_s * fps)
                if resets:
                    log.info("reset the environment", seconds=settings.reset_time_s)
                    self._reset_handover(strategy)
                    driver = Driver.HUMAN if self.teleop_source is not None else Driver.HOLD
                    ends.add(self._phase(resets, driver, store=False))
            if RolloutEvent.RERECORD in ends:
                log.info("re-recording episode", episode=session.num_episodes)
                session.clear_episode_buffer()
                continue
            if session.episode_frames and self._save(force=True):
                recorded += 1
            if RolloutEvent.STOP in ends:
                raise _Stop

    def _phase(self, ticks: int, driver: Driver, *, store: bool) -> RolloutEvent | None:
        for _ in range(ticks):
            events = self._poll()
            for event in (RolloutEvent.STOP, RolloutEvent.RERECORD, RolloutEvent.NEXT):
                if event in events:
                    return event
            self._tick(driver, store=store)
            if self.u.robot.episode_over:
                return None
        return None

    def _reset_handover(self, strategy: EpisodicStrategyConfig) -> None:
        teleop = self.u.teleop
        if teleop is None:
            if strategy.reset_to_initial_position and self.initial is not None:
                self._move_follower(self.initial, self.settings.follower_handover_s)
            return
        if not strategy.smooth_handover or self.last_sent is None:
            return
        if isinstance(teleop, ActuatedTeleoperator) and strategy.smooth_leader_to_follower_handover:
            self._move_leader(self.last_sent, self.settings.leader_handover_s)
            teleop.disable_torque()
        else:
            self._slide_to_leader()

    def _scene_over(self) -> bool:
        """A simulator ended its episode (success, time limit): its scene is set again and
        the policy starts afresh; the strategy saves the episode under way."""
        if not self.u.robot.episode_over:
            return False
        log.info("the scene ended its episode: resetting it")
        self.u.robot.reset()
        self.u.policy.reset()
        return True

    # --- hand-overs ------------------------------------------------------------------------

    def _move_leader(self, target: np.ndarray, seconds: float) -> None:
        """Drive an actuated leader to `target` while the follower holds."""
        teleop = self.u.teleop
        assert isinstance(teleop, ActuatedTeleoperator)
        log.info("hand-over: bringing the leader arm to the follower", seconds=seconds)
        teleop.enable_torque()
        start = np.asarray(teleop.get_action({}), dtype=np.float32)
        for point in smooth_path(start, target, round(seconds * self.settings.fps)):
            teleop.send_feedback(point)
            self._tick(Driver.HOLD)

    def _slide_to_leader(self) -> None:
        assert self.u.teleop is not None
        target = np.asarray(self.u.teleop.get_action({}), dtype=np.float32)
        log.info("hand-over: sliding the follower to the leader arm")
        self._move_follower(target, self.settings.follower_handover_s)

    def _move_follower(self, target: np.ndarray, seconds: float, *, poll: bool = True) -> None:
        start = self.last_sent
        if start is None:
            start = self._present_position(self.u.robot.get_observation())
        if start is None or start.shape != target.shape:
            return
        for point in smooth_path(start, target, round(seconds * self.settings.fps)):
            if poll and RolloutEvent.STOP in self._poll():
                raise _Stop
            self._tick(Driver.MOVE, action=point)

    # --- one tick --------------------------------------------------------------------------

    def _tick(
        self,
        driver: Driver,
        *,
        action: np.ndarray | None = None,
        store: bool = False,
        sink: Callable[[Mapping[str, Any]], None] | None = None,
        intervention: bool | None = None,
    ) -> None:
        if self.limit is not None and self.ticker.count >= self.limit:
            log.info("duration reached", seconds=self.settings.duration_s)
            raise _Stop
        u, settings = self.u, self.settings
        start = self.ticker.tick()
        observation = u.robot.get_observation()
        task = settings.task or str(observation.get("task") or "")
        fresh = True
        if driver is Driver.POLICY:
            action = self.policy_source(observation, task)
            fresh = not (isinstance(u.policy, AsyncActing) and u.policy.last_tick_held)
        elif driver is Driver.HUMAN:
            assert self.teleop_source is not None
            action = self.teleop_source(observation, task)
        elif driver is Driver.HOLD:
            action = self.last_sent
        sent = None if action is None else u.robot.send_action(action)
        jump = 0.0
        if sent is not None:
            if self.last_sent is not None and self.last_sent.shape == sent.shape:
                jump = float(np.max(np.abs(sent - self.last_sent), initial=0.0))
            self.last_sent = np.asarray(sent, dtype=np.float32)
        if sent is not None and (store or sink is not None):
            frame: dict[str, Any] = {key: observation[key] for key in self.observation_keys}
            frame[ACTION_KEY] = sent
            frame["task"] = task
            if self.tagged:
                frame[INTERVENTION_KEY] = np.array([bool(intervention)], dtype=bool)
            if sink is not None:
                sink(frame)
            elif self.session is not None:
                self._add(frame)
        if u.display is not None:
            shown = {
                **observation,
                DISPLAY_HUMAN: np.array([float(driver is Driver.HUMAN)], np.float32),
                DISPLAY_FRESH: np.array([float(fresh)], np.float32),
            }
            u.display.log_frame(self.ticker.count - 1, shown, sent)
        self.starts.append(start)
        self.drivers.append(driver.value)
        self.fresh.append(fresh)
        self.jumps.append(jump)
        self.bar.advance()

    def _poll(self) -> frozenset[RolloutEvent]:
        controls = self.u.controls
        events = controls.poll() if controls is not None else frozenset()
        if events:
            log.info("keys", events=sorted(e.value for e in events))
        if RolloutEvent.STOP in events:
            self.stopped = True
        return events

    # --- saving and uploading --------------------------------------------------------------

    def _open(self, writer: DatasetWriter, target: DatasetTarget) -> DatasetWriteSession:
        features = as_images(self.features, video=target.video)
        if not target.resume:
            return writer.create(
                target.root,
                fps=self.settings.fps,
                features=features,
                robot_type=self.u.robot.robot_type,
                video=target.encoding,
            )
        session = writer.resume(target.root, video=target.encoding)
        try:
            _check_resumable(session, features, self.settings.fps)
        except Exception:
            session.finalize()
            raise
        log.info("resuming", root=str(target.root), episodes=session.num_episodes)
        return session

    def _require_session(self) -> DatasetWriteSession:
        if self.session is None:
            raise ConfigError("this strategy records a dataset: say where", where="dataset")
        return self.session

    def _episode_ticks(self, strategy: SentryStrategyConfig | DAggerStrategyConfig) -> int:
        seconds = strategy.episode_time_s
        if seconds is None:
            video = as_images(self.features, video=self.target is None or self.target.video)
            seconds = episode_seconds_for_video(
                video.values(), self.settings.fps, strategy.target_video_file_size_mb
            )
        log.info("episodes are cut every", seconds=round(seconds, 1))
        return max(1, round(seconds * self.settings.fps))

    @contextlib.contextmanager
    def _shielded(self) -> Iterator[None]:
        interrupts = self.u.interrupts
        if interrupts is None:
            yield
            return
        with interrupts.saving():
            yield

    def _add(self, frame: Mapping[str, Any]) -> None:
        """One frame to the episode under way, never half of one: a Ctrl-C that comes while
        the writer hands it to its encoders waits for the end of that (the writer's frame
        counts and its encoder's would disagree, and the last save would wait forever)."""
        session = self.session
        assert session is not None
        with self._shielded():
            session.add_frame(frame)
        if self.u.interrupts is not None:
            self.u.interrupts.raise_pending()

    def _save(self, *, force: bool = False) -> bool:
        """Save the episode under way, or (during an upload) as soon as it is over."""
        session = self.session
        if session is None or not session.episode_frames:
            return False
        if self.uploads.busy and not force:
            self.pending_save = True
            log.info("an upload is under way: the episode is saved when it ends")
            return True
        if force:
            self.uploads.wait()
        self._save_now()
        return True

    def _save_if_pending(self) -> None:
        if self.pending_save and not self.uploads.busy:
            self._save_now()

    def _wait_for_pending_save(self) -> None:
        """Before frames of a new episode are added: the previous one must be saved first."""
        if self.pending_save:
            self.uploads.wait()
            self._save_now()

    def _save_now(self) -> None:
        session = self.session
        assert session is not None
        self.pending_save = False
        if not session.episode_frames:
            return
        with self._shielded():
            record = session.save_episode()
        self.saved.append(record.index)
        log.info("episode saved", episode=record.index, frames=record.length)
        if self.u.interrupts is not None:
            self.u.interrupts.raise_pending()

    def _upload_now(self) -> None:
        if not self.uploads.available:
            log.info("no upload: --dataset.push_to_hub=true uploads (to --dataset.repo_id)")
            return
        if not self.uploads.start():
            log.info("an upload is already under way")

    # --- what to report --------------------------------------------------------------------

    def _present_position(self, observation: Mapping[str, Any]) -> np.ndarray | None:
        """The joints' present position as an action, when the state names the action's."""
        robot = self.u.robot
        state = robot.observation_features.get(STATE_KEY)
        action = robot.action_features.get(ACTION_KEY)
        if state is None or action is None or STATE_KEY not in observation:
            return None
        if not state.names or list(state.names) != list(action.names or []):
            return None
        return np.asarray(observation[STATE_KEY], dtype=np.float32).copy()

    def _report(self, interrupted: bool) -> RolloutReport:
        drivers = self.drivers
        spans: list[tuple[int, int]] = []
        for i, driver in enumerate(drivers):
            if driver != Driver.HUMAN.value:
                continue
            if spans and spans[-1][1] == i - 1:
                spans[-1] = (spans[-1][0], i)
            else:
                spans.append((i, i))
        policy = [i for i, d in enumerate(drivers) if d == Driver.POLICY.value]
        meta = self.meta
        t0 = self.starts[0] if self.starts else 0.0
        return RolloutReport(
            strategy=self.strategy.type_name,
            root=self.target.root if self.target is not None else None,
            saved_episodes=tuple(self.saved),
            frames=sum(e.length for e in meta.episodes if e.index in self.saved) if meta else 0,
            total_episodes=meta.total_episodes if meta else 0,
            uploads=self.uploads.done,
            stopped=self.stopped,
            interrupted=interrupted,
            timing=self.ticker.stats(),
            ticks=len(drivers),
            policy_ticks=len(policy),
            human_ticks=sum(1 for d in drivers if d == Driver.HUMAN.value),
            held_ticks=sum(1 for i in policy if not self.fresh[i]),
            interventions=tuple(spans),
            max_policy_jump=max(
                (self.jumps[i] for i in policy if i and drivers[i - 1] == Driver.POLICY.value),
                default=0.0,
            ),
            timeline=Timeline(
                tuple(s - t0 for s in self.starts),
                tuple(drivers),
                tuple(self.fresh),
                tuple(self.jumps),
            ),
        )
