"""`rlctl rl learn`: HIL-SERL's learner. Soft actor-critic from the actors' transitions and the
demonstrations, its parameters published to the actors, checkpoints to resume from.

The loop, as LeRobot's learner runs it: take what the actors pushed into the replay (an
intervention into the demonstrations' buffer too); once the online buffer holds
`online_step_before_learning` transitions, one SAC step per turn on batches mixed
`online_ratio` online; every `push_every_s` seconds publish the actor's weights; every
`save_freq` steps save the policy, the learner's own tensors, the optimisers and the replay
(and once more when the learner stops with transitions no checkpoint holds yet). A
restart with `resume` picks up the last checkpoint and its replay, and the actors (which hold
their arm meanwhile) reconnect and go on.

The learner's policy is built when its features are known: from a checkpoint being resumed, or
from the first actor's hello (its robot's observation and action features). Any number of actors
may feed one learner (each says hello, pushes, fetches on its own); one that stops or dies takes
nothing from the others. The interaction step is every transition received, from all of them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import structlog

from rlctl.application.ports.clock import Clock
from rlctl.application.ports.reinforcement import (
    ActorHello,
    LearnerDescription,
    LearnerEndpoint,
    Pushed,
    ReplayStore,
    SACTrainer,
    SACTrainerFactory,
)
from rlctl.domain.errors import ConfigError, InvalidInput, RlctlError
from rlctl.domain.features import FeatureKind
from rlctl.domain.policies import ACTION, PolicyConfig
from rlctl.domain.rl.replay import Replay, ReplayBuffer, TransitionBatch

log = structlog.get_logger(__name__)

CHECKPOINTS = "checkpoints"
LAST = "last"
ONLINE_REPLAY = "replay"
OFFLINE_REPLAY = "replay_offline"
# Observations travel and are stored as float32 (the actor casts them; demonstrations too).
STATE_DTYPE = np.dtype(np.float32)
# How far past the robot's action bounds an executed action may lie (of the bounds' span, at
# least this much absolutely): float rounding, never a peer's 1e30.
ACTION_TOLERANCE = 1e-3


@attrs.frozen(kw_only=True)
class LearnSettings:
    output_dir: Path
    batch_size: int = 256
    online_ratio: float = 0.5
    online_buffer_capacity: int = 100_000
    offline_buffer_capacity: int = 100_000
    online_step_before_learning: int = 100
    push_every_s: float = 4.0
    save_freq: int = 2_000
    # Optimisation steps in all (LeRobot's online_steps); the learner stops after them.
    steps: int = 1_000_000
    # Stop after this many seconds (None: when the steps are done).
    max_seconds: float | None = None
    resume: bool = False
    seed: int = 0
    drq: bool = True
    poll_s: float = 0.01
    log_every: int = 100


@attrs.frozen
class LearnResult:
    optimization_step: int
    interaction_step: int
    online_transitions: int
    offline_transitions: int
    checkpoint: Path | None
    episodes: int
    last_stats: Mapping[str, float] = attrs.field(factory=dict)


class LearnWithSAC:
    def __init__(
        self,
        endpoint: LearnerEndpoint,
        trainers: SACTrainerFactory,
        replay_store: ReplayStore,
        clock: Clock,
        demonstrations: TransitionBatch | None = None,
    ) -> None:
        self._endpoint = endpoint
        self._trainers = trainers
        self._store = replay_store
        self._clock = clock
        self._demonstrations = demonstrations
        self._lock = threading.Lock()
        self._trainer: SACTrainer | None = None
        self._hello: ActorHello | None = None
        # The union of the accepted hellos' action bounds: a pushed action must lie inside.
        self._action_bounds: tuple[np.ndarray, np.ndarray] | None = None
        self._unpublished = 0

    def __call__(
        self, settings: LearnSettings, *, on_ready: Any = None, stop: threading.Event | None = None
    ) -> LearnResult:
        _check(settings)
        rng = np.random.default_rng(settings.seed)
        interaction_step = 0
        online, offline = self._buffers(settings)
        last = settings.output_dir / CHECKPOINTS / LAST
        if settings.resume:
            if not last.exists():
                raise ConfigError(
                    "nothing to resume: no checkpoint in this output folder",
                    where=str(last),
                    hint="drop --resume to start a new run",
                )
            self._trainer, interaction_step = self._trainers.resume(last.resolve())
            config = self._trainer.description.config
            saved_online = self._load_replay(
                last / ONLINE_REPLAY, settings.online_buffer_capacity, config
            )
            if saved_online is not None:
                online = saved_online
            saved_offline = self._load_replay(
                last / OFFLINE_REPLAY, settings.offline_buffer_capacity, config
            )
            if saved_offline is not None:
                offline = saved_offline
            log.info(
                "resumed",
                step=self._trainer.optimization_step,
                online=len(online),
                offline=len(offline) if offline is not None else 0,
            )
        elif last.exists():
            raise ConfigError(
                "this output folder holds a run already",
                where=str(settings.output_dir),
                hint="add --resume to go on with it, or choose another --output-dir",
            )
        replay = Replay(online, offline, online_ratio=settings.online_ratio, drq=settings.drq)
        address = self._endpoint.start(self._describe, self._check_batch)
        if on_ready is not None:
            on_ready(address)
        started = self._clock.now()
        last_push = -float("inf")
        published = 0
        episodes = 0
        stats: dict[str, float] = {}
        checkpoint: Path | None = None
        saved_at = interaction_step
        try:
            while True:
                if stop is not None and stop.is_set():
                    break
                now = self._clock.now()
                if settings.max_seconds is not None and now - started >= settings.max_seconds:
                    break
                added, ended = _absorb(self._endpoint.take(), replay)
                interaction_step += added
                episodes += ended
                trainer = self._trainer
                if trainer is None:
                    self._clock.sleep_until(self._clock.now() + settings.poll_s)
                    continue
                if published == 0:
                    published = self._publish(trainer)
                    last_push = self._clock.now()
                if trainer.optimization_step >= settings.steps:
                    break
                if len(replay.online) < max(1, settings.online_step_before_learning):
                    self._clock.sleep_until(self._clock.now() + settings.poll_s)
                    continue
                stats = trainer.update(_batches(replay, settings.batch_size, rng))
                step = trainer.optimization_step
                if self._clock.now() - last_push >= settings.push_every_s:
                    published = self._publish(trainer)
                    last_push = self._clock.now()
                if step % settings.log_every == 0:
                    log.info("learner step", step=step, online=len(replay.online), **stats)
                if step % settings.save_freq == 0 or step >= settings.steps:
                    checkpoint = self._save(settings, trainer, replay, interaction_step)
                    saved_at = interaction_step
        finally:
            self._endpoint.stop()
        # Pushes answered while the loop ended (the endpoint has stopped: no more come) were
        # acknowledged to their actors: they join the replay, and what no checkpoint holds yet
        # is saved now, so a resumed run has every transition an actor was told arrived.
        added, ended = _absorb(self._endpoint.take(), replay)
        interaction_step += added
        episodes += ended
        if self._trainer is not None and interaction_step != saved_at:
            checkpoint = self._save(settings, self._trainer, replay, interaction_step)
        return LearnResult(
            optimization_step=self._trainer.optimization_step if self._trainer else 0,
            interaction_step=interaction_step,
            online_transitions=len(replay.online),
            offline_transitions=len(replay.offline) if replay.offline is not None else 0,
            checkpoint=checkpoint,
            episodes=episodes,
            last_stats=stats,
        )

    def _buffers(self, settings: LearnSettings) -> tuple[ReplayBuffer, ReplayBuffer | None]:
        online = ReplayBuffer(settings.online_buffer_capacity)
        if self._demonstrations is None:
            return online, None
        offline = ReplayBuffer(settings.offline_buffer_capacity)
        offline.extend(self._demonstrations)
        return online, offline

    def _describe(self, hello: ActorHello) -> LearnerDescription:
        """An actor's hello: the first one fixes the policy's features (unless resumed)."""
        with self._lock:
            if self._trainer is None:
                self._trainer = self._trainers.create(hello)
                self._hello = hello
            description = self._trainer.description
        _fits(description, hello)
        with self._lock:
            self._action_bounds = _widened(self._action_bounds, hello, description.config)
        return description

    def _check_batch(self, batch: TransitionBatch) -> None:
        """A pushed batch the policy can train on, or `InvalidInput` (answered to the pusher):
        the policy's observations, each `(n, *shape)` float32, actions of its width inside
        the robot's bounds."""
        trainer = self._trainer
        if trainer is None:
            raise InvalidInput(
                "the learner has no policy yet: say hello (Describe) first", where="transitions"
            )
        config = trainer.description.config
        wanted = set(config.input_features)
        if set(batch.state) != wanted or set(batch.next_state) != wanted:
            raise InvalidInput(
                f"transitions observe {sorted(batch.state)}, the policy reads {sorted(wanted)}",
                where="transitions",
                hint="the actor must run the robot the learner's policy was made for",
            )
        n = len(batch)
        for label, states in (("state", batch.state), ("next_state", batch.next_state)):
            for key, feature in config.input_features.items():
                values = np.asarray(states[key])
                shape = (n, *(int(d) for d in feature.shape))
                if values.shape != shape:
                    raise InvalidInput(
                        f"transitions carry {label} {key} of shape {values.shape[1:]}, the "
                        f"policy reads {shape[1:]}",
                        where="transitions",
                        hint="the actor must run the robot the learner's policy was made for",
                    )
                if values.dtype != STATE_DTYPE:
                    raise InvalidInput(
                        f"transitions carry {label} {key} as {values.dtype}, the learner "
                        f"stores {STATE_DTYPE}",
                        where="transitions",
                    )
        width = action_width(config)
        if batch.action.ndim != 2 or batch.action.shape != (n, width):
            raise InvalidInput(
                f"transitions carry actions of shape {batch.action.shape[1:]}, the policy "
                f"({width},)",
                where="transitions",
            )
        bounds = self._action_bounds
        if bounds is not None:
            low, high = bounds
            columns = low.shape[0]
            slack = ACTION_TOLERANCE * np.maximum(high - low, 1.0)
            actions = np.asarray(batch.action[:, :columns], dtype=np.float64)
            outside = (actions < low - slack) | (actions > high + slack)
            if outside.any():
                row, column = (int(i) for i in np.argwhere(outside)[0])
                raise InvalidInput(
                    f"transition {row}'s action[{column}] = {actions[row, column]:.6g} lies "
                    f"outside the robot's bounds [{low[column]:.6g}, {high[column]:.6g}]",
                    where="transitions",
                    hint="push the actions the robot's guard let through",
                )

    def _load_replay(
        self, folder: Path, capacity: int, config: PolicyConfig
    ) -> ReplayBuffer | None:
        """A saved buffer that fits the resumed policy (its observations, shapes and action
        width), its non-finite rows dropped; one error naming the replay otherwise."""
        hint = "resume from an earlier checkpoint (checkpoints/<step>), or start a new run"
        try:
            buffer = self._store.load(folder, capacity)
        except RlctlError as err:
            if isinstance(err, InvalidInput) and err.where and err.where != "replay":
                raise
            raise InvalidInput(
                f"the saved replay does not load: {err.message}", where=str(folder), hint=hint
            ) from err
        if buffer is None or len(buffer) == 0:
            return buffer
        problem = _replay_misfit(buffer, config)
        if problem is not None:
            raise InvalidInput(
                f"the saved replay does not fit the resumed policy: {problem}",
                where=str(folder),
                hint=hint,
            )
        arrays = buffer.arrays()
        finite = np.ones(len(buffer), dtype=bool)
        for values in arrays.values():
            if values.dtype.kind in "fc":
                finite &= np.isfinite(values.reshape(values.shape[0], -1)).all(axis=1)
        dropped = int((~finite).sum())
        if dropped:
            log.warning(
                "the saved replay holds transitions with NaN or infinity: they are dropped",
                replay=str(folder),
                dropped=dropped,
            )
            buffer = ReplayBuffer.from_arrays(
                capacity, {name: values[finite] for name, values in arrays.items()}
            )
        return buffer

    def _publish(self, trainer: SACTrainer) -> int:
        """The trainer's weights to the actors, unless one of them is not finite (then the
        actors keep the last good ones; counted and said)."""
        version = trainer.optimization_step + 1
        weights = trainer.weights()
        bad = next(
            (
                name
                for name, value in weights.items()
                if np.asarray(value).dtype.kind in "fc" and not np.isfinite(value).all()
            ),
            None,
        )
        if bad is not None:
            self._unpublished += 1
            log.error(
                "the policy's weights hold NaN or infinity: not published",
                parameter=bad,
                step=trainer.optimization_step,
                unpublished=self._unpublished,
            )
            return max(version, 1)
        self._endpoint.publish(version, weights)
        return version

    def _save(
        self, settings: LearnSettings, trainer: SACTrainer, replay: Replay, interaction_step: int
    ) -> Path:
        root = settings.output_dir / CHECKPOINTS
        # LeRobot's name: the step, zero-padded to the digits of the run's last step (6 at least).
        digits = max(6, len(str(settings.steps)))
        folder = root / f"{trainer.optimization_step:0{digits}d}"
        trainer.save(folder, interaction_step)
        self._store.save(folder / ONLINE_REPLAY, replay.online)
        if replay.offline is not None:
            self._store.save(folder / OFFLINE_REPLAY, replay.offline)
        _point_last(root, folder)
        log.info("checkpoint", folder=str(folder), step=trainer.optimization_step)
        return folder


