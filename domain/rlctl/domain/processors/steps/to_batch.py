"""Give a single, unbatched sample a leading batch axis of one, as LeRobot's to_batch step does.

Only what is recognisably unbatched changes: a 1-D state or action, a 3-D image, a 0-D index,
a task string (which becomes a one-element list). Batched inputs pass through.
"""

from __future__ import annotations

from typing import Any

from rlctl.domain.frames import Transition
from rlctl.domain.processors.registry import register_step
from rlctl.domain.processors.step import NoConfig, Step

STATE_KEYS = ("observation.state", "observation.environment_state")
SINGLE_IMAGE_KEY = "observation.image"
IMAGES_PREFIX = "observation.images."
INDEX_KEYS = ("index", "task_index")


def _add_axis_if_rank(value: Any, rank: int) -> Any:
    # `value[None]` adds a leading axis on numpy arrays and torch tensors alike.
    if getattr(value, "ndim", None) == rank:
        return value[None]
    return value


def _is_image_key(key: str) -> bool:
    return key == SINGLE_IMAGE_KEY or key.startswith(IMAGES_PREFIX)


@register_step("to_batch_processor")
class AddBatchDimension(Step[NoConfig]):
    config_class = NoConfig

    def __call__(self, transition: Transition) -> Transition:
        observation = {
            key: _add_axis_if_rank(value, 1)
            if key in STATE_KEYS
            else _add_axis_if_rank(value, 3)
            if _is_image_key(key)
            else value
            for key, value in transition.observation.items()
        }
        complementary = dict(transition.complementary_data)
        if isinstance(complementary.get("task"), str):
            complementary["task"] = [complementary["task"]]
        for key in INDEX_KEYS:
            if key in complementary:
                complementary[key] = _add_axis_if_rank(complementary[key], 0)
        return transition.evolve(
            observation=observation,
            action=_add_axis_if_rank(transition.action, 1),
            complementary_data=complementary,
        )
