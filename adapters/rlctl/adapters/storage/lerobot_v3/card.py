"""The dataset card (README.md) a recorded dataset gets, so that `datasets.load_dataset(ROOT)`
reads its rows.

A local folder has no Hub page, but `datasets` reads its card the same way: the YAML header's
`configs` point it at `data/*/*.parquet` (without it, `load_dataset` also gathers `meta/`'s
parquet files and fails on their columns). The card is the one a push writes, with the folder's
name for the repo id and no license claimed; a push writes its own. A README.md already there is
the user's: only the counts it shows are brought up to date, as the dataset edits do.
"""

from __future__ import annotations

from pathlib import Path

import structlog

from rlctl.adapters.storage.lerobot_v3.atomic_files import write_atomic
from rlctl.application.hub_cards import dataset_card, update_card_counts
from rlctl.domain.dataset_meta import DatasetMeta

log = structlog.get_logger(__name__)

CARD_NAME = "README.md"


def write_local_card(root: Path, meta: DatasetMeta) -> None:
    """Write `root`'s card for `meta`, or update the counts of the one there. Never fails the
    caller: a card that cannot be written is logged, the dataset is whole without it."""
    card = root / CARD_NAME
    try:
        if card.is_symlink() or (card.exists() and not card.is_file()):
            return
        if card.exists():
            text = card.read_text(encoding="utf-8")
            updated = update_card_counts(text, meta)
            if updated == text:
                return
        else:
            if not meta.total_episodes:
                return  # no data files yet: a card would point `load_dataset` at nothing
            updated = dataset_card(meta, root.name, license=None)
        write_atomic(card, lambda temp: temp.write_text(updated, encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        log.warning("could not write the dataset card", path=str(card), error=str(err))
