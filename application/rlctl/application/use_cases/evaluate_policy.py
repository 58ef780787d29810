"""EvaluatePolicy: run a policy in a simulator for n episodes per task and measure it.

Per control step, for a batch of environments at once:
raw observation → env feature map (`rlctl.domain.env_observation`) → env pre-processor →
rename map (LeRobot's `--rename_map`) → policy (`select_action`: its own pre-processor, one
action from its chunk queue, its own post-processor) → env post-processor → `env.step`.

The policy of the work lives here: how episodes are batched and seeded (one seed per episode,
`seed + episode index`, restarting for each task as LeRobot does), which episodes count (the
first n; the rest of the last batch is discarded), when an episode ends (its first
terminated/truncated, or the step limit), which episodes are filmed (the first
`max_episodes_rendered` of each task), and that every simulator is closed whatever happens.
Before anything starts, a short probe measures one env step and one policy call, and the
batch size and sync/async mode are chosen from it (`rlctl.domain.rollout_plan`) unless the
settings force them. Even before that, the policy's input and output features are checked
against the env's (`policy_env_fit`): a policy trained on another robot fails with one message
naming every difference, not with a tensor shape error from inside the model.

A suite's tasks run one after the other, the next task's envs started while the current one
runs (unless `prefetch_next_task` is off: by default when the env renders on a GPU, where each
live env holds a GL context) and each closed when it is done. With the env's
`max_parallel_tasks = N` (at most the cores), N tasks run at once in threads (`suite_schedule`),
each with its own policy (made by `policy_copies`: a policy keeps its action queue between ticks)
and `cores // N` cores for its env workers; the plan is chosen for that share. Their envs always
run in worker processes, even one env per task: in one process, simulators share global state
(Meta-World's goal sampling).
The report is the sequential run's: tasks in suite order, the same seeds, videos and task text
per task. A policy that draws random numbers (the random policy, sampling policies) draws them
per copy, so its episodes differ from a sequential run's; a deterministic policy's do not.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from rlctl.application.ports.live_display import LiveDisplay
from rlctl.application.ports.policy import Policy
from rlctl.application.ports.progress import Progress, ProgressTask
from rlctl.application.ports.simulation import (
    SimSpec,
    SimTask,
    Simulation,
    VectorSimulator,
)
from rlctl.application.ports.video import VideoEncoder
from rlctl.application.use_cases.episode_videos import EpisodeVideos
from rlctl.application.use_cases.policy_env_fit import check_policy_fits_env
from rlctl.application.use_cases.suite_schedule import SuiteSchedule, run_slots
from rlctl.domain.env_observation import (
    env_policy_features,
    flatten_observation,
    policy_key,
    to_policy_observation,
)
from rlctl.domain.errors import ConfigError, InvalidInput
from rlctl.domain.eval_metrics import (
    EpisodeResult,
    EvalReport,
    RolloutTracker,
    TaskResult,
    success_flags,
)
from rlctl.domain.eval_settings import EvalSettings
from rlctl.domain.features import FeatureSpec, typed_feature
from rlctl.domain.processors import ProcessorPipeline
from rlctl.domain.remote_inference import NonFiniteChunk, first_non_finite, largest_magnitude
from rlctl.domain.rollout_plan import RolloutPlan, TaskSlots, Timings, plan_rollouts, task_slots

log = structlog.get_logger(__name__)

# The second point of the policy cost model; larger batches are extrapolated linearly.
PROBE_POLICY_BATCH = 8
ACTION = "action"


def _identity(batch: dict[str, Any]) -> dict[str, Any]:
    return batch


def _as_batch_fn(pipeline: ProcessorPipeline) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A processor pipeline as a function on flat batch dicts; empty pipelines cost nothing."""
    return pipeline.process_batch if len(pipeline) else _identity


