from datetime import timedelta

import pytest
import torch

from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.distributed.seeds import (
    RankSeedSampler,
    agree_num_batches,
    shard,
)

from .ranks import run_ranks


def _agree(rank, world):
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    seeds = 100 if rank == 0 else 250  # unbalanced parts
    steps = agree_num_batches(coll, seeds, 32)
    sampler = RankSeedSampler(seeds, steps * 32, torch.Generator())
    return steps, list(sampler)


@pytest.mark.timeout(120)
def test_unbalanced_ranks_agree_on_the_most_steps():
    results = run_ranks(_agree, 2)
    (s0, p0), (s1, p1) = results[0][1], results[1][1]
    assert s0 == s1 == 8  # ceil(250 / 32)
    assert len(p0) == len(p1) == 8 * 32
    # the short rank revisits its seeds rather than dropping any
    assert set(p0) == set(range(100)) and set(p1) == set(range(250))
    assert sorted(p1[:250]) == list(range(250))  # one full pass first


def test_shards_across_ranks_are_disjoint_and_equal():
    shares = []
    for rank in range(3):
        sampler = RankSeedSampler(10, 8, torch.Generator().manual_seed(5),
                                  rank, 3, shard_across_ranks=True)
        shares.append(list(sampler))
    assert [len(s) for s in shares] == [8, 8, 8]
    # first pass: 10 seeds padded to 12, 4 per rank, disjoint up to the
    # 2 padded (wrapped) positions
    first = [s[:4] for s in shares]
    assert set(sum(first, [])) == set(range(10))
    assert len(sum(first, [])) - len(set(sum(first, []))) == 2


def test_evaluation_shards_cover_each_seed_once():
    seeds = torch.arange(11)
    parts = [shard(seeds, r, 3) for r in range(3)]
    assert sorted(torch.cat(parts).tolist()) == list(range(11))


def test_a_rank_without_seeds_is_refused():
    with pytest.raises(ValueError, match="'num_seeds' = 0"):
        RankSeedSampler(0, 8)


@pytest.mark.parametrize('limit, steps', [(None, 8), (3, 3), (20, 8),
                                          (0.5, 4), (1.0, 8), (0.01, 1)])
def test_an_epoch_ends_where_the_loop_stops(limit, steps):
    from pyg_fastload.distributed.seeds import rank_seed_sampler
    coll = Collectives(DistContext.current(timedelta(seconds=30)))
    sampler = rank_seed_sampler(coll, 250, 32, torch.Generator().manual_seed(0),
                                limit=limit)
    assert len(sampler) == steps * 32
    # the first seeds of the epoch's order, as the loop would take them
    full = rank_seed_sampler(coll, 250, 32, torch.Generator().manual_seed(0))
    assert list(sampler) == list(full)[:steps * 32]
