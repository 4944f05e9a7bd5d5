r"""``CSCGraphStore``: a PyG ``GraphStore`` over the shared CSC topology of
a homogeneous graph, or of every relation of a heterogeneous one."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import EdgeAttr, GraphStore
from torch_geometric.data.graph_store import EdgeLayout

from ..graph.hetero_topology import EdgeType, HeteroTopology
from ..graph.kind import is_hetero, is_topology
from ..graph.topology import CSCTopology

__all__ = ['CSCGraphStore']


class CSCGraphStore(GraphStore):
    r"""Holds one homogeneous graph as a :class:`~pyg_fastload.CSCTopology`
    (in memory or memory-mapped), or the relations of a heterogeneous one
    as a :class:`~pyg_fastload.graph.HeteroTopology`, and answers
    ``get_edge_index`` in COO, CSR or CSC layout (per edge type).
    pyg_fastload's samplers read :attr:`topology` directly; PyG's samplers
    go through :meth:`csc`.

    Edge ids: where the topology keeps the original edge order
    (``edge_id``), the store presents the edges as COO in that order, so
    PyG's ``e_id`` are original edge ids; otherwise the CSC order is the
    edge order.

    Heterogeneous edges are put per edge type with ``size=(num_src,
    num_dst)``; the topology over all of them is built at the first read.

    Edge arrays: a homogeneous graph's edge-level arrays (e.g. the ``time``
    of every edge, a dataset directory's ``"level": "edge"`` arrays) live
    here beside the edges they describe, one row per edge **in CSC order**
    (:meth:`edge_array`; why here: "Temporal sampling" in
    ``docs/guide/loader.md``). A heterogeneous graph's edge arrays belong
    to one relation each (:obj:`edge_type`): one row per edge of the
    relation, in its CSC order (:meth:`HeteroTopology.relation_topology`'s).
    Putting new edges drops the arrays of the old ones.

    Args:
        topology (CSCTopology or HeteroTopology, optional): the graph; or
            put its edges later with :meth:`put_edge_index`.
        edge_arrays (dict, optional): edge arrays of a homogeneous
            :obj:`topology` by name, or of a heterogeneous one by edge type
            and name (:meth:`put_edge_array`).

    Example:
        >>> import torch
        >>> from pyg_fastload import CSCGraphStore, CSCTopology
        >>> store = CSCGraphStore(CSCTopology.from_edge_index(
        ...     torch.tensor([[0, 1, 2], [1, 2, 1]]), num_nodes=3))
        >>> store.get_edge_index(None, 'coo')  # original edge order
        (tensor([0, 1, 2]), tensor([1, 2, 1]))
    """
    def __init__(self, topology: Union[CSCTopology, HeteroTopology,
                                       None] = None,
                 edge_arrays: Union[Dict[str, Tensor],
                                    Dict[EdgeType, Dict[str, Tensor]],
                                    None] = None):
        super().__init__()
        self._topology = topology
        # Relations put one by one: (COO edge index, (num_src, num_dst)).
        self._pending: Dict[EdgeType, Tuple[Tensor, Tuple[int, int]]] = {}
        # By edge type (None: the homogeneous graph's), then by name.
        self._edge_arrays: Dict[Optional[EdgeType], Dict[str, Tensor]] = {}
        if is_topology(topology, hetero=True):
            for edge_type, arrays in (edge_arrays or {}).items():
                for name, values in arrays.items():
                    self.put_edge_array(name, values, edge_type)
        else:
            for name, values in (edge_arrays or {}).items():
                self.put_edge_array(name, values)

    # Edge arrays #############################################################

    def put_edge_array(self, name: str, values: Tensor,
                       edge_type: Optional[EdgeType] = None) -> None:
        r"""Holds :obj:`values`, one row per edge of the homogeneous
        topology in CSC order (row ``k``: the edge at CSC position ``k``;
        :meth:`CSCTopology.csc_order` permutes rows in the original edge
        order), as edge array :obj:`name`; or with :obj:`edge_type`, one
        row per edge of that relation of the heterogeneous topology, in
        the relation's CSC order."""
        topo = self.topology
        if edge_type is None:
            if not is_topology(topo, hetero=False):
                raise ValueError(
                    f"edge array {name!r}: the store holds no homogeneous "
                    f"topology to index it by; put the edges first" + (
                        ' (a heterogeneous one: name the edge_type whose '
                        'edges it describes)' if is_topology(
                            topo, hetero=True) else ''))
            count, what = topo.num_edges, 'edge'
        else:
            edge_type = tuple(edge_type)
            if not is_topology(topo, hetero=True) or \
                    edge_type not in topo.edge_types:
                held = topo.edge_types if is_topology(
                    topo, hetero=True) else []
                raise ValueError(
                    f"edge array {name!r} of edge type {edge_type}: the "
                    f"store holds no such relation (it holds {held}); put "
                    f"its edges first, or give a homogeneous graph's edge "
                    f"arrays without an edge_type")
            count = topo.num_edges_of(edge_type)
            what = f'edge of {edge_type}'
        if not isinstance(values, Tensor) or values.dim() == 0 or \
                values.size(0) != count:
            shape = list(values.shape) if isinstance(values, Tensor) else \
                type(values).__name__
            raise ValueError(f"edge array {name!r} is {shape}; give one row "
                             f"per {what} ({count}), in CSC order")
        self._edge_arrays.setdefault(edge_type, {})[name] = values

    def edge_array(self, name: str, edge_type: Optional[EdgeType] = None
                   ) -> Optional[Tensor]:
        r"""Edge array :obj:`name` (one row per edge, in CSC order) of the
        homogeneous graph, or of relation :obj:`edge_type`; :obj:`None`
        where the store holds none of that name."""
        key = None if edge_type is None else tuple(edge_type)
        return self._edge_arrays.get(key, {}).get(name)

    @property
    def edge_array_names(self) -> List[str]:
        r"""The names of the homogeneous graph's edge arrays held."""
        return self.edge_array_names_of(None)

    def edge_array_names_of(self, edge_type: Optional[EdgeType]) -> List[str]:
        r"""The names of relation :obj:`edge_type`'s edge arrays held (of
        the homogeneous graph's where it is :obj:`None`)."""
        key = None if edge_type is None else tuple(edge_type)
        return sorted(self._edge_arrays.get(key, {}))

    @property
    def topology(self) -> Union[CSCTopology, HeteroTopology, None]:
        r"""The graph (heterogeneous relations put one by one are joined
        into one topology here, once)."""
        if self._pending:
            sizes: Dict[str, int] = {}
            for (src, _, dst), (_, (num_src, num_dst)) in \
                    self._pending.items():
                for node_type, count in ((src, num_src), (dst, num_dst)):
                    if sizes.setdefault(node_type, count) != count:
                        raise ValueError(
                            f"node type {node_type!r} was put with "
                            f"{sizes[node_type]} and {count} nodes in "
                            f"different edge types' 'size'")
            self._topology = HeteroTopology.from_relations(
                sizes, {e: v[0] for e, v in self._pending.items()})
            self._pending = {}
        return self._topology

    def _relation(self, edge_type: Optional[EdgeType]
                  ) -> Optional[CSCTopology]:
        topo = self.topology
        if is_topology(topo, hetero=True):
            if edge_type is None or tuple(edge_type) not in topo.edge_types:
                return None
            return topo.relation_topology(tuple(edge_type))
        return topo if edge_type is None else None

    def _put_edge_index(self, edge_index: Tuple[Tensor, Tensor],
                        edge_attr: EdgeAttr) -> bool:
        self._edge_arrays = {}  # they described the old edges
        row, col = edge_index
        size = edge_attr.size
        layout = EdgeLayout(edge_attr.layout)
        if edge_attr.edge_type is not None:
            if size is None:
                raise ValueError(f"edge type {edge_attr.edge_type}: put it "
                                 f"with size=(num_source_nodes, "
                                 f"num_destination_nodes)")
            if layout != EdgeLayout.COO:
                row, col = _to_coo(row, col, layout)
            if is_topology(self._topology, hetero=True):
                raise ValueError("this store's relations are already joined "
                                 "into one topology: build a new "
                                 "CSCGraphStore to change them")
            self._pending[tuple(edge_attr.edge_type)] = (
                torch.stack([row.long(), col.long()]),
                (int(size[0]), int(size[1])))
            return True
        if layout == EdgeLayout.CSC:
            num_nodes = col.numel() - 1
            self._topology = CSCTopology(col.long(), row, num_nodes)
            return True
        if layout == EdgeLayout.CSR:
            row, col = _to_coo(row, col, layout)
        num_nodes = None if size is None else max(size)
        self._topology = CSCTopology.from_edge_index(
            torch.stack([row.long(), col.long()]), num_nodes)
        return True

    def _get_edge_index(self, edge_attr: EdgeAttr) -> Optional[Tuple[Tensor,
                                                                     Tensor]]:
        topo = self._relation(edge_attr.edge_type)
        if topo is None:
            return None
        layout = EdgeLayout(edge_attr.layout)
        if layout == EdgeLayout.CSC:
            return topo.indices.long(), topo.indptr
        row, col = _coo(topo)
        if layout == EdgeLayout.COO:
            return row, col
        num_src = topo.num_nodes if edge_attr.edge_type is None else \
            self.topology.num_nodes_of(edge_attr.edge_type[0])
        perm = torch.argsort(row, stable=True)
        counts = torch.bincount(row, minlength=num_src)
        rowptr = torch.zeros(counts.numel() + 1, dtype=torch.long)
        torch.cumsum(counts, 0, out=rowptr[1:])
        return rowptr, col[perm]

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        if self._topology is None or edge_attr.edge_type is not None:
            return False
        self._topology = None
        self._edge_arrays = {}
        return True

    def get_all_edge_attrs(self) -> List[EdgeAttr]:
        topo = self.topology
        if topo is None:
            return []
        if is_hetero(topo):
            return [EdgeAttr(e, EdgeLayout.COO, False,
                             (topo.num_nodes_of(e[0]),
                              topo.num_nodes_of(e[2])))
                    for e in topo.edge_types]
        size = (topo.num_nodes, topo.num_nodes)
        if topo.edge_id is None:
            return [EdgeAttr(None, EdgeLayout.CSC, True, size)]
        return [EdgeAttr(None, EdgeLayout.COO, False, size)]


def _to_coo(row: Tensor, col: Tensor,
            layout: EdgeLayout) -> Tuple[Tensor, Tensor]:
    r"""``(row, col)`` of a CSR ``(rowptr, col)`` or CSC ``(row, colptr)``
    pair."""
    if layout == EdgeLayout.CSR:
        src = torch.repeat_interleave(torch.arange(row.numel() - 1),
                                      row[1:] - row[:-1])
        return src, col
    dst = torch.repeat_interleave(torch.arange(col.numel() - 1),
                                  col[1:] - col[:-1])
    return row, dst


def _coo(topo: CSCTopology) -> Tuple[Tensor, Tensor]:
    r"""``(row, col)`` in the original edge order."""
    row, col = topo.indices.long(), topo.destinations()
    if topo.edge_id is None:
        return row, col
    order = topo.edge_id.long()
    out_row, out_col = torch.empty_like(row), torch.empty_like(col)
    out_row[order] = row
    out_col[order] = col
    return out_row, out_col