class EvaluatePolicy:
    def __init__(
        self,
        simulation: Simulation,
        policy: Policy,
        progress: Progress,
        video_encoder: VideoEncoder | None = None,
        *,
        clock: Callable[[], float] = time.perf_counter,
        cpu_count: int | None = None,
        rename_map: Mapping[str, str] | None = None,
        display: LiveDisplay | None = None,
        policy_copies: Callable[[], Policy] | None = None,
    ) -> None:
        self._sim = simulation
        self._policy = policy
        # Another policy like `policy` (same checkpoint or type, same seed), for each task run
        # beside the first when the simulation runs several at once; without it, one at a time.
        self._policy_copies = policy_copies
        self._progress = progress
        self._video_encoder = video_encoder
        self._clock = clock
        self._cpu_count = cpu_count or os.cpu_count() or 1
        # What the last run chose and how long it took to its first env step (benchmarks).
        self.plan: RolloutPlan | None = None
        self.first_step_s: float | None = None
        self.slots: TaskSlots | None = None
        # Whether the last run started each next task's envs ahead.
        self.prefetch: bool | None = None
        self._start = 0.0
        self._successes: list[bool] = []
        # Guards what runners of parallel tasks share: the success tally, the bar, timings.
        self._lock = threading.Lock()
        self._schedule = SuiteSchedule([])
        self._env_pre: Callable[[dict[str, Any]], dict[str, Any]] = _identity
        self._env_post: Callable[[dict[str, Any]], dict[str, Any]] = _identity
        self._env_pipelines: tuple[ProcessorPipeline, ProcessorPipeline] = (
            ProcessorPipeline(name="env_preprocessor"),
            ProcessorPipeline(name="env_postprocessor"),
        )
        # Env key → policy key, applied after the env's pre-processor (LeRobot's --rename_map).
        self._rename_map = dict(rename_map or {})
        # `--display_data=true`: the first env of each batch, step by step.
        self._display = display
        self._display_step = 0

    def __call__(self, settings: EvalSettings) -> EvalReport:
        start = self._clock()
        self._start = start
        self.first_step_s = None
        spec = self._sim.spec()
        tasks = self._sim.tasks()
        # The env's processors, or the ones the policy's type brings for this env type.
        pre, post = self._sim.processors(self._policy.config)
        self._env_pipelines = (pre, post)
        self._env_pre, self._env_post = _as_batch_fn(pre), _as_batch_fn(post)
        self._check_fit(spec, tasks)
        slots = self.slots = task_slots(spec.max_parallel_tasks, len(tasks), self._cpu_count)
        if slots.count > 1 and self._policy_copies is None:
            raise ConfigError(
                f"max_parallel_tasks={spec.max_parallel_tasks} runs tasks at once, each with "
                "its own policy, and this evaluation has only the one policy it was given",
                where="env.max_parallel_tasks",
                hint="set env.max_parallel_tasks=1 (evaluations during training run one task "
                "at a time); a program embedding EvaluatePolicy passes policy_copies",
            )
        max_steps = min(
            settings.max_episode_steps or spec.max_episode_steps, spec.max_episode_steps
        )
        self.plan = self._plan(settings, spec, tasks, max_steps, slots)
        prefetch = self.prefetch = settings.prefetches(spec.renders_on_gpu)
        log.info(
            "eval plan",
            batch_size=self.plan.batch_size,
            use_async=self.plan.use_async,
            reason=self.plan.reason,
            estimated_s=self.plan.estimated_s,
            tasks=len(tasks),
            parallel_tasks=slots.count,
            n_episodes=settings.n_episodes,
            prefetch_next_task=prefetch,
        )
        policies = [self._policy]
        if slots.count > 1 and self._policy_copies is not None:
            policies += [self._policy_copies() for _ in range(slots.count - 1)]
        envs = self._sim.create(
            self.plan.batch_size,
            self.plan.use_async,
            slots.cores_per_task if slots.count > 1 else None,
        )
        flat = [(suite, tid, env) for suite, group in envs.items() for tid, env in group.items()]
        names = {(t.suite, t.task_id): t.name for t in tasks}
        results: list[TaskResult | None] = [None] * len(flat)
        bar = self._progress.task("eval", total=len(flat) * settings.n_episodes)
        self._successes = []
        self._display_step = 0
        # The next task's workers start in the background once a running task's have reset
        # (prefetch), and each task's close as soon as it is done: at most N + 1 tasks' envs
        # are alive at any time with N tasks running at once (two when they run in turn); N
        # (one) without prefetch.
        schedule = self._schedule = SuiteSchedule([env for _, _, env in flat], prefetch=prefetch)
        done = [0]

        def run_tasks(slot: int) -> None:
            while (i := schedule.take()) is not None:
                suite, task_id, env = flat[i]
                task = SimTask(suite, task_id, names.get((suite, task_id), ""))
                results[i] = self._run_task(
                    env, task, spec, settings, max_steps, bar, policies[slot], slot == 0
                )
                env.close()
                with self._lock:
                    done[0] += 1
                    count = done[0]
                log.info(
                    "task done", suite=suite, task_id=task_id, tasks_done=count, at=time.time()
                )

        try:
            if self._display is not None:
                suite = tasks[0].suite if tasks else "sim"
                features = _display_features(spec)
                # A simulator keeps no clock: every step is shown, the rollout waits if need be.
                # With tasks running at once, the display follows the first runner's tasks.
                self._display.open(features, fps=spec.fps, name=f"eval_{suite}", paced=False)
            run_slots(slots.count, run_tasks, schedule.stop)
        finally:
            bar.close()
            _close_all(env for _, _, env in flat)
            if self._display is not None:
                self._display.close()
        return EvalReport(tasks=[r for r in results if r is not None], eval_s=self._clock() - start)

    # --- does the policy fit the env? -------------------------------------------------------

    def _check_fit(self, spec: SimSpec, tasks: Sequence[SimTask]) -> None:
        pre, post = self._env_pipelines
        provided = pre.transform_features(env_policy_features(spec.features, spec.feature_map))
        provided = self._policy.observation_features(_renamed(provided, self._rename_map))
        outputs = dict(self._policy.output_features)
        action = outputs.get(ACTION)
        if action is not None:
            # What reaches env.step is the policy's action after the env's post-processor.
            after = post.transform_features(
                {ACTION: FeatureSpec(ACTION, "float32", action.shape)}
            ).get(ACTION)
            if after is not None:
                outputs[ACTION] = typed_feature("ACTION", tuple(after.shape), ACTION)
        check_policy_fits_env(
            self._policy.input_features,
            outputs,
            provided,
            spec.features.get(ACTION),
            where=f"env {tasks[0].suite}" if tasks else None,
        )

    # --- planning ---------------------------------------------------------------------------

    def _plan(
        self,
        settings: EvalSettings,
        spec: SimSpec,
        tasks: Sequence[SimTask],
        max_steps: int,
        slots: TaskSlots,
    ) -> RolloutPlan:
        forced = settings.batch_size > 0 and settings.use_async_envs is not None
        timings = None if forced else self._measure(spec, settings, max_steps)
        # Each of the tasks running at once is planned on its share of the cores, and the
        # suite takes as long as the tasks one runner goes through.
        return plan_rollouts(
            settings.n_episodes,
            slots.cores_per_task,
            timings,
            batch_size=settings.batch_size,
            use_async=settings.use_async_envs,
            n_tasks=math.ceil(max(1, len(tasks)) / slots.count),
            workers_only=slots.count > 1,
        )

    def _measure(self, spec: SimSpec, settings: EvalSettings, max_steps: int) -> Timings:
        probe = self._sim.probe()
        steps = self._policy.config.n_obs_steps
        batch = _as_history(self._policy_input(probe.observation, [probe.task], spec), steps)
        try:
            self._policy.predict_chunk(batch)  # the first call pays for lazy set-up
        except NonFiniteChunk as refused:  # a policy that checks its own answer
            raise _non_finite_actions(self._policy, batch, None, None) from refused
        calls = [(1, self._time(lambda: self._policy.predict_chunk(batch)))]
        wide = min(PROBE_POLICY_BATCH, settings.n_episodes)
        if wide > 1:
            tiled = _tile(probe.observation, wide)
            wide_batch = _as_history(self._policy_input(tiled, [probe.task] * wide, spec), steps)
            calls.append((wide, self._time(lambda: self._policy.predict_chunk(wide_batch))))
        self._policy.reset()
        return Timings(
            env_step_s=probe.step_s,
            env_start_s=probe.start_s,
            policy_calls=tuple(calls),
            n_action_steps=max(1, self._policy.actions_per_chunk),
            episode_steps=max_steps,
        )

    def _time(self, call: Callable[[], Any]) -> float:
        t0 = self._clock()
        call()
        return self._clock() - t0

    # --- rollouts ---------------------------------------------------------------------------

    def _run_task(
        self,
        env: VectorSimulator,
        task: SimTask,
        spec: SimSpec,
        settings: EvalSettings,
        max_steps: int,
        bar: ProgressTask,
        policy: Policy,
        displayed: bool,
    ) -> TaskResult:
        n = env.num_envs
        episodes: list[EpisodeResult] = []
        video_paths: list[str] = []
        videos_dir = (
            Path(settings.videos_dir) / f"{task.suite}_{task.task_id}"
            if settings.videos_dir and self._video_encoder is not None
            else None
        )
        for batch_ix in range(math.ceil(settings.n_episodes / n)):
            first = batch_ix * n
            seeds = (
                [settings.seed + first + i for i in range(n)] if settings.seed is not None else None
            )
            keep = settings.n_episodes - first
            n_render = (
                max(0, min(settings.max_episodes_rendered - len(video_paths), n, keep))
                if videos_dir is not None
                else 0
            )
            videos = (
                EpisodeVideos(
                    self._video_encoder,
                    [
                        videos_dir / f"eval_episode_{len(video_paths) + i}.mp4"
                        for i in range(n_render)
                    ],
                    fps=spec.fps,
                    codec=settings.video_codec,
                )
                if n_render and videos_dir is not None and self._video_encoder is not None
                else None
            )
            try:
                tracker = self._rollout(
                    env,
                    seeds,
                    keep,
                    max_steps,
                    spec,
                    videos,
                    bar,
                    task,
                    policy,
                    displayed,
                    first_batch=batch_ix == 0,
                    first=first,
                )
            except BaseException:
                if videos is not None:
                    videos.abort()
                raise
            if videos is not None:
                video_paths.extend(str(p) for p in videos.finish())
            episodes.extend(tracker.episodes(first, seeds or [None] * n, keep))
        return TaskResult(task.suite, task.task_id, episodes, video_paths, task=task.name)

    def _rollout(
        self,
        env: VectorSimulator,
        seeds: list[int] | None,
        keep: int,
        max_steps: int,
        spec: SimSpec,
        videos: EpisodeVideos | None,
        bar: ProgressTask,
        task: SimTask,
        policy: Policy,
        displayed: bool,
        first_batch: bool,
        first: int = 0,
    ) -> RolloutTracker:
        """`first`: the index of the episode the first env runs."""
        n = env.num_envs
        display = self._display if displayed else None
        policy.reset()
        observation = env.reset(seeds)
        if first_batch:
            self._schedule.prefetch()
        texts = [str(t) for t in env.task_descriptions()] or [""] * n
        tracker = RolloutTracker(n, max_steps, task_texts=texts)
        if videos is not None:
            videos.add(env.render(videos.count), live=np.ones(videos.count, dtype=bool))
        while not tracker.all_done:
            self._schedule.check()
            action = self._act(observation, texts, spec, policy, (task, first, tracker.steps))
            if display is not None and not tracker.done[0]:
                display.log_frame(
                    self._display_step, _first_env(observation, spec.feature_map), action[0]
                )
                self._display_step += 1
            step = env.step(action)
            if self.first_step_s is None:
                self._first_step()
            live = ~tracker.done
            finished = tracker.record(
                step.reward, step.terminated, step.truncated, success_flags(step.info, n)
            )
            if videos is not None and live[: videos.count].any():
                videos.add(env.render(videos.count), live=live[: videos.count])
            counted = finished[:keep]
            if counted.any():
                with self._lock:
                    self._successes.extend(bool(s) for s in tracker.success[:keep][counted])
                    bar.advance(int(counted.sum()))
                    bar.update(
                        success=f"{100 * np.mean(self._successes):.1f}%",
                        task=f"{task.suite}/{task.task_id}",
                    )
            observation = step.observation
        return tracker

    def _first_step(self) -> None:
        with self._lock:
            if self.first_step_s is not None:
                return
            self.first_step_s = self._clock() - self._start
        # Wall time too, so that a benchmark can measure from the command's launch.
        log.info("first env step", after_s=round(self.first_step_s, 3), at=time.time())

    def _policy_input(
        self, observation: Mapping[str, Any], texts: Sequence[str], spec: SimSpec
    ) -> dict[str, Any]:
        batch: dict[str, Any] = to_policy_observation(observation, spec.feature_map)
        batch["task"] = list(texts)
        batch = self._env_pre(batch)
        if self._rename_map:
            batch = {self._rename_map.get(k, k): v for k, v in batch.items()}
        return batch

    def _act(
        self,
        observation: Mapping[str, Any],
        texts: Sequence[str],
        spec: SimSpec,
        policy: Policy,
        at: tuple[SimTask, int, int],
    ) -> Any:
        """The actions the envs take, refused when one holds NaN or infinity: nothing
        non-finite reaches a simulator. `at`: the task, its first episode here, the step."""
        batch = self._policy_input(observation, texts, spec)
        try:
            action = policy.select_action(batch)
        except NonFiniteChunk as refused:  # a policy that checks its own answer
            raise _non_finite_actions(policy, batch, at, None) from refused
        action = np.asarray(self._env_post({"action": action})["action"])
        if action.ndim != 2:
            raise InvalidInput(
                f"the policy returned actions of shape {action.shape}; expected "
                "(batch, action_dim)",
                where="policy.select_action",
            )
        if first_non_finite({ACTION: action}) is not None:
            rows = np.flatnonzero(~np.isfinite(action).all(axis=1))
            raise _non_finite_actions(policy, batch, at, [int(r) for r in rows])
        return action


