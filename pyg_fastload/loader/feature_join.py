r"""The feature join: a sampled subgraph's node attributes gathered into
recycled (or pinned) buffers, from a ``Data`` or ``HeteroData`` or through
a :class:`~pyg_fastload.storage.FeatureSource`'s tiers."""
from __future__ import annotations

import copy
import math
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader.utils import filter_data, filter_hetero_data
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput

from ..compat import drop_entry, has_own_entry
from ..placement import Placement
from ..storage import FeatureSource
from ..storage.buffer_pool import BufferPool
from ..storage.rows import gather_rows

__all__ = ['FeatureJoin', 'RowFetch', 'Arena', 'pooled_attrs', 'typed_pooled_attrs',
           'on_host', 'with_edge_weight', 'with_sampled']

#: The id fields of a sampler's output.
_ID_FIELDS = ('node', 'row', 'col', 'edge', 'batch')


def on_host(out: SamplerOutput) -> SamplerOutput:
    r""":obj:`out` with its ids on the CPU, where a ``Data``'s attributes
    are sliced: a copy of the ids (8 bytes each) for a batch sampled on a
    GPU, :obj:`out` itself otherwise."""
    if out.node.device.type == 'cpu':
        return out
    host = copy.copy(out)
    for name in _ID_FIELDS:
        value = getattr(out, name)
        if value is not None:
            setattr(host, name, value.cpu())
    return host


def with_edge_weight(data: Any, out: Any) -> Any:
    r""":obj:`data` (a batch) with the sampler's estimator weight of every
    sampled edge, when it gave any (LABOR-*'s ``edge_weight``; per edge
    type on a heterogeneous batch)."""
    weight = getattr(out, 'edge_weight', None)
    if isinstance(weight, dict):
        for edge_type, rows in weight.items():
            data[edge_type].edge_weight = rows
    elif weight is not None:
        data.edge_weight = weight
    return data


def with_sampled(data: Any, out: Any) -> Any:
    r""":obj:`data` (a node batch) with what its sampler adds to PyG's
    attributes: its edges' weights (:func:`with_edge_weight`) and the
    attributes in ``out.metadata[2]`` (e.g. HopGNN's ``step_ptr``,
    GraphSAINT's ``node_norm`` and ``edge_norm``)."""
    with_edge_weight(data, out)
    if len(out.metadata) > 2:
        for key, value in out.metadata[2].items():
            data[key] = value
    return data


def pooled_attrs(data: Data) -> List[str]:
    r"""The node feature matrices of :obj:`data` (2+ dims, on the CPU) that
    :meth:`FeatureJoin.from_data` gathers into pooled buffers, read from
    what :obj:`data` holds now (a tensor replaced after the loader was built
    is served, never a stale copy)."""
    return [key for key, value in data.items()
            if isinstance(value, Tensor) and value.dim() >= 2
            and not value.is_cuda and data.is_node_attr(key)
            and data.__cat_dim__(key, value) == 0]


def typed_pooled_attrs(store: Any) -> List[str]:
    r"""The feature matrices of one node type's store of a
    ``HeteroData`` (2+ dims, on the CPU) that
    :meth:`FeatureJoin.from_hetero_data` gathers into pooled buffers."""
    return [key for key, value in store.items()
            if isinstance(value, Tensor) and value.dim() >= 2
            and not value.is_cuda and store.is_node_attr(key)]


#: Recycled buffers of a :class:`RowFetch` (a few hops of the batches in
#: flight).
FETCH_BUFFERS = 32

#: An arena's rows per the most rows per seed seen.
ARENA_SLACK = 1.15

#: One hop's fetched rows of one set of nodes: per feature matrix, the
#: tensor read, its rows and the arena they were written into (if any).
Rows = Dict[str, Tuple[Tensor, Tensor, Optional[Tensor]]]


class Arena:
    r"""One batch's buffers for its fetched rows (:meth:`RowFetch.begin`):
    a slice starting at row ``offset`` is written at that row."""
    def __init__(self, seeds: int, buffers: Dict[str, Tensor]):
        self.seeds, self.buffers = seeds, buffers


