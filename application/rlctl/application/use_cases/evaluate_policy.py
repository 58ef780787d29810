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
"""

from __future__ import annotations

import math
import os
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
from rlctl.domain.env_observation import (
    env_policy_features,
    flatten_observation,
    policy_key,
    to_policy_observation,
)
from rlctl.domain.errors import InvalidInput
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
from rlctl.domain.rollout_plan import RolloutPlan, Timings, plan_rollouts

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
    ) -> None:
        self._sim = simulation
        self._policy = policy
        self._progress = progress
        self._video_encoder = video_encoder
        self._clock = clock
        self._cpu_count = cpu_count or os.cpu_count() or 1
        # What the last run chose and how long it took to its first env step (benchmarks).
        self.plan: RolloutPlan | None = None
        self.first_step_s: float | None = None
        self._start = 0.0
        self._successes: list[bool] = []
        self._prefetch: Callable[[], None] | None = None
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
        pre, post = self._sim.processors()
        self._env_pipelines = (pre, post)
        self._env_pre, self._env_post = _as_batch_fn(pre), _as_batch_fn(post)
        self._check_fit(spec, tasks)
        max_steps = min(
            settings.max_episode_steps or spec.max_episode_steps, spec.max_episode_steps
        )
        self.plan = self._plan(settings, spec, tasks, max_steps)
        log.info(
            "eval plan",
            batch_size=self.plan.batch_size,
            use_async=self.plan.use_async,
            reason=self.plan.reason,
            estimated_s=self.plan.estimated_s,
            tasks=len(tasks),
            n_episodes=settings.n_episodes,
        )
        envs = self._sim.create(self.plan.batch_size, self.plan.use_async)
        flat = [(suite, tid, env) for suite, group in envs.items() for tid, env in group.items()]
        names = {(t.suite, t.task_id): t.name for t in tasks}
        results: list[TaskResult] = []
        bar = self._progress.task("eval", total=len(flat) * settings.n_episodes)
        self._successes = []
        self._display_step = 0
        try:
            if self._display is not None:
                suite = tasks[0].suite if tasks else "sim"
                features = _display_features(spec)
                # A simulator keeps no clock: every step is shown, the rollout waits if need be.
                self._display.open(features, fps=spec.fps, name=f"eval_{suite}", paced=False)
            for i, (suite, task_id, env) in enumerate(flat):
                task = SimTask(suite, task_id, names.get((suite, task_id), ""))
                # The next task's workers start in the background once this task's have reset
                # (prefetch), and this task's close as soon as it is done: at most two tasks'
                # envs are alive at any time.
                self._prefetch = flat[i + 1][2].start if i + 1 < len(flat) else None
                results.append(self._run_task(env, task, spec, settings, max_steps, bar))
                env.close()
                log.info(
                    "task done", suite=suite, task_id=task_id, tasks_done=i + 1, at=time.time()
                )
        finally:
            bar.close()
            _close_all(env for _, _, env in flat)
            if self._display is not None:
                self._display.close()
        return EvalReport(tasks=results, eval_s=self._clock() - start)

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
        self, settings: EvalSettings, spec: SimSpec, tasks: Sequence[SimTask], max_steps: int
    ) -> RolloutPlan:
        forced = settings.batch_size > 0 and settings.use_async_envs is not None
        timings = None if forced else self._measure(spec, settings, max_steps)
        return plan_rollouts(
            settings.n_episodes,
            self._cpu_count,
            timings,
            batch_size=settings.batch_size,
            use_async=settings.use_async_envs,
            n_tasks=max(1, len(tasks)),
        )

    def _measure(self, spec: SimSpec, settings: EvalSettings, max_steps: int) -> Timings:
        probe = self._sim.probe()
        batch = self._policy_input(probe.observation, [probe.task], spec)
        self._policy.predict_chunk(batch)  # the first call pays for lazy set-up
        calls = [(1, self._time(lambda: self._policy.predict_chunk(batch)))]
        wide = min(PROBE_POLICY_BATCH, settings.n_episodes)
        if wide > 1:
            tiled = _tile(probe.observation, wide)
            wide_batch = self._policy_input(tiled, [probe.task] * wide, spec)
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
                tracker = self._rollout(env, seeds, keep, max_steps, spec, videos, bar, task)
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
    ) -> RolloutTracker:
        n = env.num_envs
        self._policy.reset()
        observation = env.reset(seeds)
        start_next, self._prefetch = self._prefetch, None
        if start_next is not None:
            start_next()
        texts = [str(t) for t in env.task_descriptions()] or [""] * n
        tracker = RolloutTracker(n, max_steps, task_texts=texts)
        if videos is not None:
            videos.add(env.render(videos.count), live=np.ones(videos.count, dtype=bool))
        while not tracker.all_done:
            action = self._act(observation, texts, spec)
            if self._display is not None and not tracker.done[0]:
                self._display.log_frame(
                    self._display_step, _first_env(observation, spec.feature_map), action[0]
                )
                self._display_step += 1
            step = env.step(action)
            if self.first_step_s is None:
                self.first_step_s = self._clock() - self._start
                # Wall time too, so that a benchmark can measure from the command's launch.
                log.info("first env step", after_s=round(self.first_step_s, 3), at=time.time())
            live = ~tracker.done
            finished = tracker.record(
                step.reward, step.terminated, step.truncated, success_flags(step.info, n)
            )
            if videos is not None and live[: videos.count].any():
                videos.add(env.render(videos.count), live=live[: videos.count])
            counted = finished[:keep]
            if counted.any():
                self._successes.extend(bool(s) for s in tracker.success[:keep][counted])
                bar.advance(int(counted.sum()))
                bar.update(
                    success=f"{100 * np.mean(self._successes):.1f}%",
                    task=f"{task.suite}/{task.task_id}",
                )
            observation = step.observation
        return tracker

    def _policy_input(
        self, observation: Mapping[str, Any], texts: Sequence[str], spec: SimSpec
    ) -> dict[str, Any]:
        batch: dict[str, Any] = to_policy_observation(observation, spec.feature_map)
        batch["task"] = list(texts)
        batch = self._env_pre(batch)
        if self._rename_map:
            batch = {self._rename_map.get(k, k): v for k, v in batch.items()}
        return batch

    def _act(self, observation: Mapping[str, Any], texts: Sequence[str], spec: SimSpec) -> Any:
        batch = self._policy_input(observation, texts, spec)
        action = self._policy.select_action(batch)
        action = np.asarray(self._env_post({"action": action})["action"])
        if action.ndim != 2:
            raise InvalidInput(
                f"the policy returned actions of shape {action.shape}; expected "
                "(batch, action_dim)",
                where="policy.select_action",
            )
        return action


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
