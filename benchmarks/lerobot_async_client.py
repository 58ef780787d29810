"""LeRobot 0.6.1's `RobotClient` on a simulated arm, for `remote_inference.py` (LeRobot's venv).

The client is LeRobot's own class (`lerobot.async_inference.robot_client.RobotClient`): its
handshake (`Ready`, `SendPolicyInstructions` with the pickled `RemotePolicyConfig`), its pickled
`TimedObservation`s sent by `SendObservations`, its receiver thread long-polling `GetActions`, its
chunk aggregation and its `chunk_size_threshold` test, and its control loop. Only the robot is
simulated: LeRobot 0.6.1 has no simulated robot outside its tests, so `SimArm` is a
position-controlled arm whose joints are where they were last commanded, with cameras giving a
fixed uint8 frame. A subclass only records what the loop does (`actions_available` is called once
at the start of every tick), never changes it.

Modes (one JSON line on stdout each):
    overhead ADDRESS CHECKPOINT CHUNK HZ REQUESTS      observations one at a time, at HZ
    link ADDRESS CHECKPOINT CHUNK HZ SECONDS THRESHOLD  RobotClient.control_loop as LeRobot runs it
    hammer ADDRESS CHECKPOINT CHUNK SECONDS ID          observations back to back when told
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import lerobot.async_inference.robot_client as robot_client
import numpy as np
from lerobot.async_inference.configs import RobotClientConfig
from lerobot.async_inference.helpers import TimedObservation
from lerobot.robots.config import RobotConfig
from lerobot.robots.robot import Robot


@RobotConfig.register_subclass("benchmark_sim_arm")
@dataclass
class SimArmConfig(RobotConfig):
    checkpoint: str = ""


class SimArm(Robot):
    """A position-controlled arm: joints at the last commanded positions; fixed camera frames."""

    config_class = SimArmConfig
    name = "benchmark_sim_arm"

    def __init__(self, config: SimArmConfig) -> None:
        super().__init__(config)
        policy = json.loads((Path(config.checkpoint) / "config.json").read_text())
        inputs = policy["input_features"]
        state_dim = inputs["observation.state"]["shape"][0]
        action_dim = policy["output_features"]["action"]["shape"][0]
        self.joints = [f"joint{i}.pos" for i in range(state_dim)]
        self.motors = [f"joint{i}.pos" for i in range(action_dim)]
        rng = np.random.default_rng(0)
        self.frames = {
            key.removeprefix("observation.images."): rng.integers(
                0, 256, (spec["shape"][1], spec["shape"][2], spec["shape"][0]), dtype=np.uint8
            )
            for key, spec in inputs.items()
            if spec["type"] == "VISUAL"
        }
        self.position = dict.fromkeys(self.joints, 0.0)
        self.connected = False

    @property
    def observation_features(self) -> dict:
        return {**dict.fromkeys(self.joints, float), **{k: f.shape for k, f in self.frames.items()}}

    @property
    def action_features(self) -> dict:
        return dict.fromkeys(self.motors, float)

    @property
    def is_connected(self) -> bool:
        return self.connected

    def connect(self, calibrate: bool = True) -> None:
        self.connected = True

    @property
    def is_calibrated(self) -> bool:
        return True

    def calibrate(self) -> None:
        pass

    def configure(self) -> None:
        pass

    def get_observation(self) -> dict:
        return {**self.position, **self.frames}

    def send_action(self, action: dict) -> dict:
        for key, value in action.items():
            if key in self.position:
                self.position[key] = float(value)
        return action

    def disconnect(self) -> None:
        self.connected = False


# RobotClient builds its robot from LeRobot's list of types; this arm is not on it.
robot_client.make_robot_from_config = SimArm


class RecordingClient(robot_client.RobotClient):
    """RobotClient, recording when observations leave, chunks arrive and ticks start."""

    def __init__(self, config: RobotClientConfig) -> None:
        super().__init__(config)
        self.sent: dict[int, float] = {}
        self.received: list[tuple[int, float]] = []
        self.ticks: list[tuple[float, bool]] = []
        self.chunk_arrived = threading.Condition()

    def send_observation(self, obs: TimedObservation) -> bool:
        self.sent.setdefault(obs.get_timestep(), time.perf_counter())
        return super().send_observation(obs)

    def _aggregate_action_queues(self, incoming_actions, aggregate_fn=None):
        super()._aggregate_action_queues(incoming_actions, aggregate_fn)
        with self.chunk_arrived:
            if incoming_actions:
                self.received.append((incoming_actions[0].get_timestep(), time.perf_counter()))
            self.chunk_arrived.notify_all()

    def actions_available(self) -> bool:
        available = super().actions_available()
        self.ticks.append((time.perf_counter(), available))
        return available

    def wait_chunk(self, count: int, timeout: float) -> bool:
        with self.chunk_arrived:
            return self.chunk_arrived.wait_for(lambda: len(self.received) > count, timeout)


def make_client(address: str, checkpoint: str, chunk: int, hz: float, threshold: float = 0.5):
    config = RobotClientConfig(
        policy_type=json.loads((Path(checkpoint) / "config.json").read_text())["type"],
        pretrained_name_or_path=checkpoint,
        robot=SimArmConfig(checkpoint=checkpoint),
        actions_per_chunk=chunk,
        task="pick",
        server_address=address,
        policy_device="cpu",
        chunk_size_threshold=threshold,
        fps=round(hz),
        aggregate_fn_name="weighted_average",
    )
    client = RecordingClient(config)
    if not client.start():
        raise SystemExit(f"LeRobot's RobotClient could not connect to {address}")
    receiver = threading.Thread(target=client.receive_actions, daemon=True)
    receiver.start()
    return client, receiver


def ask(client: RecordingClient, timestep: int, timeout: float) -> bool:
    """One observation that must go through (as when the queue is empty); wait for a chunk."""
    raw = client.robot.get_observation()
    raw["task"] = client.config.task
    seen = len(client.received)
    obs = TimedObservation(timestamp=time.time(), observation=raw, timestep=timestep, must_go=True)
    client.send_observation(obs)
    return client.wait_chunk(seen, timeout)


def overhead(address: str, checkpoint: str, chunk: int, hz: float, requests: int) -> dict:
    client, _ = make_client(address, checkpoint, chunk, hz)
    client.start_barrier.wait()  # the receiver thread waits for the control loop's thread
    for i in range(5):
        ask(client, i, 60.0)
    period = 1.0 / hz
    trips: dict[int, float] = {}
    for i in range(requests):
        timestep = 1000 + i
        started = time.perf_counter()
        if ask(client, timestep, 30.0):
            step, at = client.received[-1]
            if step == timestep:
                trips[timestep] = at - client.sent[timestep]
        time.sleep(max(0.0, period - (time.perf_counter() - started)))
    client.shutdown_event.set()
    client.channel.close()
    return {"round_trips_s": trips}


def link(
    address: str, checkpoint: str, chunk: int, hz: float, seconds: float, threshold: float
) -> dict:
    client, receiver = make_client(address, checkpoint, chunk, hz, threshold)

    def stop_later() -> None:
        # Run `seconds` after the first action reached the arm (before it the robot waits).
        while not any(available for _, available in client.ticks):
            time.sleep(0.01)
        time.sleep(seconds)
        client.shutdown_event.set()

    threading.Thread(target=stop_later, daemon=True).start()
    client.control_loop(task="pick")
    first = next(i for i, (_, available) in enumerate(client.ticks) if available)
    ticks = client.ticks[first:]
    starts = [t for t, _ in ticks]
    trips = [at - client.sent[step] for step, at in client.received if step in client.sent]
    client.channel.close()
    receiver.join(timeout=5)
    return {
        "ticks": len(ticks),
        "ticks_without_fresh_action": sum(not available for _, available in ticks),
        "periods_s": list(np.diff(starts)),
        "round_trips_s": trips[1:],
        "observations_sent": len(client.sent),
        "chunks": len(client.received),
    }


def hammer(address: str, checkpoint: str, chunk: int, seconds: float, ident: int) -> dict:
    client, _ = make_client(address, checkpoint, chunk, 30.0)
    client.start_barrier.wait()
    base = (ident + 1) * 10_000_000  # this client's timesteps: another's chunk is told apart
    ask(client, base, 60.0)
    print("ready", flush=True)
    start = float(sys.stdin.readline())  # every robot connected and warmed up by then
    time.sleep(max(0.0, start - time.time()))
    received_before = len(client.received)
    i = 1
    while time.time() < start + seconds:
        ask(client, base + i * 1000, 5.0)
        i += 1
    answered = client.received[received_before:]
    client.shutdown_event.set()
    client.channel.close()
    return {
        "chunks": len(answered),
        "foreign_chunks": sum(not base <= step < base + 10_000_000 for step, _ in answered),
        "observations_sent": i - 1,
    }


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "overhead":
        out = overhead(args[0], args[1], int(args[2]), float(args[3]), int(args[4]))
    elif mode == "link":
        out = link(args[0], args[1], int(args[2]), float(args[3]), float(args[4]), float(args[5]))
    elif mode == "hammer":
        out = hammer(args[0], args[1], int(args[2]), float(args[3]), int(args[4]))
    else:
        raise SystemExit(__doc__)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