def _absorb(pushes: list[Pushed], replay: Replay) -> tuple[int, int]:
    """The pushes into the replay: (transitions, episodes ended)."""
    transitions = episodes = 0
    for pushed in pushes:
        if pushed.batch is not None:
            # A push that cannot be stored (checked when it came, yet not fitting the replay)
            # is dropped with its reason: no peer ends the learner.
            try:
                replay.add(pushed.batch.transitions())
            except (RlctlError, ValueError, TypeError, IndexError) as err:
                log.warning(
                    "a pushed batch does not fit the replay: dropped",
                    transitions=len(pushed.batch),
                    reason=str(err),
                )
            else:
                # Counted here, not read from the reports: each actor reports its own steps,
                # and any number of them (restarted ones too) feed this learner.
                transitions += len(pushed.batch)
        if pushed.report is not None:
            episodes += 1
            # The peer's keys are values here, never keyword arguments.
            log.info("episode", report={str(k): v for k, v in pushed.report.items()})
    return transitions, episodes


def _batches(
    replay: Replay, batch_size: int, rng: np.random.Generator
) -> Iterator[TransitionBatch]:
    while True:
        yield replay.sample(batch_size, rng)


def action_width(config: PolicyConfig) -> int:
    """The width of the actions the robot executes: the policy's continuous actions, and the
    gripper's index when the policy has a discrete gripper (`num_discrete_actions`)."""
    discrete = getattr(config, "num_discrete_actions", None) is not None
    return int(config.action_dim) + (1 if discrete else 0)


