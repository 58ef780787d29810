"""Remote inference on loopback: what the wire costs, what a slow link does to the arm, and how
many observations one server answers.

A real `rlctl policy serve` process serves an ACT checkpoint: LeRobot's `act_tiny` fixture
(ResNet-18 backbone, one 3x48x64 camera and a 6-joint state), re-built with a 50-step chunk
(`--chunk 50`; the fixture's processors and statistics, freshly initialised weights: the
figures are timings, not behaviour).

1. Overhead: synchronous `Predict` calls; the round trip measured by the client minus the
   inference time the server measured around `predict_chunk` (p50, p95). Goal: <= 5 ms.
2. A delaying proxy (a TCP relay on loopback that holds each client->server segment for
   `--delay-ms` +- `--jitter-ms`, uniform, order kept) between a `RemotePolicy` and the server;
   a control loop at `--hz` asks one action per tick for `--loop-s` seconds, chunk 50 and
   threshold 0.5: ticks without a fresh action (held; goal 0), the loop's period (p50, p95;
   goal: p95 within 1 ms of the target), the round trips.
3. Throughput: 1, 2 and 4 clients, each its own process (started as this script with
   `--hammer`) sending observations back to back for `--throughput-s` seconds: observations per
   second the server answered.

One JSON line per part. LeRobot's async inference is not run here (see the guide's figures for
what was and was not compared).

Usage:
    python benchmarks/remote_inference.py [--chunk 50 --hz 30 --loop-s 20 --delay-ms 100
        --jitter-ms 30 --threshold 0.5 --requests 100 --throughput-s 10]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ACT_TINY = REPO.parent / "shared" / "fixtures" / "lerobot-0.6.1" / "act_tiny"


def act_checkpoint(folder: Path, chunk: int) -> Path:
    import attrs
    import torch

    from rlctl.adapters.policies.base import build_policy
    from rlctl.adapters.policies.loaded_policy import LoadedPolicy, load_policy_folder

    tiny = load_policy_folder(ACT_TINY, device="cpu")
    torch.manual_seed(0)
    config = attrs.evolve(tiny.config, chunk_size=chunk, n_action_steps=chunk)
    return LoadedPolicy(build_policy(config), tiny.preprocessor, tiny.postprocessor).save(folder)


def observation() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "observation.state": rng.normal(size=(1, 6)).astype(np.float32),
        "observation.images.front": rng.random((1, 3, 48, 64), dtype=np.float32),
    }


def start_server(folder: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    out = log.open("w")
    process = subprocess.Popen(
        [
            *(sys.executable, "-c", "from rlctl.entrypoints.cli.main import main; main()"),
            *("policy", "serve", f"--policy.path={folder}", "--port=0", "--progress=silent"),
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    end = time.monotonic() + 120
    while time.monotonic() < end:
        found = re.findall(r"serving \S+ on (\S+:\d+)", log.read_text())
        if found:
            return process, found[-1]
        if process.poll() is not None:
            raise SystemExit(log.read_text())
        time.sleep(0.05)
    raise SystemExit("the server did not start")


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)) * 1e3, 3) if values else float("nan")


# --- 1. overhead ---------------------------------------------------------------------------


def overhead(address: str, requests: int) -> dict[str, object]:
    from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
    from rlctl.domain.remote_inference import ChunkRequest

    client = GrpcPolicyClient(address)
    request = ChunkRequest(observation=observation(), task=("pick",))
    for _ in range(5):
        client.predict(request, timeout=30)
    trips, inference = [], []
    for _ in range(requests):
        t0 = time.perf_counter()
        reply = client.predict(request, timeout=30)
        trips.append(time.perf_counter() - t0)
        inference.append(reply.inference_s)
    over = [t - i for t, i in zip(trips, inference, strict=True)]
    client.close()
    return {
        "part": "overhead",
        "requests": requests,
        "round_trip_ms": {"p50": pct(trips, 50), "p95": pct(trips, 95)},
        "inference_ms": {"p50": pct(inference, 50), "p95": pct(inference, 95)},
        "overhead_ms": {"p50": pct(over, 50), "p95": pct(over, 95), "goal": 5.0},
    }


# --- 2. a slow link ------------------------------------------------------------------------


class DelayingProxy:
    """A TCP relay: client->server bytes are held `delay +- jitter` seconds, in order."""

    def __init__(self, target: str, delay_s: float, jitter_s: float) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.delay_s, self.jitter_s = delay_s, jitter_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            upstream = socket.create_connection(self.target)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._relay, args=(client, upstream, True), daemon=True).start()
            threading.Thread(
                target=self._relay, args=(upstream, client, False), daemon=True
            ).start()

    def _relay(self, src: socket.socket, dst: socket.socket, delayed: bool) -> None:
        pending: deque[tuple[float, bytes]] = deque()
        last_due = 0.0
        try:
            while True:
                wait = max(0.0, pending[0][0] - time.monotonic()) if pending else None
                ready, _, _ = select.select([src], [], [], wait)
                if ready:
                    data = src.recv(1 << 16)
                    if not data:
                        return
                    if not delayed:
                        dst.sendall(data)
                        continue
                    jitter = random.uniform(-self.jitter_s, self.jitter_s)
                    last_due = max(last_due, time.monotonic() + self.delay_s + jitter)
                    pending.append((last_due, data))
                while pending and pending[0][0] <= time.monotonic():
                    dst.sendall(pending.popleft()[1])
        except OSError:
            return


def slow_link(address: str, args: argparse.Namespace) -> dict[str, object]:
    from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
    from rlctl.adapters.remote.remote_policy import RemotePolicy
    from rlctl.domain.remote_inference import RemotePolicySettings

    proxy = DelayingProxy(address, args.delay_ms / 1e3, args.jitter_ms / 1e3)
    settings = RemotePolicySettings(
        server=proxy.address,
        chunk_size_threshold=args.threshold,
        actions_per_chunk=args.chunk,
        aggregate="weighted_average",
    )
    policy = RemotePolicy(GrpcPolicyClient(proxy.address), settings)
    obs = {**observation(), "task": ["pick"]}
    period = 1.0 / args.hz
    policy.select_action(obs)  # the first chunk: the robot waits for it before moving
    ticks = int(args.loop_s * args.hz)
    starts: list[float] = []
    next_at = time.perf_counter()
    for _ in range(ticks):
        now = time.perf_counter()
        if next_at > now:
            time.sleep(next_at - now)
        starts.append(time.perf_counter())
        policy.select_action(obs)
        next_at += period
    periods = list(np.diff(starts))
    trips = policy.round_trips_s[1:]
    policy.close()
    return {
        "part": "delayed link",
        "added_one_way_ms": f"{args.delay_ms} +- {args.jitter_ms}",
        "chunk": args.chunk,
        "threshold": args.threshold,
        "ticks": ticks,
        "ticks_without_fresh_action": policy.held_ticks,
        "stalls": policy.stalls,
        "chunks": policy.chunks_received,
        "round_trip_ms": {"p50": pct(trips, 50), "p95": pct(trips, 95), "max": pct(trips, 100)},
        "period_ms": {
            "target": round(period * 1e3, 3),
            "p50": pct(periods, 50),
            "p95": pct(periods, 95),
            "max": pct(periods, 100),
        },
    }


# --- 3. throughput -------------------------------------------------------------------------


def hammer(address: str, start: float, seconds: float) -> int:
    """One client (its own process): observations sent back to back from `start` on."""
    from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
    from rlctl.domain.remote_inference import ChunkRequest

    client = GrpcPolicyClient(address)
    request = ChunkRequest(observation=observation(), task=("pick",))
    client.predict(request, timeout=60)
    time.sleep(max(0.0, start - time.time()))
    done = 0
    while time.time() < start + seconds:
        client.predict(request, timeout=60)
        done += 1
    return done


def throughput(address: str, clients: int, seconds: float) -> dict[str, object]:
    start = time.time() + 10.0  # every client imported and warmed up by then
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--hammer", address, str(start), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(clients)
    ]
    counts = [int(p.communicate(timeout=seconds + 120)[0].split()[-1]) for p in procs]
    return {
        "part": "throughput",
        "clients": clients,
        "observations_per_s": round(sum(counts) / seconds, 1),
        "per_client": [round(c / seconds, 1) for c in counts],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--hz", type=float, default=30.0)
    parser.add_argument("--loop-s", type=float, default=20.0)
    parser.add_argument("--delay-ms", type=float, default=100.0)
    parser.add_argument("--jitter-ms", type=float, default=30.0)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--throughput-s", type=float, default=10.0)
    parser.add_argument("--clients", default="1,2,4")
    parser.add_argument("--parts", default="overhead,link,throughput")
    parser.add_argument("--hammer", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hammer:
        address, start, seconds = args.hammer
        print(hammer(address, float(start), float(seconds)))
        return

    with tempfile.TemporaryDirectory() as tmp:
        folder = act_checkpoint(Path(tmp) / "act", args.chunk)
        server, address = start_server(folder, Path(tmp) / "server.log")
        try:
            parts = args.parts.split(",")
            if "overhead" in parts:
                print(json.dumps(overhead(address, args.requests)), flush=True)
            if "link" in parts:
                print(json.dumps(slow_link(address, args)), flush=True)
            if "throughput" in parts:
                for n in (int(c) for c in args.clients.split(",")):
                    print(json.dumps(throughput(address, n, args.throughput_s)), flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
