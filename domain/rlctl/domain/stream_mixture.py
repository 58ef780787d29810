"""How several streamed datasets are interleaved into one stream (`--dataset.streaming=true` with
several repo ids), by weight.

Every reader (one DataLoader worker of one rank) reads its own shard of every dataset
(`rlctl.domain.stream_shards`) and interleaves them. A *pass* of the mixture holds as many
frames as the reader's shares of its datasets together — as an epoch of the local mixture holds
as many draws as its frames — and takes from dataset i its weight's part of them
(`pass_counts`), in an order drawn from `(seed, epoch, shard)` (`interleave_order`):

- without weights (in proportion to the frames, as one concatenation) each dataset gives
  exactly its share, so the readers together read every frame once per pass;
- with weights, a dataset asked for more than its share starts over, in a new order (the run
  numbered `restart_epoch(epoch, run)`, the same on every reader so that the shards of that
  run stay disjoint), as a single stream starts each epoch over; one asked for less gives the
  first frames of its order, and the next pass another order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlctl.domain.errors import InvalidInput

# Tells the interleave's generator apart from the shuffle buffers' (seeded by seed, epoch, shard).
_INTERLEAVE = 0x6D6978  # "mix"


def pass_counts(frames: Sequence[int], weights: Sequence[float] | None) -> list[int]:
    """How many frames a reader takes from each dataset in one pass: `frames[i]` is its share
    of dataset i. Without weights, `frames` itself; with weights, `sum(frames)` split by the
    weights (largest remainders, so they add up), a dataset this reader holds nothing of
    giving its part to the others."""
    if any(n < 0 for n in frames):
        raise InvalidInput(f"frame counts must be 0 or more, got {list(frames)}", where="frames")
    if weights is None:
        return [int(n) for n in frames]
    if len(weights) != len(frames):
        raise InvalidInput(
            f"{len(weights)} weights for {len(frames)} datasets", where="dataset.weights"
        )
    if not all(np.isfinite(w) and w > 0 for w in weights):
        raise InvalidInput(
            f"weights must be positive numbers, got {list(weights)}", where="dataset.weights"
        )
    total = int(sum(frames))
    share = np.asarray(weights, dtype=np.float64) * (np.asarray(frames) > 0)
    if total == 0:
        return [0] * len(frames)
    exact = share / share.sum() * total
    counts = np.floor(exact).astype(np.int64)
    # Largest remainders first; ties to the earlier dataset.
    order = sorted(range(len(frames)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: total - int(counts.sum())]:
        counts[i] += 1
    return [int(n) for n in counts]


def interleave_order(counts: Sequence[int], *, seed: int, epoch: int, shard: int) -> np.ndarray:
    """Which dataset each frame of the pass comes from: `counts[i]` times i, in an order drawn
    from `(seed, epoch, shard)`."""
    # The smallest integer type: a pass of a large mixture holds millions of frames.
    kind = np.min_scalar_type(max(len(counts) - 1, 0))
    labels = np.repeat(np.arange(len(counts), dtype=kind), np.asarray(counts, dtype=np.int64))
    rng = np.random.default_rng(
        [seed & 0xFFFFFFFF, epoch & 0xFFFFFFFF, shard & 0xFFFFFFFF, _INTERLEAVE]
    )
    return rng.permutation(labels)


def restart_epoch(epoch: int, run: int) -> int:
    """The epoch a dataset's stream reads for its `run`-th start in pass `epoch` (0: the pass's
    own epoch, so a mixture of one dataset reads what the dataset alone does). Later runs get
    epoch numbers in the upper half of 32 bits, apart from the passes' own."""
    if run < 0:
        raise InvalidInput(f"run must be 0 or more, got {run}", where="run")
    if run == 0:
        return epoch
    state = np.random.SeedSequence([epoch & 0xFFFFFFFF, run, _INTERLEAVE]).generate_state(1)[0]
    return int(state) | 0x80000000