class RowFetch:
    r"""ByteGNN's per-hop feature fetching: called with the ids of the
    nodes one hop reached first (a slice of the batch's ``n_id``; global
    ids on a heterogeneous graph), it gathers their rows of every feature
    matrix :class:`FeatureJoin` pools, as soon as the hop is sampled
    (:class:`~pyg_fastload.loader.sampling_pool.SamplingPool` runs it as a
    task). The join then puts the batch's slices together instead of
    gathering, when they are its ``n_id`` in order and were read from the
    tensors the graph holds at the join.

    Args:
        data (Data or HeteroData): the graph the loader joins from.
        node_offset (Tensor, optional): a heterogeneous graph's first
            global id of every node type and the total (its sampler's
            :class:`~pyg_fastload.graph.HeteroTopology`'s).
        node_types (list, optional): the node types in the order of
            :obj:`node_offset`.
        arena (bool): gather a ``Data``'s slices straight into one buffer
            per batch (:meth:`begin`), sized from the rows per seed of the
            batches before, so the join copies nothing (``False``: the
            join concatenates, e.g. into pinned memory).
    """
    def __init__(self, data: Any, node_offset: Optional[Tensor] = None,
                 node_types: Optional[Sequence[str]] = None,
                 arena: bool = True):
        self.data = data
        self.arena = arena and node_offset is None
        # The most rows per seed a batch reached so far (arena sizes).
        self._rows_per_seed = 0.0
        # The slices' buffers, recycled once their batch is joined.
        self._pool = BufferPool(max_buffers=FETCH_BUFFERS)
        self.node_offset = node_offset
        self.node_types = list(node_types or [])
        stores = [data[t] for t in self.node_types] if self.node_types \
            else [data]
        widths = [data_width(store, typed_pooled_attrs(store)
                             if self.node_types else pooled_attrs(data))
                  for store in stores]
        #: Values per row of the fetched matrices (a fetch costs rows
        #: times this).
        self.width = max(widths + [1])

    def begin(self, seeds: int) -> Optional[Arena]:
        r"""A batch's arena: per feature matrix, a buffer for the rows of
        a batch of :obj:`seeds` seeds (``None`` until a batch was
        fetched, or without arenas)."""
        if not self.arena or not self._rows_per_seed:
            return None
        rows = math.ceil(seeds * self._rows_per_seed * ARENA_SLACK)
        return Arena(seeds, {key: self._pool.empty(
            (rows, *self.data[key].shape[1:]), self.data[key].dtype)
            for key in pooled_attrs(self.data)})

    def __call__(self, ids: Tensor, offset: int = 0,
                 arena: Optional[Arena] = None) -> Any:
        r"""The rows of :obj:`ids`, which start at row :obj:`offset` of
        the batch (written there into :obj:`arena` where it has room):
        :data:`Rows` for a ``Data``; per node type, ``(ids within the
        type, Rows)`` for a ``HeteroData``."""
        if not self.node_types:
            end = offset + ids.numel()
            if arena is not None or not offset:
                seeds = arena.seeds if arena is not None else ids.numel()
                self._rows_per_seed = max(self._rows_per_seed,
                                          end / max(seeds, 1))
            rows = {}
            for key in pooled_attrs(self.data):
                whole = None if arena is None else arena.buffers.get(key)
                if whole is not None and end <= whole.size(0):
                    value = self.data[key]
                    rows[key] = (value, gather_rows(
                        value, ids, out=whole[offset:end]), whole)
                else:
                    rows.update(self._gather(self.data, [key], ids))
            return rows
        offset = self.node_offset
        types = torch.searchsorted(offset, ids, right=True) - 1
        fetched = {}
        for t, name in enumerate(self.node_types):
            store = self.data[name]
            keys = typed_pooled_attrs(store)
            if not keys:
                continue
            local = ids[types == t] - offset[t]
            if local.numel():
                fetched[name] = (local, self._gather(store, keys, local))
        return fetched

    def _gather(self, store: Any, keys: List[str], ids: Tensor) -> Rows:
        return {key: (store[key], gather_rows(store[key], ids, out=(
            self._pool.empty((ids.numel(), *store[key].shape[1:]),
                             store[key].dtype))), None) for key in keys}


def data_width(store: Any, keys: List[str]) -> int:
    r"""Values per row of :obj:`store`'s matrices :obj:`keys`."""
    return sum(store[key][0].numel() for key in keys if store[key].numel())


def _slices(rows: Optional[List[Tuple[Tensor, Any]]], node: Tensor,
            store: Any, keys: List[str],
            node_type: Optional[str] = None) -> Optional[List[Rows]]:
    r"""The fetched rows (:class:`RowFetch`) of a batch's nodes :obj:`node`
    (of :obj:`node_type`), in order, if they are its nodes and were read
    from :obj:`store`'s matrices :obj:`keys` as they are now; else
    ``None`` (the join gathers)."""
    if not rows or any(fetched is None for _, fetched in rows):
        return None
    if node_type is None:
        parts = [(ids, fetched) for ids, fetched in rows]
    else:
        parts = [fetched[node_type] for _, fetched in rows
                 if node_type in fetched]
    if not parts or not torch.equal(torch.cat([i for i, _ in parts]), node):
        return None
    if any(key not in got or got[key][0] is not store[key]
           for _, got in parts for key in keys):
        return None
    return [got for _, got in parts]


