r"""``replicated``: the whole dataset on every rank, each epoch's training
seeds split across the ranks (one process is this mode with one rank)."""
from __future__ import annotations

from .base import LoadingMode

__all__ = ['Replicated']


class Replicated(LoadingMode):
    r"""Every rank holds the whole :obj:`source`; each epoch one permutation
    of all training seeds (the same on every rank) is split across the
    ranks, padded to equal shares as ``DistributedSampler`` does;
    evaluation seeds are sharded. With one rank: the plain loaders."""
    name = 'replicated'
