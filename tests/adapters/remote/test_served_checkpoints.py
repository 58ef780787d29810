"""LeRobot checkpoints served: the chunk that crosses the wire is LeRobot's chunk, and a policy
that reads a history gets it stacked by the robot's side."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rlctl.adapters.memory.policy_server import InProcessPolicyConnector
from rlctl.adapters.policies.loaded_policy import load_policy_folder
from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
from rlctl.adapters.remote.grpc_server import GrpcPolicyServer
from rlctl.adapters.remote.remote_policy import RemotePolicy
from rlctl.application.use_cases.serve_policy import PolicyService
from rlctl.domain.remote_inference import ChunkReply, ChunkRequest, RemotePolicySettings


@pytest.fixture
def act_server(fixtures_dir: Path) -> Iterator[str]:
    service = PolicyService({"act": load_policy_folder(fixtures_dir / "act_tiny", device="cpu")})
    server = GrpcPolicyServer(port=0)
    ready = threading.Event()
    thread = threading.Thread(
        target=server.serve, args=(service,), kwargs={"on_ready": lambda _: ready.set()}
    )
    thread.start()
    assert ready.wait(30)
    yield f"127.0.0.1:{server.port}"
    server.stop()
    thread.join(10)


def test_act_chunks_over_grpc_match_lerobot(act_server: str, fixtures_dir: Path) -> None:
    reference = np.load(fixtures_dir / "act_tiny.reference.npz")
    policy = RemotePolicy(GrpcPolicyClient(act_server), RemotePolicySettings(server=act_server))
    assert policy.actions_per_chunk == 5
    frames = sorted({key.split("/")[0] for key in reference.files})
    for j in frames:
        batch = {
            key.split("/", 2)[2]: reference[key]
            for key in reference.files
            if key.startswith(f"{j}/input/")
        }
        chunk = policy.predict_chunk({**batch, "task": ["pick the cube"]})
        np.testing.assert_allclose(chunk.actions, reference[f"{j}/output/action_chunk"], atol=1e-4)
    policy.close()


class Recording(PolicyService):
    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.requests: list[ChunkRequest] = []

    def predict(self, request: ChunkRequest) -> ChunkReply:
        self.requests.append(request)
        return super().predict(request)


def test_a_history_is_stacked_by_the_robot(fixtures_dir: Path) -> None:
    service = Recording({"dp": load_policy_folder(fixtures_dir / "diffusion_tiny", device="cpu")})
    policy = InProcessPolicyConnector(service).connect(
        RemotePolicySettings(server="127.0.0.1:1"), realtime=False
    )
    assert policy.config.n_obs_steps == 2 and policy.actions_per_chunk == 4
    rng = np.random.default_rng(0)
    states = [rng.normal(size=(1, 6)).astype(np.float32) for _ in range(3)]
    image = rng.random((1, 3, 48, 64), dtype=np.float32)
    for state in states:
        action = policy.select_action(
            {"observation.state": state, "observation.images.front": image, "task": ["pick"]}
        )
        assert action.shape == (1, 6) and np.isfinite(action).all()
    end = time.monotonic() + 30
    while len(service.requests) < 2 and time.monotonic() < end:  # tick 2's ask is on its way
        time.sleep(0.01)
    # Tick 0 asked with its observation twice (the history filled, as LeRobot does); tick 2
    # (two of four actions left: the threshold) with ticks 1 and 2.
    first, second = (r.observation["observation.state"] for r in service.requests[:2])
    np.testing.assert_array_equal(first, np.stack([states[0], states[0]], axis=1))
    np.testing.assert_array_equal(second, np.stack([states[1], states[2]], axis=1))
    assert service.requests[1].timestep == 2
    assert service.requests[0].observation["observation.images.front"].shape == (1, 2, 3, 48, 64)
    policy.close()
