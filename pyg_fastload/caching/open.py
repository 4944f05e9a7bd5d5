r"""Opening a prepared dataset directory, or putting an in-memory ``Data``,
behind the storage tiers as a ``(FeatureStore, GraphStore)`` pair with its
caches filled."""
from __future__ import annotations

import os
from typing import Any, Optional, Tuple, Union

import torch
from torch_geometric.data import Data

from ..config import FeatureCache
from ..graph.convert import topology_of
from ..graph.topology import CSCTopology
from ..io import open_dataset_dir
from ..storage import CSCGraphStore, TieredFeatureStore
from .hotness import Scores
from .planner import configure_caches

__all__ = ['open_dataset', 'stores_from_data']


def _cache_settings(cache: Optional[FeatureCache],
                    settings: Any) -> FeatureCache:
    if cache is not None and settings:
        raise TypeError(f"pass either 'cache' or the cache settings "
                        f"{sorted(settings)}, not both")
    if cache is None:
        return FeatureCache(**settings)
    if not isinstance(cache, FeatureCache):
        raise TypeError(f"'cache' must be a FeatureCache, got "
                        f"{type(cache).__name__}")
    return cache


def open_dataset(
    path: Union[str, os.PathLike],
    cache: Optional[FeatureCache] = None,
    *,
    device: Optional[Union[str, torch.device]] = None,
    scores: Optional[Scores] = None,
    verify: str = 'size',
    topology: Optional[CSCTopology] = None,
    **settings: Any,
) -> Tuple[TieredFeatureStore, CSCGraphStore]:
    r"""Opens a directory written by ``pyg-fastload prepare``.

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
        topology (CSCTopology, optional): serve this topology instead of the
            stored one (e.g. a part's, relabelled to its own rows); the
            hotness policies rank with it.
    """
    cache = _cache_settings(cache, settings)
    dataset = open_dataset_dir(path, verify=verify)
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
    for name, tensor in dataset.arrays.items():
        if tensor.dim() >= 2 and not cache.in_memory:
            feature_store.put_mmap_tensor(
                str(dataset.array_path(name)), tensor.dtype, tensor.shape,
                name, storage=cache.storage,
                in_flight=cache.reads_in_flight)
        else:
            value = tensor.clone() if cache.in_memory else tensor
            feature_store.put_tensor(value, group_name=None, attr_name=name,
                                     index=None)
    graph_store = CSCGraphStore(topology or dataset.topology)
    _configure(feature_store, graph_store, cache, scores)
    return feature_store, graph_store


def stores_from_data(
    data: Data,
    cache: Optional[FeatureCache] = None,
    *,
    device: Optional[Union[str, torch.device]] = None,
    scores: Optional[Scores] = None,
    **settings: Any,
) -> Tuple[TieredFeatureStore, CSCGraphStore]:
    r"""Puts an in-memory :class:`~torch_geometric.data.Data` behind the
    same tiers as :func:`open_dataset` (storage in memory), so its feature
    rows are served and counted per tier.

    Every node attribute goes into the feature store (tensors are shared,
    not copied) and the topology into a :class:`CSCGraphStore`. Edge
    attributes other than ``edge_index`` cannot be held by the stores and
    raise an error. The remaining arguments are those of
    :func:`open_dataset`; ``read_ahead`` and ``in_memory`` do not apply.
    """
    cache = _cache_settings(cache, settings)
    if not isinstance(data, Data):
        raise TypeError(f"'data' must be a torch_geometric.data.Data, got "
                        f"{type(data).__name__}")
    edge_attrs = [key for key in data.keys()
                  if key != 'edge_index' and data.is_edge_attr(key)]
    if edge_attrs:
        raise ValueError(f"the data object has edge attributes "
                         f"{sorted(edge_attrs)}, which the tiered stores do "
                         f"not hold; drop them or load the Data without "
                         f"feature caches")
    topology = topology_of(data)
    feature_store = TieredFeatureStore(device)
    for key, value in data.items():
        if isinstance(value, torch.Tensor) and data.is_node_attr(key):
            feature_store.put_tensor(value, group_name=None, attr_name=key,
                                     index=None)
    graph_store = CSCGraphStore(topology)
    _configure(feature_store, graph_store, cache, scores, read_ahead=False)
    return feature_store, graph_store


def _configure(feature_store: TieredFeatureStore, graph_store: CSCGraphStore,
               cache: FeatureCache, scores: Optional[Scores],
               read_ahead: bool = True) -> None:
    if cache.enabled:
        names = {a.attr_name for a in feature_store.get_all_tensor_attrs()}
        train_nodes = None
        if 'train_mask' in names:
            train = feature_store.get_tensor(group_name=None,
                                             attr_name='train_mask',
                                             index=None)
            train_nodes = train.nonzero().view(-1)
        configure_caches(feature_store, cache, graph_store.topology,
                         scores=scores, train_nodes=train_nodes)
    if read_ahead and cache.read_ahead:
        feature_store.set_read_ahead(cache.read_ahead)