def _hello_action(hello: ActorHello) -> Any | None:
    feature = hello.features.get(ACTION)
    if feature is not None:
        return feature
    return next((f for f in hello.features.values() if f.kind is FeatureKind.ACTION), None)


def _widened(
    known: tuple[np.ndarray, np.ndarray] | None, hello: ActorHello, config: PolicyConfig
) -> tuple[np.ndarray, np.ndarray] | None:
    """The action bounds of the hellos so far, widened by this one's (when finite, ordered and
    as wide as the robot's actions or the policy's continuous part)."""
    if hello.action_low is None or hello.action_high is None:
        return known
    low = np.asarray(hello.action_low, dtype=np.float64).reshape(-1)
    high = np.asarray(hello.action_high, dtype=np.float64).reshape(-1)
    if (
        low.shape != high.shape
        or low.shape[0] not in (action_width(config), int(config.action_dim))
        or low.shape[0] == 0
        or not (np.isfinite(low).all() and np.isfinite(high).all())
        or (low > high).any()
    ):
        return known
    if known is None or known[0].shape != low.shape:
        return (low, high) if known is None else known
    return np.minimum(known[0], low), np.maximum(known[1], high)


def _replay_misfit(buffer: ReplayBuffer, config: PolicyConfig) -> str | None:
    """What keeps a saved buffer from training the policy, or None."""
    wanted = sorted(config.input_features)
    if buffer.observation_keys != wanted:
        return f"it observes {buffer.observation_keys}, the policy reads {wanted}"
    arrays = buffer.arrays()
    for key, feature in config.input_features.items():
        shape = tuple(int(d) for d in feature.shape)
        for prefix in ("state.", "next_state."):
            values = arrays.get(prefix + key)
            if values is None or tuple(values.shape[1:]) != shape:
                found = None if values is None else tuple(values.shape[1:])
                return f"{prefix}{key} has shape {found}, the policy reads {shape}"
            if values.dtype.kind != "f":
                return f"{prefix}{key} is {values.dtype}, not floats"
    width = action_width(config)
    action = arrays.get("action")
    if action is None or action.ndim != 2 or action.shape[1] != width:
        found = None if action is None else tuple(action.shape[1:])
        return f"its actions have shape {found}, the policy's ({width},)"
    return None


