r"""Opening a prepared dataset directory, or putting an in-memory ``Data``,
behind the storage tiers as a ``(FeatureStore, GraphStore)`` pair with its
caches filled."""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from ..config import FeatureCache
from ..graph.convert import topology_of
from ..graph.hetero_topology import HeteroTopology
from ..graph.kind import is_data, is_hetero, is_topology
from ..graph.topology import CSCTopology
from ..io import (
    OnDiskDataset,
    open_dataset_dir,
)
from ..storage import CSCGraphStore, TieredFeatureStore, storage_kind
from .hotness import Scores
from .planner import configure_caches

__all__ = ['open_dataset', 'stores_from_data']


def _cache_settings(cache: Optional[FeatureCache],
                    settings: Any) -> FeatureCache:
    if cache is not None and settings:
        raise TypeError(f"pass either 'cache' or the cache settings "
                        f"{sorted(settings)}, not both")
    if cache is None:
        cache = FeatureCache(**settings)
    if not isinstance(cache, FeatureCache):
        raise TypeError(f"'cache' must be a FeatureCache, got "
                        f"{type(cache).__name__}")
    storage_kind(cache.storage)  # a registered kind, before any file opens
    return cache


def open_dataset(
    path: Union[str, os.PathLike],
    cache: Optional[FeatureCache] = None,
    *,
    device: Optional[Union[str, torch.device]] = None,
    scores: Optional[Scores] = None,
    verify: str = 'size',
    topology: Optional[Union[CSCTopology, HeteroTopology]] = None,
    rows_from: Optional[Tuple[OnDiskDataset, Tensor]] = None,
    **settings: Any,
) -> Tuple[TieredFeatureStore, CSCGraphStore]:
    r"""Opens a directory written by ``pyg-fastload prepare``.

    Node arrays go into the feature store, edge arrays (one row per edge,
    in CSC order; of a heterogeneous directory, per relation) into the
    graph store (:meth:`~pyg_fastload.storage.CSCGraphStore.edge_array`).
    Feature matrices stay on disk (memory-mapped, read directly with
    ``cache.storage='direct'``, or into GPU memory with ``'gds'``) unless
    ``cache.in_memory``; smaller node
    arrays (labels, masks) are memory-mapped (a direct 4 KiB read per label
    would read 500x the bytes).
    With budgets, the hottest rows by ``cache.policy`` fill the device cache
    and the host buffer.

    Args:
        path: the dataset directory.
        cache (FeatureCache, optional): the cache settings; or give them as
            keywords (``host_budget='10%', device_budget='auto',
            policy='reverse_pagerank', device_cache='window', window=4,
            read_ahead=0, in_memory=False``).
        device: where the device cache lives (default: CPU).
        scores (Scores, optional): what ranks the rows for the caches:
            :func:`~pyg_fastload.caching.loader_scores` with the loader's
            fan-outs and batch size (which ``policy='presample'`` and
            ``'expected_access'`` need), or precomputed scores.
        verify (str): ``'none'``, ``'size'`` or ``'checksum'``.
        topology (CSCTopology or HeteroTopology, optional): serve this
            topology instead of the stored one (e.g. a part's, relabelled to
            its own rows); the hotness policies rank with it.
        rows_from (tuple, optional): ``(dataset, rows)``: the feature
            matrices (arrays of two or more dimensions) that the directory
            lacks are rows :obj:`rows` of :obj:`dataset`'s, read from its
            files (a part of a ``--features source`` partition).

    Example:
        >>> from pyg_fastload import FastNeighborLoader, open_dataset
        >>> from pyg_fastload.datasets import prepare_synthetic
        >>> _ = prepare_synthetic('tiny', 'tiny-dir', progress=False)
        >>> store, graph = open_dataset('tiny-dir', host_budget='20%')
        >>> list(store.tiers('x'))  # the hottest fifth of x in memory
        ['host', 'storage']
        >>> loader = FastNeighborLoader((store, graph), [5, 5],
        ...                             batch_size=256)
        >>> next(iter(loader)).x.shape[1]
        16
    """
    cache = _cache_settings(cache, settings)
    dataset = hetero = open_dataset_dir(path, verify=verify)
    if is_topology(dataset.topology, hetero=True):
        if topology is not None and (
                not is_topology(topology, hetero=True) or
                {t: topology.num_nodes_of(t) for t in topology.node_types}
                != hetero.num_nodes):
            raise ValueError(f"'topology' must be a HeteroTopology with the "
                             f"node types and counts of the heterogeneous "
                             f"dataset '{path}' ({hetero.num_nodes})")
        feature_store = TieredFeatureStore(device)
        for node_type, arrays in hetero.arrays.items():
            _put_arrays(feature_store, arrays, cache, node_type,
                        lambda name, t=node_type: hetero.array_path(t, name))
        # each relation's edge arrays are in the stored topology's order
        graph_store = CSCGraphStore(topology) if topology is not None else \
            CSCGraphStore(hetero.topology, hetero.edge_arrays)
        _configure(feature_store, graph_store, cache, scores,
                   target=hetero.target)
        return feature_store, graph_store
    if topology is not None and topology.num_nodes != dataset.num_nodes:
        raise ValueError(f"'topology' has {topology.num_nodes} nodes, the "
                         f"dataset '{path}' {dataset.num_nodes}")
    space = dataset.meta.get('index_space', dataset.num_nodes)
    if topology is None and space != dataset.num_nodes:
        raise ValueError(f"'{path}' is a part of a partition: its neighbour "
                         f"ids index {space} nodes, it holds "
                         f"{dataset.num_nodes}; open it with pyg_fastload."
                         f"partition.open_partition (or give the partition "
                         f"directory to a partitioned mode)")
    feature_store = TieredFeatureStore(device)
    _put_arrays(feature_store, dataset.arrays, cache, None,
                dataset.array_path)
    if rows_from is not None:
        source, rows = rows_from
        if rows.numel() != dataset.num_nodes:
            raise ValueError(f"'rows_from' gives {rows.numel()} rows, "
                             f"'{path}' has {dataset.num_nodes}")
        _put_arrays(feature_store, {
            name: tensor for name, tensor in source.arrays.items()
            if tensor.dim() >= 2 and name not in dataset.arrays},
            cache, None, source.array_path, rows)
    # the edge arrays are in the stored topology's CSC order
    graph_store = CSCGraphStore(topology) if topology is not None else \
        CSCGraphStore(dataset.topology, dataset.edge_arrays)
    _configure(feature_store, graph_store, cache, scores)
    return feature_store, graph_store


