"""A vector env whose envs are split over a few worker processes, one shard each.

Gymnasium's `AsyncVectorEnv` starts one process per env. When envs outnumber the cores the
extra processes only queue behind each other, and every step pays a round trip per env. Here
each worker holds a contiguous shard of the envs and steps them one after the other
(next-step autoreset, as `SyncVectorEnv` does): 8 envs on 2 cores run as 2 processes of 4
envs, and a step costs one round trip per worker. Rendered frames come back through shared
memory (`FrameBuffer`), not through the pipe: filming 8 PushT envs moves ~3.5 MB a step.

The main process sends one command to every worker that holds envs concerned and reads the
replies in order. A worker that raises sends its exception back (its traceback is logged) and
stops; a worker that dies shows as an `EOFError` or `BrokenPipeError` on its pipe, which the
caller reports with the process's exit code (`processes`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
import traceback
from collections.abc import Callable, Sequence
from multiprocessing import shared_memory
from typing import Any

import gymnasium as gym
import numpy as np
import structlog
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

log = structlog.get_logger(__name__)

_RESET, _STEP, _CALL, _RENDER, _CLOSE = "reset", "step", "call", "render", "close"


# A render reply meaning "the frames are in the shared memory you named".
_IN_SHARED_MEMORY = "in shared memory"


class FrameBuffer:
    """Shared memory holding one frame per env of a shard: frames cross without pickling."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.memory = shared_memory.SharedMemory(
            create=True, size=max(1, int(np.prod(shape)) * dtype.itemsize)
        )
        self.view = np.ndarray(shape, dtype, buffer=self.memory.buf)

    @property
    def address(self) -> tuple[str, tuple[int, ...], str]:
        """What a worker needs to write into it; travels with each render request."""
        return self.memory.name, self.view.shape, self.view.dtype.str

    @classmethod
    def fitting(cls, frames: list[Any], n_envs: int) -> FrameBuffer | None:
        first = frames[0] if frames else None
        if not isinstance(first, np.ndarray) or any(
            not isinstance(f, np.ndarray) or f.shape != first.shape or f.dtype != first.dtype
            for f in frames
        ):
            return None
        return cls((n_envs, *first.shape), first.dtype)

    def release(self) -> None:
        del self.view
        self.memory.close()
        self.memory.unlink()


class WorkerError(RuntimeError):
    """An exception raised inside a worker that could not travel back as itself."""


def split_evenly(n: int, parts: int) -> list[range]:
    """`n` indices in `parts` contiguous shards whose sizes differ by at most one."""
    parts = max(1, min(parts, n))
    base, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


