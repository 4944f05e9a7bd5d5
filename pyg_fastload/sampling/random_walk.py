r"""Random walks as a hop-wise sampler: every seed starts a walker, which at
every hop steps to one of its node's in-neighbours, uniformly (or by
:obj:`weight_attr`) over the in-edges, until the walk has as many steps as
there are hops, reaches a node without in-edges (a dead end) or stops, with
probability :obj:`stop_prob` before each step.

A walk is a draw of fan-out 1 per walker per hop through
:meth:`~pyg_fastload.sampling.FastNeighborSampler.pick`, so the engines
that call ``pick`` run it unchanged: in time (each step only along in-edges
not later than the walk's seed), and over a partition through DSP's
collective sampling, where each hop's walkers go to the owners of their
nodes, which draw their steps (the collective sampling of the DSP paper,
without its reshuffle stage: a walker needs no other walker's step).
"""
from __future__ import annotations

from typing import Any, Optional, Tuple, Union

import torch
from torch import Tensor

from ..config import check_fanouts
from ..graph.kind import is_hetero
from .neighbor_sampler import FastNeighborSampler

__all__ = ['RandomWalkSampler']


class RandomWalkSampler(FastNeighborSampler):
    r"""Random walks from the seeds (see the module's description) behind
    PyG's ``BaseSampler`` contract: hop ``i`` of a batch holds every
    walker's ``i``-th step, its edge pointing from the node stepped to
    towards the walker's node (the direction messages flow, as neighbour
    sampling's).

    A walker goes on from a node it visited before (its next step is drawn
    there again), so a batch keeps no per-hop node counts
    (``num_sampled_nodes``): a model must not trim layers by hop on it.
    With ``disjoint=True`` every seed's walk is a tree of its own
    (``batch`` tells the walk of every node); otherwise the walks' nodes
    are merged.

    Args:
        data: a ``Data``, a homogeneous ``(FeatureStore, GraphStore)``
            tuple or a :class:`~pyg_fastload.CSCTopology` (a heterogeneous
            graph is refused: a walk there follows a metapath, which this
            sampler does not take).
        num_neighbors (List[int]): one ``1`` per step: ``[1, 1, 1]`` walks
            3 steps.
        stop_prob (float): the probability that a walker stops before each
            step, in ``[0, 1)`` (default: 0: every walk runs to its length
            or a dead end).
        **options: :class:`~pyg_fastload.sampling.FastNeighborSampler`'s
            (``subgraph_type``, ``disjoint``, ``weight_attr``,
            ``time_attr`` with ``temporal_strategy='uniform'``,
            ``replace`` (no effect: one step per hop), ``share_memory``,
            ``device``).

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload import FastNeighborLoader
        >>> ring = Data(x=torch.randn(6, 4), edge_index=torch.tensor(
        ...     [[1, 2, 3, 4, 5, 0], [0, 1, 2, 3, 4, 5]]))  # i + 1 -> i
        >>> loader = FastNeighborLoader(ring, num_neighbors=[1, 1, 1],
        ...                             batch_size=2, disjoint=True,
        ...                             neighbor_sampler='random_walk')
        >>> batch = next(iter(loader))  # 0 <- 1 <- 2 <- 3, 1 <- 2 <- 3 <- 4
        >>> batch.n_id.tolist(), batch.batch.tolist()
        ([0, 1, 1, 2, 2, 3, 3, 4], [0, 1, 0, 1, 0, 1, 0, 1])
    """
    walks = True
    typed_class = None  # no heterogeneous engine: such a graph is refused

    def __init__(self, data: Any, num_neighbors: Any, *,
                 stop_prob: float = 0.0, **options: Any):
        if is_hetero(data):
            raise ValueError("'data' is a heterogeneous graph: a random walk "
                             "there follows a metapath, which "
                             "neighbor_sampler='random_walk' does not take; "
                             "sample it with 'neighbor' or 'labor'")
        if isinstance(stop_prob, bool) or not isinstance(
                stop_prob, (int, float)) or not 0.0 <= stop_prob < 1.0:
            raise ValueError(f"'stop_prob' must be a probability in [0, 1), "
                             f"got {stop_prob!r}")
        strategy = options.get('temporal_strategy', 'uniform')
        if strategy != 'uniform':
            raise ValueError(f"'temporal_strategy={strategy!r}' takes the "
                             f"most recent edges and draws nothing: random "
                             f"walks step with 'uniform'")
        self.stop_prob = float(stop_prob)
        super().__init__(data, num_neighbors, **options)

    def _take_fanouts(self, fanouts: Any) -> int:
        self.num_neighbors = check_fanouts(fanouts, zero_hops=True)
        if any(k != 1 for k in self.num_neighbors):
            raise ValueError(
                f"'num_neighbors' = {self.num_neighbors}: a random walk takes "
                f"one step per hop: give [1] * walk_length, e.g. [1, 1, 1] "
                f"for walks of 3 steps")
        return len(self.num_neighbors)

    def pick(self, hop: int, start: Tensor, deg: Tensor,
             k: Union[int, Tensor], indices: Tensor,
             generator: Optional[torch.Generator]
             ) -> Tuple[Tensor, Tensor]:
        r"""Every walker's step: one in-edge of its segment, unless it is a
        dead end or stops (probability :attr:`stop_prob`)."""
        if self.stop_prob:
            stop = torch.rand(deg.shape, dtype=torch.float64,
                              generator=generator,
                              device=deg.device) < self.stop_prob
            deg = torch.where(stop, 0, deg)
        return self._sample(start, deg, 1, True, generator)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(walk_length='
                f'{self.num_hops}, stop_prob={self.stop_prob}, '
                f'disjoint={self.disjoint}, time_attr={self.time_attr!r})')
