"""docs/examples/embedding_service: rlctl's use cases behind a service's own container, no CLI."""

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from dependency_injector import providers

from rlctl.adapters.memory.dataset_store import InMemoryDatasetStore
from rlctl.adapters.memory.simulator import FakeSimulation
from rlctl.adapters.storage.lerobot_v3.meta_reader import LeRobotMetaReader
from rlctl.domain.errors import ConfigError, DatasetNotFound

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "embedding_service"
sys.path.insert(0, str(EXAMPLE))

import embedding_service  # noqa: E402


@pytest.fixture
def service():
    return embedding_service.EmbeddingService()


@pytest.fixture
def sim_video(fixtures_dir):
    return str(fixtures_dir / "sim_video")


@pytest.fixture
def server(service):
    server = embedding_service.make_server("127.0.0.1", 0, service)
    embedding_service.serve_in_background(server)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def call(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def fake_simulation(_env_config):
    # Seeds 1000, 1001, 1002: only 1002 is divisible by 3, the fake's rule for success.
    return FakeSimulation(renders=False)


def test_inspects_a_lerobot_dataset(service, sim_video):
    summary = service.inspect_dataset(sim_video)
    assert summary["total_episodes"] == 3 and summary["total_frames"] == 75
    assert summary["fps"] == 10 and summary["robot_type"] == "so101_follower"
    assert summary["video_keys"] == ["observation.images.front"]
    assert summary["tasks"] == ["pick the cube", "place the cube"]


def test_a_fake_meta_reader_swapped_in_serves_the_use_case(service, sim_video):
    store = InMemoryDatasetStore()
    store.add("mem://demo", LeRobotMetaReader().read_meta(sim_video), size_bytes=42)
    service.container.meta_reader.override(providers.Object(store))
    try:
        summary = service.inspect_dataset("mem://demo")
        assert summary["location"] == "mem://demo" and summary["size_bytes"] == 42
        assert summary["total_frames"] == 75
        with pytest.raises(DatasetNotFound):
            service.inspect_dataset(sim_video)  # the real reader is out of the loop
    finally:
        service.container.meta_reader.reset_override()
    assert service.inspect_dataset(sim_video)["size_bytes"] > 42


def test_evaluates_on_a_fake_simulation(service):
    service.container.simulation.override(providers.Callable(fake_simulation))
    info = service.evaluate({"env": {"type": "pusht"}, "eval": {"n_episodes": 3}})
    overall = info["overall"]
    assert overall["n_episodes"] == 3
    assert overall["pc_success"] == pytest.approx(100 / 3)
    assert [e["seed"] for e in info["per_episode"]] == [1000, 1001, 1002]
    assert overall["video_paths"] == []


def test_bad_requests_are_rlctl_config_errors(service):
    with pytest.raises(ConfigError, match="unknown env type 'nosuch"):
        service.evaluate({"env": {"type": "nosuch_env"}})
    with pytest.raises(ConfigError, match="n_episodes must be at least 1"):
        service.evaluate({"eval": {"n_episodes": 0}})


def test_http_routes(service, server, sim_video):
    assert call(f"{server}/health") == (200, {"status": "ok"})

    status, summary = call(f"{server}/datasets/info?location={sim_video}")
    assert status == 200 and summary["total_frames"] == 75

    status, error = call(f"{server}/datasets/info?location=/no/such/dataset")
    assert status == 404
    assert error["where"] == "/no/such/dataset" and "root folder" in error["hint"]

    service.container.simulation.override(providers.Callable(fake_simulation))
    status, info = call(f"{server}/evaluations", {"eval": {"n_episodes": 2}})
    assert status == 200 and info["overall"]["n_episodes"] == 2

    status, error = call(f"{server}/evaluations", {"env": {"type": "nosuch_env"}})
    assert status == 400 and "unknown env type" in error["error"]
    assert call(f"{server}/nowhere")[0] == 404


def test_evaluates_in_a_real_simulator(service):
    info = service.evaluate(
        {
            "env": {"type": "pusht", "obs_type": "environment_state_agent_pos"},
            "eval": {"n_episodes": 2, "batch_size": 2, "max_episode_steps": 10},
        }
    )
    assert info["overall"]["n_episodes"] == 2
    assert [e["length"] for e in info["per_episode"]] == [10, 10]


NO_CLI = """
import json, sys
sys.path.insert(0, {example!r})
import embedding_service
from dependency_injector import providers
from rlctl.adapters.memory.simulator import FakeSimulation

service = embedding_service.EmbeddingService()
service.inspect_dataset({dataset!r})
service.container.simulation.override(providers.Callable(lambda env: FakeSimulation()))
service.evaluate({{"eval": {{"n_episodes": 2}}}})
embedding_service.make_server("127.0.0.1", 0, service).server_close()
print(json.dumps(sorted(m for m in sys.modules if m == "click" or m.startswith(("click.",
    "rlctl.entrypoints", "rlctl.api")))))
"""


def test_the_service_never_imports_the_cli(sim_video):
    result = subprocess.run(
        [sys.executable, "-c", NO_CLI.format(example=str(EXAMPLE), dataset=sim_video)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_the_example_declares_its_dependencies_without_the_cli():
    import tomllib

    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    names = {
        dep.split("[")[0].split(">")[0].split("=")[0].strip() for dep in project["dependencies"]
    }
    assert {"rlctl-application", "rlctl-adapters", "dependency-injector"} <= names
    assert "rlctl" not in names and "click" not in names
