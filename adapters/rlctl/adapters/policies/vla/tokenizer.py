"""The processor steps that make a VLA's tokens: LeRobot's `tokenizer_processor` (the task text,
over `transformers`' `AutoTokenizer`), π0.5's and π0-FAST's prompts holding the state, and
π0-FAST's `action_tokenizer_processor` (the training chunk as FAST tokens, `fast`).

The tokenizer step turns the batch's task text (`complementary_data["task"]`: one string, a
list or a tuple) into `observation.language.tokens` (int64) and
`observation.language.attention_mask` (bool), padded and truncated to `max_length` on
`padding_side`. A batch without task text (no task key, or empty strings) gives one warning at
the first call and empty text, never a crash inside the model. `transformers` is imported when
the step is built, so reading a pipeline file needs it only when the file has this step (install
`rlctl-adapters[smolvla]`).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import structlog
import torch
from torch import Tensor

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
PI0_FAST_STATE_STEP = "pi0_fast_prepare_state_tokenizer_processor_step"
ACTION_TOKENIZER_STEP = "action_tokenizer_processor"
ACTION_TOKENS = "action.tokens"
ACTION_TOKEN_MASK = "action.token_mask"
STATE_BINS = 256

log = structlog.get_logger(__name__)


def load_tokenizer(name: str, **options: Any) -> Any:
    """`AutoTokenizer.from_pretrained(name, **options)` (a folder, or a Hub id in the cache)."""
    transformers = require_transformers(f"the tokenizer {name!r}")
    try:
        return transformers.AutoTokenizer.from_pretrained(name, **options)
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
    policy = "π0.5"
    # What follows the state: π0.5's prompt ends where the action tokens' text begins.
    prompt_end = ";\nAction: "

    def __init__(self, config: Pi05PromptConfig | None = None) -> None:
        super().__init__(config)
        self._warned = False

    def __call__(self, transition: Transition) -> Transition:
        state = transition.observation.get("observation.state")
        if state is None:
            raise ConfigError(
                f"{self.policy} writes the robot state into its prompt, but the batch has no "
                "observation.state",
                where=self.name,
            )
        values = torch.as_tensor(state).detach().to("cpu", torch.float32).numpy()
        values = values.reshape(-1, values.shape[-1])
        bins = np.digitize(values, bins=np.linspace(-1, 1, STATE_BINS + 1)[:-1]) - 1
        texts = task_texts(transition.complementary_data.get(self.config.task_key))
        if texts is None or not any(t.strip() for t in texts):
            if not self._warned:
                self._warned = True
                log.warning(
                    f"the batch has no task text: {self.policy}'s prompt holds the state alone",
                    key=self.config.task_key,
                )
            texts = [""] * len(bins)
        elif len(texts) == 1 and len(bins) > 1:
            texts = texts * len(bins)
        prompts = []
        for text, row in zip(texts, bins, strict=True):
            cleaned = text.strip().replace("_", " ").replace("\n", " ")
            state_text = " ".join(str(int(b)) for b in row)
            prompts.append(f"Task: {cleaned}, State: {state_text}{self.prompt_end}")
        complementary = {**transition.complementary_data, self.config.task_key: prompts}
        return transition.evolve(complementary_data=complementary)


@register_step(PI0_FAST_STATE_STEP)
class Pi0FastStatePrompt(Pi05StatePrompt):
    """π0-FAST's prompt: `Task: <task>, State: <bins>;\n` (the model writes "Action: ..." after
    it), the normalised state discretised into 256 bins as π0.5's."""

    policy = "π0-FAST"
    prompt_end = ";\n"


@attrs.frozen(kw_only=True)
class ActionTokenizerConfig:
    """LeRobot's `ActionTokenizerProcessorStep` settings. LeRobot writes the first three; the
    last two it takes but does not write (so a pipeline it reloads uses their defaults): rlctl
    writes them too, so a reloaded pipeline makes the tokens it was built with."""

    trust_remote_code: bool = True
    max_action_tokens: int = 256
    action_tokenizer_name: str | None = None
    fast_skip_tokens: int = 128
    paligemma_tokenizer_name: str = PALIGEMMA_TOKENIZER

    def __attrs_post_init__(self) -> None:
        if self.max_action_tokens < 1 or self.fast_skip_tokens < 0:
            raise ConfigError(
                "max_action_tokens must be positive and fast_skip_tokens not negative, got "
                f"{self.max_action_tokens} and {self.fast_skip_tokens}",
                where=ACTION_TOKENIZER_STEP,
            )


