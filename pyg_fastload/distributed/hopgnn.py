r"""HopGNN's feature-centric training on one rank: every rank draws its
mini-batch from the global training set as in data parallelism, the roots
are routed to the rank that owns their features, and each rank samples one
micrograph (a disjoint computation tree) per root it received and trains
them, fetching the union of its micrographs' remote rows once per owner
per iteration (pre-gathering, in
:class:`~pyg_fastload.distributed.PartitionedFeatureStore`).

Micrographs are sampled on the whole topology, which every rank holds
(``partition.full_topology``): topology is small next to features
(products-like's ``meta.json``: 495 MB of neighbour ids, 980 MB of
features), and a full topology
keeps micrograph sampling local with no collectives.

The update equals data-parallel training on the same global batch when
each rank's loss is the *sum* over the roots it trained divided by the
per-rank batch size (DDP averages the ranks' gradients), and no layer uses
batch statistics (batch norm sees only the micrographs one rank trains).
Each rank trains all micrographs homed on it in one step per iteration:
HopGNN's time steps (one per origin model, accumulating gradients before
one all-reduce) sum to the same gradient, so this is its fully merged
schedule, without moving any micrograph off its home.
"""
from __future__ import annotations

from typing import Any, List, Optional

import torch
from torch import Tensor
from torch_geometric.sampler import NodeSamplerInput, SamplerOutput

from ..graph.topology import CSCTopology
from ..partition import PartitionBook
from ..sampling import FastNeighborSampler
from .collectives import Collectives

__all__ = ['RootRouter']


class RootRouter(FastNeighborSampler):
    r"""Routes this rank's drawn roots to their homes and samples the
    micrographs of the roots homed here (a collective per batch).

    The batches it produces hold the roots this rank received (``n_id[:
    batch_size]``, in new ids; ``input_id`` = those ids), and one disjoint
    tree per root. :attr:`load` lists the roots trained here per batch.

    Args:
        topology (CSCTopology): the whole graph, in new ids.
        book (PartitionBook): who owns (homes) which node.
        part (int): this rank's part.
        collectives (Collectives): this rank's collectives.
        num_neighbors (List[int]): fan-out per hop.
        replace (bool): sample with replacement.
    """
    def __init__(self, topology: CSCTopology, book: PartitionBook, part: int,
                 collectives: Collectives, num_neighbors: List[int],
                 replace: bool = False):
        if collectives.world_size != book.num_parts:
            raise ValueError(f'{book.num_parts} parts but world size '
                             f'{collectives.world_size}')
        super().__init__(topology, num_neighbors, replace=replace,
                         disjoint=True)
        self.book = book
        self.part = part
        self.collectives = collectives
        self.load: List[int] = []

    def route(self, roots: Tensor) -> Tensor:
        r"""Sends each root to its home; returns the roots homed here, in
        the order of the ranks that drew them."""
        roots = roots.long()
        owner = self.book.owner(roots)
        order = torch.argsort(owner, stable=True)
        sizes = torch.bincount(owner,
                               minlength=self.collectives.world_size)
        got = self.collectives.exchange(
            list(roots[order].split(sizes.tolist())), 'sampling',
            'route the roots to their homes')
        return torch.cat(got)

    def sample_from_nodes(self, inputs: NodeSamplerInput,
                          **kwargs: Any) -> SamplerOutput:
        self.collectives.begin_batch()
        home = self.route(inputs.node)
        self.load.append(home.numel())
        generator: Optional[torch.Generator] = kwargs.get('generator')
        out = self.sample(home, generator=generator)
        out.metadata = (home, None)
        return out

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(part={self.part}, '
                f'num_neighbors={self.num_neighbors})')
