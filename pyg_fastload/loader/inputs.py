r"""Checks of what a user hands the loader (seed nodes, device, features),
with errors naming the argument, the value and the fix."""
from __future__ import annotations

from typing import Any, Optional, Union

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data, FeatureStore

from ..errors import HETERO_UNSUPPORTED

__all__ = ['check_input_nodes', 'check_device', 'check_has_features',
           'check_sorted_by_destination']


def check_input_nodes(input_nodes: Any, num_nodes: int) -> Optional[Tensor]:
    r"""Validates :obj:`input_nodes` (``None``, a boolean mask or an index)
    and returns it as a tensor."""
    if input_nodes is None:
        return None
    if isinstance(input_nodes, str) or isinstance(input_nodes, tuple):
        raise NotImplementedError(
            f"'input_nodes={input_nodes!r}' names a node type, which only "
            f"heterogeneous graphs have. " + HETERO_UNSUPPORTED)
    if isinstance(input_nodes, (set, frozenset, dict)):
        raise TypeError(f"'input_nodes' is a {type(input_nodes).__name__}, "
                        f"which has no order: pass a tensor or a list (e.g. "
                        f"torch.tensor(sorted(input_nodes)))")
    if isinstance(input_nodes, np.ndarray):
        input_nodes = torch.from_numpy(input_nodes)
    elif not isinstance(input_nodes, Tensor):
        input_nodes = torch.as_tensor(input_nodes)
    if input_nodes.dtype == torch.bool:
        if input_nodes.numel() != num_nodes:
            raise ValueError(
                f"'input_nodes' is a boolean mask of length "
                f"{input_nodes.numel()}, but the graph has {num_nodes} nodes; "
                f"pass a mask with one entry per node or an index tensor")
        return input_nodes.view(-1)
    if input_nodes.dtype.is_floating_point or input_nodes.dtype.is_complex:
        raise TypeError(
            f"'input_nodes' has dtype {input_nodes.dtype}: pass node ids as "
            f"an integer tensor (e.g. torch.long) or a boolean mask")
    input_nodes = input_nodes.view(-1).long()
    if input_nodes.numel() > 0:
        low, high = int(input_nodes.min()), int(input_nodes.max())
        if low < 0 or high >= num_nodes:
            raise IndexError(
                f"'input_nodes' holds node id {low if low < 0 else high}, "
                f"outside [0, {num_nodes}) for this graph")
    return input_nodes


def check_device(device: Optional[Union[str, torch.device]],
                  num_workers: int) -> Optional[torch.device]:
    r"""Validates the loader's :obj:`device`."""
    if device is None:
        return None
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"'device={device!r}' is not a torch device: pass "
                         f"None, 'cpu' or 'cuda[:index]'") from error
    if device.type not in ('cpu', 'cuda'):
        raise ValueError(f"'device={device}' is not supported: pass None, "
                         f"'cpu' or 'cuda[:index]'")
    if device.type == 'cuda':
        if not torch.cuda.is_available():
            raise ValueError(f"'device={device}' needs CUDA, which this "
                             f"PyTorch build or machine lacks: pass None or "
                             f"'cpu'")
        if device.index is None:
            device = torch.device('cuda', torch.cuda.current_device())
        if num_workers > 0:
            raise ValueError(f"'device={device}' needs 'num_workers=0' (got "
                             f"{num_workers}): the loader's own pipeline "
                             f"moves batches; with worker processes, move "
                             f"them in the training loop")
    return device


def check_has_features(data: Any) -> None:
    if isinstance(data, Data):
        if 'x' not in data or data.x is None:
            raise ValueError(
                "the data object has no node features 'x': set 'data.x' "
                "(a [num_nodes, num_features] tensor) before building the "
                "loader")
        x = data.x
        if not isinstance(x, Tensor) or x.layout != torch.strided or \
                x.device.type == 'meta':
            what = type(x).__name__ if not isinstance(x, Tensor) else (
                f'a {x.layout} tensor' if x.layout != torch.strided
                else 'a tensor on the meta device (no values)')
            raise ValueError(f"'data.x' is {what}: give a dense tensor "
                             f"with values (e.g. x.to_dense())")
        num_nodes = data.num_nodes
        for key, value in data.items():
            if (key == 'x' or data.is_node_attr(key)) and isinstance(
                    value, Tensor) and value.dim() >= 1 and \
                    value.size(0) != num_nodes:
                raise ValueError(
                    f"'data.{key}' has {value.size(0)} rows but the graph "
                    f"has num_nodes = {num_nodes}; give every node one row "
                    f"(or fix 'data.num_nodes')")
        return
    feature_store: FeatureStore = data[0]
    names = {attr.attr_name for attr in feature_store.get_all_tensor_attrs()}
    if 'x' not in names:
        raise ValueError(f"the FeatureStore has no 'x' tensor (found "
                         f"{sorted(names)}); put the node features under "
                         f"attr_name='x'")


def check_sorted_by_destination(data: Any) -> None:
    r"""Checks the ``is_sorted=True`` claim: ``edge_index`` of a ``Data`` is
    sorted by destination (its second row), as PyG assumes without
    checking."""
    if not isinstance(data, Data):
        raise ValueError("'is_sorted=True' describes a Data's 'edge_index'; "
                         "a (FeatureStore, GraphStore) tuple keeps its own "
                         "order: leave 'is_sorted' at False")
    col = data.edge_index[1]
    if col.numel() > 1 and bool((col[1:] < col[:-1]).any()):
        first = int((col[1:] < col[:-1]).nonzero()[0]) + 1
        raise ValueError(
            f"'is_sorted=True', but 'edge_index' is not sorted by destination "
            f"(edge {first} has destination {int(col[first])} after "
            f"{int(col[first - 1])}); sort it (e.g. torch_geometric.utils."
            f"sort_edge_index(edge_index, sort_by_row=False)) or pass "
            f"is_sorted=False")
