"""Training and acting on a CUDA GPU, as users run them there: the same losses as the CPU for the
same seeds (within TF32's rounding), FSDP and DDP through NCCL with bf16 mixed precision, a
sharded checkpoint resumed, the exported `pretrained_model` loaded on the CPU, flow-matching
chunks equal on both devices for the same noise, and bfloat16 kept where the GPU computes it.

These need a GPU and skip without one; `benchmarks/gpu_check.sh` runs them on a lent machine.
"""

from __future__ import annotations

import json
import os
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
from rlctl.domain.features import typed_feature
from rlctl.domain.policies.pi0 import PI0Config
from rlctl.entrypoints.cli.main import cli

# RLCTL_GPU_TESTS_DEVICE=cpu runs the same checks on the CPU (gloo), to try them without a GPU.
DEVICE = os.environ.get("RLCTL_GPU_TESTS_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(
    DEVICE == "cuda" and not torch.cuda.is_available(),
    reason="needs a CUDA GPU (benchmarks/gpu_check.sh runs these)",
)

POLICIES = Path(__file__).parents[1] / "adapters" / "policies"
VLM = (
    "custom:width=32,depth=1,mlp_dim=64,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=320,"
    "vision_width=32,vision_depth=1,vision_mlp_dim=64,vision_heads=2,patch_size=14"
)
EXPERT = "custom:width=16,depth=1,mlp_dim=32,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=320"


def losses(out: Path) -> list[float]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines if "loss" in json.loads(line)]


def train(*args: str) -> None:
    result = CliRunner().invoke(cli, ["train", *args])
    assert result.exit_code == 0, result.output


@pytest.fixture
def tiny_paligemma_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PaliGemma's tokenizer name read from a tiny local folder, as if from the Hub cache."""
    from rlctl.adapters.policies.vla import tokenizer

    folder: Path = runpy.run_path(str(POLICIES / "tiny_paligemma_tokenizer.py"))[
        "write_tiny_paligemma_tokenizer"
    ](tmp_path / "tokenizer")
    load = tokenizer.load_tokenizer

    def local(name: str) -> object:
        return load(str(folder) if name == tokenizer.PALIGEMMA_TOKENIZER else name)

    monkeypatch.setattr(tokenizer, "load_tokenizer", local)
    return folder