class ShardedVectorEnv(gym.vector.VectorEnv):
    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        n_workers: int,
        *,
        observation_space: gym.Space,
        action_space: gym.Space,
        metadata: dict[str, Any] | None = None,
        context: str = "forkserver",
    ) -> None:
        self.num_envs = len(env_fns)
        self.single_observation_space = observation_space
        self.single_action_space = action_space
        self.observation_space = batch_space(observation_space, self.num_envs)
        self.action_space = batch_space(action_space, self.num_envs)
        self.metadata = dict(metadata or {})
        self.metadata["autoreset_mode"] = gym.vector.AutoresetMode.NEXT_STEP
        self.shards = split_evenly(self.num_envs, n_workers)
        self.closed = False
        # typeshed's BaseContext has no `Process`; every context get_context returns has one.
        ctx: Any = multiprocessing.get_context(context)
        self.processes: list[Any] = []
        self._pipes: list[Any] = []
        # Shared memory a worker renders into, once its first frames told their size.
        self._frames: dict[int, FrameBuffer] = {}
        try:
            for index, shard in enumerate(self.shards):
                parent, child = ctx.Pipe()
                process = ctx.Process(
                    target=_work,
                    name=f"rlctl-sim-{index}",
                    args=(child, [env_fns[i] for i in shard]),
                    daemon=True,
                )
                process.start()
                child.close()
                self.processes.append(process)
                self._pipes.append(parent)
        except BaseException:
            self.close(terminate=True)
            raise

    # --- the vector env API -----------------------------------------------------------------

    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: Any = None):
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"{len(seeds)} seeds for {self.num_envs} envs")
        replies = self._ask_all(_RESET, lambda shard: ([seeds[i] for i in shard], options))
        observations: list[Any] = []
        infos: dict[str, Any] = {}
        for shard, reply in zip(self.shards, replies, strict=True):
            for i, (observation, info) in zip(shard, reply, strict=True):
                observations.append(observation)
                infos = self._add_info(infos, info, i)
        return self._batched(observations), infos

    def step(self, actions: Any):
        per_env = list(iterate(self.action_space, actions))
        replies = self._ask_all(_STEP, lambda shard: [per_env[i] for i in shard])
        observations: list[Any] = []
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        infos: dict[str, Any] = {}
        for shard, reply in zip(self.shards, replies, strict=True):
            for i, (observation, reward, term, trunc, info) in zip(shard, reply, strict=True):
                observations.append(observation)
                rewards[i], terminated[i], truncated[i] = reward, term, trunc
                infos = self._add_info(infos, info, i)
        return self._batched(observations), rewards, terminated, truncated, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        replies = self._ask_all(_CALL, lambda _: (name, args, kwargs))
        return tuple(value for reply in replies for value in reply)

    def render_first(self, n: int) -> list[Any]:
        """The frames of the first `n` envs; workers holding none of them are not asked.

        Frames from workers are views of shared memory, valid until the next render.
        """
        wanted = [s for s in self.shards if s.start < n]
        requests = [
            (k, _RENDER, (min(s.stop, n) - s.start, self._frame_address(k)))
            for k, s in enumerate(wanted)
        ]
        frames: list[Any] = []
        for (k, _, (count, _)), reply in zip(requests, self._ask(requests), strict=True):
            if isinstance(reply, str) and reply == _IN_SHARED_MEMORY:
                frames.extend(self._frames[k].view[:count])
                continue
            frames.extend(reply)
            if k not in self._frames:
                buffer = FrameBuffer.fitting(reply, len(self.shards[k]))
                if buffer is not None:
                    self._frames[k] = buffer
        return frames

    def _frame_address(self, worker: int) -> tuple[str, tuple[int, ...], str] | None:
        buffer = self._frames.get(worker)
        return None if buffer is None else buffer.address

    def render(self) -> tuple[Any, ...]:
        return tuple(np.array(frame, copy=True) for frame in self.render_first(self.num_envs))

    def close_extras(self, terminate: bool = False, **kwargs: Any) -> None:
        if not terminate:
            for pipe, process in zip(self._pipes, self.processes, strict=False):
                if process.is_alive():
                    try:
                        pipe.send((_CLOSE, None))
                    except (BrokenPipeError, OSError):
                        continue
            for process in self.processes:
                process.join(timeout=5)
        for process in self.processes:
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
        for pipe in self._pipes:
            pipe.close()
        for buffer in self._frames.values():
            buffer.release()
        self._frames = {}

    # --- plumbing ---------------------------------------------------------------------------

    def _batched(self, observations: list[Any]) -> Any:
        # A fresh buffer each time: callers may keep what a step returned.
        out = create_empty_array(self.single_observation_space, self.num_envs)
        assert out is not None  # gymnasium's return type allows None; a Box or Dict never is
        return concatenate(self.single_observation_space, observations, out)

    def _ask_all(self, command: str, payload: Callable[[range], Any]) -> list[Any]:
        return self._ask([(k, command, payload(s)) for k, s in enumerate(self.shards)])

    def _ask(self, requests: list[tuple[int, str, Any]]) -> list[Any]:
        if self.closed:
            raise gym.error.ClosedEnvironmentError("the vector env is closed")
        for worker, command, payload in requests:
            self._pipes[worker].send((command, payload))
        replies: list[Any] = []
        failure = None
        for worker, _, _ in requests:
            ok, value = self._pipes[worker].recv()
            if ok:
                replies.append(value)
            elif failure is None:
                failure = value
        if failure is not None:
            raise _as_exception(failure)
        return replies


