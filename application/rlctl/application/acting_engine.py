"""The acting engine: a control loop acts from a queue while the next chunk is computed elsewhere.

One engine, whatever computes the chunks (a `ChunkClient`): a policy server over the network
(`rlctl policy serve`, the gRPC client) or a model in this process (`LocalChunks`, a worker
thread). It is the `Policy` port, so a loop calls `select_action` once a tick and never waits
on the model: a background thread asks for a chunk when the queue falls to a threshold (or to
the ticks a chunk has lately taken to come, when that is more: `lead_ticks`), and
merges each arriving chunk into the queue (acting's `TimedActionQueue`, LeRobot's aggregations,
with the history and the inference delay from the same `rlctl.domain.acting`). A tick whose
action has not arrived holds the last commanded action (or the configured safe action), said
once per stall, and acting resumes with the next chunk. Actions for ticks already past are
dropped, so a late chunk is never replayed.

What holds the arm, told apart (`rlctl.domain.remote_inference`): a server away or busy is
retried with backoff; a chunk past its deadline is asked again; a chunk holding NaN or infinity
is never used (the robot holds, asks again with its next observation, and says so once until a
usable chunk arrives); a model that raises holds the same way, and `MAX_FAILURES` failures in a
row stop the loop with the model's error.

Without `realtime` (a simulation, which can wait), a tick with no action waits for its chunk;
a chunk that cannot be used is an error there (the same observation would get the same answer).

With real-time chunking (`rtc_config`), each request carries the actions queued from its tick
on (up to the execution horizon) and the inference delay, measured as the most ticks acted
between a request and its chunk lately (or `rtc_inference_delay`); a flow-matching policy
generates a chunk that follows them, and it replaces the queue (`latest_only`). A chunk the
loop waited for (the first one, the first after a reset) cannot be measured in ticks (none
passed): its delay is its wall time over the loop's tick period (LeRobot's RTC measures every
chunk so, `ceil(latency * fps)`), used until a chunk is measured in ticks.

A reset (a new episode) drops what the worker computes: the chunk is dropped when it comes
(a generation counter), and the next request goes to a fresh worker at once instead of
queueing behind it; the stale call's worker ends when its call returns. (A model in this
process computes one call at a time, `PolicyService`'s lock: there the fresh request starts
when the stale call returns; a client that computes calls side by side starts it at once.)

Closing tells the workers to stop and waits (bounded) for a call under way. The workers are
not daemon threads: a process does not exit while one is inside the model (torch, a C
extension); it waits for the call to return, since a thread cut off inside a native call at
exit aborts the process (`terminate called without an active exception`). Nothing a worker
computes after the close is used, so the arm only holds.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np
import structlog

from rlctl.application.ports.policy_service import ChunkClient, ChunkService
from rlctl.domain.acting import (
    ConfigDescribed,
    InferenceDelay,
    ObservationHistory,
    TimedActionQueue,
    aggregation,
)
from rlctl.domain.action_chunk import ActionChunk
from rlctl.domain.config import structure
from rlctl.domain.errors import HardwareError, InvalidInput, RlctlError
from rlctl.domain.features import FeatureSpec
from rlctl.domain.policies import PolicyConfig
from rlctl.domain.policies.rtc import CommittedActions
from rlctl.domain.remote_inference import (
    ChunkLate,
    ChunkReply,
    ChunkRequest,
    ChunkUnusable,
    NonFiniteChunk,
    PolicyDescription,
    PolicyFailed,
    RemotePolicySettings,
    ServerBusy,
    ServerUnavailable,
    first_non_finite,
)

log = structlog.get_logger()

FIRST_BACKOFF_S = 0.05
DELAY_WINDOW = 100
# An idle worker looks this often whether the program's main thread has ended (an engine
# never closed must not keep the process alive).
IDLE_POLL_S = 0.25
# Tick periods kept to convert a wall-clock delay into ticks (their median).
PERIOD_WINDOW = 31
# A model that fails this many chunks in a row is broken, not unlucky: the loop stops.
MAX_FAILURES = 3


class AsyncActing(ConfigDescribed[PolicyConfig]):
    """`select_action` from a queue that a worker fills from `client`.

    `label` names the source in what the log says ("policy server", "policy");
    `queue_threshold`: ask for the next chunk when at most this many actions are queued
    (else `settings.chunk_size_threshold`, a fraction of a chunk)."""

    def __init__(
        self,
        client: ChunkClient,
        settings: RemotePolicySettings,
        *,
        realtime: bool = True,
        label: str = "policy server",
        queue_threshold: int | None = None,
        now: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._client = client
        self._settings = settings
        self._realtime = realtime
        self._label = label
        self._queue_threshold = queue_threshold
        self._now = now
        # Real-time chunking: every request carries the actions still queued, and a chunk
        # generated to follow them replaces them (no averaging with what it already follows).
        rtc = settings.rtc_config
        self._rtc = rtc if rtc is not None and rtc.enabled else None
        self._merge = aggregation("latest_only" if self._rtc else settings.aggregate)
        # Ticks acted between a request and its chunk, for the inference delay (recent max).
        self.delay = InferenceDelay(DELAY_WINDOW, fixed=settings.rtc_inference_delay)
        # The wall time of the last chunk the loop waited for (no tick passed: its delay is
        # measured in seconds), and the loop's recent tick periods to turn it into ticks.
        self.waited_chunk_s: float | None = None
        self._periods: deque[float] = deque(maxlen=PERIOD_WINDOW)
        self._last_tick_at: float | None = None
        self._waiting = False
        self.description = self._with_retries(
            lambda: client.describe(settings.server_policy, timeout=settings.connect_timeout_s)
        )
        self._config = structure(self.description.config, PolicyConfig)
        self._chunk_size = settings.actions_per_chunk or max(1, self.description.actions_per_chunk)
        self._history: ObservationHistory | None = None
        self._queue = TimedActionQueue()
        self._cond = threading.Condition()
        self._slot: ChunkRequest | None = None
        self._in_flight = False
        self._sent_at: float | None = None
        self._generation = 0
        # Which worker takes requests (a reset while a call is under way starts a fresh one),
        # and whether it is in a call.
        self._owner = 0
        self._calling = False
        self._workers: list[threading.Thread] = []
        self._tick = 0
        self._executed = -1
        self._last: np.ndarray | None = None
        self._stalled = False
        self._error: RlctlError | None = None
        self._closed = False
        self._unusable_said = False
        self._failures = 0
        # Why the last request brought no chunk (a deadline, an unusable chunk), for the error
        # a loop that cannot hold is given.
        self._last_problem: str | None = None
        # What a loop, a benchmark or a test reads.
        self.held_ticks = 0
        self.stalls = 0
        self.last_tick_held = False
        self.chunks_received = 0
        self.chunks_unusable = 0
        # Chunks that came after all their ticks had passed (none of their actions was used).
        self.chunks_stale = 0
        self._stale_said = False
        self.failures = 0
        self.round_trips_s: list[float] = []
        self.inference_s: list[float] = []
        self._worker = self._start_worker()

    @property
    def in_flight(self) -> bool:
        """Whether a chunk has been asked for and has not come yet."""
        return self._in_flight

    # --- the Policy port ----------------------------------------------------------------------

    @property
    def actions_per_chunk(self) -> int:
        return int(self.description.actions_per_chunk)

    def observation_features(self, provided: Mapping[str, FeatureSpec]) -> dict[str, FeatureSpec]:
        description: PolicyDescription = self._with_retries(
            lambda: self._client.describe(
                self._settings.server_policy,
                dict(provided),
                timeout=self._settings.connect_timeout_s,
            )
        )
        return dict(description.observation_features)

    def predict_chunk(
        self,
        observation: Mapping[str, Any],
        noise: Any | None = None,
        *,
        committed: CommittedActions | None = None,
    ) -> ActionChunk:
        arrays, task = split_observation(observation)
        request = following(self._request(arrays, task, 0), committed)
        reply = self._with_retries(
            lambda: self._client.predict(request, timeout=self._settings.connect_timeout_s)
        )
        check_usable(reply)
        return ActionChunk(actions=reply.actions)

    def select_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        arrays, task = split_observation(observation)
        if self._config.n_obs_steps > 1:
            if self._history is None:
                self._history = ObservationHistory(self._config.n_obs_steps, list(arrays))
            arrays = self._history.push(arrays)
        with self._cond:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            self._period_from(self._now())
            tick = self._tick
            if not self._in_flight and self._needs_chunk(tick):
                self._submit(self._request(arrays, task, tick))
            action = self._queue.pop(tick)
            if action is None and (not self._realtime or self._last is None):
                action = self._wait_for(tick, arrays, task)
            self.last_tick_held = action is None
            if action is None:
                action = self._stall_action()
            elif self._stalled:
                self._stalled = False
                log.info(f"{self._label}: acting again", tick=tick, held_ticks=self.held_ticks)
            self._last = action
            self._executed = tick
            self._tick += 1
            return action

    def reset(self) -> None:
        with self._cond:
            self._generation += 1
            self._queue.clear()
            if self._slot is not None:
                # Asked but not yet taken by the worker: it never will be, so nothing is in
                # flight (left set, no request was ever made again: the first tick waited
                # `connect_timeout_s` and failed).
                self._slot = None
                self._in_flight = False
            if self._calling and not self._closed:
                # The worker is computing a chunk for the last episode: its result is dropped
                # when it comes, and the new episode's first request is not queued behind it.
                self._owner += 1
                self._calling = False
                self._in_flight = False
                self._sent_at = None
                self._worker = self._start_worker()
            self._tick, self._executed = 0, -1
            self._last_tick_at = None
            self._last = None
            self._stalled = False
            self._error = None
            self._failures = 0
        if self._history is not None:
            self._history.reset()

    def close(self) -> None:
        """Stop the workers: a call under way is waited for up to the chunk deadline (plus a
        second); one still running after that is let finish (its chunk is not used), and the
        process does not exit before it returns (never a thread cut off inside the model)."""
        with self._cond:
            self._closed = True
            self._slot = None
            self._cond.notify_all()
        give_up = time.monotonic() + self._settings.chunk_deadline_s + 1.0
        for worker in self._workers:
            worker.join(timeout=max(0.0, give_up - time.monotonic()))
        running = [w for w in self._workers if w.is_alive()]
        if running:
            log.warning(
                f"{self._label}: still computing a chunk at close; it is not used, and this "
                "process waits for it to return before it exits",
                waited_s=round(self._settings.chunk_deadline_s + 1.0, 3),
            )
        self._client.close()

    @property
    def workers_alive(self) -> int:
        """The engine's worker threads still running (one in a call may outlive `close`)."""
        return sum(w.is_alive() for w in self._workers)

    def _start_worker(self) -> threading.Thread:
        # Not a daemon: the interpreter joins it at exit, so a call inside the model returns
        # before the process ends (an idle worker ends itself with the main thread).
        worker = threading.Thread(
            target=self._work, args=(self._owner,), name="acting-engine", daemon=False
        )
        self._workers = [w for w in self._workers if w.is_alive()]
        self._workers.append(worker)
        worker.start()
        return worker

    def _period_from(self, now: float) -> None:
        """Note the loop's tick period (not a tick that waited for its chunk)."""
        if self._last_tick_at is not None:
            self._periods.append(now - self._last_tick_at)
        self._last_tick_at = now

    def tick_s(self) -> float | None:
        """The loop's tick period lately (median), None before two ticks were timed."""
        if not self._periods:
            return None
        # Not np.median: its first call imports numpy.ma (0.2 s in the loop's tick, measured).
        ordered = sorted(self._periods)
        middle = len(ordered) // 2
        return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2

    def delay_ticks(self) -> int:
        """Ticks acted while a chunk is computed: set (`rtc_inference_delay`), the most of
        recent chunks measured in ticks, or before any was, the wall time of a chunk the loop
        waited for over the loop's tick period."""
        if self.delay.fixed is not None:
            return self.delay.fixed
        if self.delay.samples:
            return max(self.delay.samples)
        period = self.tick_s()
        if self.waited_chunk_s is None or not period:
            return 0
        # A chunk taking 10 periods on the dot is a delay of 10 (float error aside).
        return math.ceil(self.waited_chunk_s / period - 1e-6)

    # --- the loop's side ----------------------------------------------------------------------

    def _needs_chunk(self, tick: int) -> bool:
        remaining = self._queue.remaining(tick)
        # Asked at the latest when the queue holds no more than the ticks a chunk has lately
        # taken to come (its measured delay): a threshold below that ran the queue dry before
        # every chunk, although the chunk outlasted the delay.
        if remaining <= self.lead_ticks():
            return True
        if self._queue_threshold is not None:
            return remaining <= self._queue_threshold
        return self._queue.needs_chunk(tick, self._chunk_size, self._settings.chunk_size_threshold)

    def lead_ticks(self) -> int:
        """How many queued actions must be left when the next chunk is asked, so that it comes
        before they run out: the most ticks a recent chunk took (or the configured inference
        delay), plus one for a chunk arriving a tick later than those."""
        return self.delay_ticks() + 1

    def _request(self, arrays: dict[str, np.ndarray], task: list[str], tick: int) -> ChunkRequest:
        request = ChunkRequest(
            observation=arrays,
            task=tuple(task),
            timestep=tick,
            policy=self._settings.server_policy,
            max_actions=self._settings.actions_per_chunk,
        )
        if self._rtc is None:
            return request
        left = self._queue.leftover(tick, self._rtc.execution_horizon, self.delay_ticks())
        return request if left is None else following(request, left.committed(self._rtc))

    def _submit(self, request: ChunkRequest) -> None:
        self._slot = request
        self._in_flight = True
        self._cond.notify_all()

    def _wait_for(self, tick: int, arrays: dict[str, np.ndarray], task: list[str]) -> Any:
        """Block (lock held by the caller, released while waiting) until `tick` has an action."""
        give_up = time.monotonic() + self._settings.connect_timeout_s
        self._waiting = True
        try:
            return self._wait_loop(tick, arrays, task, give_up)
        finally:
            self._waiting = False
            # The tick that waited is no measure of the loop's period.
            self._last_tick_at = None

    def _wait_loop(
        self, tick: int, arrays: dict[str, np.ndarray], task: list[str], give_up: float
    ) -> Any:
        while True:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            if not self._in_flight:
                self._submit(self._request(arrays, task, tick))
            left = give_up - time.monotonic()
            if left <= 0:
                break
            self._cond.wait(min(left, 0.05))
            action = self._queue.pop(tick)
            if action is not None:
                return action
        if self._settings.safe_action is not None and self._realtime:
            return None  # the stall path sends the safe action
        raise HardwareError(
            f"no action from the {self._label} within {self._settings.connect_timeout_s} s"
            + (f" (the last request: {self._last_problem})" if self._last_problem else ""),
            where="policy.server" if self._label == "policy server" else "policy",
            hint="check `rlctl policy serve` is running and reachable; "
            "--policy.connect_timeout_s waits longer"
            if self._label == "policy server"
            else "--policy.connect_timeout_s waits longer for the model's first chunk",
        )

    def _stall_action(self) -> np.ndarray:
        if not self._stalled:
            self._stalled = True
            self.stalls += 1
            waited = None if self._sent_at is None else time.perf_counter() - self._sent_at
            log.warning(
                f"{self._label}: no fresh action, holding",
                tick=self._tick,
                holding="safe action" if self._settings.on_stall == "safe_action" else "last",
                waiting_s=None if waited is None else round(waited, 3),
            )
        self.held_ticks += 1
        if self._settings.on_stall == "safe_action" or self._last is None:
            safe = np.asarray(self._settings.safe_action, dtype=np.float32)
            shape = self._last.shape if self._last is not None else (1, safe.shape[-1])
            return np.broadcast_to(safe, shape).copy()
        return self._last

    # --- the worker's side --------------------------------------------------------------------

    def _work(self, mine: int) -> None:
        """A worker's loop; `mine`: the owner number it takes requests under (a reset while
        it computes gives them to a fresh worker, and this one ends when its call returns)."""
        backoff = FIRST_BACKOFF_S
        down = False
        deadline = self._settings.chunk_deadline_s
        main = threading.main_thread()
        while True:
            with self._cond:
                while self._slot is None and not self._closed and self._owner == mine:
                    self._cond.wait(IDLE_POLL_S)
                    if not main.is_alive():  # the program ended without closing the engine
                        return
                if self._closed or self._owner != mine:
                    return
                request = self._slot
                self._slot = None
                if request is None:
                    continue
                generation = self._generation
                self._calling = True
                self._sent_at = sent = time.perf_counter()
                started = self._now()
            try:
                reply = self._client.predict(request, timeout=deadline)
                check_usable(reply)
            except (ChunkUnusable, PolicyFailed) as err:
                if self._stale(mine, generation):
                    self._done(None, generation, mine)
                    continue
                failed = isinstance(err, PolicyFailed)
                self.failures += failed
                self.chunks_unusable += not failed
                self._last_problem = err.message
                if not self._realtime:
                    self._done(None, generation, mine, error=err)
                    continue
                if failed:
                    self._failures += 1
                    if self._failures >= MAX_FAILURES:
                        self._done(None, generation, mine, error=_gave_up(err, self._failures))
                        continue
                if not self._unusable_said:
                    self._unusable_said = True
                    log.warning(
                        f"{self._label}: "
                        + ("the model failed" if failed else "chunk unusable")
                        + ", holding; asking again with the next observation",
                        reason=err.message,
                    )
                self._done(None, generation, mine)
                continue
            except ChunkLate as err:
                self._last_problem = err.message
                log.warning(f"{self._label}: chunk past its deadline", deadline_s=deadline)
                self._done(None, generation, mine)
                continue
            except (ServerUnavailable, ServerBusy) as err:
                self._last_problem = err.message
                if not down:
                    log.warning(
                        f"{self._label} busy, asking again"
                        if isinstance(err, ServerBusy)
                        else f"{self._label} unreachable, reconnecting",
                        error=err.message,
                    )
                down = True
                time.sleep(backoff)
                backoff = min(backoff * 2, self._settings.reconnect_max_s)
                self._done(None, generation, mine)
                continue
            except RlctlError as err:
                self._done(None, generation, mine, error=err)
                continue
            if down:
                log.info(f"{self._label} answering again")
                down, backoff = False, FIRST_BACKOFF_S
            if self._unusable_said:
                log.info(f"{self._label}: usable chunks again")
                self._unusable_said = False
            self._failures = 0
            self._last_problem = None
            self.round_trips_s.append(time.perf_counter() - sent)
            self.inference_s.append(reply.inference_s)
            self._done(reply, generation, mine, waited_s=self._now() - started)

    def _stale(self, mine: int, generation: int) -> bool:
        """Whether a call's outcome belongs to an episode since reset (or a closed engine)."""
        with self._cond:
            return self._closed or self._owner != mine or generation != self._generation

    def _done(
        self,
        reply: ChunkReply | None,
        generation: int,
        mine: int,
        *,
        error: RlctlError | None = None,
        waited_s: float | None = None,
    ) -> None:
        with self._cond:
            if self._owner == mine:
                self._calling = False
            if self._closed or self._owner != mine or generation != self._generation:
                # A stale call (reset since, or closed): nothing of it is used, and what is in
                # flight now is another request's.
                self._cond.notify_all()
                return
            self._in_flight = False
            self._sent_at = None
            if error is not None:
                self._error = error
            if reply is not None:
                if self._waiting and self._realtime:
                    # The loop waited for this chunk: no tick passed to count. (A loop that
                    # waits for every chunk, a simulation, counts its ticks as they are.)
                    self.waited_chunk_s = waited_s
                else:
                    self.delay.arrived(reply.timestep, self._executed)
                kept = self._queue.merge(reply.timestep, reply.actions, self._executed, self._merge)
                self._chunk_size = reply.actions.shape[-2]
                self.chunks_received += 1
                self._say_if_stale(reply, kept)
            self._cond.notify_all()

    def _say_if_stale(self, reply: ChunkReply, kept: int) -> None:
        """A chunk that came after every tick it had actions for is dropped whole: at this
        rate the arm holds for good. Said once (until a chunk is used again), with the figures
        a person needs to choose a lower rate or a faster device."""
        if kept:
            self._stale_said = False
            return
        self.chunks_stale += 1
        if self._stale_said:
            return
        self._stale_said = True
        late = self._executed + 1 - reply.timestep
        steps = reply.actions.shape[-2]
        log.warning(
            f"{self._label}: a chunk came {late} ticks after its observation, later than its "
            f"{steps} actions last: none can be acted, the arm holds",
            hint="the model is too slow for this rate on this device: lower --fps, a faster "
            "device (--policy.device), or fewer denoising steps",
            delay_ticks=late,
            chunk_actions=steps,
            model_s=round(reply.inference_s, 3),
        )

    def _with_retries(self, call: Callable[[], Any]) -> Any:
        give_up = time.monotonic() + self._settings.connect_timeout_s
        backoff = FIRST_BACKOFF_S
        while True:
            try:
                return call()
            except (ServerUnavailable, ServerBusy):
                if time.monotonic() + backoff > give_up:
                    raise
                time.sleep(backoff)
                backoff = min(backoff * 2, self._settings.reconnect_max_s)


