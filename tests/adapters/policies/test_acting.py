"""What the model sees tick by tick, through the loaded policy, as eval and record drive it.

For every trainable policy type: each chunk is predicted from the last `n_obs_steps`
observations (those training gave it), never from a history that skipped the ticks between
chunks; and a policy without a history reads an observation only when a new chunk is due
(that rule, on numpy, is property-tested in tests/domain/test_acting.py).
"""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from rlctl.adapters.policies.base import build_policy
from rlctl.adapters.policies.loaded_policy import LoadedPolicy
from rlctl.adapters.policies.processors import make_pre_post_processors
from rlctl.domain.acting import ObservationHistory, RealTimeChunks
from rlctl.domain.action_chunk import ActionChunk
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import (
    ACTConfig,
    DiffusionConfig,
    MLPConfig,
    PolicyConfig,
    SmolVLAConfig,
    known_policy_types,
)
from rlctl.domain.policies.gaussian_actor import GaussianActorConfig
from rlctl.domain.policies.groot import GrootConfig
from rlctl.domain.policies.multi_task_dit import MultiTaskDiTConfig
from rlctl.domain.policies.pi0 import PI0Config
from rlctl.domain.policies.pi0_fast import PI0FastConfig
from rlctl.domain.policies.pi05 import PI05Config
from rlctl.domain.policies.tdmpc import TDMPCConfig
from rlctl.domain.policies.vqbet import VQBeTConfig
from rlctl.domain.policies.xvla import XVLAConfig
from rlctl.domain.processors.arrays import concatenate, stack

TINY_XVLA = runpy.run_path(str(Path(__file__).with_name("tiny_xvla.py")))
STATE, ENV, ACTION_DIM = 3, 2, 2
INPUTS = {
    "observation.state": typed_feature("STATE", (STATE,)),
    "observation.environment_state": typed_feature("ENV", (ENV,)),
}
OUTPUTS = {"action": typed_feature("ACTION", (ACTION_DIM,))}
CAMERA = "observation.images.top"

