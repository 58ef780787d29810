"""The harness the `*_real_size.py` benchmarks share: rlctl side by side with LeRobot 0.6.1, each
tool in its own fresh process.

A benchmark script runs twice over: as the parent (`main`), which writes the checkpoint and
starts the children, and as a child (`--child rlctl|lerobot`), which loads the checkpoint,
predicts and prints one JSON line of figures. What they share lives here:

- `host_line()`: the machine the figures come from (every benchmark prints it);
- the parent's side: `tools()` (which Pythons to compare), `run_child()` (one child, in a fresh
  process, reading compiled bytecode), `compare()` (one untimed warm-up run of each tool, then
  `--repeat` rounds alternating the tools) and `print_best()` (the best-of table);
- the child's side: `child_threads()`, `chunk_times()` and `seconds_each()` (the first chunk,
  then per-chunk latencies), `figures()` (the timings dict every child reports) and
  `peak_rss_mb()`.

Only the standard library is imported at the top: LeRobot's Python imports this module too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

Figures = dict[str, float]


def host_line() -> str:
    """The CPU (lscpu's model name), its cores, memory and AVX flags: figures mean nothing
    without them."""
    try:
        lscpu = subprocess.run(
            ["lscpu"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        lscpu = ""
    fields = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition(":") for line in lscpu.splitlines())
    )
    model = fields.get("Model name") or platform.processor() or "unknown CPU"
    # AMX tiles and AVX-512 BF16 decide what a bfloat16 model costs: without them (AVX2 only)
    # a bfloat16 matrix product runs some 30x slower than a float32 one.
    flags = sorted(f for f in fields.get("Flags", "").split() if f.startswith(("avx", "amx_bf16")))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"host: {model}, {os.cpu_count()} cores, {memory:.0f} GiB, {' '.join(flags) or 'no AVX'}"


# --- the parent ----------------------------------------------------------------------------------


def tools(lerobot_python: str | None) -> dict[str, str]:
    """The tools to compare and the Python each runs in: rlctl in this one, LeRobot in
    `--lerobot-python` when given."""
    found = {"rlctl": sys.executable}
    if lerobot_python:
        found["lerobot"] = lerobot_python
    return found


def child_env(pycache: Path, threads: int = 0, *, hub_offline: bool = False) -> dict[str, str]:
    """A child's environment: it reads compiled bytecode, as an installed package does, written
    into the scratch cache `pycache` (`PYTHONPYCACHEPREFIX`, even where this process runs under
    `PYTHONDONTWRITEBYTECODE`); `threads` (0: torch's default) bounds OpenMP; `hub_offline`
    keeps the Hugging Face Hub from being asked for anything."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    if hub_offline:
        env["HF_HUB_OFFLINE"] = "1"
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def run_child(
    script: str | Path,
    tool: str,
    python: str,
    argv: Sequence[str],
    options: argparse.Namespace,
    *,
    hub_offline: bool = False,
) -> Figures:
    """Runs `python script --child tool *argv [--threads N]` in a fresh process and returns the
    figures of its last stdout line; a failed child ends the benchmark with the tail of its
    stderr. `options` are the script's parsed options: their `threads` and `pycache` (the
    scratch bytecode cache the parent chose) go to `child_env`, with `hub_offline`."""
    threads = int(options.threads or 0)
    command = [python, str(Path(script).resolve()), "--child", tool, *argv]
    if threads:
        command += ["--threads", str(threads)]
    env = child_env(options.pycache, threads, hub_offline=hub_offline)
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode:
        raise SystemExit(f"{tool} failed:\n{result.stderr[-3000:]}")
    found: Figures = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def compare(
    options: argparse.Namespace, child: Callable[[str, str, str, int], Figures]
) -> dict[str, list[Figures]]:
    """Runs the tools side by side and returns their figures by tool. `child(tool, python,
    size, chunks)` runs one tool (see `tools(options.lerobot_python)`) on the checkpoint of
    `size` with `chunks` further chunks and returns its figures: first once per tool, untimed,
    at tiny size with no further chunks (it fills the bytecode cache, so no tool's load pays for
    compiling its imports), then `options.repeat` rounds at `options.size` with
    `options.chunks`, the tools alternating; each run's figures are printed as a JSON line."""
    pythons = tools(options.lerobot_python)
    for tool, python in pythons.items():
        child(tool, python, "tiny", 0)
    results: dict[str, list[Figures]] = {tool: [] for tool in pythons}
    for _ in range(options.repeat):
        for tool, python in pythons.items():
            figures = child(tool, python, options.size, options.chunks)
            results[tool].append(figures)
            print(json.dumps({"tool": tool, "size": options.size, **figures}), flush=True)
    return results


# The timings every table shows, in its order (then a script's own, then `peak_rss_mb`).
TIMES = ("import_and_load_s", "first_chunk_s", "to_first_action_s", "chunk_median_s")


def print_best(
    title: str,
    results: dict[str, list[Figures]],
    lowest: Iterable[str] = (*TIMES, "peak_rss_mb"),
    *,
    highest: Iterable[str] = (),
    width: int = 18,
) -> None:
    """The table of the best figures by tool under `title` and the host line: the lowest of
    each key in `lowest` (seconds, megabytes; 3 decimals), the highest of each in `highest`
    (rates; 2 decimals)."""
    print(f"\n{title}")
    print(host_line())
    print(f"{'':{width}}" + "".join(f"{tool:>12}" for tool in results))
    for key in lowest:
        best = [min(r[key] for r in runs) for runs in results.values()]
        print(f"{key:{width}}" + "".join(f"{value:12.3f}" for value in best))
    for key in highest:
        best = [max(r[key] for r in runs) for runs in results.values()]
        print(f"{key:{width}}" + "".join(f"{value:12.2f}" for value in best))


# --- the child -----------------------------------------------------------------------------------


def child_threads(threads: int) -> None:
    """Torch's thread count in a child (0: torch's default)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def seconds_each(call: Callable[[], object], count: int) -> list[float]:
    """`count` calls of `call`, the seconds each took (a chunk's latency)."""
    latencies = []
    for _ in range(count):
        tick = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - tick)
    return latencies


def train_figures(step: Callable[[], object], steps: int) -> dict[str, float]:
    """`steps` training steps: the first apart (`first_train_step_s`: it also pays what a tool
    deferred from its load, such as weights mapped from the file and copied once the optimizer
    writes them, and the optimizer's state made), then the median of the others
    (`train_step_s`: what every further step of a training run costs; NaN for one step)."""
    times = seconds_each(step, max(steps, 1))
    steady = statistics.median(times[1:]) if len(times) > 1 else float("nan")
    return {"first_train_step_s": times[0], "train_step_s": steady}


def chunk_times(predict: Callable[[], object], chunks: int) -> tuple[float, list[float]]:
    """Under torch's inference mode, the first `predict()` (the clock reading at its end), then
    `chunks` more (the seconds each took)."""
    import torch

    with torch.inference_mode():
        predict()
        first = time.perf_counter()
        return first, seconds_each(predict, chunks)


def peak_rss_mb() -> float:
    """This process's peak resident memory, in MB: Linux's VmHWM, the peak of this program's
    own memory. (`ru_maxrss` keeps the peak from before `exec`, so a child started by a parent
    that had built a real-size checkpoint reported the parent's peak.)"""
    try:
        with Path("/proc/self/status").open() as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def figures(
    start: float,
    loaded: float,
    first: float,
    latencies: Sequence[float],
    *,
    imported: float | None = None,
    **extra: float,
) -> Figures:
    """What a child reports, from `time.perf_counter()` readings: at its start (before its
    imports), once `imported` (when given: `import_s` and `load_s` apart), once `loaded` (a
    policy ready to act) and at the end of the `first` chunk; the median of the further chunks'
    `latencies`; then the script's own `extra` figures and the peak resident memory.

    Compare `import_and_load_s` rather than `load_s` (rlctl imports torch and transformers
    lazily, inside the load), and `to_first_action_s` rather than either (rlctl maps the weights
    and reads them as the first chunk touches them; LeRobot reads them all while loading)."""
    out: Figures = {}
    if imported is not None:
        out["import_s"] = imported - start
        out["load_s"] = loaded - imported
    out["import_and_load_s"] = loaded - start
    out["first_chunk_s"] = first - loaded
    out["to_first_action_s"] = first - start
    out["chunk_median_s"] = statistics.median(latencies) if latencies else float("nan")
    out.update(extra)
    out["peak_rss_mb"] = peak_rss_mb()
    return out
