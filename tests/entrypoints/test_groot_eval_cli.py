"""A tiny GR00T N1.7 (tiny_groot.py) evaluated as a user types it: on Meta-World with real-time
chunking, on LIBERO (its libero_sim embodiment and gripper convention), and served by
`rlctl policy serve` to a client on loopback."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

pytest.importorskip("transformers", reason="GR00T needs the smolvla extra")

from rlctl.adapters.policies.loaded_policy import create_policy
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.groot import GrootConfig
from rlctl.entrypoints.cli.main import cli

TINY_GROOT = Path(__file__).parents[1] / "adapters" / "policies" / "tiny_groot.py"
SIZE = 32


def groot_checkpoint(
    folder: Path, tiny: Path, cameras: list[str], state: int, action: int, **settings: object
) -> Path:
    torch.manual_seed(0)
    config = GrootConfig(
        input_features={
            "observation.state": typed_feature("STATE", (state,)),
            **{key: typed_feature("VISUAL", (3, SIZE, SIZE)) for key in cameras},
        },
        output_features={"action": typed_feature("ACTION", (action,))},
        base_model_path=str(tiny / "base"),
        chunk_size=8,
        n_action_steps=4,
        max_state_dim=16,
        max_action_dim=16,
        use_bf16=False,
        device="cpu",
        **settings,  # type: ignore[arg-type]
    )
    stats = {
        "observation.state": {"min": -np.ones(state), "max": np.ones(state)},
        "action": {"min": -np.ones(action), "max": np.ones(action)},
    }
    return create_policy(config, stats).save(folder)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    folder: Path = runpy.run_path(str(TINY_GROOT))["write_tiny_groot"](tmp_path / "tiny")
    return folder


def evaluate(tmp_path: Path, *args: str) -> dict[str, object]:
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            *args,
            "--eval.n_episodes=1",
            "--eval.batch_size=1",
            "--eval.use_async_envs=false",
            "--eval.max_episodes_rendered=0",
            f"--output_dir={tmp_path / 'eval'}",
        ],
    )
    assert result.exit_code == 0, result.output
    info: dict[str, object] = json.loads((tmp_path / "eval" / "eval_info.json").read_text())
    return info


@pytest.mark.slow
def test_groot_evaluates_on_metaworld_with_real_time_chunking(tiny: Path, tmp_path: Path) -> None:
    pytest.importorskip("metaworld", reason="needs the metaworld extra")
    checkpoint = groot_checkpoint(tmp_path / "groot", tiny, ["observation.image"], 4, 4)
    info = evaluate(
        tmp_path,
        "--env.type=metaworld",
        "--env.task=reach-v3",
        f"--env.observation_height={SIZE}",
        f"--env.observation_width={SIZE}",
        "--env.episode_length=6",
        f"--policy.path={checkpoint}",
        "--policy.rtc_config.enabled=true",
        "--policy.rtc_config.execution_horizon=4",
        "--policy.rtc_inference_delay=1",
    )
    [episode] = info["per_episode"]  # type: ignore[misc]
    assert episode["length"] == 6


@pytest.mark.slow
def test_groot_evaluates_on_libero(tiny: Path, tmp_path: Path, monkeypatch) -> None:
    from rlctl.adapters.sim.envs import libero_setup

    if libero_setup.libero_root() is None or libero_setup.installed_assets() is None:
        pytest.skip("hf-libero or LIBERO's assets are not installed (uv sync --extra libero)")
    monkeypatch.delenv("DISPLAY", raising=False)
    cameras = ["observation.images.image", "observation.images.image2"]
    checkpoint = groot_checkpoint(
        tmp_path / "groot", tiny, cameras, 8, 7, embodiment_tag="libero_sim"
    )
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["action_decode_transform"] == "libero"
    info = evaluate(
        tmp_path,
        "--env.type=libero",
        "--env.task=libero_object",
        "--env.task_ids=[0]",
        f"--env.observation_height={SIZE}",
        f"--env.observation_width={SIZE}",
        "--eval.max_episode_steps=3",
        f"--policy.path={checkpoint}",
    )
    [episode] = info["per_episode"]  # type: ignore[misc]
    assert episode["length"] == 3


@pytest.mark.slow
def test_groot_is_served_to_a_client(tiny: Path, tmp_path: Path) -> None:
    from rlctl.adapters.remote.grpc_client import GrpcPolicyClient
    from rlctl.domain.remote_inference import ChunkRequest
    from tests.adapters.remote.server_process import ServerProcess, free_port, write_token

    token = "a-token-for-the-groot-serve-test-0123456789"
    checkpoint = groot_checkpoint(tmp_path / "groot", tiny, ["observation.images.top"], 5, 3)
    port = free_port()

    class ColdServer(ServerProcess):
        """A server process given time to import torch and transformers on a busy machine, and
        killed when it does not start in that time."""

        def _wait_ready(self, timeout: float = 300.0) -> str:
            try:
                return super()._wait_ready(timeout)
            except AssertionError:
                self.stop()
                raise

    server = ColdServer(
        tmp_path / "server.log",
        f"--policy.path={checkpoint}",
        f"--port={port}",
        f"--token-file={write_token(tmp_path / 'token', token)}",
    )
    try:
        client = GrpcPolicyClient(f"127.0.0.1:{port}", token=token)
        request = ChunkRequest(
            observation={
                "observation.state": np.zeros((1, 5), np.float32),
                "observation.images.top": np.full((1, 3, SIZE, SIZE), 0.5, np.float32),
            },
            task=("close the drawer",),
        )
        chunk = client.predict(request, timeout=120).actions
        client.close()
    finally:
        server.stop()
    assert chunk.shape == (1, 4, 3) and np.isfinite(chunk).all()


@pytest.mark.slow
def test_a_relative_groot_is_refused_by_eval_and_record_before_anything_starts(
    tiny: Path, tmp_path: Path
) -> None:
    """GR00T's relative actions decode a whole chunk at a time (LeRobot's select_action refuses
    them at the first tick): `rlctl eval` and `rlctl record`, which act one action per tick,
    refuse such a checkpoint when they load it, in one line naming the paths that act from
    whole chunks, before an episode (or a dataset) is started."""
    raw_groot = runpy.run_path(str(TINY_GROOT.parent / "raw_groot.py"))
    raw = raw_groot["write_raw_groot"](tiny, tmp_path / "raw")
    config = GrootConfig(
        input_features={
            "observation.state": typed_feature("STATE", (5,)),
            "observation.images.front": typed_feature("VISUAL", (3, SIZE, SIZE)),
        },
        output_features={"action": typed_feature("ACTION", (4,))},
        base_model_path=str(raw),
        embodiment_tag=raw_groot["TAG"],
        chunk_size=8,
        n_action_steps=8,
        max_state_dim=16,
        max_action_dim=16,
        use_bf16=False,
        device="cpu",
    )
    checkpoint = create_policy(config).save(tmp_path / "relative")
    assert create_policy(config).decodes_whole_chunks

    out = tmp_path / "eval"
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "--env.type=pusht",
            f"--policy.path={checkpoint}",
            "--eval.n_episodes=1",
            "--eval.batch_size=1",
            "--eval.max_episodes_rendered=0",
            f"--output_dir={out}",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "decoded a whole chunk at a time" in result.output
    assert "--policy.server=HOST:PORT" in result.output and "Traceback" not in result.output
    assert not out.exists()  # nor the settings of a run that never ran

    root = tmp_path / "recorded"
    result = CliRunner().invoke(
        cli,
        [
            "record",
            "--robot.type=scripted",
            "--robot.cameras={front: {type: synthetic, width: 32, height: 32}}",
            f"--policy.path={checkpoint}",
            f"--dataset.root={root}",
            "--dataset.repo_id=me/relative",
            "--dataset.single_task=close the drawer",
            "--dataset.num_episodes=1",
            "--dataset.episode_time_s=0.2",
            "--dataset.reset_time_s=0",
            "--controls=off",
            "--progress=silent",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "decoded a whole chunk at a time" in result.output
    assert "rlctl rollout --inference.type=async" in result.output
    assert not root.exists()