def _put_arrays(store: TieredFeatureStore, arrays: Dict[str, Tensor],
                cache: FeatureCache, group: Optional[str],
                path_of: Any, rows: Optional[Tensor] = None) -> None:
    r"""Feature matrices read from their files (unless
    ``cache.in_memory``), smaller arrays memory-mapped; with :obj:`rows`,
    the arrays' rows :obj:`rows` only."""
    for name, tensor in arrays.items():
        if tensor.dim() >= 2 and not cache.in_memory:
            store.put_mmap_tensor(
                str(path_of(name)), tensor.dtype, tensor.shape, name,
                group_name=group, storage=cache.storage,
                in_flight=cache.reads_in_flight, rows=rows)
        elif rows is not None:
            store.put_tensor(tensor[rows], group_name=group, attr_name=name,
                             index=None)
        else:
            value = tensor.clone() if cache.in_memory else tensor
            store.put_tensor(value, group_name=group, attr_name=name,
                             index=None)


def stores_from_data(
    data: Union[Data, HeteroData],
    cache: Optional[FeatureCache] = None,
    *,
    device: Optional[Union[str, torch.device]] = None,
    scores: Optional[Scores] = None,
    **settings: Any,
) -> Tuple[TieredFeatureStore, CSCGraphStore]:
    r"""Puts an in-memory :class:`~torch_geometric.data.Data` or
    :class:`~torch_geometric.data.HeteroData` behind the same tiers as
    :func:`open_dataset` (storage in memory), so its feature rows are
    served and counted per tier.

    Every node attribute goes into the feature store (tensors are shared,
    not copied; per node type as its group) and the topology into a
    :class:`CSCGraphStore`. Edge
    attributes other than ``edge_index`` cannot be held by the stores and
    raise an error. The remaining arguments are those of
    :func:`open_dataset`; ``read_ahead`` and ``in_memory`` do not apply.

    Args:
        data (Data or HeteroData): the in-memory graph.
        cache (FeatureCache, optional): host and device cache budgets and
            policy. (default: no caches)
        device (str or torch.device, optional): the device cache's device.
        scores (Scores, optional): hotness per node, or the function
            computing the policy's (:func:`loader_scores`).
        **settings: :class:`FeatureCache` fields given as keywords.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload import stores_from_data
        >>> data = Data(x=torch.randn(4, 3),
        ...             edge_index=torch.tensor([[0, 1], [1, 2]]))
        >>> feature_store, graph_store = stores_from_data(data)
        >>> list(feature_store.tiers('x'))  # no cache asked for
        ['storage']
    """
    cache = _cache_settings(cache, settings)
    if not is_data(data):
        raise TypeError(f"'data' must be a torch_geometric Data or "
                        f"HeteroData, got {type(data).__name__}")
    hetero = is_hetero(data)
    stores = data.edge_stores if hetero else [data]
    edge_attrs = sorted({key for store in stores for key in store.keys()
                         if key != 'edge_index' and store.is_edge_attr(key)})
    if edge_attrs:
        raise ValueError(f"the data object has edge attributes "
                         f"{edge_attrs}, which the tiered stores do "
                         f"not hold; drop them or load the data without "
                         f"feature caches")
    topology = topology_of(data)
    feature_store = TieredFeatureStore(device)
    target = None
    node_stores = [(t, data[t]) for t in data.node_types] if hetero else \
        [(None, data)]
    for group, store in node_stores:
        for key, value in store.items():
            if isinstance(value, torch.Tensor) and store.is_node_attr(key):
                feature_store.put_tensor(value, group_name=group,
                                         attr_name=key, index=None)
        if group is not None and 'y' in store:
            target = group
    graph_store = CSCGraphStore(topology)
    _configure(feature_store, graph_store, cache, scores, read_ahead=False,
               target=target)
    return feature_store, graph_store


def _configure(feature_store: TieredFeatureStore, graph_store: CSCGraphStore,
               cache: FeatureCache, scores: Optional[Scores],
               read_ahead: bool = True, target: Optional[str] = None) -> None:
    topology = graph_store.topology
    hetero = is_hetero(topology)
    if cache.enabled:
        names = {(a.group_name, a.attr_name)
                 for a in feature_store.get_all_tensor_attrs()}
        train_nodes = None
        if (target, 'train_mask') in names:
            train = feature_store.get_tensor(group_name=target,
                                             attr_name='train_mask',
                                             index=None)
            train_nodes = train.nonzero().view(-1)
            if hetero:  # global ids
                train_nodes = train_nodes + topology.node_offset[
                    topology.node_types.index(target)]
        configure_caches(feature_store, cache, topology,
                         scores=scores, train_nodes=train_nodes)
    if read_ahead and cache.read_ahead:
        feature_store.set_read_ahead(cache.read_ahead)
