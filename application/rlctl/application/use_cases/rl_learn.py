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
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.rl.replay import Replay, ReplayBuffer, TransitionBatch

log = structlog.get_logger(__name__)

CHECKPOINTS = "checkpoints"
LAST = "last"
ONLINE_REPLAY = "replay"
OFFLINE_REPLAY = "replay_offline"


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
            online = (
                self._store.load(last / ONLINE_REPLAY, settings.online_buffer_capacity) or online
            )
            saved_offline = self._store.load(
                last / OFFLINE_REPLAY, settings.offline_buffer_capacity
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
        return description

    def _check_batch(self, batch: TransitionBatch) -> None:
        trainer = self._trainer
        if trainer is None:
            raise InvalidInput(
                "the learner has no policy yet: say hello (Describe) first", where="transitions"
            )
        config = trainer.description.config
        wanted = set(config.input_features)
        if set(batch.state) != wanted:
            raise InvalidInput(
                f"transitions observe {sorted(batch.state)}, the policy reads {sorted(wanted)}",
                where="transitions",
                hint="the actor must run the robot the learner's policy was made for",
            )
        width = config.action_dim + (1 if getattr(config, "num_discrete_actions", None) else 0)
        if batch.action.ndim != 2 or batch.action.shape[1] != width:
            raise InvalidInput(
                f"transitions carry actions of shape {batch.action.shape[1:]}, the policy "
                f"({width},)",
                where="transitions",
            )

    def _publish(self, trainer: SACTrainer) -> int:
        version = trainer.optimization_step + 1
        self._endpoint.publish(version, trainer.weights())
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
            replay.add(pushed.batch.transitions())
            # Counted here, not read from the reports: each actor reports its own steps, and
            # any number of them (restarted ones too) feed this learner.
            transitions += len(pushed.batch)
        if pushed.report is not None:
            episodes += 1
            log.info("episode", **{k: float(v) for k, v in pushed.report.items()})
    return transitions, episodes


def _batches(
    replay: Replay, batch_size: int, rng: np.random.Generator
) -> Iterator[TransitionBatch]:
    while True:
        yield replay.sample(batch_size, rng)


def _fits(description: LearnerDescription, hello: ActorHello) -> None:
    config = description.config
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
    checks = (
        (settings.batch_size >= 1, "batch_size must be at least 1", "batch_size"),
        (0 <= settings.online_ratio <= 1, "online_ratio must be in [0, 1]", "online_ratio"),
        (settings.save_freq >= 1, "save_freq must be at least 1", "save_freq"),
        (settings.steps >= 1, "steps must be at least 1", "steps"),
        (settings.push_every_s >= 0, "push_every_s must be >= 0", "push_every_s"),
    )
    for ok, message, where in checks:
        if not ok:
            raise ConfigError(message, where=f"--{where.replace('_', '-')}")
