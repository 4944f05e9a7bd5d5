r"""What makes two processes' datasets the same one (:func:`data_identity`,
:func:`dataset_dir_identity`): ranks on several machines compare these at
start-up, so two copies of a dataset that share a name and sizes but not
their edges or features are told apart before anything trains."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Union

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from ..graph.kind import is_hetero
from .reader import read_meta

__all__ = ['data_identity', 'dataset_dir_identity', 'FULL_HASH_BYTES']

#: Tensors up to this size are hashed whole; a larger one (a feature
#: matrix) by its shape, dtype and :data:`SAMPLED_ROWS` rows spread evenly
#: over it, so start-up stays fast on graphs of many GiB.
FULL_HASH_BYTES = 256 << 20
SAMPLED_ROWS = 4096


def dataset_dir_identity(path: Union[str, Path]) -> str:
    r"""A dataset directory's identity: its ``meta.json`` (every array's
    SHA-256, sizes, types), whatever the pyg-fastload version that wrote
    it or where it lies.

    Args:
        path (str or pathlib.Path): the dataset directory.
    """
    path = Path(path)
    meta, _ = read_meta(path, True)
    meta = {k: v for k, v in meta.items() if k != 'created_by'}
    text = json.dumps(meta, sort_keys=True)
    return (f"dataset directory {meta.get('name')!r} (meta "
            f"{hashlib.sha256(text.encode()).hexdigest()[:16]})")


def _hash_tensor(sha: Any, name: str, value: Tensor) -> None:
    value = value.detach().cpu()
    sha.update(f'{name} {value.dtype} {list(value.shape)}'.encode())
    if value.layout != torch.strided:
        value = value.to_sparse_coo().coalesce()
        _hash_tensor(sha, f'{name}.indices', value.indices())
        _hash_tensor(sha, f'{name}.values', value.values())
        return
    if value.dim() > 0 and \
            value.numel() * value.element_size() > FULL_HASH_BYTES:
        rows = torch.linspace(0, value.size(0) - 1, SAMPLED_ROWS).long()
        value = value.index_select(0, rows)
    sha.update(value.contiguous().reshape(-1).view(torch.uint8).numpy())


def data_identity(data: Union[Data, HeteroData]) -> str:
    r"""A ``Data``'s or ``HeteroData``'s identity: a SHA-256 over every
    store's tensors (their names, dtypes, shapes and values; larger than
    :data:`FULL_HASH_BYTES`, sampled rows) and node counts.

    Args:
        data (Data or HeteroData): the graph.
    """
    sha = hashlib.sha256(f'nodes {data.num_nodes}'.encode())
    stores = [*data.node_items(), *data.edge_items()] \
        if is_hetero(data) else [(None, data.to_dict())]
    for key, store in stores:
        for name in sorted(store.keys()):
            value = store[name]
            if isinstance(value, Tensor):
                _hash_tensor(sha, f'{key}.{name}', value)
            elif isinstance(value, (int, float, str, bool)):
                sha.update(f'{key}.{name}={value!r}'.encode())
    return f'{type(data).__name__} (content {sha.hexdigest()[:16]})'
