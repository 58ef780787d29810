"""Remote inference on loopback, rlctl side by side with LeRobot 0.6.1's async inference.

Both tools serve the same ACT checkpoint (`--checkpoint`, a `pretrained_model` folder LeRobot
wrote or can read; by default LeRobot's `act_tiny` test fixture when this checkout has it). A
checkpoint whose chunk is shorter than `--chunk` is re-built with that chunk (its processors and
statistics, freshly initialised weights: the figures are timings, not behaviour) and both tools
serve the re-built folder. The robot is simulated the same way for both: a position-controlled arm
whose joints are where they were last commanded, with fixed uint8 camera frames at the
checkpoint's image size.

- rlctl: a real `rlctl policy serve` process; the robot side is `RemotePolicy` behind
  `PolicySource` (what `rlctl record --policy.server` runs).
- LeRobot: a real `python -m lerobot.async_inference.policy_server` process (`--fps` = `--hz`,
  `--inference_latency=0` so it does not pad answers to one period); the robot side is LeRobot's
  own `RobotClient` on the same simulated arm (`benchmarks/lerobot_async_client.py`, run with
  `--lerobot-python`).

1. Overhead at `--hz`: one observation per tick, each waited for; the round trip measured by
   the robot side minus the inference the server measured for that observation (rlctl: around
   `predict_chunk`; LeRobot: its log's "Total time" of `_predict_action_chunk`, preparation,
   pre-processing, model and post-processing). p50, p95; goal <= 5 ms.
2. A delaying proxy (`--proxy`, its own asyncio process: client->server bytes held `--delay-ms`
   +- `--jitter-ms`, uniform, order kept) between robot and server; the control loop at `--hz`
   for `--loop-s` seconds from the first action, chunk `--chunk`, threshold `--threshold`,
   weighted average: ticks without a fresh action (goal 0), the loop's period (goal: p95 within
   1 ms of the target), round trips.
3. Throughput: 1, 2 and 4 robots (`--clients`), each its own process, observations back to back
   for `--throughput-s` seconds: observations per second the server answered. LeRobot's server
   keeps one robot's state (one observation slot, `Ready` resets it), so with several robots a
   chunk can reach a robot that did not send its observation: counted as `foreign_chunks`.

One JSON line per part and tool, then a side-by-side table.

Usage:
    python benchmarks/remote_inference.py --lerobot-python /path/to/lerobot/venv/bin/python \
        [--checkpoint FOLDER --chunk 50 --hz 30 --requests 200 --loop-s 20 --delay-ms 100
         --jitter-ms 30 --threshold 0.5 --throughput-s 10 --clients 1,2,4 --tools rlctl,lerobot]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ACT_TINY = REPO.parent / "shared" / "fixtures" / "lerobot-0.6.1" / "act_tiny"
LEROBOT_CLIENT = Path(__file__).resolve().parent / "lerobot_async_client.py"
TASK = "pick"


# --- the checkpoint and the simulated arm ---------------------------------------------------


def prepare_checkpoint(source: Path, chunk: int, tmp: Path) -> tuple[Path, str]:
    config = json.loads((source / "config.json").read_text())
    if config.get("chunk_size", 0) >= chunk:
        return source, f"{source} as it is (chunk {config['chunk_size']}, {chunk} kept)"
    import attrs
    import torch

    from rlctl.adapters.policies.base import build_policy
    from rlctl.adapters.policies.loaded_policy import LoadedPolicy, load_policy_folder

    loaded = load_policy_folder(source, device="cpu")
    torch.manual_seed(0)
    evolved = attrs.evolve(loaded.config, chunk_size=chunk, n_action_steps=chunk)
    folder = LoadedPolicy(build_policy(evolved), loaded.preprocessor, loaded.postprocessor).save(
        tmp / "checkpoint"
    )
    return folder, f"{source} re-built with chunk {chunk} (fresh weights)"


class SimArm:
    """A position-controlled arm: joints where last commanded; fixed uint8 camera frames."""

    def __init__(self, checkpoint: Path) -> None:
        config = json.loads((checkpoint / "config.json").read_text())
        inputs = config["input_features"]
        self.state = np.zeros(inputs["observation.state"]["shape"][0], np.float32)
        rng = np.random.default_rng(0)
        self.frames = {
            key: rng.integers(0, 256, (f["shape"][1], f["shape"][2], f["shape"][0]), np.uint8)
            for key, f in inputs.items()
            if f["type"] == "VISUAL"
        }

    def observe(self) -> dict[str, np.ndarray]:
        return {"observation.state": self.state.copy(), **self.frames}

    def command(self, action: np.ndarray) -> None:
        n = min(len(action), len(self.state))
        self.state[:n] = action[:n]


def policy_batch(arm: SimArm) -> dict[str, np.ndarray]:
    """The batch `PolicySource` hands a policy (images float32 channels-first)."""
    from rlctl.domain.env_observation import to_policy_observation

    return to_policy_observation({k: v[None] for k, v in arm.observe().items()})


# --- servers ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(log: Path, pattern: str, process: subprocess.Popen[bytes]) -> str:
    end = time.monotonic() + 180
    while time.monotonic() < end:
        found = re.findall(pattern, log.read_text(errors="replace"))
        if found:
            return str(found[-1])
        if process.poll() is not None:
            raise SystemExit(log.read_text(errors="replace"))
        time.sleep(0.05)
    raise SystemExit(f"the server did not start; its log: {log}")


def start_rlctl_server(folder: Path, tmp: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    log = tmp / "rlctl_server.log"
    process = subprocess.Popen(
        [
            *(sys.executable, "-c", "from rlctl.entrypoints.cli.main import main; main()"),
            *("policy", "serve", f"--policy.path={folder}", "--port=0", "--progress=silent"),
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    return process, wait_for(log, r"serving \S+ on (\S+:\d+)", process), log


def start_lerobot_server(
    python: str, hz: float, tmp: Path
) -> tuple[subprocess.Popen[bytes], str, Path]:
    port = free_port()
    folder = tmp / "lerobot_server"  # its logs/ folder lands here
    folder.mkdir(exist_ok=True)
    log = folder / "server.log"
    process = subprocess.Popen(
        [
            *(python, "-m", "lerobot.async_inference.policy_server"),
            *("--host=127.0.0.1", f"--port={port}", f"--fps={round(hz)}"),
            *("--inference_latency=0", "--obs_queue_timeout=2"),
        ],
        cwd=folder,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    wait_for(log, r"PolicyServer started on", process)
    return process, f"127.0.0.1:{port}", log


def lerobot_inference_s(log: Path) -> dict[int, float]:
    """Its server's own measure per observation: `_predict_action_chunk`'s "Total time"."""
    found = re.findall(r"Observation (\d+) \| Total time: ([\d.]+)ms", log.read_text())
    return {int(step): float(ms) / 1e3 for step, ms in found}


def stop(process: subprocess.Popen[Any]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)) * 1e3, 3) if values else float("nan")


def run_lerobot(python: str, mode: str, *args: object, timeout: float) -> dict[str, Any]:
    out = subprocess.run(
        [python, str(LEROBOT_CLIENT), mode, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tempfile.gettempdir(),
    )
    if out.returncode != 0 or not out.stdout.strip():
        raise SystemExit(f"LeRobot's client failed:\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# --- 1. overhead ------------------------------------------------------------------------------


def overhead_rlctl(address: str, arm: SimArm, args: argparse.Namespace) -> dict[str, Any]:
    from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
    from rlctl.domain.remote_inference import ChunkRequest

    client = GrpcPolicyClient(address)
    period = 1.0 / args.hz
    for _ in range(5):
        client.predict(ChunkRequest(observation=policy_batch(arm), task=(TASK,)), timeout=60)
    trips, inference = [], []
    for i in range(args.requests):
        started = time.perf_counter()
        request = ChunkRequest(
            observation=policy_batch(arm), task=(TASK,), timestep=i, max_actions=args.chunk
        )
        t0 = time.perf_counter()
        reply = client.predict(request, timeout=60)
        trips.append(time.perf_counter() - t0)
        inference.append(reply.inference_s)
        time.sleep(max(0.0, period - (time.perf_counter() - started)))
    client.close()
    return overhead_figures("rlctl", trips, inference)


def overhead_lerobot(
    python: str, address: str, log: Path, folder: Path, args: argparse.Namespace
) -> dict[str, Any]:
    out = run_lerobot(
        python,
        "overhead",
        *(address, folder, args.chunk, args.hz, args.requests),
        timeout=args.requests * 2 + 300,
    )
    served = lerobot_inference_s(log)
    pairs = [(trip, served[int(k)]) for k, trip in out["round_trips_s"].items() if int(k) in served]
    return overhead_figures("lerobot", [t for t, _ in pairs], [i for _, i in pairs])


def overhead_figures(tool: str, trips: list[float], inference: list[float]) -> dict[str, Any]:
    over = [t - i for t, i in zip(trips, inference, strict=True)]
    return {
        "part": "overhead",
        "tool": tool,
        "requests": len(trips),
        "round_trip_ms": {"p50": pct(trips, 50), "p95": pct(trips, 95)},
        "inference_ms": {"p50": pct(inference, 50), "p95": pct(inference, 95)},
        "overhead_ms": {"p50": pct(over, 50), "p95": pct(over, 95), "goal": 5.0},
    }


# --- 2. a slow link ---------------------------------------------------------------------------


async def _relay(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float, jitter_s: float
) -> None:
    due: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def send() -> None:
        while True:
            at, data = await due.get()
            if not data:
                break
            await asyncio.sleep(max(0.0, at - loop.time()))
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(send())
    last = 0.0
    try:
        while data := await reader.read(1 << 16):
            # Each segment held delay +- jitter, never overtaking the one before (TCP keeps order).
            last = max(last, loop.time() + delay_s + random.uniform(-jitter_s, jitter_s))
            due.put_nowait((last, data))
    except OSError:
        pass
    due.put_nowait((0.0, b""))
    try:
        await sender
        writer.close()
    except OSError:
        pass


async def _proxy(target: str, delay_s: float, jitter_s: float) -> None:
    host, port = target.rsplit(":", 1)

    async def connection(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(host, int(port))
        for w in (client_w, server_w):
            w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(
            _relay(client_r, server_w, delay_s, jitter_s),  # robot -> server: delayed
            _relay(server_r, client_w, 0.0, 0.0),
        )

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def start_proxy(target: str, args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--proxy", target, str(args.delay_ms), str(args.jitter_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, f"127.0.0.1:{int(process.stdout.readline())}"


def link_rlctl(address: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
    from rlctl.adapters.remote.remote_policy import RemotePolicy
    from rlctl.application.action_sources import PolicySource
    from rlctl.domain.remote_inference import RemotePolicySettings

    proxy, via = start_proxy(address, args)
    settings = RemotePolicySettings(
        server=via,
        chunk_size_threshold=args.threshold,
        actions_per_chunk=args.chunk,
        aggregate="weighted_average",
    )
    arm = SimArm(folder)
    policy = RemotePolicy(GrpcPolicyClient(via), settings)
    source = PolicySource(policy, list(arm.observe()))
    period = 1.0 / args.hz
    arm.command(source(arm.observe(), TASK))  # the first chunk: the robot waits for it
    ticks = int(args.loop_s * args.hz)
    starts: list[float] = []
    next_at = time.perf_counter()
    for _ in range(ticks):
        now = time.perf_counter()
        if next_at > now:
            time.sleep(next_at - now)
        starts.append(time.perf_counter())
        arm.command(source(arm.observe(), TASK))
        next_at += period
    policy.close()
    stop(proxy)
    return link_figures(
        "rlctl",
        args,
        ticks=ticks,
        held=policy.held_ticks,
        periods=list(np.diff(starts)),
        trips=policy.round_trips_s[1:],
        extra={"stalls": policy.stalls, "chunks": policy.chunks_received},
    )


def link_lerobot(
    python: str, address: str, folder: Path, args: argparse.Namespace
) -> dict[str, Any]:
    proxy, via = start_proxy(address, args)
    try:
        out = run_lerobot(
            python,
            "link",
            *(via, folder, args.chunk, args.hz, args.loop_s, args.threshold),
            timeout=args.loop_s + 300,
        )
    finally:
        stop(proxy)
    return link_figures(
        "lerobot",
        args,
        ticks=out["ticks"],
        held=out["ticks_without_fresh_action"],
        periods=out["periods_s"],
        trips=out["round_trips_s"],
        extra={"observations_sent": out["observations_sent"], "chunks": out["chunks"]},
    )


def link_figures(
    tool: str,
    args: argparse.Namespace,
    *,
    ticks: int,
    held: int,
    periods: list[float],
    trips: list[float],
    extra: dict[str, Any],
) -> dict[str, Any]:
    return {
        "part": "delayed link",
        "tool": tool,
        "added_ms": f"{args.delay_ms} +- {args.jitter_ms} (robot -> server)",
        "chunk": args.chunk,
        "threshold": args.threshold,
        "ticks": ticks,
        # Ticks the loop should have run in the time it ran: a loop that blocks misses some.
        "ticks_due": round(sum(periods) * args.hz) + 1,
        "ticks_without_fresh_action": held,
        **extra,
        "round_trip_ms": {"p50": pct(trips, 50), "p95": pct(trips, 95), "max": pct(trips, 100)},
        "period_ms": {
            "target": round(1e3 / args.hz, 3),
            "p50": pct(periods, 50),
            "p95": pct(periods, 95),
            "max": pct(periods, 100),
        },
    }


# --- 3. throughput ----------------------------------------------------------------------------


def hammer(address: str, folder: Path, seconds: float) -> int:
    """One rlctl robot (its own process): observations back to back once told to go."""
    from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
    from rlctl.domain.remote_inference import ChunkRequest

    client = GrpcPolicyClient(address)
    arm = SimArm(folder)
    client.predict(ChunkRequest(observation=policy_batch(arm), task=(TASK,)), timeout=60)
    print("ready", flush=True)
    start = float(sys.stdin.readline())
    time.sleep(max(0.0, start - time.time()))
    done = 0
    while time.time() < start + seconds:
        client.predict(ChunkRequest(observation=policy_batch(arm), task=(TASK,)), timeout=60)
        done += 1
    return done


def throughput(
    tool: str, address: str, folder: Path, clients: int, args: argparse.Namespace
) -> dict[str, Any]:
    if tool == "rlctl":
        command = [sys.executable, __file__, "--hammer", address, str(folder)]
    else:
        command = [args.lerobot_python, str(LEROBOT_CLIENT), "hammer", address, str(folder)]
        command += [str(args.chunk)]
    procs = [
        subprocess.Popen(
            [*command, str(args.throughput_s), *([str(i)] if tool == "lerobot" else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=tempfile.gettempdir(),
        )
        for i in range(clients)
    ]
    for p in procs:  # every robot imported, connected and warmed up
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"a {tool} robot failed to start")
    start = time.time() + 1.0
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(f"{start}\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=args.throughput_s + 300)[0] for p in procs]
    results = [json.loads(out.strip().splitlines()[-1]) for out in outs]
    counts = [r["chunks"] for r in results]
    figures: dict[str, Any] = {
        "part": "throughput",
        "tool": tool,
        "clients": clients,
        "observations_per_s": round(sum(counts) / args.throughput_s, 1),
        "per_client": [round(c / args.throughput_s, 1) for c in counts],
    }
    if tool == "lerobot":
        figures["foreign_chunks"] = sum(r["foreign_chunks"] for r in results)
    return figures


# --- the table --------------------------------------------------------------------------------


def table(results: list[dict[str, Any]], tools: list[str]) -> str:
    def get(part: str, tool: str, clients: int | None = None) -> dict[str, Any] | None:
        for r in results:
            if r["part"] == part and r["tool"] == tool and r.get("clients") == clients:
                return r
        return None

    rows: list[tuple[str, list[str]]] = []

    def row(label: str, part: str, show: Any, clients: int | None = None) -> None:
        cells = []
        for tool in tools:
            r = get(part, tool, clients)
            cells.append(show(r) if r else "-")
        if any(c != "-" for c in cells):
            rows.append((label, cells))

    row(
        "overhead above inference, p50 / p95 ms (goal p95 <= 5)",
        "overhead",
        lambda r: f"{r['overhead_ms']['p50']} / {r['overhead_ms']['p95']}",
    )
    row("  policy inference p50 ms", "overhead", lambda r: f"{r['inference_ms']['p50']}")
    row(
        "delayed link: ticks without a fresh action (goal 0)",
        "delayed link",
        lambda r: f"{r['ticks_without_fresh_action']} of {r['ticks']}",
    )
    row(
        "  ticks run / ticks due at the target rate",
        "delayed link",
        lambda r: f"{r['ticks']} / {r['ticks_due']}",
    )
    row(
        "  loop period p50 / p95 / max ms (target, goal p95 within 1)",
        "delayed link",
        lambda r: (
            f"{r['period_ms']['p50']} / {r['period_ms']['p95']} / {r['period_ms']['max']}"
            f" ({r['period_ms']['target']})"
        ),
    )
    row(
        "  round trip p50 / p95 ms",
        "delayed link",
        lambda r: f"{r['round_trip_ms']['p50']} / {r['round_trip_ms']['p95']}",
    )
    for n in sorted({r["clients"] for r in results if r["part"] == "throughput"}):
        row(
            f"throughput, observations/s, {n} robot{'s' if n > 1 else ''}",
            "throughput",
            lambda r: (
                f"{r['observations_per_s']}"
                + (f" ({r['foreign_chunks']} foreign)" if r.get("foreign_chunks") else "")
            ),
            clients=n,
        )
    width = max(len(label) for label, _ in rows)
    cols = [max(len(t), *(len(c[i]) for _, c in rows)) for i, t in enumerate(tools)]
    lines = [
        " | ".join([" " * width, *(t.ljust(w) for t, w in zip(tools, cols, strict=True))]),
        "-+-".join(["-" * width, *("-" * w for w in cols)]),
    ]
    for label, cells in rows:
        lines.append(
            " | ".join(
                [label.ljust(width), *(c.ljust(w) for c, w in zip(cells, cols, strict=True))]
            )
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=ACT_TINY if ACT_TINY.is_dir() else None,
        help="an ACT pretrained_model folder (default: LeRobot's act_tiny fixture, when present)",
    )
    parser.add_argument("--lerobot-python", default=os.environ.get("RLCTL_LEROBOT_PYTHON"))
    parser.add_argument("--tools", default="rlctl,lerobot")
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--hz", type=float, default=30.0)
    parser.add_argument("--loop-s", type=float, default=20.0)
    parser.add_argument("--delay-ms", type=float, default=100.0)
    parser.add_argument("--jitter-ms", type=float, default=30.0)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--throughput-s", type=float, default=10.0)
    parser.add_argument("--clients", default="1,2,4")
    parser.add_argument("--parts", default="overhead,link,throughput")
    parser.add_argument("--hammer", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--proxy", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.proxy:
        target, delay_ms, jitter_ms = args.proxy
        asyncio.run(_proxy(target, float(delay_ms) / 1e3, float(jitter_ms) / 1e3))
        return
    if args.hammer:
        address, folder, seconds = args.hammer
        print(json.dumps({"chunks": hammer(address, Path(folder), float(seconds))}))
        return
    if args.checkpoint is None:
        parser.error("--checkpoint FOLDER: an ACT checkpoint (pretrained_model folder) to serve")
    tools = args.tools.split(",")
    if "lerobot" in tools and not args.lerobot_python:
        print("no --lerobot-python (or RLCTL_LEROBOT_PYTHON): rlctl only", file=sys.stderr)
        tools = [t for t in tools if t != "lerobot"]
    parts = args.parts.split(",")
    results: list[dict[str, Any]] = []

    def report(figures: dict[str, Any]) -> None:
        results.append(figures)
        print(json.dumps(figures), flush=True)

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        folder, what = prepare_checkpoint(args.checkpoint.expanduser(), args.chunk, tmp)
        print(json.dumps({"checkpoint": what}), flush=True)
        for tool in tools:
            if tool == "rlctl":
                server, address, log = start_rlctl_server(folder, tmp)
            else:
                server, address, log = start_lerobot_server(args.lerobot_python, args.hz, tmp)
            try:
                if "overhead" in parts:
                    if tool == "rlctl":
                        report(overhead_rlctl(address, SimArm(folder), args))
                    else:
                        report(overhead_lerobot(args.lerobot_python, address, log, folder, args))
                if "link" in parts:
                    if tool == "rlctl":
                        report(link_rlctl(address, folder, args))
                    else:
                        report(link_lerobot(args.lerobot_python, address, folder, args))
                if "throughput" in parts:
                    for n in (int(c) for c in args.clients.split(",")):
                        report(throughput(tool, address, folder, n, args))
            finally:
                stop(server)
    print()
    print(table(results, tools))


if __name__ == "__main__":
    main()