def _fits(description: LearnerDescription, hello: ActorHello) -> None:
    config = description.config
    width = action_width(config)
    action = _hello_action(hello)
    if action is None:
        raise InvalidInput(
            "the actor does not say its robot's action feature",
            where="features",
            hint="run the actor on the robot (or env) the learner's policy was made for",
        )
    if tuple(action.shape) != (width,):
        discrete = (
            " (its continuous actions and the gripper's index)"
            if width != int(config.action_dim)
            else ""
        )
        raise InvalidInput(
            f"the actor's robot acts with shape {tuple(action.shape)}, the policy with "
            f"({width},){discrete}",
            where="features",
            hint="run the actor on the robot (or env) the learner's policy was made for",
        )
    for key, feature in config.input_features.items():
        offered = hello.features.get(key)
        if offered is None:
            raise InvalidInput(
                f"the actor does not observe {key}, which the learner's policy reads",
                where="features",
                hint="run the actor on the robot (or env) the learner's policy was made for",
            )
        shape = tuple(offered.shape)
        if offered.is_visual and len(shape) == 3:
            shape = (shape[2], shape[0], shape[1])
        if shape != tuple(feature.shape):
            raise InvalidInput(
                f"the actor's {key} has shape {shape}, the policy's {tuple(feature.shape)}",
                where="features",
            )


