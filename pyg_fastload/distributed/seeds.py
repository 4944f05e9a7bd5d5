r"""Which training seeds each rank takes per epoch, so that every rank runs
the same number of steps even when parts hold different numbers of seeds
(a rank that ran out of steps early would leave the others waiting in the
gradient all-reduce)."""
from __future__ import annotations

from typing import Iterator, Optional, Union

import torch
from torch.utils.data import DistributedSampler

from .collectives import Collectives

__all__ = ['RankSeedSampler', 'agree_num_batches', 'in_order',
           'rank_seed_sampler', 'shard']


def shard(seeds: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    r"""Rank :obj:`rank`'s share of :obj:`seeds` (every
    :obj:`world_size`-th, from position :obj:`rank`): evaluation seeds,
    each evaluated once over all ranks."""
    return seeds[rank::world_size]


def agree_num_batches(collectives: Collectives, num_seeds: int,
                      batch_size: int, drop_last: bool = False) -> int:
    r"""The training batches per epoch every rank runs: the most any rank
    needs for its :obj:`num_seeds` seeds (a collective)."""
    mine = num_seeds // batch_size if drop_last else \
        -(-num_seeds // batch_size)
    agreed = collectives.max_int(mine, 'agree on the steps per epoch')
    if agreed == 0:
        raise ValueError(f'no rank has a full training batch ({num_seeds} '
                         f'seeds here, batch_size={batch_size})')
    return agreed


def limited_batches(steps: int, limit: Union[None, int, float]) -> int:
    r""":obj:`steps` batches cut to :obj:`limit` as Lightning counts it: an
    int is a number of batches, a float a share of them (at least one)."""
    if limit is None or isinstance(limit, bool):
        return steps
    if isinstance(limit, float):
        return steps if limit >= 1.0 else max(1, min(steps,
                                                      int(steps * limit)))
    return max(1, min(steps, int(limit)))


class RankSeedSampler(DistributedSampler):
    r"""Yields :obj:`num_samples` positions into a rank's seeds per epoch.
    A ``DistributedSampler``, so that Lightning (whose
    ``use_distributed_sampler`` replaces any other sampler) keeps it; its
    order comes from :obj:`generator`, never from ``set_epoch``.

    * ``shard_across_ranks=True`` (every rank holds all seeds): one
      permutation of all :obj:`num_seeds` seeds, the same on every rank
      (their generators start from the same seed), of which rank ``r``
      takes every ``world_size``-th from position ``r`` (padded by
      wrapping to equal lengths, as ``DistributedSampler`` does), so the
      ranks' shares are disjoint up to the padding;
    * ``shard_across_ranks=False`` (each rank holds its own part's seeds):
      a permutation of the rank's seeds.

    A rank whose share is shorter than :obj:`num_samples` continues with
    another permutation (its seeds are revisited, never dropped), so all
    ranks run ``num_samples / batch_size`` steps.

    Args:
        num_seeds (int): seeds the positions index.
        num_samples (int): positions per epoch.
        generator (torch.Generator): the random stream.
        rank (int): this rank.
        world_size (int): number of ranks.
        shard_across_ranks (bool): see above.
        shuffle (bool): permute (else keep the seeds' order).

    Example:
        >>> from pyg_fastload.distributed import RankSeedSampler
        >>> sampler = RankSeedSampler(5, 4, rank=1, world_size=2,
        ...                           shard_across_ranks=True, shuffle=False)
        >>> list(sampler)  # every 2nd of 0..4 padded to 6, then wrapped
        [1, 3, 0, 1]
    """
    def __init__(self, num_seeds: int, num_samples: int,
                 generator: Optional[torch.Generator] = None, rank: int = 0,
                 world_size: int = 1, shard_across_ranks: bool = False,
                 shuffle: bool = True):
        if num_seeds < 1 and num_samples > 0:
            raise ValueError(f"'num_seeds' = {num_seeds} must be >= 1: this "
                             f"rank has no seeds")
        super().__init__(range(num_seeds), num_replicas=world_size,
                         rank=rank, shuffle=shuffle)
        self.num_seeds = num_seeds
        self.num_samples = num_samples
        self.generator = generator
        self.world_size = world_size
        self.shard_across_ranks = shard_across_ranks

    def _pass(self) -> torch.Tensor:
        if self.shuffle:
            order = torch.randperm(self.num_seeds, generator=self.generator)
        else:
            order = torch.arange(self.num_seeds)
        if self.shard_across_ranks:  # padded: every share equally long
            padded = -(-self.num_seeds // self.world_size) * self.world_size
            order = order.repeat(-(-padded // self.num_seeds))[:padded]
            order = order[self.rank::self.world_size]
        return order

    def __iter__(self) -> Iterator[int]:
        left = self.num_samples
        while left > 0:
            order = self._pass()
            yield from order[:left].tolist()
            left -= min(left, order.numel())

    def __len__(self) -> int:
        return self.num_samples


def in_order(num_seeds: int, collectives: Collectives) -> RankSeedSampler:
    r"""A sampler of this rank's :obj:`num_seeds` evaluation seeds (already
    its share), each once, in order."""
    return RankSeedSampler(num_seeds, num_seeds, None, collectives.rank,
                           collectives.world_size, shuffle=False)


def rank_seed_sampler(collectives: Collectives, num_seeds: int,
                      batch_size: int, generator: torch.Generator,
                      shuffle: bool = True, replicated: bool = False,
                      drop_last: bool = False,
                      limit: Union[None, int, float] = None
                      ) -> RankSeedSampler:
    r"""This rank's sampler over its :obj:`num_seeds` seeds, for the number
    of batches all ranks agree on (a collective): every rank runs the same
    number of batches, a short rank revisiting some of its seeds.
    :obj:`replicated`: every rank holds all seeds and takes its share.

    :obj:`limit` (Lightning's ``limit_train_batches`` and the like: a
    number of batches, or a share of them) ends the epoch there: the
    loaders of a collective mode sample and fetch exactly the batches the
    loop takes, on every rank (a loop that stopped early would leave some
    ranks' stages a collective ahead of the others'). The seeds are the
    first ones of the epoch's order, as the loop would take them."""
    world = collectives.world_size
    mine = -(-num_seeds // world) if replicated else num_seeds
    steps = agree_num_batches(collectives, mine, batch_size, drop_last)
    steps = limited_batches(steps, limit)
    return RankSeedSampler(num_seeds, steps * batch_size, generator,
                           collectives.rank, world,
                           shard_across_ranks=replicated, shuffle=shuffle)