def _policy_name(policy: Policy) -> str:
    # A loaded policy is named by its folder; any other by its type.
    return str(getattr(policy, "name", None) or policy.config.type_name)


def _non_finite_actions(
    policy: Policy,
    batch: Mapping[str, Any],
    at: tuple[SimTask, int, int] | None,
    rows: Sequence[int] | None,
) -> NonFiniteChunk:
    """The error for a policy answering `batch` with NaN or infinite actions, naming the task,
    the episodes (`rows` of the batch; None: not known) and the step (`at`; None: the probe)."""
    name = _policy_name(policy)
    if at is None:
        when = "the probe's observation (before the first episode)"
    else:
        task, first, step = at
        episodes = (
            [first + r for r in rows]
            if rows is not None
            else list(range(first, first + _batch_rows(batch)))
        )
        listed = ", ".join(str(e) for e in episodes[:8]) + (" …" if len(episodes) > 8 else "")
        label = "episode" if len(episodes) == 1 else "episodes"
        when = f"step {step} of {label} {listed} of task {task.suite}/{task.task_id}"
    found = largest_magnitude(
        {k: v for k, v in batch.items() if isinstance(v, np.ndarray) and k != "task"}
    )
    reach = f" ({found[0]} reaches {found[1]:.3g})" if found is not None else ""
    return NonFiniteChunk(
        f"policy {name!r} answered {when} with NaN or infinite actions; the simulator was not "
        "stepped with them and the evaluation stops",
        where="policy.predict_chunk" if at is None else "policy.select_action",
        hint="a checkpoint whose training diverged holds NaN weights (check its training "
        f"losses); else the observation is far outside what it was trained on{reach}",
    )


