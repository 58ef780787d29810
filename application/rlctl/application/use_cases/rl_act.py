"""`rlctl rl act`: HIL-SERL's actor. Runs the learner's policy on a robot (or a simulated one) and
streams the transitions back.

Each tick: the policy proposes an action for the observation, a person may take over
(`InterventionSource`, or the robot's own teleoperation, which its step's info tags
`is_intervention`, as gym-hil does: the executed action is theirs, and the transition is tagged
`is_intervention`), the robot executes it through its safety guard (the action recorded is the
one the guard let through), and the reward and success come from the `RewardSource` (the env's
reward by default). At each episode's end (and every `push_every` ticks) the transitions go to
the learner with the episode's report, and the newest parameters come back, as LeRobot's actor
does it.

When the learner cannot be reached the actor holds the arm (`Interaction.hold`, once per
`retry_s`), keeps its transitions (at most `max_pending`; the oldest are dropped past that, said
once), and tries again until it answers or `reconnect_timeout_s` passes. A learner that answers
busy (its queue full: several actors pushing faster than it takes) is asked again after a wait
that doubles from `retry_s` up to `max_backoff_s`, within the same bound; giving up says how
many transitions were not delivered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np
import structlog

from rlctl.application.ports.clock import Clock
from rlctl.application.ports.reinforcement import (
    ActingPolicy,
    ActingPolicyFactory,
    ActorHello,
    Interaction,
    InterventionSource,
    LearnerBusy,
    LearnerLink,
    LearnerUnavailable,
    RewardSource,
)
from rlctl.domain.errors import ConfigError, HardwareError, InvalidInput, RlctlError
from rlctl.domain.rl.replay import (
    RLTransition,
    TransitionBatch,
    episode_report,
    non_finite,
    stack,
)

log = structlog.get_logger(__name__)


@attrs.frozen(kw_only=True)
class ActSettings:
    # Interaction steps in all (LeRobot's online_steps); None: until `episodes` are done.
    steps: int | None = None
    episodes: int | None = None
    # Also push mid-episode every this many ticks (0: at episodes' ends only, as LeRobot does).
    push_every: int = 0
    fps: float | None = None
    retry_s: float = 0.5
    # The longest wait between two tries while the learner answers busy.
    max_backoff_s: float = 8.0
    reconnect_timeout_s: float = 300.0
    max_pending: int = 100_000


@attrs.frozen
class ActResult:
    steps: int
    episodes: int
    returns: tuple[float, ...]
    successes: tuple[bool, ...]
    interventions: int
    parameters_version: int
    reconnections: int
    # Transitions not sent: with NaN or infinity in them, or in a batch the learner refused.
    non_finite: int = 0
    refused: int = 0


class ActWithPolicy:
    def __init__(
        self,
        link: LearnerLink,
        policies: ActingPolicyFactory,
        interaction: Interaction,
        reward: RewardSource,
        intervention: InterventionSource,
        clock: Clock,
    ) -> None:
        self._link = link
        self._policies = policies
        self._world = interaction
        self._reward = reward
        self._intervention = intervention
        self._clock = clock
        self._pending: list[RLTransition] = []
        self._reports: list[Mapping[str, float]] = []
        self._dropped = 0
        self._non_finite = 0
        self._refused = 0
        self.reconnections = 0

    def __call__(
        self, settings: ActSettings, *, should_stop: Callable[[], bool] | None = None
    ) -> ActResult:
        check_act_settings(settings)
        bounds = self._world.action_bounds()
        hello = ActorHello(
            self._world.features,
            None if bounds is None else bounds[0],
            None if bounds is None else bounds[1],
            self._world.observation_bounds(),
        )
        description = self._reliably(lambda: self._link.describe(hello), settings)
        policy = self._policies.create(description)
        version = self._update(policy, 0, settings)
        period = 1.0 / settings.fps if settings.fps else 0.0
        returns: list[float] = []
        successes: list[bool] = []
        interventions = 0
        step = 0
        try:
            while not self._done(settings, step, len(returns)):
                if should_stop is not None and should_stop():
                    break
                observation = self._world.reset()
                self._intervention.reset()
                rewards: list[float] = []
                tagged: list[bool] = []
                success = False
                while True:
                    tick = self._clock.now()
                    proposed = np.asarray(policy.select_action(observation)).reshape(-1)
                    taken = self._intervention.intervene(observation, proposed)
                    result = self._world.step(proposed if taken is None else taken)
                    # A person at the robot itself (gym-hil's keyboard or gamepad) is told by
                    # the step's info, as LeRobot's actor reads it.
                    is_intervention = taken is not None or bool(
                        result.info.get("is_intervention", False)
                    )
                    reward, success = self._reward.judge(result)
                    done = bool(result.terminated or success)
                    self._pending.append(
                        RLTransition(
                            state=_arrays(observation, description.config.input_features),
                            action=np.asarray(result.executed_action, dtype=np.float32),
                            reward=float(reward),
                            next_state=_arrays(
                                result.observation, description.config.input_features
                            ),
                            done=done,
                            truncated=bool(result.truncated),
                            is_intervention=is_intervention,
                            discrete_penalty=float(result.info.get("discrete_penalty", 0.0)),
                        )
                    )
                    self._bound_pending(settings)
                    rewards.append(float(reward))
                    tagged.append(is_intervention)
                    interventions += int(is_intervention)
                    step += 1
                    observation = result.observation
                    over = done or bool(result.truncated)
                    budget = settings.steps is not None and step >= settings.steps
                    if over or budget:
                        break
                    if settings.push_every and len(self._pending) >= settings.push_every:
                        version = self._flush(policy, version, settings)
                    if period:
                        self._clock.sleep_until(tick + period)
                returns.append(float(sum(rewards)))
                successes.append(success)
                self._reports.append(episode_report(rewards, tagged, step))
                log.info(
                    "episode",
                    episode=len(returns),
                    reward=returns[-1],
                    success=success,
                    interventions=sum(tagged),
                    steps=len(rewards),
                )
                # After the last episode nothing would use new parameters: fetching them
                # would only wait on a learner that may rightly have finished.
                last = self._done(settings, step, len(returns))
                version = self._flush(policy, version, settings, fetch=not last)
        finally:
            self._world.close()
        return ActResult(
            steps=step,
            episodes=len(returns),
            returns=tuple(returns),
            successes=tuple(successes),
            interventions=interventions,
            parameters_version=version,
            reconnections=self.reconnections,
            non_finite=self._non_finite,
            refused=self._refused,
        )

    @staticmethod
    def _done(settings: ActSettings, steps: int, episodes: int) -> bool:
        if settings.steps is not None and steps >= settings.steps:
            return True
        return settings.episodes is not None and episodes >= settings.episodes

    def _flush(
        self, policy: ActingPolicy, version: int, settings: ActSettings, *, fetch: bool = True
    ) -> int:
        """Push what is pending (the reports with the last batch), then fetch parameters.

        Transitions with NaN or infinity in them are dropped first (counted, said once), as
        LeRobot's learner skips them: the wire would refuse the whole batch for one. A push the
        learner refuses as sent (not busy, not away: it will never take it) is dropped with its
        reason, said once, and the run goes on."""
        self._drop_non_finite()
        while self._pending or self._reports:
            batch = stack(self._pending) if self._pending else None
            report = self._reports[0] if self._reports else None

            def push(
                batch: TransitionBatch | None = batch, report: Mapping[str, float] | None = report
            ) -> int:
                return self._link.push(batch, report)

            try:
                self._reliably(push, settings)
            except RlctlError as err:
                # Refused as sent (INVALID_ARGUMENT, or the in-memory link's InvalidInput);
                # anything else (a token refused, the learner gone for good) ends the run.
                if not (
                    isinstance(err, InvalidInput)
                    or getattr(err, "code", None) == "INVALID_ARGUMENT"
                ):
                    raise
                lost = 0 if batch is None else len(batch)
                if not self._refused:
                    log.error(
                        "the learner refused a push: its transitions are dropped, the run goes "
                        "on (said once; the count is in the result)",
                        reason=err.message,
                        transitions=lost,
                    )
                self._refused += max(lost, 1)
            self._pending = []
            if self._reports:
                self._reports.pop(0)
        return self._update(policy, version, settings) if fetch else version

    def _drop_non_finite(self) -> None:
        kept = []
        for transition in self._pending:
            what = non_finite(transition)
            if what is None:
                kept.append(transition)
                continue
            if not self._non_finite:
                log.warning(
                    "a transition holds NaN or infinity: dropped, not sent (said once; the "
                    "count is in the result)",
                    field=what,
                )
            self._non_finite += 1
        self._pending = kept

    def _update(self, policy: ActingPolicy, version: int, settings: ActSettings) -> int:
        newest, weights = self._reliably(lambda: self._link.fetch(version), settings)
        if weights is not None and newest != version:
            policy.load_weights(weights)
            log.debug("new parameters", version=newest)
            return newest
        return version

    def _reliably[T](self, call: Callable[[], T], settings: ActSettings) -> T:
        """`call`, retried while the learner is away (every `retry_s`) or busy (backing off);
        the arm holds meanwhile."""
        first_failure: float | None = None
        busy = 0
        while True:
            try:
                result = call()
            except LearnerUnavailable as err:
                now = self._clock.now()
                if first_failure is None:
                    first_failure = now
                    log.warning(
                        "the learner is busy: holding the arm and sending again later"
                        if isinstance(err, LearnerBusy)
                        else "the learner is away: holding the arm and reconnecting",
                        reason=err.message,
                    )
                if now - first_failure >= settings.reconnect_timeout_s:
                    raise HardwareError(
                        f"the learner has been {'busy' if busy else 'unreachable'} for "
                        f"{now - first_failure:.0f} s; {len(self._pending)} transitions and "
                        f"{len(self._reports)} episode reports were not delivered",
                        where="--learner",
                        hint="start (or restart with --resume) `rlctl rl learn`, then the actor "
                        "again; the arm was held meanwhile"
                        if not busy
                        else "the learner takes transitions slower than its actors push them: "
                        "fewer actors, or a longer --reconnect-timeout-s",
                    ) from err
                self._world.hold()
                if isinstance(err, LearnerBusy):
                    wait = min(settings.retry_s * 2.0**busy, settings.max_backoff_s)
                    busy += 1
                else:
                    wait, busy = settings.retry_s, 0
                self._clock.sleep_until(now + wait)
                continue
            if first_failure is not None:
                self.reconnections += 1
                log.info("the learner is back", pending=len(self._pending), busy_refusals=busy)
            return result

    def _bound_pending(self, settings: ActSettings) -> None:
        excess = len(self._pending) - settings.max_pending
        if excess > 0:
            del self._pending[:excess]
            if not self._dropped:
                log.warning(
                    "too many transitions waiting for the learner: the oldest are dropped",
                    max_pending=settings.max_pending,
                )
            self._dropped += excess


def check_act_settings(settings: ActSettings) -> None:
    """The actor's settings, each wrong one refused with its flag (before any robot moves)."""
    if settings.steps is None and settings.episodes is None:
        raise ConfigError(
            "the actor needs a budget", where="--steps", hint="give --steps or --episodes"
        )
    for name, value in (("steps", settings.steps), ("episodes", settings.episodes)):
        if value is not None and not (
            isinstance(value, int) and not isinstance(value, bool) and value >= 1
        ):
            raise ConfigError(
                f"{name} must be a whole number of at least 1, got {value!r}",
                where=f"--{name}",
                hint=f"e.g. --{name}=10, or leave it out",
            )
    push_every = settings.push_every
    if not (isinstance(push_every, int) and not isinstance(push_every, bool) and push_every >= 0):
        raise ConfigError(
            f"push_every must be a whole number of ticks >= 0, got {push_every!r}",
            where="--push_every",
            hint="0 pushes at each episode's end only",
        )
    fps = settings.fps
    if fps is not None and not (isinstance(fps, int | float) and math.isfinite(fps) and fps > 0):
        raise ConfigError(
            f"fps must be a positive number, got {fps!r}",
            where="--fps",
            hint="e.g. --fps=10, or leave it out to go as fast as the robot steps",
        )
    if not (isinstance(settings.max_pending, int) and settings.max_pending >= 1):
        raise ConfigError(
            f"max_pending must be at least 1, got {settings.max_pending!r}",
            where="--max_pending",
        )
    _check_waits(settings)


def _check_waits(settings: ActSettings) -> None:
    for name, value in (
        ("retry_s", settings.retry_s),
        ("max_backoff_s", settings.max_backoff_s),
        ("reconnect_timeout_s", settings.reconnect_timeout_s),
    ):
        # Not finite, or not positive, the waits would hammer a busy learner or never end.
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ConfigError(
                f"{name} must be a positive number of seconds, got {value!r}",
                where=f"--{name}",
                hint="e.g. --max_backoff_s=8 (the wait doubles from 0.5 s up to it)"
                if name == "max_backoff_s"
                else None,
            )


def _arrays(observation: Mapping[str, Any], keys: Mapping[str, Any]) -> dict[str, np.ndarray]:
    out = {}
    for key in keys:
        if key not in observation:
            raise ConfigError(
                f"the robot's observation has no {key}, which the policy reads",
                where="observation",
            )
        value = np.asarray(observation[key])
        # Observations travel and are stored as float32 (what the learner takes).
        out[key] = value.astype(np.float32) if value.dtype.kind in "fiub" else value
    return out
