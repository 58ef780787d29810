"""X-VLA's own Florence-2 encoder side (`xvla_florence`) against transformers' `Florence2Model`
(what LeRobot 0.6.1 runs) on the same weights, and loading an X-VLA policy without importing
transformers' modelling code (most of the load time at real size)."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="X-VLA needs transformers")

from rlctl.adapters.policies.vla.xvla import florence_config  # noqa: E402
from rlctl.adapters.policies.vla.xvla_florence import Florence2Encoder  # noqa: E402
from rlctl.domain.errors import ConfigError  # noqa: E402
from rlctl.domain.features import typed_feature  # noqa: E402
from rlctl.domain.policies.xvla import XVLAConfig  # noqa: E402

TINY = runpy.run_path(str(Path(__file__).with_name("tiny_xvla.py")))


def config_of(florence: dict[str, Any]) -> Any:
    return florence_config(
        XVLAConfig(
            input_features={"observation.images.image": typed_feature("VISUAL", (3, 36, 36))},
            output_features={"action": typed_feature("ACTION", (7,))},
            florence_config=florence,
        )
    )


def pair(florence: dict[str, Any]) -> tuple[Any, Florence2Encoder]:
    """transformers' model with every weight drawn at random (norms and biases too), and ours
    loaded from its state dict (the decoder left out, as X-VLA does)."""
    torch.manual_seed(0)
    config = config_of(florence)
    reference = transformers.Florence2Model(config).eval()
    with torch.no_grad():
        for param in reference.parameters():
            param.copy_(torch.randn_like(param) * 0.2)
    state = {
        k: v
        for k, v in reference.state_dict().items()
        if not k.startswith("language_model.decoder.")
    }
    ours = Florence2Encoder(config).eval()
    ours.load_state_dict(state, strict=True)
    return reference, ours


def test_the_encoder_side_computes_transformers_florence2() -> None:
    """Image tokens and the BART encoder's output equal transformers' up to float rounding
    (1e-5: the same products, attention through SDPA in both), for a 36x36 image whose maps
    (9x9, then 5x5) are padded to whole windows."""
    reference, ours = pair(TINY["tiny_florence"]())
    images = torch.randn(3, 3, 36, 36)
    ids = torch.randint(0, 300, (3, 7))
    with torch.no_grad():
        expected = reference.get_image_features(images).pooler_output
        got = ours.image_features(images)
        assert got.shape == expected.shape == (3, 1 + 5 * 5, 24)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        embeds = reference.get_input_embeddings()(ids)
        torch.testing.assert_close(ours.get_input_embeddings()(ids), embeds)
        merged = torch.cat([expected, embeds], dim=1)
        encoded = reference.language_model.encoder(inputs_embeds=merged)[0]
        torch.testing.assert_close(
            ours.language_model.encoder(merged), encoded, rtol=1e-5, atol=1e-5
        )


def test_the_window_attention_speed_path_gives_the_same_image_tokens() -> None:
    """The speed path (the padding's rows not multiplied, their projections taken as the
    bias) gives the readable path's image tokens up to float rounding (1e-5: the same
    products over fewer rows), for maps padded to whole windows and a map that needs none;
    without a qkv bias too."""
    for florence, size in ((TINY["tiny_florence"](), 36), (TINY["tiny_florence"](), 32)):
        _, ours = pair(florence)
        images = torch.randn(2, 3, size, size)
        with torch.no_grad():
            torch.testing.assert_close(
                ours.image_features(images, speed=True),
                ours.image_features(images),
                rtol=1e-5,
                atol=1e-5,
            )
    florence = TINY["tiny_florence"]()
    florence["vision_config"]["qkv_bias"] = False
    _, ours = pair(florence)
    images = torch.randn(2, 3, 36, 36)
    with torch.no_grad():
        torch.testing.assert_close(
            ours.image_features(images, speed=True),
            ours.image_features(images),
            rtol=1e-5,
            atol=1e-5,
        )


def test_scaled_embeddings_and_other_activations_follow_the_config() -> None:
    florence = TINY["tiny_florence"]()
    florence["text_config"].update(scale_embedding=True, activation_function="relu")
    reference, ours = pair(florence)
    ids = torch.randint(0, 300, (2, 5))
    with torch.no_grad():
        embeds = reference.get_input_embeddings()(ids)
        torch.testing.assert_close(ours.get_input_embeddings()(ids), embeds)
        encoded = reference.language_model.encoder(inputs_embeds=embeds)[0]
        torch.testing.assert_close(
            ours.language_model.encoder(embeds), encoded, rtol=1e-5, atol=1e-5
        )


def test_an_unknown_activation_is_one_clear_message() -> None:
    florence = TINY["tiny_florence"]()
    florence["vision_config"]["activation_function"] = "mish_x"
    with pytest.raises(ConfigError, match="mish_x"):
        Florence2Encoder(config_of(florence))


@pytest.mark.slow
def test_loading_and_acting_leave_transformers_modelling_code_unimported(tmp_path: Path) -> None:
    """A saved X-VLA loads and predicts without `transformers.modeling_utils` (which imports
    torch's compiler stack, distributed tensors and SciPy: seconds at every load)."""
    script = textwrap.dedent(
        f"""
        import runpy, sys
        from pathlib import Path
        import numpy as np, torch
        tiny = runpy.run_path({str(Path(__file__).with_name("tiny_xvla.py"))!r})
        from rlctl.adapters.policies.loaded_policy import create_policy, load_policy_folder
        from rlctl.domain.features import typed_feature
        from rlctl.domain.policies.xvla import XVLAConfig
        out = Path({str(tmp_path)!r})
        tokenizer = tiny["write_tiny_bart_tokenizer"](out / "tok")
        config = XVLAConfig(
            input_features={{"observation.state": typed_feature("STATE", (8,)),
                "observation.images.image": typed_feature("VISUAL", (3, 32, 32))}},
            output_features={{"action": typed_feature("ACTION", (7,))}},
            florence_config=tiny["tiny_florence"](), tokenizer_name=str(tokenizer),
            tokenizer_max_length=8, hidden_size=32, depth=1, num_heads=4,
            len_soft_prompts=4, chunk_size=4, n_action_steps=4, max_len_seq=96,
            num_denoising_steps=2, device="cpu")
        stats = {{k: {{"mean": np.zeros(d), "std": np.ones(d)}}
                 for k, d in (("observation.state", 8), ("action", 7))}}
        create_policy(config, stats).save(out / "xvla")
        heavy = [m for m in sys.modules if m.startswith("transformers.modeling_utils")]
        assert not heavy, heavy
        policy = load_policy_folder(out / "xvla", device="cpu")
        chunk = policy.predict_chunk({{
            "observation.state": np.zeros((1, 8), np.float32),
            "observation.images.image": np.zeros((1, 3, 32, 32), np.float32),
            "task": ["close the drawer"]}})
        assert np.isfinite(np.asarray(chunk.actions)).all()
        heavy = [m for m in ("transformers.modeling_utils", "torch._dynamo") if m in sys.modules]
        print("HEAVY", heavy)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "HEAVY []" in done.stdout, done.stdout[-2000:]