def _batch_rows(batch: Mapping[str, Any]) -> int:
    shapes = [np.shape(v) for v in batch.values() if isinstance(v, np.ndarray)]
    return int(shapes[0][0]) if shapes and shapes[0] else 1


def _display_features(spec: SimSpec) -> dict[str, FeatureSpec]:
    """The env's features under the keys a policy reads, pictures as the env gives them
    (height, width, channels), and the action."""
    out: dict[str, FeatureSpec] = {}
    for raw_key, feature in spec.features.items():
        key = ACTION if raw_key == ACTION else policy_key(raw_key, spec.feature_map)
        out[key] = FeatureSpec(key, feature.dtype, tuple(feature.shape), feature.names)
    return out


def _first_env(observation: Mapping[str, Any], feature_map: Mapping[str, str]) -> dict[str, Any]:
    return {
        policy_key(key, feature_map): np.asarray(value)[0]
        for key, value in flatten_observation(observation).items()
    }


def _renamed(
    features: Mapping[str, FeatureSpec], renames: Mapping[str, str]
) -> dict[str, FeatureSpec]:
    out: dict[str, FeatureSpec] = {}
    for key, spec in features.items():
        new = renames.get(key, key)
        out[new] = spec if new == key else FeatureSpec(new, spec.dtype, spec.shape, spec.names)
    return out


def _as_history(batch: dict[str, Any], n_obs_steps: int) -> dict[str, Any]:
    """The probe's one observation as the `(batch, n_obs_steps, ...)` history that a policy
    reading several steps takes from `predict_chunk` (as the acting history stacks it at the
    first tick: the observation repeated)."""
    if n_obs_steps <= 1:
        return batch
    return {
        k: np.repeat(np.asarray(v)[:, None], n_obs_steps, axis=1)
        if isinstance(v, np.ndarray) and k.startswith("observation.")
        else v
        for k, v in batch.items()
    }


def _tile(observation: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    return {k: np.repeat(np.asarray(v), n, axis=0) for k, v in observation.items()}


def _close_all(envs: Any) -> None:
    # Closing is best effort: one env failing to close must not leave the others' workers.
    errors: list[BaseException] = []
    for env in envs:
        try:
            env.close()
        except Exception as error:
            errors.append(error)
    for failure in errors:
        log.warning("closing a simulator failed", error=str(failure))
