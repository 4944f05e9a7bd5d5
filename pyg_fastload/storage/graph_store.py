r"""``CSCGraphStore``: a PyG ``GraphStore`` over the shared CSC topology."""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import EdgeAttr, GraphStore
from torch_geometric.data.graph_store import EdgeLayout

from ..errors import HETERO_UNSUPPORTED
from ..graph.topology import CSCTopology

__all__ = ['CSCGraphStore']


class CSCGraphStore(GraphStore):
    r"""Holds one homogeneous graph as a :class:`~pyg_fastload.CSCTopology`
    (in memory or memory-mapped) and answers ``get_edge_index`` in COO, CSR
    or CSC layout. pyg_fastload's samplers read :attr:`topology` directly;
    PyG's samplers go through :meth:`csc`.

    Edge ids: where the topology keeps the original edge order
    (``edge_id``), the store presents the edges as COO in that order, so
    PyG's ``e_id`` are original edge ids; otherwise the CSC order is the
    edge order.

    Args:
        topology (CSCTopology, optional): the graph; or put one later with
            :meth:`put_edge_index`.
    """
    def __init__(self, topology: Optional[CSCTopology] = None):
        super().__init__()
        self.topology = topology

    def _size(self) -> Tuple[int, int]:
        n = self.topology.num_nodes
        return (n, n)

    def _put_edge_index(self, edge_index: Tuple[Tensor, Tensor],
                        edge_attr: EdgeAttr) -> bool:
        if edge_attr.edge_type is not None:
            raise NotImplementedError(HETERO_UNSUPPORTED)
        row, col = edge_index
        size = edge_attr.size
        layout = EdgeLayout(edge_attr.layout)
        if layout == EdgeLayout.CSC:
            num_nodes = col.numel() - 1
            self.topology = CSCTopology(col.long(), row, num_nodes)
            return True
        if layout == EdgeLayout.CSR:
            num_nodes = row.numel() - 1
            src = torch.repeat_interleave(torch.arange(num_nodes),
                                          row[1:] - row[:-1])
            row, col = src, col
        num_nodes = None if size is None else max(size)
        self.topology = CSCTopology.from_edge_index(
            torch.stack([row.long(), col.long()]), num_nodes)
        return True

    def _get_edge_index(self, edge_attr: EdgeAttr) -> Optional[Tuple[Tensor,
                                                                     Tensor]]:
        topo = self.topology
        if topo is None or edge_attr.edge_type is not None:
            return None
        layout = EdgeLayout(edge_attr.layout)
        if layout == EdgeLayout.CSC:
            return topo.indices.long(), topo.indptr
        row, col = self._coo()
        if layout == EdgeLayout.COO:
            return row, col
        perm = torch.argsort(row, stable=True)
        counts = torch.bincount(row, minlength=topo.num_nodes)
        rowptr = torch.zeros(topo.num_nodes + 1, dtype=torch.long)
        torch.cumsum(counts, 0, out=rowptr[1:])
        return rowptr, col[perm]

    def _coo(self) -> Tuple[Tensor, Tensor]:
        r"""``(row, col)`` in the original edge order."""
        topo = self.topology
        row, col = topo.indices.long(), topo.destinations()
        if topo.edge_id is None:
            return row, col
        order = topo.edge_id.long()
        out_row, out_col = torch.empty_like(row), torch.empty_like(col)
        out_row[order] = row
        out_col[order] = col
        return out_row, out_col

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        if self.topology is None or edge_attr.edge_type is not None:
            return False
        self.topology = None
        return True

    def get_all_edge_attrs(self) -> List[EdgeAttr]:
        if self.topology is None:
            return []
        if self.topology.edge_id is None:
            return [EdgeAttr(None, EdgeLayout.CSC, True, self._size())]
        return [EdgeAttr(None, EdgeLayout.COO, False, self._size())]
