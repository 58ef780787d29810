"""Shards of a streamed dataset: disjoint, and covering every episode once per epoch."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.errors import InvalidInput
from rlctl.domain.stream_shards import shard_of, shard_pieces

layouts = st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=12).map(
    lambda counts: [list(range(sum(counts[:i]), sum(counts[:i]) + n)) for i, n in enumerate(counts)]
)


@given(
    files=layouts,
    world=st.integers(1, 4),
    workers=st.integers(1, 3),
    seed=st.integers(0, 2**31),
    epoch=st.integers(0, 50),
    shuffle=st.booleans(),
)
def test_shards_are_disjoint_and_cover_every_episode_once(
    files, world, workers, seed, epoch, shuffle
):
    read: Counter[int] = Counter()
    for rank in range(world):
        for worker in range(workers):
            shard, shards = shard_of(rank, world, worker, workers)
            for file, episodes in shard_pieces(
                files, shard=shard, shards=shards, seed=seed, epoch=epoch, shuffle=shuffle
            ):
                assert set(episodes) <= set(files[file])
                # A file's episodes come in the order they lie in it.
                assert episodes == [e for e in files[file] if e in episodes]
                read.update(episodes)
    assert read == Counter(e for episodes in files for e in episodes)


@given(files=layouts, seed=st.integers(0, 2**31))
def test_with_as_many_files_as_readers_each_file_is_read_by_one_reader(files, seed):
    shards = len(files)
    owners: Counter[int] = Counter()
    for shard in range(shards):
        for file, episodes in shard_pieces(files, shard=shard, shards=shards, seed=seed, epoch=0):
            owners[file] += 1
            assert episodes == files[file]
    assert all(count == 1 for count in owners.values())


def test_the_order_depends_on_seed_and_epoch_only():
    files = [[i] for i in range(40)]
    first = shard_pieces(files, shard=0, shards=1, seed=1, epoch=0)
    assert first == shard_pieces(files, shard=0, shards=1, seed=1, epoch=0)
    assert first != shard_pieces(files, shard=0, shards=1, seed=1, epoch=1)
    assert first != shard_pieces(files, shard=0, shards=1, seed=2, epoch=0)
    assert shard_pieces(files, shard=0, shards=1, seed=1, epoch=0, shuffle=False) == [
        (i, [i]) for i in range(40)
    ]


def test_a_reader_outside_the_world_is_refused():
    with pytest.raises(InvalidInput, match="rank 2"):
        shard_of(2, 2, 0, 1)
    with pytest.raises(InvalidInput, match="worker 3"):
        shard_of(0, 1, 3, 2)
