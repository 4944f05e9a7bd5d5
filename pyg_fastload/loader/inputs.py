r"""Checks of what a user hands the loader (seed nodes, features, times;
devices: :mod:`~pyg_fastload.placement`), with errors naming the argument,
the value and the fix."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import FeatureStore, HeteroData

from ..graph.convert import check_data_edge_rows
from ..graph.kind import is_data
from ..sampling import SamplerChoice

__all__ = ['check_input_nodes', 'check_hetero_input_nodes',
           'check_has_features', 'check_hetero_features',
           'check_sorted_by_destination', 'check_temporal',
           'check_input_time', 'prepare_sampler']


def check_input_nodes(input_nodes: Any, num_nodes: int) -> Optional[Tensor]:
    r"""Validates :obj:`input_nodes` (``None``, a boolean mask or an index:
    a tensor, or a list, tuple, range or NumPy array of ids, as PyG takes
    them) and returns it as a tensor."""
    if input_nodes is None:
        return None
    if isinstance(input_nodes, str) or (
            isinstance(input_nodes, (tuple, list)) and len(input_nodes) > 0
            and isinstance(input_nodes[0], str)):
        raise ValueError(
            f"'input_nodes={_shown(input_nodes)}' names a node type, which "
            f"only heterogeneous graphs have: this graph is homogeneous (a "
            f"Data, or stores of one node type); pass node ids or a mask, "
            f"or load a HeteroData")
    return _check_ids(input_nodes, num_nodes, 'this graph')


def check_hetero_input_nodes(input_nodes: Any, num_nodes: Dict[str, int]
                             ) -> Tuple[str, Optional[Tensor]]:
    r"""Validates a heterogeneous graph's :obj:`input_nodes`: a node type,
    or ``(node type, ids or mask or None)``; returns ``(type, tensor)``."""
    if isinstance(input_nodes, str):
        node_type, ids = input_nodes, None
    elif isinstance(input_nodes, (tuple, list)) and len(input_nodes) == 2 \
            and isinstance(input_nodes[0], str):
        node_type, ids = input_nodes
    else:
        raise ValueError(
            f"'input_nodes' of a HeteroData must name the seeds' node type: "
            f"'paper' or ('paper', ids or mask), got "
            f"{type(input_nodes).__name__}")
    if node_type not in num_nodes:
        raise ValueError(f"'input_nodes' names node type {node_type!r}, "
                         f"which the graph does not have (node types: "
                         f"{', '.join(map(repr, num_nodes))})")
    count = num_nodes[node_type]
    if ids is None:
        return node_type, torch.arange(count)
    return node_type, _check_ids(ids, count, f'node type {node_type!r}')


def _shown(value: Any, limit: int = 60) -> str:
    r""":obj:`value`'s ``repr``, cut to :obj:`limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _what(value: Any) -> str:
    r"""The kind of :obj:`value` in words (``a list``, ``a NumPy array of
    dtype float64``)."""
    if isinstance(value, np.ndarray):
        return f'a NumPy array of dtype {value.dtype}'
    name = 'tensor' if isinstance(value, Tensor) else type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _as_ids_tensor(input_nodes: Any) -> Tensor:
    r"""A list, tuple, range or NumPy array of :obj:`input_nodes` as a
    tensor, read as PyG reads it (``torch.tensor(nodes, dtype=torch.long)``:
    its values are node ids, booleans included), or an error naming the
    type and the fix where PyG fails or would read it wrongly."""
    what = _what(input_nodes)
    if isinstance(input_nodes, (int, float, np.generic)):
        value = input_nodes.item() if isinstance(input_nodes, np.generic) \
            else input_nodes
        raise TypeError(
            f"'input_nodes' is a single number ({value!r}, {what}), not a "
            f"sequence of node ids: pass input_nodes=[{value!r}] (or "
            f"torch.tensor([{value!r}])) for one seed, or None for all "
            f"nodes")
    if isinstance(input_nodes, np.ndarray):
        if input_nodes.dtype.kind not in 'biuf':
            raise TypeError(
                f"'input_nodes' is {what}: pass integer node ids (e.g. "
                f"input_nodes.astype(np.int64)) or a boolean mask tensor")
        # a copy where the array is reversed, strided or read-only
        tensor = torch.from_numpy(np.array(input_nodes, copy=True)) \
            if not input_nodes.flags.writeable or \
            not input_nodes.flags.c_contiguous else \
            torch.from_numpy(input_nodes)
    else:
        try:
            tensor = torch.as_tensor(input_nodes)
        except (TypeError, ValueError, RuntimeError) as error:
            raise TypeError(
                f"'input_nodes' is {what} that is not a sequence of node "
                f"ids ({error}): pass a 1-D list or tensor of integer ids, "
                f"e.g. torch.tensor([0, 5, 7]), or a boolean mask "
                f"tensor") from error
        if tensor.numel() == 0:  # PyG: an empty list is no seeds
            tensor = tensor.long()
    if tensor.dtype == torch.bool:
        kind = 'NumPy array' if isinstance(input_nodes, np.ndarray) else \
            type(input_nodes).__name__
        raise ValueError(
            f"'input_nodes' is a {kind} of booleans (a mask?), which PyG's "
            f"loaders read as node ids (True and False as ids 1 and 0): "
            f"to select nodes by mask pass it as a boolean tensor, "
            f"torch.as_tensor(mask), or pass the ids, e.g. "
            f"np.flatnonzero(mask)")
    if tensor.dtype.is_floating_point and tensor.numel() > 0:
        whole = torch.isfinite(tensor) & (tensor == tensor.round())
        if not bool(whole.all()):
            bad = tensor[~whole][0].item()
            raise TypeError(
                f"'input_nodes' is {what} holding {bad:g}, which is not a "
                f"node id: PyG would cut it to an integer; pass integer ids "
                f"(e.g. [int(v) for v in input_nodes])")
    return tensor