# A tiny config of every built-in trainable type, reading a history where the type allows it
# (each is given the tiny SmolVLM folder; only SmolVLA reads it; π0 and π0.5 read the tiny
# PaliGemma tokenizer the `tiny_paligemma_tokenizer` fixture puts in place of the Hub's; the
# multi-task DiT is given the tiny CLIP folder instead; GR00T is given its tiny base model's
# folder, and packs the state as `state`).
PI_VLM = (
    "custom:width=32,depth=2,mlp_dim=64,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=320,"
    "vision_width=32,vision_depth=1,vision_mlp_dim=64,vision_heads=2,patch_size=14"
)
PI_EXPERT = (
    "custom:width=16,depth=2,mlp_dim=32,num_heads=8,num_kv_heads=1,head_dim=8,vocab_size=320"
)
PI_FIELDS = dict(
    input_features={**INPUTS, CAMERA: typed_feature("VISUAL", (3, 16, 16))},
    output_features=OUTPUTS,
    paligemma_variant=PI_VLM,
    action_expert_variant=PI_EXPERT,
    chunk_size=5,
    n_action_steps=4,
    max_state_dim=8,
    max_action_dim=4,
    num_inference_steps=2,
    image_resolution=(28, 28),
    tokenizer_max_length=40,
)
TINY: dict[str, Callable[[Path], PolicyConfig]] = {
    "act": lambda vlm: ACTConfig(
        input_features=INPUTS, output_features=OUTPUTS, chunk_size=4, n_action_steps=4,
        dim_model=8, n_heads=2, dim_feedforward=16, n_encoder_layers=1, n_vae_encoder_layers=1,
        latent_dim=2, pretrained_backbone_weights=None,
    ),
    "diffusion": lambda vlm: DiffusionConfig(
        input_features=INPUTS, output_features=OUTPUTS, n_obs_steps=2, horizon=8,
        n_action_steps=4, down_dims=(8, 16), kernel_size=3, n_groups=4,
        diffusion_step_embed_dim=8, num_inference_steps=2, pretrained_backbone_weights=None,
    ),
    "mlp": lambda vlm: MLPConfig(
        input_features=INPUTS, output_features=OUTPUTS, n_obs_steps=2, chunk_size=5,
        n_action_steps=4, hidden_dims=(8,),
    ),
    "smolvla": lambda vlm: SmolVLAConfig(
        input_features={**INPUTS, CAMERA: typed_feature("VISUAL", (3, 16, 16))},
        output_features=OUTPUTS, vlm_model_name=str(vlm), num_vlm_layers=2, chunk_size=5,
        n_action_steps=4, num_steps=2, max_state_dim=4, max_action_dim=4,
        resize_imgs_with_padding=(32, 32),
    ),
    "pi0": lambda vlm: PI0Config(**PI_FIELDS),  # type: ignore[arg-type]
    "pi05": lambda vlm: PI05Config(**PI_FIELDS),  # type: ignore[arg-type]
    # Given the FAST tokenizer's folder; random weights write no "Action:", decoded anyway.
    "pi0_fast": lambda fast: PI0FastConfig(
        input_features=PI_FIELDS["input_features"], output_features=OUTPUTS,
        paligemma_variant=PI_VLM.replace("vocab_size=320", "vocab_size=1024"), chunk_size=5,
        n_action_steps=4, max_state_dim=8, max_action_dim=4, image_resolution=(28, 28),
        tokenizer_max_length=40, max_decoding_steps=6, action_tokenizer_name=str(fast),
        validate_action_token_prefix=False,
    ),
    "xvla": lambda tokenizer: XVLAConfig(
        input_features={**INPUTS, CAMERA: typed_feature("VISUAL", (3, 16, 16))},
        output_features=OUTPUTS, florence_config=TINY_XVLA["tiny_florence"](),
        tokenizer_name=str(tokenizer), tokenizer_max_length=8, hidden_size=16, depth=1,
        num_heads=2, num_domains=2, len_soft_prompts=2, max_len_seq=64, chunk_size=5,
        n_action_steps=4, num_denoising_steps=2, action_mode="auto", max_action_dim=4,
    ),
    "multi_task_dit": lambda clip: MultiTaskDiTConfig(
        input_features={**INPUTS, CAMERA: typed_feature("VISUAL", (3, 16, 16))},
        output_features=OUTPUTS, vision_encoder_name=str(clip), text_encoder_name=str(clip),
        n_obs_steps=2, horizon=8, n_action_steps=4, hidden_dim=16, num_layers=1, num_heads=2,
        timestep_embed_dim=8, num_train_timesteps=4, num_inference_steps=2,
        image_resize_shape=(32, 32), image_crop_shape=None, tokenizer_max_length=8,
    ),
    "gaussian_actor": lambda vlm: GaussianActorConfig(
        input_features=INPUTS, output_features=OUTPUTS, latent_dim=8,
        actor_network_kwargs={"hidden_dims": [8]},
    ),
    "vqbet": lambda vlm: VQBeTConfig(
        input_features={"observation.state": INPUTS["observation.state"],
                        CAMERA: typed_feature("VISUAL", (3, 16, 16))},
        output_features=OUTPUTS, n_obs_steps=2, action_chunk_size=4, n_action_pred_token=3,
        pretrained_backbone_weights=None, crop_shape=None, spatial_softmax_num_keypoints=4,
        vqvae_n_embed=6, vqvae_embedding_dim=8, vqvae_enc_hidden_dim=8, gpt_block_size=24,
        gpt_input_dim=8, gpt_output_dim=8, gpt_n_layer=1, gpt_n_head=2, gpt_hidden_dim=8,
    ),
    "tdmpc": lambda vlm: TDMPCConfig(
        input_features=INPUTS, output_features=OUTPUTS, latent_dim=8, mlp_dim=8,
        state_encoder_hidden_dim=8, n_gaussian_samples=8, n_pi_samples=2, n_elites=3,
        cem_iterations=2, n_action_steps=4, n_action_repeats=1,
    ),
    "groot": lambda tiny: GrootConfig(
        input_features={**INPUTS, CAMERA: typed_feature("VISUAL", (3, 16, 16))},
        output_features=OUTPUTS, base_model_path=str(tiny / "base"), chunk_size=5,
        n_action_steps=4, max_state_dim=16, max_action_dim=16, use_bf16=False,
    ),
}  # fmt: skip


def test_every_trainable_builtin_type_is_covered() -> None:
    trainable = {
        name
        for name, cls in known_policy_types().items()
        if cls.trainable and cls.acts and cls.__module__.startswith("rlctl.")
    }
    assert trainable == set(TINY)
    assert not known_policy_types()["reward_classifier"].acts  # it tells success, not actions