def one_process_world(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    """What `torchrun --nproc-per-node=1` puts in the environment."""
    for key, value in {
        "WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
    }.items():  # fmt: skip
        monkeypatch.setenv(key, value)


@pytest.mark.parametrize(
    "policy",
    [
        ["--policy.type=mlp", "--policy.hidden_dims=[64,64]", "--policy.dropout=0.0"],
        [
            "--policy.type=act",
            "--policy.dim_model=32",
            "--policy.n_heads=2",
            "--policy.dim_feedforward=64",
            "--policy.n_encoder_layers=1",
            "--policy.n_decoder_layers=1",
            "--policy.use_vae=false",
            "--policy.dropout=0.0",
            "--policy.pretrained_backbone_weights=null",
        ],
    ],
    ids=["mlp", "act"],
)
def test_a_run_on_the_gpu_gives_the_cpu_losses(policy, fixtures_dir, tmp_path):
    common = [
        f"--dataset.root={fixtures_dir / 'sim_images'}", "--steps=6", "--batch_size=4",
        "--num_workers=0", "--log_freq=1", "--save_freq=6", "--seed=3", "--policy.chunk_size=2",
        "--policy.n_action_steps=2", *policy,
    ]  # fmt: skip
    train(*common, "--policy.device=cpu", f"--output_dir={tmp_path / 'cpu'}")
    train(*common, f"--policy.device={DEVICE}", f"--output_dir={tmp_path / 'gpu'}")
    cpu, gpu = losses(tmp_path / "cpu"), losses(tmp_path / "gpu")
    assert len(cpu) == len(gpu) == 6
    # TF32 matmuls on the GPU (as lerobot-train) round to ~1e-3.
    np.testing.assert_allclose(gpu, cpu, rtol=2e-2, atol=1e-4)


@pytest.mark.parametrize("strategy", ["fsdp", "ddp"])
def test_pi0_trains_on_one_gpu_with_nccl_and_bf16_then_resumes_and_loads_on_the_cpu(
    strategy, fixtures_dir, tiny_paligemma_tokenizer, tmp_path, monkeypatch
):
    one_process_world(monkeypatch, 29611 if strategy == "fsdp" else 29612)
    out = tmp_path / "run"
    common = [
        f"--dataset.root={fixtures_dir / 'sim_images'}", "--batch_size=2", "--num_workers=0",
        "--log_freq=1", "--save_freq=2", f"--distributed.strategy={strategy}",
        "--use_amp=true",
    ]  # fmt: skip
    train(
        "--policy.type=pi0", f"--policy.paligemma_variant={VLM}",
        f"--policy.action_expert_variant={EXPERT}", "--policy.chunk_size=4",
        "--policy.n_action_steps=4", "--policy.num_inference_steps=2",
        "--policy.image_resolution=[28,28]", "--policy.tokenizer_max_length=24",
        f"--policy.device={DEVICE}", "--steps=4", f"--output_dir={out}", *common,
    )  # fmt: skip
    first = losses(out)
    assert len(first) == 4 and all(np.isfinite(first))
    train(f"--resume={out}", "--steps=6", *common)
    assert len(losses(out)) >= 6 and all(np.isfinite(losses(out)))
    exported = out / "checkpoints" / "last" / "pretrained_model"
    policy = load_policy_folder(exported, device="cpu")
    observation = {
        "observation.state": np.zeros((1, 6), np.float32),
        "observation.images.front": np.full((1, 3, 48, 64), 0.5, np.float32),
        "task": "push the t to the target",
    }
    chunk = policy.predict_chunk(observation).actions
    assert chunk.shape == (1, 4, 6) and np.isfinite(np.asarray(chunk)).all()


def tiny_pi0() -> PI0Config:
    return PI0Config(
        input_features={
            "observation.state": typed_feature("STATE", (6,)),
            "observation.images.top": typed_feature("VISUAL", (3, 56, 56)),
        },
        output_features={"action": typed_feature("ACTION", (6,))},
        paligemma_variant=VLM,
        action_expert_variant=EXPERT,
        chunk_size=8,
        n_action_steps=8,
        max_state_dim=8,
        max_action_dim=8,
        image_resolution=(56, 56),
        tokenizer_max_length=16,
        num_inference_steps=4,
    )


def test_a_pi0_chunk_on_the_gpu_is_the_cpu_chunk_for_the_same_noise(tiny_paligemma_tokenizer):
    stats = {
        "observation.state": {"mean": np.zeros(6), "std": np.ones(6)},
        "action": {"mean": np.zeros(6), "std": np.ones(6)},
    }
    torch.manual_seed(0)
    cpu = create_policy(tiny_pi0(), stats, device="cpu")
    with torch.no_grad():
        for param in cpu.model.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    gpu = create_policy(tiny_pi0(), stats, device=DEVICE)
    gpu.model.load_state_dict(cpu.model.state_dict())
    rng = np.random.default_rng(0)
    observation = {
        "observation.state": rng.normal(size=(1, 6)).astype(np.float32),
        "observation.images.top": rng.uniform(size=(1, 3, 56, 56)).astype(np.float32),
        "task": "pick up the cube",
    }
    noise = rng.normal(size=(1, 8, 8)).astype(np.float32)
    on_cpu = np.asarray(cpu.predict_chunk(observation, noise=noise).actions)
    on_gpu = np.asarray(gpu.predict_chunk(observation, noise=noise).actions)
    np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-2, atol=2e-3)


def test_bfloat16_is_kept_where_the_gpu_computes_it():
    from rlctl.adapters.policies.vla import compute_dtype

    if DEVICE != "cuda":
        pytest.skip("a GPU's own bfloat16")
    native = compute_dtype.native_bfloat16(torch.device("cuda"))
    assert native == (torch.cuda.get_device_capability() >= (8, 0))
