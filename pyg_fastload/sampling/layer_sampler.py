r"""Layer-wise sampling (DSP, Eq. 2): a fixed number of draws per layer for the
whole mini-batch instead of a fan-out per node."""
from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.sampler.base import SubgraphType

from ..config import check_fanouts
from .neighbor_sampler import SCRATCH_BATCH_SIZE, HopSampler
from .ops import arange_as, first_occurrence_mask, sample_uniform

__all__ = ['LayerWiseSampler']


class LayerWiseSampler(HopSampler):
    r"""At layer ``i`` draws ``layer_sizes[i]`` in-edges for the whole
    frontier: first ``layer_sizes[i]`` frontier nodes with replacement, node
    ``u`` with probability proportional to its total in-edge weight ``W_u``
    (its in-degree when unweighted), then for every node ``u`` drawn ``c_u``
    times, ``c_u`` of its in-edges with replacement. This equals drawing with
    replacement from the union of the frontier's adjacency lists (DSP, Eq. 2).
    Repeated draws of the same edge are kept once.

    Args:
        data: a :class:`~torch_geometric.data.Data`, a ``(FeatureStore,
            GraphStore)`` tuple or a :class:`~pyg_fastload.CSCTopology`.
        layer_sizes (List[int]): edge draws per layer (``-1``: every in-edge
            of the frontier).
        subgraph_type (str): as in
            :class:`~pyg_fastload.sampling.FastNeighborSampler`.
        weight_attr (str, optional): edge attribute with sampling weights.
        share_memory (bool): move the topology to shared memory.
        device (torch.device or str, optional): where sampling runs
            (:class:`~pyg_fastload.sampling.HopSampler`).
        batch_size (int): seeds of one batch, whose sampling scratch a
            move to a GPU leaves room for.
    """
    def __init__(
        self,
        data: Any,
        layer_sizes: List[int],
        subgraph_type: Union[SubgraphType, str] = 'directional',
        weight_attr: Optional[str] = None,
        share_memory: bool = False,
        device: Optional[Union[str, torch.device]] = None,
        batch_size: int = SCRATCH_BATCH_SIZE,
    ):
        super().__init__(data, layer_sizes, subgraph_type, disjoint=False,
                         weight_attr=weight_attr, share_memory=share_memory,
                         device=device, batch_size=batch_size)

    def _take_fanouts(self, fanouts: Any) -> int:
        self.layer_sizes = check_fanouts(fanouts)
        return len(self.layer_sizes)

    def _hop_edges(self, hop: int, frontier: int, in_edges: int) -> int:
        size = self.layer_sizes[hop]
        return in_edges if size < 0 else min(size, in_edges)

    hop_tasks = False  # one draw over the whole frontier per layer

    def draw(self, hop: int, start: Tensor, deg: Tensor,
             generator: torch.Generator) -> Tuple[Tensor, Tensor]:
        size = self.layer_sizes[hop]
        if size < 0:
            return sample_uniform(start, deg, -1, False, generator)
        if self.cum_weight is None:
            mass = deg.to(torch.float64)
        else:
            end = (start + deg - 1).clamp(min=0)
            before = (start - 1).clamp(min=0)
            mass = torch.where(
                deg > 0,
                self.cum_weight[end] - torch.where(
                    start > 0, self.cum_weight[before], 0.0), 0.0)
        if size == 0 or not bool((mass > 0).any()):
            return start.new_empty(0), torch.zeros_like(deg)
        picks = torch.multinomial(mass, size, replacement=True,
                                  generator=generator)
        draws = torch.bincount(picks, minlength=deg.numel())
        pos, counts = self._sample(start, deg, draws, True, generator)
        rows = torch.repeat_interleave(arange_as(deg), counts,
                                       output_size=pos.numel())
        keep = first_occurrence_mask(pos)
        return pos[keep], torch.bincount(rows[keep], minlength=deg.numel())

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(layer_sizes={self.layer_sizes}, '
                f'subgraph_type={self.subgraph_type.value!r})')