class FeatureJoin:
    r"""Joins sampled subgraphs with their attributes.

    For a ``Data``, node feature matrices (:func:`pooled_attrs`) are
    gathered into pooled buffers and PyG's ``filter_data`` slices everything
    else; both read the ``Data`` as it is when the batch is made. For a
    feature source, every attribute is read with its ``gather``.

    Args:
        placement (Placement): the loader's placement; where it pins host
            buffers (batches copied to a GPU), buffers are pinned instead
            of recycled.
        max_buffers (int): recycled buffers per shape and dtype (the batches
            that can be alive at once).
    """
    def __init__(self, placement: Placement, max_buffers: int):
        self._pinned = placement.pinned
        self._pool = BufferPool(max_buffers=max_buffers)

    def from_data(self, data: Data, pooled: List[str], out: SamplerOutput,
                  breakdown: Dict[str, float]) -> Data:
        r"""The batch of :obj:`data`, whose attributes :obj:`pooled` are
        gathered into pooled buffers (feature seconds added to
        :obj:`breakdown`; ids sampled on a GPU are read from a copy on the
        CPU, where :obj:`data` is)."""
        out = on_host(out)
        rest = copy.copy(data)
        rest.num_nodes = data.num_nodes
        for key in pooled:
            del rest[key]
        batch = filter_data(rest, out.node, out.row, out.col, out.edge)
        if not has_own_entry(data, 'num_nodes'):
            drop_entry(batch, 'num_nodes')
        started = time.perf_counter()
        slices = _slices(getattr(out, 'fetched_rows', None), out.node, data,
                         pooled)
        for key in pooled:
            whole = None if slices is None else slices[0][key][2]
            if whole is not None and all(got[key][2] is whole
                                         for got in slices):
                batch[key] = whole[:out.node.numel()]  # written in place
                continue
            value = data[key]
            buffer = self.buffer((out.node.numel(), *value.shape[1:]),
                                 value.dtype)
            batch[key] = gather_rows(value, out.node, out=buffer) \
                if slices is None else \
                torch.cat([got[key][1] for got in slices], out=buffer)
        breakdown['feature_loading.storage'] += time.perf_counter() - started
        return batch

    def from_hetero_data(self, data: HeteroData, out: HeteroSamplerOutput,
                         breakdown: Dict[str, float]) -> HeteroData:
        r"""The batch of :obj:`data`: every node type's feature matrices
        gathered into pooled buffers, the rest sliced by PyG's
        ``filter_hetero_data`` (per-type ``n_id`` and the sampler's other
        outputs are the caller's to add)."""
        rest = copy.copy(data)
        pooled = {}
        for node_type in data.node_types:
            store = data[node_type]
            keys = typed_pooled_attrs(store)
            if keys:
                pooled[node_type] = keys
                rest[node_type].num_nodes = store.num_nodes
                for key in keys:
                    del rest[node_type][key]
        batch = filter_hetero_data(rest, out.node, out.row, out.col,
                                   out.edge)
        started = time.perf_counter()
        for node_type, keys in pooled.items():
            if 'num_nodes' not in data[node_type]:
                del batch[node_type].num_nodes
            index = out.node[node_type]
            slices = _slices(getattr(out, 'fetched_rows', None), index,
                             data[node_type], keys, node_type)
            for key in keys:
                value = data[node_type][key]
                buffer = self.buffer((index.numel(), *value.shape[1:]),
                                     value.dtype)
                batch[node_type][key] = gather_rows(
                    value, index, out=buffer) if slices is None else \
                    torch.cat([got[key][1] for got in slices], out=buffer)
        breakdown['feature_loading.storage'] += time.perf_counter() - started
        return batch

    def from_source(self, store: FeatureSource, out: SamplerOutput,
                    breakdown: Dict[str, float]) -> Data:
        r"""The batch read through :obj:`store` (seconds per tier added to
        :obj:`breakdown` as ``feature_loading.<tier>``)."""
        store.retire(out.node)
        batch = Data(edge_index=torch.stack([out.row, out.col]))
        timings: Dict[str, float] = {}
        for attr in store.get_all_tensor_attrs():
            if attr.group_name is not None:
                continue
            size = store.get_tensor_size(attr)
            buffer = None
            if len(size) >= 2 and store.device.type == 'cpu':
                buffer = self.buffer((out.node.numel(), *size[1:]),
                                     store.dtype_of(attr.attr_name))
            batch[attr.attr_name] = store.gather(attr.attr_name, out.node,
                                                 out=buffer, timings=timings)
        for tier, seconds in timings.items():
            breakdown[f'feature_loading.{tier}'] += seconds
        return batch

    def buffer(self, shape: tuple, dtype: torch.dtype) -> Tensor:
        r"""A feature buffer: recycled, or pinned (from torch's caching host
        allocator, which keeps it until its copy is done) where the
        placement pins host buffers."""
        if self._pinned:
            return torch.empty(shape, dtype=dtype, pin_memory=True)
        return self._pool.empty(shape, dtype)
