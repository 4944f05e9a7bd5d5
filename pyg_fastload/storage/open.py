r"""Opening a prepared dataset directory as a ``(FeatureStore, GraphStore)``
pair ready for either loader."""
from __future__ import annotations

import os
from typing import List, Optional, Tuple, Union

import torch

from ..datasets.ondisk import open_dataset_dir
from .budget import Budget
from .feature_store import TieredFeatureStore
from .graph_store import CSCGraphStore

__all__ = ['open_dataset']


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
    if host_budget is not None or device_budget is not None:
        train = dataset.arrays.get('train_mask')
        train_nodes = None if train is None else train.nonzero().view(-1)
        feature_store.configure_caches(
            dataset.topology, policy=policy, host_budget=host_budget,
            device_budget=device_budget, device_cache=device_cache,
            window=window, train_nodes=train_nodes,
            num_neighbors=num_neighbors, progress=progress)
    if read_ahead:
        feature_store.set_read_ahead(read_ahead)
    return feature_store, graph_store
