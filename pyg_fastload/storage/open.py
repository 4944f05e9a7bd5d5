r"""Opening a prepared dataset directory as a ``(FeatureStore, GraphStore)``
pair ready for either loader."""
from __future__ import annotations

import os
from typing import List, Optional, Tuple, Union

import torch
from torch_geometric.data import Data

from ..config import Budget
from ..graph.convert import topology_of
from ..io import open_dataset_dir
from .feature_store import TieredFeatureStore
from .graph_store import CSCGraphStore

__all__ = ['open_dataset', 'stores_from_data']


def open_dataset(
    path: Union[str, os.PathLike],
    host_budget: Budget = None,
    device_budget: Budget = None,
    device: Optional[Union[str, torch.device]] = None,
    policy: str = 'out_degree',
    device_cache: str = 'static',
    window: int = 4,
    read_ahead: int = 0,
    in_memory: bool = False,
    num_neighbors: Optional[List[int]] = None,
    verify: str = 'size',
    progress: bool = True,
) -> Tuple[TieredFeatureStore, CSCGraphStore]:
    r"""Opens a directory written by ``pyg-fastload prepare``.

    Feature matrices stay on disk (memory-mapped, read row by row) unless
    :obj:`in_memory`; smaller node arrays (labels, masks) are mapped too.
    With budgets, the hottest rows by :obj:`policy` fill the device cache
    and the host buffer.

    Args:
        path: the dataset directory.
        host_budget: host buffer size (bytes, fraction or ``'2GiB'``).
        device_budget: device cache size, or ``'auto'``.
        device: where the device cache lives (default: CPU).
        policy (str): ``'out_degree'``, ``'reverse_pagerank'``,
            ``'presample'`` (samples from the train mask with
            :obj:`num_neighbors`) or ``'random'``.
        device_cache (str): ``'static'`` or ``'window'``.
        window (int): look-ahead of the window-buffered cache.
        read_ahead (int): batches of merged storage read-ahead (0: off).
        in_memory (bool): load the feature matrices into memory.
        verify (str): ``'none'``, ``'size'`` or ``'checksum'``.
    """
    dataset = open_dataset_dir(path, verify=verify)
    feature_store = TieredFeatureStore(device)
    for name, tensor in dataset.arrays.items():
        if tensor.dim() >= 2 and not in_memory:
            feature_store.put_mmap_tensor(str(dataset.array_path(name)),
                                          tensor.dtype, tensor.shape, name)
        else:
            value = tensor.clone() if in_memory else tensor
            feature_store.put_tensor(value, group_name=None, attr_name=name,
                                     index=None)
    graph_store = CSCGraphStore(dataset.topology)
    _configure(feature_store, graph_store, host_budget, device_budget,
               policy, device_cache, window, read_ahead, num_neighbors,
               progress)
    return feature_store, graph_store


def stores_from_data(
    data: Data,
    host_budget: Budget = None,
    device_budget: Budget = None,
    device: Optional[Union[str, torch.device]] = None,
    policy: str = 'out_degree',
    device_cache: str = 'static',
    window: int = 4,
    num_neighbors: Optional[List[int]] = None,
    progress: bool = True,
) -> Tuple[TieredFeatureStore, CSCGraphStore]:
    r"""Puts an in-memory :class:`~torch_geometric.data.Data` behind the
    same tiers as :func:`open_dataset` (storage in memory), so its feature
    rows are served and counted per tier.

    Every node attribute goes into the feature store (tensors are shared,
    not copied) and the topology into a :class:`CSCGraphStore`. Edge
    attributes other than ``edge_index`` cannot be held by the stores and
    raise an error. The remaining arguments are those of
    :func:`open_dataset`.
    """
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
    _configure(feature_store, graph_store, host_budget, device_budget,
               policy, device_cache, window, 0, num_neighbors, progress)
    return feature_store, graph_store


def _configure(feature_store: TieredFeatureStore, graph_store: CSCGraphStore,
               host_budget: Budget, device_budget: Budget, policy: str,
               device_cache: str, window: int, read_ahead: int,
               num_neighbors: Optional[List[int]], progress: bool) -> None:
    if host_budget is not None or device_budget is not None:
        names = {a.attr_name for a in feature_store.get_all_tensor_attrs()}
        train_nodes = None
        if 'train_mask' in names:
            train = feature_store.get_tensor(group_name=None,
                                             attr_name='train_mask',
                                             index=None)
            train_nodes = train.nonzero().view(-1)
        feature_store.configure_caches(
            graph_store.topology, policy=policy, host_budget=host_budget,
            device_budget=device_budget, device_cache=device_cache,
            window=window, train_nodes=train_nodes,
            num_neighbors=num_neighbors, progress=progress)
    if read_ahead:
        feature_store.set_read_ahead(read_ahead)