@attrs.frozen
class ActionTextIds:
    """The PaliGemma tokenizer's ids π0-FAST writes its actions with."""

    bos: int
    prefix: tuple[int, ...]  # "Action: "
    end: tuple[int, ...]  # "|" as encoded with the tokenizer's specials (then <eos>)
    end_of_action: int  # "|" alone
    action_word: tuple[int | None, int | None]  # the tokens "Action" and ":"
    vocab_size: int

    @classmethod
    def of(cls, tokenizer: Any) -> ActionTextIds:
        """`tokenizer` loaded as π0-FAST loads it: `add_eos_token=True, add_bos_token=False`."""
        return cls(
            bos=int(tokenizer.bos_token_id),
            prefix=tuple(tokenizer.encode("Action: ", add_special_tokens=False)),
            end=tuple(tokenizer.encode("|")),
            end_of_action=int(tokenizer.convert_tokens_to_ids("|")),
            action_word=(
                _known_id(tokenizer, "Action"),
                _known_id(tokenizer, ":"),
            ),
            vocab_size=int(tokenizer.vocab_size),
        )

    def fast_to_text(self, ids: Tensor, skip: int) -> Tensor:
        """FAST ids as PaliGemma ids: the top of the vocabulary, below `skip` reserved ones."""
        return self.vocab_size - 1 - skip - ids


def _known_id(tokenizer: Any, token: str) -> int | None:
    found = tokenizer.convert_tokens_to_ids(token)
    return None if found is None or found == tokenizer.unk_token_id else int(found)


def load_action_text_ids(name: str) -> ActionTextIds:
    return ActionTextIds.of(load_tokenizer(name, add_eos_token=True, add_bos_token=False))


@register_step(ACTION_TOKENIZER_STEP)
class ActionTokenizerStep(Step[ActionTokenizerConfig]):
    """The training chunk (normalised, (B, H, D)) as the text π0-FAST learns to write:
    `<bos> Action: <FAST ids as PaliGemma ids> | <eos>`, padded with 0 or cut to
    `max_action_tokens`, into `action.tokens` (int64) and `action.token_mask` (bool). Without an
    action (inference) the transition passes unchanged. `fast` and `text_ids`, when given, skip
    loading the tokenizers by name."""

    config_class = ActionTokenizerConfig

    def __init__(
        self,
        config: ActionTokenizerConfig | None = None,
        *,
        fast: Any = None,
        text_ids: ActionTextIds | None = None,
    ) -> None:
        super().__init__(config)
        if fast is None:
            from rlctl.adapters.policies.vla.fast import load_action_tokenizer

            name = self.config.action_tokenizer_name
            if not name:
                raise ConfigError(
                    "the action tokenizer step needs an action_tokenizer_name",
                    where=f"{ACTION_TOKENIZER_STEP}.action_tokenizer_name",
                    hint="fit a FAST tokenizer with `rlctl train-tokenizer` and name its folder",
                )
            fast = load_action_tokenizer(name)
        self.fast = fast
        self.text_ids = text_ids or load_action_text_ids(self.config.paligemma_tokenizer_name)
        self._warned = False

    def __call__(self, transition: Transition) -> Transition:
        action = transition.action
        if action is None:
            return transition
        chunks = torch.as_tensor(action)
        if chunks.ndim == 2:
            chunks = chunks[None]
        if chunks.ndim != 3:
            raise ConfigError(
                f"π0-FAST tokenises (batch, horizon, dim) action chunks, got shape "
                f"{tuple(chunks.shape)}",
                where=ACTION_TOKENIZER_STEP,
            )
        rows = [self._row(chunk) for chunk in chunks.detach().to("cpu", torch.float32).numpy()]
        device = chunks.device
        complementary = {
            **transition.complementary_data,
            ACTION_TOKENS: torch.stack([ids for ids, _ in rows]).to(device),
            ACTION_TOKEN_MASK: torch.stack([mask for _, mask in rows]).to(device),
        }
        return transition.evolve(complementary_data=complementary)

    def _row(self, chunk: np.ndarray) -> tuple[Tensor, Tensor]:
        text = self.text_ids
        fast = torch.tensor(self.fast.encode(chunk)[0], dtype=torch.long)
        ids = torch.cat(
            [
                torch.tensor([text.bos, *text.prefix], dtype=torch.long),
                text.fast_to_text(fast, self.config.fast_skip_tokens),
                torch.tensor(text.end, dtype=torch.long),
            ]
        )
        limit = self.config.max_action_tokens
        if len(ids) > limit:
            if not self._warned:
                self._warned = True
                log.warning(
                    "an action chunk takes more tokens than max_action_tokens: cut",
                    tokens=len(ids),
                    max_action_tokens=limit,
                    hint="raise --policy.max_action_tokens (and max_decoding_steps)",
                )
            return ids[:limit], torch.ones(limit, dtype=torch.bool)
        mask = torch.zeros(limit, dtype=torch.bool)
        mask[: len(ids)] = True
        return torch.nn.functional.pad(ids, (0, limit - len(ids))), mask