def observation(tick: int) -> dict[str, torch.Tensor]:
    """Observation `tick`: every value equals the tick, so a history names its ticks."""
    return {
        "observation.state": torch.full((1, STATE), float(tick)),
        "observation.environment_state": torch.full((1, ENV), float(tick)),
        CAMERA: torch.full((1, 3, 16, 16), tick / 10),
        "task": ["t"],
    }


# GR00T's tiny Qwen3-VL and processor take tens of seconds here: in the slow run.
SLOW_TYPES = {"groot"}


@pytest.mark.parametrize(
    "policy_type",
    [pytest.param(t, marks=[pytest.mark.slow] if t in SLOW_TYPES else []) for t in sorted(TINY)],
)
def test_each_chunk_is_predicted_from_the_last_observations(
    policy_type: str, request: pytest.FixtureRequest
) -> None:
    torch.manual_seed(0)
    vlm = request.getfixturevalue("tiny_smolvlm") if policy_type == "smolvla" else Path()
    if policy_type == "groot":  # its base model's folder, and its backbone's processor
        vlm = request.getfixturevalue("tiny_groot")
    if policy_type == "pi0_fast":
        request.getfixturevalue("tiny_fast_text_tokenizer")
        vlm = request.getfixturevalue("tiny_fast_tokenizer_dir")
    elif policy_type == "multi_task_dit":
        vlm = request.getfixturevalue("tiny_clip")
    elif policy_type.startswith("pi"):
        request.getfixturevalue("tiny_paligemma_tokenizer")
    if policy_type == "xvla":
        vlm = request.getfixturevalue("tiny_bart_tokenizer")
    config = TINY[policy_type](vlm)
    model = build_policy(config)
    seen: list[list[int]] = []
    predict = model.predict_chunk

    # LeRobot's processors for the type (the tokenizer, π0.5's state prompt) give it the task it
    # reads; without statistics the normaliser leaves values as they are. GR00T's base folder is
    # a raw N1.7 checkpoint without statistics, which (as in LeRobot) needs the dataset's: its
    # pack step maps [low, high] onto [-1, 1], undone here to read the ticks.
    low, high, stats = -1.0, 1.0, None
    if policy_type == "groot":
        high = 19.0
        stats = {
            key: {"min": np.full(dim, low), "max": np.full(dim, high)}
            for key, dim in (("observation.state", STATE), ("action", ACTION_DIM))
        }

    def spy(batch, noise=None):
        state = batch["observation.state"] if "observation.state" in batch else batch["state"]
        ticks = state[0, :, 0] if state.ndim == 3 else state[0, :1]
        seen.append([round((float(t) + 1) * (high - low) / 2 + low) for t in ticks])
        return predict(batch, noise)

    model.predict_chunk = spy  # type: ignore[method-assign]
    pre, post = make_pre_post_processors(config, stats, device="cpu")
    policy = LoadedPolicy(model, pre, post)
    for episode in range(2):
        policy.reset()
        seen.clear()
        for tick in range(10):
            action = policy.select_action(observation(tick))
            assert isinstance(action, np.ndarray) and action.shape == (1, ACTION_DIM)
        n, every = config.n_obs_steps, config.n_action_steps
        # Chunks at ticks 0, 4, 8; the first observation of an episode fills the history.
        expected = [[max(0, t - k) for k in reversed(range(n))] for t in range(0, 10, every)]
        assert seen == expected, f"episode {episode}"


def test_a_history_and_real_time_chunks_stack_torch_tensors_as_torch_does() -> None:
    # The domain's acting never imports torch: tensors are stacked through what they share.
    values = [torch.full((1, 2), float(i), dtype=torch.float16) for i in range(3)]
    history = ObservationHistory(3, ["x"])
    for value in values:
        out = history.push({"x": value})
    assert out["x"].dtype == torch.float16 and out["x"].device == values[0].device
    assert torch.equal(out["x"], torch.stack(values, dim=1))
    for axis in (0, 1, -1):
        assert torch.equal(stack(values, axis=axis), torch.stack(values, dim=axis))
        assert torch.equal(concatenate(values, axis=axis), torch.cat(values, dim=axis))
    buffer = RealTimeChunks(2, chunk_size=4, execution_horizon=2, inference_delay=1)
    buffer.push(ActionChunk(torch.arange(4.0).reshape(1, 4, 1)))
    buffer.pop(), buffer.pop()
    buffer.push(ActionChunk(torch.arange(10.0, 14.0).reshape(1, 4, 1)))
    assert [float(buffer.pop()[0, 0]) for _ in range(2)] == [2.0, 11.0]
