"""Batching dataset items that carry language annotations (LeRobot 0.6.1's `lerobot_collate_fn`).

torch's default collate stacks tensors and recurses into lists, so it fails on
`language_persistent` / `language_events`: each item holds a list of row dicts, of its own
length, with None fields. `collate_items` keeps those columns (and the chat keys LeRobot's
message rendering adds: `messages`, `message_streams`, `target_message_indices`) as a list with
one entry per item, in the batch's order, and hands everything else to `default_collate`.

One difference from LeRobot: its collate drops the language columns from the batch (no policy
of 0.6.1 reads them), rlctl's keeps them so that a training loop can render or inspect them.
Policies ignore keys they do not read, and the device step moves only tensors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch.utils.data import default_collate

from rlctl.domain.errors import FeatureMismatch
from rlctl.domain.language import LANGUAGE_COLUMNS

# Rendered chat messages, as LeRobot's `RenderMessagesStep` leaves them in an item.
MESSAGE_KEYS = ("messages", "message_streams", "target_message_indices")
LIST_KEYS = frozenset((*LANGUAGE_COLUMNS, *MESSAGE_KEYS))


def collate_items(items: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """One batch of `items`: the language (and message) keys as per-item lists, the rest
    collated by torch's `default_collate`. None items are left out (LeRobot's recipes drop a
    sample that way); a batch of only None is None.

    Every item must agree on which of those keys it has: a list shorter than the batch would
    no longer line up with the tensors.
    """
    present = [item for item in items if item is not None]
    if not present:
        return None
    found = sorted({key for item in present for key in item if key in LIST_KEYS})
    if not found:
        return default_collate(present)  # type: ignore[no-any-return]
    kept: dict[str, list[Any]] = {}
    for key in found:
        having = sum(key in item for item in present)
        if having != len(present):
            raise FeatureMismatch(
                f"{having} of the {len(present)} items of a batch have {key!r}",
                where=f"batch key {key!r}",
                hint="every item of a batch must carry the same language keys: batch items of "
                "datasets that all have the column (or none of them)",
            )
        kept[key] = [item[key] for item in present]
    batch: dict[str, Any] = default_collate(
        [{k: v for k, v in item.items() if k not in LIST_KEYS} for item in present]
    )
    batch.update(kept)
    return batch
