"""LeRobot's `tokenizer_processor` step over `transformers`' `AutoTokenizer`.

It turns the batch's task text (`complementary_data["task"]`: one string, a list or a tuple)
into `observation.language.tokens` (int64) and `observation.language.attention_mask` (bool),
padded and truncated to `max_length` on `padding_side`. A batch without task text (no task key,
or empty strings) gives one warning at the first call and empty text, never a crash inside the
model. `transformers` is imported when the step is built, so reading a pipeline file needs it
only when the file has this step (install `rlctl-adapters[smolvla]`).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import structlog
import torch

from rlctl.adapters.policies.vla.loading import require_transformers
from rlctl.domain.errors import ConfigError
from rlctl.domain.frames import Transition
from rlctl.domain.processors import Step, register_step
from rlctl.domain.processors.steps.task_text import (
    LANGUAGE_ATTENTION_MASK,
    LANGUAGE_TOKENS,
    TASK_KEY,
    NewLineTask,
    TokenizerConfig,
    task_texts,
)

TOKENIZER_STEP = "tokenizer_processor"
# The tokenizer LeRobot's π0 and π0.5 processors name (fetched through the Hub cache).
PALIGEMMA_TOKENIZER = "google/paligemma-3b-pt-224"
PI05_STATE_STEP = "pi05_prepare_state_tokenizer_processor_step"
STATE_BINS = 256

log = structlog.get_logger(__name__)


def load_tokenizer(name: str) -> Any:
    transformers = require_transformers(f"the tokenizer {name!r}")
    try:
        return transformers.AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"cannot load the tokenizer {name!r}: {err}",
            where=f"{TOKENIZER_STEP}.tokenizer_name",
            hint="give a local folder holding tokenizer.json, or a Hub repository id "
            "(downloaded once into the Hub cache)",
        ) from err


@register_step(TOKENIZER_STEP)
class TokenizerStep(Step[TokenizerConfig]):
    """Tokenises the task text; `tokenizer` (an already loaded one) skips loading by name."""

    config_class = TokenizerConfig

    def __init__(self, config: TokenizerConfig | None = None, *, tokenizer: Any = None) -> None:
        super().__init__(config)
        if tokenizer is None:
            if not self.config.tokenizer_name:
                raise ConfigError(
                    "the tokenizer step needs a tokenizer_name",
                    where=f"{TOKENIZER_STEP}.tokenizer_name",
                )
            tokenizer = load_tokenizer(self.config.tokenizer_name)
        self.tokenizer = tokenizer
        self._warned = False

    def __call__(self, transition: Transition) -> Transition:
        texts = task_texts(transition.complementary_data.get(self.config.task_key))
        rows = _batch_size(transition)
        if texts is None or not any(t.strip() for t in texts):
            self._warn_missing(texts)
            texts = [""] * (rows or (len(texts) if texts else 1))
        elif len(texts) == 1 and rows is not None and rows > 1:
            texts = texts * rows  # one task for every row of the batch
        encoded = self.tokenizer(
            texts,
            max_length=self.config.max_length,
            truncation=self.config.truncation,
            padding=self.config.padding,
            padding_side=self.config.padding_side,
            return_tensors="pt",
        )
        device = _device_of(transition)
        observation = dict(transition.observation)
        observation[LANGUAGE_TOKENS] = encoded["input_ids"].to(device)
        observation[LANGUAGE_ATTENTION_MASK] = encoded["attention_mask"].to(device, torch.bool)
        return transition.evolve(observation=observation)

    def _warn_missing(self, texts: list[str] | None) -> None:
        if self._warned:
            return
        self._warned = True
        log.warning(
            "the batch has no task text: the language-conditioned policy reads an empty "
            "instruction",
            key=self.config.task_key,
            found="empty text" if texts is not None else "no task",
            hint="record datasets with --dataset.single_task, or use an env that describes "
            "its task",
        )


def _batch_size(transition: Transition) -> int | None:
    for value in transition.observation.values():
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) >= 2:
            return int(shape[0])
    return None


def _device_of(transition: Transition) -> torch.device:
    for value in transition.observation.values():
        if isinstance(value, torch.Tensor):
            return value.device
    return torch.device("cpu")


@register_step("pi0_new_line_processor")
class Pi0NewLineTask(NewLineTask):
    """π0's name for the same step: each task text ends with a newline (PaliGemma's prompts)."""


@attrs.frozen(kw_only=True)
class Pi05PromptConfig:
    """LeRobot's `Pi05PrepareStateTokenizerProcessorStep` settings."""

    max_state_dim: int = 32
    task_key: str = TASK_KEY


@register_step(PI05_STATE_STEP)
class Pi05StatePrompt(Step[Pi05PromptConfig]):
    """π0.5's prompt: `Task: <task>, State: <bins>;\nAction: `, the normalised state (expected
    in [-1, 1], so after quantile normalisation) discretised into 256 bins, as openpi's
    PaliGemma tokenizer writes it. Runs after the normaliser and before the tokenizer."""

    config_class = Pi05PromptConfig

    def __init__(self, config: Pi05PromptConfig | None = None) -> None:
        super().__init__(config)
        self._warned = False

    def __call__(self, transition: Transition) -> Transition:
        state = transition.observation.get("observation.state")
        if state is None:
            raise ConfigError(
                "π0.5 writes the robot state into its prompt, but the batch has no "
                "observation.state",
                where=PI05_STATE_STEP,
            )
        values = torch.as_tensor(state).detach().to("cpu", torch.float32).numpy()
        values = values.reshape(-1, values.shape[-1])
        bins = np.digitize(values, bins=np.linspace(-1, 1, STATE_BINS + 1)[:-1]) - 1
        texts = task_texts(transition.complementary_data.get(self.config.task_key))
        if texts is None or not any(t.strip() for t in texts):
            if not self._warned:
                self._warned = True
                log.warning(
                    "the batch has no task text: π0.5's prompt holds the state alone",
                    key=self.config.task_key,
                )
            texts = [""] * len(bins)
        elif len(texts) == 1 and len(bins) > 1:
            texts = texts * len(bins)
        prompts = []
        for text, row in zip(texts, bins, strict=True):
            cleaned = text.strip().replace("_", " ").replace("\n", " ")
            state_text = " ".join(str(int(b)) for b in row)
            prompts.append(f"Task: {cleaned}, State: {state_text};\nAction: ")
        complementary = {**transition.complementary_data, self.config.task_key: prompts}
        return transition.evolve(complementary_data=complementary)