def _as_exception(failure: tuple[bytes | None, str, str]) -> BaseException:
    pickled, described, where = failure
    log.error("a simulator worker raised", worker_traceback=where)
    if pickled is not None:
        try:
            return pickle.loads(pickled)
        except Exception:  # an exception type the main process cannot rebuild
            pass
    return WorkerError(described)


def _failure(error: BaseException) -> tuple[bytes | None, str, str]:
    try:
        pickled: bytes | None = pickle.dumps(error)
    except Exception:
        pickled = None
    return pickled, f"{type(error).__name__}: {error}", traceback.format_exc()


class Shard:
    """The envs of one shard, stepped one after the other with next-step autoreset."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        self.envs: list[gym.Env] = []
        try:
            for fn in env_fns:
                self.envs.append(fn())
        except BaseException:
            self.close()
            raise
        self._needs_reset = [False] * len(self.envs)

    def handle(self, command: str, payload: Any) -> Any:
        if command == _RESET:
            seeds, options = payload
            self._needs_reset = [False] * len(self.envs)
            return [
                env.reset(seed=seed, options=options)
                for env, seed in zip(self.envs, seeds, strict=True)
            ]
        if command == _STEP:
            return [self._step(i, action) for i, action in enumerate(payload)]
        if command == _CALL:
            name, args, kwargs = payload
            return [_call(env, name, args, kwargs) for env in self.envs]
        if command == _RENDER:
            count, shared = payload
            frames = [env.render() for env in self.envs[:count]]
            if shared is not None and _write_frames(*shared, frames=frames):
                return _IN_SHARED_MEMORY
            return frames
        raise ValueError(f"unknown command {command!r}")

    def _step(self, i: int, action: Any) -> tuple[Any, ...]:
        if self._needs_reset[i]:  # next-step autoreset, as SyncVectorEnv does it
            self._needs_reset[i] = False
            observation, info = self.envs[i].reset()
            return observation, 0.0, False, False, info
        result = self.envs[i].step(action)
        self._needs_reset[i] = bool(result[2] or result[3])
        return result

    def close(self) -> None:
        for env in self.envs:
            try:
                env.close()
            except Exception as error:
                log.warning("closing an env failed", error=f"{type(error).__name__}: {error}")
        self.envs = []


def _work(pipe: Any, env_fns: list[Callable[[], gym.Env]]) -> None:
    """A worker's loop: build its shard's envs, then answer commands until closed."""
    shard: Shard | None = None
    try:
        shard = Shard(env_fns)
        while True:
            command, payload = pipe.recv()
            if command == _CLOSE:
                break
            pipe.send((True, shard.handle(command, payload)))
    except KeyboardInterrupt:
        pass  # the main process decides what Ctrl-C means; it closes or terminates us
    except BaseException as error:
        with contextlib.suppress(BrokenPipeError, OSError):
            pipe.send((False, _failure(error)))
    finally:
        if shard is not None:
            shard.close()
        pipe.close()


_attached: dict[str, shared_memory.SharedMemory] = {}


def _write_frames(name: str, shape: tuple[int, ...], dtype: str, *, frames: list[Any]) -> bool:
    """Write a worker's frames into the main process's shared memory, if they fit its layout."""
    if len(frames) > shape[0] or any(
        not isinstance(f, np.ndarray) or f.shape != shape[1:] or f.dtype.str != dtype
        for f in frames
    ):
        return False
    memory = _attached.get(name)
    if memory is None:
        # Workers share the main process's resource tracker (forkserver), which the main
        # process's unlink settles: attaching here registers nothing new.
        try:
            memory = _attached[name] = shared_memory.SharedMemory(name=name)
        except OSError:
            return False  # the frames travel through the pipe instead
    view = np.ndarray(shape, np.dtype(dtype), buffer=memory.buf)
    for i, frame in enumerate(frames):
        view[i] = frame
    return True


def _call(env: gym.Env, name: str, args: Any, kwargs: Any) -> Any:
    value = env.get_wrapper_attr(name)
    return value(*args, **kwargs) if callable(value) else value