def _check_ids(input_nodes: Any, num_nodes: int, what: str) -> Tensor:
    if isinstance(input_nodes, (set, frozenset, dict)):
        raise TypeError(f"'input_nodes' is a {type(input_nodes).__name__}, "
                        f"which has no order: pass a tensor or a list (e.g. "
                        f"torch.tensor(sorted(input_nodes)))")
    given = input_nodes
    if not isinstance(input_nodes, Tensor):
        input_nodes = _as_ids_tensor(input_nodes)
    elif input_nodes.dim() == 0:
        raise TypeError(
            f"'input_nodes' is a tensor with no dimensions "
            f"({_shown(given)}): pass a 1-D tensor of node ids, e.g. "
            f"input_nodes.view(1), or None for all nodes")
    shape = list(input_nodes.shape)
    if len(shape) > 2 or (len(shape) == 2 and shape[1] != 1):
        hint = (' (an edge_index? loading around edges is link-level: '
                'FastLinkNeighborLoader(data, num_neighbors, '
                'edge_label_index=...))' if len(shape) == 2 and
                shape[0] == 2 else '')
        raise ValueError(
            f"'input_nodes' has shape {shape}{hint}: pass 1-D node ids, a "
            f"boolean mask with one entry per node, or a [num_seeds, 1] "
            f"column such as mask.nonzero()")
    if input_nodes.dtype == torch.bool:
        if input_nodes.numel() != num_nodes:
            raise ValueError(
                f"'input_nodes' is a boolean mask of length "
                f"{input_nodes.numel()}, but {what} has {num_nodes} nodes; "
                f"pass a mask with one entry per node or an index tensor")
        return input_nodes.reshape(-1)
    # whole floats of a list or NumPy array are ids, as PyG casts them; a
    # float tensor PyG's samplers refuse
    if input_nodes.dtype.is_complex or (
            input_nodes.dtype.is_floating_point and
            isinstance(given, Tensor)):
        raise TypeError(
            f"'input_nodes' is {_what(given)} of dtype {input_nodes.dtype}: "
            f"pass node ids as an integer tensor (e.g. torch.long) or a "
            f"boolean mask")
    if not input_nodes.dtype.is_floating_point:
        input_nodes = input_nodes.long()
    if input_nodes.numel() > 0:  # whole floats: checked before the cast
        low, high = input_nodes.min().item(), input_nodes.max().item()
        if low < 0 or high >= num_nodes:
            raise IndexError(
                f"'input_nodes' holds node id "
                f"{int(low) if low < 0 else int(high)}, outside [0, "
                f"{num_nodes}) for {what}")
    return input_nodes.reshape(-1).long()


def built(neighbor_sampler: Any) -> bool:
    r"""Whether a loader's :obj:`neighbor_sampler` is a sampler object (to
    reuse) rather than the choice of one to build (a name, a class, a
    ``class_path`` dict or :obj:`None`)."""
    return neighbor_sampler is not None and not isinstance(
        neighbor_sampler, (str, dict, type, SamplerChoice))


def prepare_sampler(sampler: Any, inputs: Any, batch_size: int,
                    drop_last: bool) -> None:
    r"""Hands a loader's seeds (its ``input_data``), batch size and
    whether it drops a last, smaller batch (:obj:`drop_last`) to its
    sampler, if the sampler takes them (``prepare``: GraphSAINT estimates
    its normalisation for them; other samplers need nothing)."""
    prepare = getattr(sampler, 'prepare', None)
    if prepare is not None:
        prepare(inputs, batch_size, drop_last=drop_last)


def check_temporal(input_time: Any, time_attr: Optional[str],
                   builds_sampler: bool) -> None:
    r"""Temporal arguments that agree with each other (PyG's rules; a given
    sampler brings its own times)."""
    if input_time is not None and time_attr is None and builds_sampler:
        raise ValueError("'input_time' was given but 'time_attr' was not: "
                         "name the node or edge attribute holding the "
                         "graph's times (e.g. time_attr='time')")