def _point_last(root: Path, folder: Path) -> None:
    """`checkpoints/last` names the newest checkpoint (a relative symlink, replaced whole)."""
    last = root / LAST
    temporary = root / f".{LAST}.tmp"
    if temporary.is_symlink() or temporary.exists():
        temporary.unlink()
    temporary.symlink_to(folder.name, target_is_directory=True)
    temporary.replace(last)


def _check(settings: LearnSettings) -> None:
    """The settings, each wrong one refused with its flag before anything listens."""
    seconds = settings.max_seconds
    checks = (
        (settings.batch_size >= 1, "batch_size must be at least 1", "batch_size", None),
        (0 <= settings.online_ratio <= 1, "online_ratio must be in [0, 1]", "online_ratio", None),
        (settings.save_freq >= 1, "save_freq must be at least 1", "save_freq", None),
        (settings.steps >= 1, "steps must be at least 1", "steps", None),
        (settings.push_every_s >= 0, "push_every_s must be >= 0", "push_every_s", None),
        (
            isinstance(settings.seed, int) and 0 <= settings.seed < 2**63,
            f"seed must be a whole number >= 0, got {settings.seed!r}",
            "seed",
            "e.g. --seed=0",
        ),
        (
            seconds is None
            or (isinstance(seconds, int | float) and math.isfinite(seconds) and seconds > 0),
            f"max_seconds must be a positive number of seconds, got {seconds!r}",
            "max_seconds",
            "leave it out to stop when the steps are done",
        ),
        (
            settings.online_buffer_capacity >= 1,
            "online_buffer_capacity must be at least 1 transition, got "
            f"{settings.online_buffer_capacity!r}",
            "policy.online_buffer_capacity",
            "e.g. --policy.online_buffer_capacity=100000",
        ),
        (
            settings.offline_buffer_capacity >= 1,
            "offline_buffer_capacity must be at least 1 transition, got "
            f"{settings.offline_buffer_capacity!r}",
            "policy.offline_buffer_capacity",
            "e.g. --policy.offline_buffer_capacity=100000",
        ),
    )
    for ok, message, where, hint in checks:
        if not ok:
            raise ConfigError(message, where=f"--{where}", hint=hint)
