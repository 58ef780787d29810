"""Which part of a streamed dataset each reader takes in an epoch: disjoint shards that cover it.

A streamed dataset is read by `shards = world_size x num_workers` readers at once (every
DataLoader worker of every DDP rank). Each computes the same order from `(seed, epoch)`, with
no communication, and takes every `shards`-th piece of it:

- with at least as many data files as readers, whole files are dealt out, so each file is read
  by one reader only;
- otherwise episodes are dealt out, and a reader reads only its episodes' rows of a file.

Either way the shards are disjoint and together hold every selected episode once per epoch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlctl.domain.errors import InvalidInput

# (file number, the episodes of that file this reader takes), in reading order.
Piece = tuple[int, list[int]]


def shard_of(rank: int, world_size: int, worker: int, num_workers: int) -> tuple[int, int]:
    """(this reader's shard, the number of shards) for DDP rank `rank` and loader `worker`."""
    if not 0 <= rank < world_size:
        raise InvalidInput(f"rank {rank} is outside a world of {world_size}", where="rank")
    if not 0 <= worker < num_workers:
        raise InvalidInput(f"worker {worker} is outside {num_workers} workers", where="worker")
    return rank * num_workers + worker, world_size * num_workers


def shard_pieces(
    files: Sequence[Sequence[int]],
    *,
    shard: int,
    shards: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
) -> list[Piece]:
    """The pieces shard `shard` of `shards` reads in `epoch`.

    `files[i]` lists the selected episodes held by data file i, in the order they lie there.
    Without `shuffle`, files and episodes keep their order (still dealt out).
    """
    if not 0 <= shard < shards:
        raise InvalidInput(f"shard {shard} is outside {shards} shards", where="shard")
    rng = np.random.default_rng([seed & 0xFFFFFFFF, epoch & 0xFFFFFFFF])
    if len(files) >= shards:
        order = rng.permutation(len(files)) if shuffle else np.arange(len(files))
        return [(int(f), list(files[int(f)])) for f in order[shard::shards]]
    located = [(f, episode) for f, episodes in enumerate(files) for episode in episodes]
    order = rng.permutation(len(located)) if shuffle else np.arange(len(located))
    mine: dict[int, list[int]] = {}
    for number in order[shard::shards]:
        file, episode = located[int(number)]
        mine.setdefault(file, []).append(episode)
    # A file's episodes are read together (one fetch of its rows), in the order they lie there.
    files_order = list(mine)
    if shuffle:
        files_order = [files_order[i] for i in rng.permutation(len(files_order))]
    position = {episode: i for f in mine for i, episode in enumerate(files[f])}
    return [(f, sorted(mine[f], key=position.__getitem__)) for f in files_order]