class LocalChunks:
    """The `ChunkClient` of a model running in this process: the engine's worker calls the
    same `ChunkService` a policy server runs (`PolicyService`: its checks, its non-finite
    refusal), so local and remote acting differ only in the transport. A model that raises is
    a `PolicyFailed` (the robot holds and asks again); NaN actions are a `ChunkUnusable`."""

    def __init__(self, service: ChunkService) -> None:
        self._service = service

    def describe(
        self,
        policy: str = "",
        provided: Mapping[str, FeatureSpec] | None = None,
        *,
        timeout: float = 10.0,
    ) -> PolicyDescription:
        return self._service.describe(policy, provided)

    def predict(self, request: ChunkRequest, *, timeout: float) -> ChunkReply:
        try:
            return self._service.predict(request)
        except NonFiniteChunk as err:
            raise ChunkUnusable(err.message, where=err.where, hint=err.hint) from err
        except RlctlError:
            raise
        except Exception as err:  # the model's own failure (torch, CUDA, a plugin's code)
            raise PolicyFailed(
                f"the policy failed computing a chunk: {type(err).__name__}: {err}",
                where="policy",
                hint="run with --debug to see where; the arm held meanwhile",
            ) from err

    def close(self) -> None:
        pass


def _gave_up(err: RlctlError, failures: int) -> RlctlError:
    return PolicyFailed(
        f"the policy failed {failures} chunks in a row, the last: {err.message}",
        where=err.where,
        hint=err.hint,
    )


def check_usable(reply: ChunkReply) -> None:
    """Whatever a server sent, no NaN or infinity reaches the queue (or an arm)."""
    if first_non_finite({"actions": reply.actions}) is not None:
        raise ChunkUnusable(
            "the chunk holds NaN or infinite actions; none is used", where="policy.server"
        )


def following(request: ChunkRequest, committed: CommittedActions | None) -> ChunkRequest:
    """`request` asking for a chunk that follows `committed` (real-time chunking)."""
    if committed is None:
        return request
    return attrs.evolve(
        request,
        committed=_host(committed.actions),
        inference_delay=committed.inference_delay,
        rtc=committed.rtc,
    )


def _host(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float32)


def split_observation(observation: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], list[str]]:
    """A policy batch as the wire carries it: numeric arrays on the host, and the task texts."""
    arrays: dict[str, np.ndarray] = {}
    task: list[str] = []
    for key, value in observation.items():
        if key == "task":
            task = [value] if isinstance(value, str) else [str(t) for t in value]
            continue
        if hasattr(value, "detach"):
            value = value.detach().cpu().numpy()
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise InvalidInput(f"{key}: {array.dtype} values cannot be sent", where=key)
        arrays[key] = array
    return arrays, task