def check_input_time(input_time: Any, input_nodes: Optional[Tensor],
                     num_nodes: int) -> None:
    r""":obj:`input_time` holds one time per seed node."""
    if input_time is None:
        return
    if isinstance(input_nodes, tuple):  # (node type, ids) of a HeteroData
        input_nodes = input_nodes[1]
    if not isinstance(input_time, Tensor) or input_time.dim() != 1:
        shape = list(input_time.shape) if isinstance(input_time, Tensor) \
            else type(input_time).__name__
        raise ValueError(f"'input_time' must be a 1-D tensor with one time "
                         f"per seed node, got {shape}")
    if input_nodes is None:
        count = num_nodes
    elif input_nodes.dtype == torch.bool:
        count = int(input_nodes.sum())
    else:
        count = input_nodes.numel()
    if input_time.numel() != count:
        raise ValueError(f"'input_time' has {input_time.numel()} entries for "
                         f"{count} seed nodes: give one time per seed")


#: ``LinkNeighborLoader`` arguments, which a node loader does not take.
LINK_ARGUMENTS = ('edge_label_index', 'edge_label', 'edge_label_time',
                  'neg_sampling', 'neg_sampling_ratio')


def check_not_link(kwargs: Dict[str, Any]) -> None:
    r"""Refuses link-level arguments given to the node loader, naming the
    loader that takes them."""
    given = [k for k in LINK_ARGUMENTS if k in kwargs]
    if given:
        raise TypeError(
            f"FastNeighborLoader loads around seed nodes and takes no "
            f"{', '.join(repr(k) for k in given)}: for link-level loading "
            f"use pyg_fastload.FastLinkNeighborLoader (PyG's "
            f"LinkNeighborLoader's arguments); for nodes pass 'input_nodes'")


#: Attributes of a ``Data`` that hold one row per node by their name
#: (PyG's own node-level names).
NODE_KEYS = ('x', 'pos', 'feat', 'batch', 'node_type', 'n_id')


def check_has_features(data: Any, need_x: bool = True) -> None:
    r"""The node features ``x`` (needed unless not :obj:`need_x`, as PyG's
    link loader samples a graph without them) are a dense tensor, and every
    node attribute has one row per node."""
    if is_data(data, hetero=False):
        if ('x' not in data or data.x is None) and need_x:
            raise ValueError(
                "the data object has no node features 'x': set 'data.x' "
                "(a [num_nodes, num_features] tensor) before building the "
                "loader")
        x = data.x
        # a numpy array (a memmap: features larger than memory) is read
        # row by row per batch, as PyG reads it
        if x is not None and not isinstance(x, np.ndarray) and (
                not isinstance(x, Tensor) or x.layout != torch.strided or
                x.device.type == 'meta'):
            what = type(x).__name__ if not isinstance(x, Tensor) else (
                f'a {x.layout} tensor' if x.layout != torch.strided
                else 'a tensor on the meta device (no values)')
            raise ValueError(f"'data.x' is {what}: give a dense tensor "
                             f"with values (e.g. x.to_dense()) or a numpy "
                             f"array or memmap")
        num_nodes = data.num_nodes
        for key, value in data.items():
            # PyG decides by length (Data.is_node_attr): a node attribute
            # of another length would be served whole in every batch. Its
            # length is along PyG's concatenation dimension: an index such
            # as edge_label_index (a [2, N] tensor) is no node attribute.
            if not isinstance(value, (Tensor, np.ndarray)) or \
                    value.ndim < 1 or key.startswith('edge_'):
                continue
            rows_along_0 = data.__cat_dim__(key, value) in (0, -value.ndim)
            if (key in NODE_KEYS or (rows_along_0 and data.is_node_attr(
                    key))) and value.shape[0] != num_nodes:
                raise ValueError(
                    f"'data.{key}' has {value.shape[0]} rows but the graph "
                    f"has num_nodes = {num_nodes}; give every node one row "
                    f"(or fix 'data.num_nodes')")
        check_data_edge_rows(data)
        return
    feature_store: FeatureStore = data[0]
    names = {attr.attr_name for attr in feature_store.get_all_tensor_attrs()}
    if 'x' not in names:
        raise ValueError(f"the FeatureStore has no 'x' tensor (found "
                         f"{sorted(names)}); put the node features under "
                         f"attr_name='x'")


def check_hetero_features(data: HeteroData) -> None:
    r"""Every tensor of a node type (its node attributes) has one row per
    node of that type; types without features are fine (their nodes are
    only sampled)."""
    for node_type in data.node_types:
        store = data[node_type]
        count = store.num_nodes
        for key, value in store.items():
            if isinstance(value, Tensor) and value.dim() >= 1 and \
                    value.size(0) != count:
                raise ValueError(
                    f"data[{node_type!r}].{key} has {value.size(0)} rows but "
                    f"node type {node_type!r} has {count} nodes; give every "
                    f"node one row (or fix data[{node_type!r}].num_nodes)")


def check_sorted_by_destination(data: Any) -> None:
    r"""Checks the ``is_sorted=True`` claim: ``edge_index`` of a ``Data`` is
    sorted by destination (its second row), as PyG assumes without
    checking."""
    if not is_data(data, hetero=False):
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
