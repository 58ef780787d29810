"""LeRobot's `tokenizer_processor` step over a real (tiny, locally trained) tokenizer: the task
as a string, a list or a tuple, padding and truncation on either side, LeRobot's JSON, and a
missing task."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import structlog
import torch

pytest.importorskip("transformers", reason="the tokenizer step needs the smolvla extra")

from rlctl.adapters.policies.vla.tokenizer import TokenizerStep
from rlctl.domain.errors import ConfigError
from rlctl.domain.frames import Transition
from rlctl.domain.processors import ProcessorPipeline
from rlctl.domain.processors.steps.task_text import (
    LANGUAGE_ATTENTION_MASK,
    LANGUAGE_TOKENS,
    NewLineTask,
    TokenizerConfig,
)


def tokenize(
    step: TokenizerStep, task: object, batch: int = 2
) -> tuple[torch.Tensor, torch.Tensor]:
    complementary = {} if task is None else {"task": task}
    transition = Transition(
        observation={"observation.state": torch.zeros(batch, 3)},
        complementary_data=complementary,
    )
    out = step(transition).observation
    return out[LANGUAGE_TOKENS], out[LANGUAGE_ATTENTION_MASK]


def test_a_string_a_list_and_a_tuple_tokenise_alike(tiny_smolvlm: Path) -> None:
    step = TokenizerStep(TokenizerConfig(tokenizer_name=str(tiny_smolvlm), max_length=12))
    listed = tokenize(step, ["close the drawer", "close the drawer"])
    assert torch.equal(tokenize(step, ("close the drawer", "close the drawer"))[0], listed[0])
    # One string serves every row of the batch.
    assert torch.equal(tokenize(step, "close the drawer")[0], listed[0])
    tokens, mask = listed
    assert tokens.shape == mask.shape == (2, 12)
    assert tokens.dtype == torch.int64 and mask.dtype == torch.bool


@pytest.mark.parametrize("side", ["right", "left"])
def test_pads_and_truncates_to_max_length_on_the_configured_side(
    tiny_smolvlm: Path, side: str
) -> None:
    step = TokenizerStep(
        TokenizerConfig(tokenizer_name=str(tiny_smolvlm), max_length=6, padding_side=side)
    )
    tokenizer = step.tokenizer
    short, long = "close the drawer", "pick up the cube and place it in the box"
    tokens, mask = tokenize(step, [short, long])
    ids = tokenizer(short)["input_ids"]
    assert len(ids) < 6 < len(tokenizer(long)["input_ids"])
    assert mask[1].all() and tokens[1].tolist() == tokenizer(long)["input_ids"][:6]
    pad = tokenizer.pad_token_id
    if side == "right":
        assert tokens[0, : len(ids)].tolist() == ids and (tokens[0, len(ids) :] == pad).all()
        assert mask[0].tolist() == [True] * len(ids) + [False] * (6 - len(ids))
    else:
        assert tokens[0, -len(ids) :].tolist() == ids and (tokens[0, : -len(ids)] == pad).all()
        assert mask[0].tolist() == [False] * (6 - len(ids)) + [True] * len(ids)


def test_longest_padding_pads_to_the_longest_task(tiny_smolvlm: Path) -> None:
    step = TokenizerStep(
        TokenizerConfig(tokenizer_name=str(tiny_smolvlm), max_length=48, padding="longest")
    )
    tokens, _ = tokenize(step, ["close the drawer", "push the t to the target"])
    assert tokens.shape[1] == len(step.tokenizer("push the t to the target")["input_ids"])


def test_lerobots_json_loads_and_is_written_back_the_same(tiny_smolvlm: Path) -> None:
    # The entry LeRobot 0.6.1 writes for SmolVLA (its tokenizer_name last, as LeRobot puts it).
    entry = {
        "registry_name": "tokenizer_processor",
        "config": {
            "max_length": 48,
            "task_key": "task",
            "padding_side": "right",
            "padding": "longest",
            "truncation": True,
            "tokenizer_name": str(tiny_smolvlm),
        },
    }
    data = {
        "name": "policy_preprocessor",
        "steps": [{"registry_name": "smolvla_new_line_processor", "config": {}}, entry],
    }
    pipeline = ProcessorPipeline.from_data(data)
    assert isinstance(pipeline[0], NewLineTask) and isinstance(pipeline[1], TokenizerStep)
    assert pipeline.to_data() == data
    batch = pipeline.process_batch(
        {"observation.state": np.zeros((1, 3), np.float32), "task": ["close the drawer"]}
    )
    expected = pipeline[1].tokenizer("close the drawer\n")["input_ids"]
    assert batch[LANGUAGE_TOKENS][0].tolist() == expected
    assert batch["task"] == ["close the drawer\n"]


def test_a_missing_task_warns_once_at_the_first_call(tiny_smolvlm: Path) -> None:
    step = TokenizerStep(TokenizerConfig(tokenizer_name=str(tiny_smolvlm), max_length=4))
    with structlog.testing.capture_logs() as logs:
        tokens, mask = tokenize(step, None)
        tokenize(step, ["", ""])
        tokenize(step, "   ")
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1 and "task" in warnings[0]["event"]
    assert tokens.shape == (2, 4) and not mask.any()


def test_bad_settings_are_one_error_naming_the_field(tiny_smolvlm: Path) -> None:
    with pytest.raises(ConfigError, match="padding_side"):
        TokenizerConfig(tokenizer_name=str(tiny_smolvlm), padding_side="middle")
    with pytest.raises(ConfigError, match="tokenizer_name"):
        TokenizerStep(TokenizerConfig())
    with pytest.raises(ConfigError, match="cannot load the tokenizer"):
        TokenizerStep(TokenizerConfig(tokenizer_name=str(tiny_smolvlm / "missing")))
