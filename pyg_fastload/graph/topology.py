r"""Graph topology in CSC form, the one representation shared by the samplers,
the graph store and (later) the partitioners.

In CSC form the in-neighbours of node ``v`` are
``indices[indptr[v]:indptr[v + 1]]``: for PyG's default
``flow='source_to_target'`` these are the sources of the edges that point at
``v``, exactly the nodes a neighbour sampler draws for ``v``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Optional, TypeVar, Union

import torch
from torch import Tensor

from ..config import free_cuda_memory

__all__ = ['CSCTopology', 'device_copy', 'index_dtype_for', 'moved_arrays']

Topology = TypeVar('Topology')

#: Held while a topology is copied to a device: one copy per device, even
#: when several threads ask at once.
_COPYING = threading.Lock()


def device_copy(topology: Topology, device: Union[str, torch.device],
                make: Callable[[torch.device], Topology],
                reserve_bytes: int = 0) -> Topology:
    r""":obj:`topology` (homogeneous or typed) on :obj:`device`: itself if
    it is there, else its copy there, made by :obj:`make` once per device
    (under a lock) and kept in its ``_copies``; a copy that would leave
    less than :obj:`reserve_bytes` of a GPU's free memory (sampling's
    scratch) is refused."""
    device = torch.device(device)
    if device.type == 'cuda' and device.index is None:
        device = torch.device('cuda', torch.cuda.current_device())
    if device == topology.device:
        return topology
    with _COPYING:
        copy = topology._copies.get(device)
        if copy is None:
            if device.type == 'cuda':
                _check_room(topology.nbytes(), reserve_bytes,
                            free_cuda_memory(device), device)
            copy = topology._copies[device] = make(device)
    return copy


def _check_room(nbytes: int, reserve_bytes: int, free: int,
                device: torch.device) -> None:
    r"""Refuses a topology of :obj:`nbytes` that would leave less than
    :obj:`reserve_bytes` of :obj:`free` bytes on :obj:`device`."""
    if nbytes + reserve_bytes > free:
        raise ValueError(
            f"the graph's topology takes {nbytes / 2**20:,.0f} MiB and "
            f"sampling's scratch {reserve_bytes / 2**20:,.0f} MiB, more "
            f"than the {free / 2**20:,.0f} MiB free on {device}: sample on "
            f"the CPU (sampling_device='cpu'), or use a smaller batch_size "
            f"or fan-out")


def moved_arrays(topology: Any, device: torch.device,
                 names: Iterable[str]) -> Dict[str, Optional[Tensor]]:
    r"""The arrays :obj:`names` of :obj:`topology` on :obj:`device`
    (missing ones stay :obj:`None`)."""
    return {name: None if getattr(topology, name) is None
            else getattr(topology, name).to(device) for name in names}

_INT32_MAX = 2**31 - 1
#: Edges counted at once by :meth:`CSCTopology.out_degree` (bounds the
#: ``int64`` copy ``bincount`` needs of ``int32`` ids).
_COUNT_CHUNK = 2**26


def index_dtype_for(max_value: int) -> torch.dtype:
    r"""The smallest signed integer dtype (int32 or int64) holding
    :obj:`max_value`.

    Args:
        max_value (int): the largest value to hold.

    Example:
        >>> from pyg_fastload.graph import index_dtype_for
        >>> index_dtype_for(2**31 - 1), index_dtype_for(2**31)
        (torch.int32, torch.int64)
    """
    return torch.int32 if max_value <= _INT32_MAX else torch.int64


@dataclass
class CSCTopology:
    r"""A homogeneous graph's edges grouped by destination node.

    Args:
        indptr (torch.Tensor): ``int64`` offsets of shape ``[num_nodes + 1]``.
        indices (torch.Tensor): source node of every edge, grouped by
            destination (``int32`` where the node count allows it).
        num_nodes (int): number of nodes.
        edge_id (torch.Tensor, optional): the position of every CSC edge in
            the original ``edge_index``; :obj:`None` means the original edges
            were already sorted by destination (identity).
        edge_weight (torch.Tensor, optional): a weight per CSC edge, used by
            weighted sampling.

    Example:
        >>> import torch
        >>> from pyg_fastload import CSCTopology
        >>> topo = CSCTopology.from_edge_index(
        ...     torch.tensor([[0, 1, 2], [1, 2, 1]]), num_nodes=3)
        >>> topo.indptr.tolist(), topo.indices.tolist()  # node 1: from 0, 2
        ([0, 0, 2, 3], [0, 2, 1])
    """
    indptr: Tensor
    indices: Tensor
    num_nodes: int
    edge_id: Optional[Tensor] = None
    edge_weight: Optional[Tensor] = None
    #: Copies on other devices made by :meth:`to`, one per device.
    _copies: Dict[torch.device, 'CSCTopology'] = field(
        default_factory=dict, repr=False, compare=False)

    @property
    def num_edges(self) -> int:
        return int(self.indices.numel())

    @property
    def device(self) -> torch.device:
        r"""Where the arrays live (where a sampler of this topology runs)."""
        return self.indptr.device

    def nbytes(self) -> int:
        r"""Bytes of the arrays (what a copy to another device takes)."""
        return sum(value.numel() * value.element_size() for value in (
            self.indptr, self.indices, self.edge_id, self.edge_weight)
            if value is not None)

    def to(self, device: Union[str, torch.device],
           reserve_bytes: int = 0) -> 'CSCTopology':
        r"""This topology with every array on :obj:`device`: itself if they
        are there already, else a copy, made once per device and kept
        with this topology (the loaders of one graph share it). A sampler
        given a topology on a CUDA device samples there: its batches' ids
        come back on that device. A copy that would leave less than
        :obj:`reserve_bytes` of the device's free memory (what sampling
        allocates there:
        :meth:`~pyg_fastload.sampling.HopSampler.scratch_bytes`) is
        refused."""
        return device_copy(self, device, lambda to: CSCTopology(
            num_nodes=self.num_nodes, **moved_arrays(self, to, (
                'indptr', 'indices', 'edge_id', 'edge_weight'))),
            reserve_bytes)

    @classmethod
    def from_edge_index(
        cls,
        edge_index: Tensor,
        num_nodes: Optional[int] = None,
        edge_weight: Optional[Tensor] = None,
        num_sources: Optional[int] = None,
    ) -> 'CSCTopology':
        r"""Builds the CSC form of a ``[2, num_edges]`` COO ``edge_index``
        (row 0: source, row 1: destination) with one stable sort. A
        bipartite relation gives :obj:`num_sources`, the number of source
        nodes (default: :obj:`num_nodes`, sources and destinations are the
        same nodes)."""
        if not isinstance(edge_index, Tensor):
            raise TypeError(f"'edge_index' must be a torch.Tensor, got "
                            f"{type(edge_index).__name__}")
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise ValueError(f"'edge_index' must have shape [2, num_edges], "
                             f"got {list(edge_index.shape)}")
        if edge_index.dtype.is_floating_point or \
                edge_index.dtype == torch.bool:
            raise TypeError(f"'edge_index' must hold integer node ids, got "
                            f"dtype {edge_index.dtype}")
        edge_index = edge_index.cpu()
        num_edges = edge_index.size(1)
        if num_nodes is None:
            num_nodes = int(edge_index.max()) + 1 if num_edges > 0 else 0
        if num_sources is None:
            num_sources = num_nodes
        for row, name, bound in ((0, 'source', num_sources),
                                 (1, 'destination', num_nodes)):
            if num_edges == 0:
                break
            low, high = int(edge_index[row].min()), int(edge_index[row].max())
            if low < 0 or high >= bound:
                bad = low if low < 0 else high
                raise ValueError(
                    f"'edge_index' holds {name} node id {bad}, outside "
                    f"[0, {bound}); set 'num_nodes' on the data object to "
                    f"the true node count or fix the edge list")
        if edge_weight is not None:
            if edge_weight.numel() != num_edges:
                raise ValueError(
                    f"the edge weights have {edge_weight.numel()} entries "
                    f"but 'edge_index' has {num_edges} edges")
            edge_weight = edge_weight.reshape(-1).cpu()

        src, dst = edge_index[0], edge_index[1]
        perm: Optional[Tensor] = None
        if num_edges > 1 and not bool((dst[1:] >= dst[:-1]).all()):
            dst, perm = torch.sort(dst, stable=True)
            src = src[perm]
            if edge_weight is not None:
                edge_weight = edge_weight[perm]
        counts = torch.bincount(dst, minlength=num_nodes)
        indptr = torch.zeros(num_nodes + 1, dtype=torch.long)
        torch.cumsum(counts, 0, out=indptr[1:])
        indices = src.to(index_dtype_for(max(num_sources - 1, 0)))
        if perm is not None:
            perm = perm.to(index_dtype_for(max(num_edges - 1, 0)))
        return cls(indptr=indptr, indices=indices, num_nodes=num_nodes,
                   edge_id=perm, edge_weight=edge_weight)

    def in_degree(self) -> Tensor:
        r"""Number of in-edges per node (how many neighbours can be drawn)."""
        return self.indptr[1:] - self.indptr[:-1]

    def out_degree(self) -> Tensor:
        r"""Number of out-edges per node: how many in-neighbour lists a node
        appears in, i.e. how often a neighbour sampler can reach it
        (counted in chunks of edges: memory stays bounded on big graphs)."""
        counts = torch.zeros(self.num_nodes, dtype=torch.long,
                             device=self.device)
        for start in range(0, self.num_edges, _COUNT_CHUNK):
            counts += torch.bincount(
                self.indices[start:start + _COUNT_CHUNK].long(),
                minlength=self.num_nodes)
        return counts

    def destinations(self) -> Tensor:
        r"""The destination node of every CSC edge (``int64``)."""
        return torch.repeat_interleave(
            torch.arange(self.num_nodes, device=self.device),
            self.in_degree(),
            output_size=self.num_edges)

    def csc_order(self, values: Tensor) -> Tensor:
        r"""Edge-level :obj:`values` (one row per edge, in the original
        edge order) in CSC order: row ``k`` for the edge at CSC position
        ``k`` (``values[edge_id]``; :obj:`values` itself where the edges
        were in CSC order already)."""
        if values.dim() == 0 or values.size(0) != self.num_edges:
            raise ValueError(f"edge-level values of shape "
                             f"{list(values.shape)} for {self.num_edges} "
                             f"edges: give one row per edge")
        if self.edge_id is None:
            return values
        return values.index_select(0, self.edge_id.to(values.device).long())

    def to_edge_index(self) -> Tensor:
        r"""A ``[2, num_edges]`` COO ``edge_index`` sorted by destination."""
        return torch.stack([self.indices.long(), self.destinations()])

    def share_memory_(self) -> 'CSCTopology':
        r"""Moves every array to shared memory (for worker processes)."""
        for name in ('indptr', 'indices', 'edge_id', 'edge_weight'):
            value = getattr(self, name)
            if value is not None:
                value.share_memory_()
        return self
