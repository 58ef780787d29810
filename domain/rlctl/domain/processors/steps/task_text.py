"""The task text of language-conditioned policies: how it is read from a batch, ended with a
newline (SmolVLA's prompt format), and the settings of the step that tokenises it.

The tokenising step itself needs a tokenizer library, so it lives in the VLA policy adapters
(registered as LeRobot's `tokenizer_processor`, under the same step registry); its
settings are here, with LeRobot's `TokenizerProcessorStep` field names, so the JSON both tools
write structures into them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from rlctl.domain.errors import ConfigError
from rlctl.domain.frames import Transition
from rlctl.domain.processors.registry import register_step
from rlctl.domain.processors.step import NoConfig, Step

TASK_KEY = "task"
LANGUAGE_TOKENS = "observation.language.tokens"
LANGUAGE_ATTENTION_MASK = "observation.language.attention_mask"
PADDING_SIDES = ("right", "left")
PADDINGS = ("max_length", "longest", "do_not_pad")


def _one_of(allowed: tuple[str, ...]) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[str], value: str) -> None:
        if value not in allowed:
            raise ConfigError(
                f"{attribute.name} must be one of {', '.join(allowed)}, got {value!r}",
                where=f"tokenizer_processor.{attribute.name}",
            )

    return check


@attrs.frozen(kw_only=True)
class TokenizerConfig:
    """LeRobot's `TokenizerProcessorStep` settings (a tokenizer object is never serialised)."""

    tokenizer_name: str | None = None
    max_length: int = 512
    task_key: str = TASK_KEY
    padding_side: str = attrs.field(default="right", validator=_one_of(PADDING_SIDES))
    padding: str = attrs.field(default="max_length", validator=_one_of(PADDINGS))
    truncation: bool = True

    def __attrs_post_init__(self) -> None:
        if self.max_length <= 0:
            raise ConfigError(
                f"max_length must be positive, got {self.max_length}",
                where="tokenizer_processor.max_length",
            )


def task_texts(value: Any) -> list[str] | None:
    """The task as a list of strings: one string, a list or a tuple of strings (a vector env's
    `call("task_description")` gives a tuple). None when there is no usable text."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(t, str) for t in value):
        return list(value)
    return None


def _with_newline(text: str) -> str:
    return text if text.endswith("\n") else f"{text}\n"


@register_step("smolvla_new_line_processor")
class NewLineTask(Step[NoConfig]):
    """Ends each task text with a newline, as SmolVLA's prompts were trained (LeRobot's
    `NewLineTaskProcessorStep`); a batch without task text passes through unchanged."""

    config_class = NoConfig

    def __call__(self, transition: Transition) -> Transition:
        complementary: Mapping[str, Any] = transition.complementary_data
        task = complementary.get(TASK_KEY)
        if isinstance(task, str):
            new_task: Any = _with_newline(task)
        elif isinstance(task, (list, tuple)) and all(isinstance(t, str) for t in task):
            new_task = [_with_newline(t) for t in task]
        else:
            return transition
        return transition.evolve(complementary_data={**complementary, TASK_KEY: new_task})
