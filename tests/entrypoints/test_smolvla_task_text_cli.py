"""The task text reaches SmolVLA's tokenizer end to end, as a user types the commands:
`rlctl eval` passes each env's own description (`task_description`), `rlctl record
--policy.path` the recording's `--dataset.single_task`."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("transformers", reason="SmolVLA needs the smolvla extra")
pytest.importorskip("metaworld", reason="the test envs are Meta-World's")

from rlctl.adapters.policies.loaded_policy import create_policy
from rlctl.adapters.policies.vla import tokenizer
from rlctl.adapters.sim.envs.metaworld_env import task_table
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.smolvla import SmolVLAConfig
from rlctl.domain.processors.steps.task_text import task_texts
from rlctl.entrypoints.cli.main import cli

SIZE = 32  # the env's camera, small
TINY_SMOLVLM = Path(__file__).parents[1] / "adapters" / "policies" / "tiny_smolvlm.py"
TASKS = ("reach-v3", "push-v3")


def metaworld_smolvla(vlm: Path, folder: Path) -> Path:
    """A tiny SmolVLA over Meta-World's pixels_agent_pos observation, saved as a checkpoint."""
    config = SmolVLAConfig(
        input_features={
            "observation.image": typed_feature("VISUAL", (3, SIZE, SIZE)),
            "observation.state": typed_feature("STATE", (4,)),
        },
        output_features={"action": typed_feature("ACTION", (4,))},
        vlm_model_name=str(vlm),
        num_vlm_layers=2,
        chunk_size=4,
        n_action_steps=4,
        num_steps=2,
        max_state_dim=8,
        max_action_dim=8,
        resize_imgs_with_padding=(SIZE, SIZE),
        tokenizer_max_length=24,
        device="cpu",
    )
    stats = {
        "observation.state": {"mean": np.zeros(4), "std": np.ones(4)},
        "action": {"mean": np.zeros(4), "std": np.full(4, 0.1)},
    }
    return create_policy(config, stats).save(folder)


@pytest.fixture
def heard(monkeypatch) -> list[list[str]]:
    """Every batch of task texts SmolVLA's tokenizer step is given."""
    texts: list[list[str]] = []
    original = tokenizer.TokenizerStep.__call__

    def spy(self, transition):
        texts.append(list(task_texts(transition.complementary_data.get("task")) or []))
        return original(self, transition)

    monkeypatch.setattr(tokenizer.TokenizerStep, "__call__", spy)
    return texts


@pytest.mark.slow
def test_eval_and_record_give_smolvla_the_task_text(heard, tmp_path):
    vlm = runpy.run_path(str(TINY_SMOLVLM))["write_tiny_smolvlm"](tmp_path / "vlm")
    checkpoint = metaworld_smolvla(vlm, tmp_path / "pretrained_model")
    env = [
        "--env.type=metaworld",
        f"--env.observation_height={SIZE}",
        f"--env.observation_width={SIZE}",
        "--env.episode_length=4",
    ]
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            *env,
            f"--env.task={','.join(TASKS)}",
            f"--policy.path={checkpoint}",
            "--eval.n_episodes=1",
            "--eval.batch_size=1",
            "--eval.use_async_envs=false",
            "--eval.max_episodes_rendered=0",
            f"--output_dir={tmp_path / 'eval'}",
        ],
    )
    assert result.exit_code == 0, result.output
    descriptions = [task_table()["tasks"][task]["description"] for task in TASKS]
    assert all(descriptions) and descriptions[0] != descriptions[1]
    # One chunk per 4 steps, per task; each task's description ends with the newline
    # SmolVLA's prompt adds.
    assert [texts for texts in heard] == [[f"{descriptions[0]}\n"], [f"{descriptions[1]}\n"]]

    heard.clear()
    result = CliRunner().invoke(
        cli,
        [
            "record",
            "--robot.type=sim",
            *(arg.replace("--env.", "--robot.env.") for arg in env),
            "--robot.env.task=reach-v3",
            # The sim robot's default env records states only; SmolVLA needs the camera.
            "--robot.env.obs_type=pixels_agent_pos",
            f"--policy.path={checkpoint}",
            "--dataset.single_task=wave at the camera",
            f"--dataset.root={tmp_path / 'recorded'}",
            "--dataset.num_episodes=1",
            "--dataset.fps=10",
            "--dataset.episode_time_s=5",
            "--dataset.reset_time_s=0",
            "--controls=off",
            "--progress=silent",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert heard and all(texts == ["wave at the camera\n"] for texts in heard)
