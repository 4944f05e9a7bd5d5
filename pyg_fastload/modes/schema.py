r"""What a model needs to know of a dataset: its number of classes
(:func:`check_classes`) and, heterogeneous, its :class:`HeteroSchema`: its
node and edge types, the node type whose labels it learns, each type's
feature width or node count."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from ..config import SettingError
from ..graph.kind import graph_input
from ..io import DatasetFormatError, open_dataset_dir

__all__ = ['HeteroSchema', 'hetero_schema', 'directory_schema',
           'target_of', 'check_classes']


def check_classes(y: Optional[Tensor], num_nodes: int,
                  num_classes: Optional[int], where: str,
                  labelled: bool = True) -> int:
    r"""The number of classes of node labels :obj:`y`, checked before a
    model allocates one output per class: labels are class indices in
    ``[0, num_classes)`` (default: up to the largest label), and there are
    no more classes than nodes."""
    if y is None or y.numel() == 0:
        if not labelled:  # links: labels only if the dataset has them
            return 0
        raise SettingError('dataset', f"{where} has no node labels 'y'")
    if y.dtype.is_floating_point or y.dtype == torch.bool:
        raise SettingError('dataset', f"{where}: labels 'y' are {y.dtype}; "
                           f"give class indices as integers")
    low, high = int(y.min()), int(y.max())
    if low < 0:
        raise SettingError('dataset', f"{where}: label {low} is negative; "
                           f"labels are class indices 0..C-1")
    count = high + 1 if num_classes is None else num_classes
    if high >= count:
        raise SettingError('dataset', f"{where}: label {high} is not below "
                           f"'num_classes' = {count}")
    if count > max(num_nodes, 1):
        raise SettingError('dataset', f"{where}: {count:,} classes (label "
                           f"{high:,}) for {num_nodes:,} nodes; labels must "
                           f"be class indices 0..C-1 (relabel them with "
                           f"torch.unique(y, return_inverse=True))")
    return count


@dataclass(frozen=True)
class HeteroSchema:
    r"""The shape of a ``HeteroData`` a node classifier trains on.

    Args:
        node_types, edge_types: the graph's types (``data.metadata()``).
        target (str, optional): the node type with labels ``y`` (the
            seeds' type); :obj:`None` for a graph without labels (link
            prediction).
        num_features (Dict[str, int]): feature width of every node type
            with features ``x``.
        num_nodes (Dict[str, int]): node count of every type (a model
            learns embeddings for types without features).
        num_classes (int): classes of the target's labels.
    """
    node_types: List[str]
    edge_types: List[Tuple[str, str, str]]
    target: Optional[str]
    num_features: Dict[str, int]
    num_nodes: Dict[str, int]
    num_classes: int

    def metadata(self) -> Tuple[List[str], List[Tuple[str, str, str]]]:
        r"""PyG's ``(node_types, edge_types)`` (what ``to_hetero`` takes)."""
        return self.node_types, self.edge_types

    def to_dict(self) -> Dict[str, Any]:
        r"""Plain lists and dicts (YAML- and JSON-safe; edge types as
        lists), read back by :meth:`from_dict`."""
        return {'node_types': list(self.node_types),
                'edge_types': [list(e) for e in self.edge_types],
                'target': self.target,
                'num_features': dict(self.num_features),
                'num_nodes': dict(self.num_nodes),
                'num_classes': self.num_classes}

    @classmethod
    def from_dict(cls, value: Dict[str, Any]) -> 'HeteroSchema':
        r"""The schema :meth:`to_dict` wrote."""
        features, nodes = value['num_features'], value['num_nodes']
        schema = cls(list(value['node_types']),
                     [tuple(e) for e in value['edge_types']],
                     None if value['target'] is None
                     else str(value['target']),
                     {str(k): int(v) for k, v in features.items()},
                     {str(k): int(v) for k, v in nodes.items()},
                     int(value['num_classes']))
        if (schema.target is not None and
                schema.target not in schema.node_types) or any(
                len(e) != 3 for e in schema.edge_types):
            raise ValueError(f"target {schema.target!r} or edge types "
                             f"{schema.edge_types} do not fit node types "
                             f"{schema.node_types}")
        return schema


def hetero_schema(data: HeteroData, labelled: bool = True) -> HeteroSchema:
    r"""The schema of :obj:`data`: its one labelled node type is the
    target (without :obj:`labelled`, a graph with no labelled type gets
    none: what link prediction needs).

    Args:
        data (HeteroData): the graph.
        labelled (bool): require exactly one labelled node type.
    """
    types = [t for t in data.node_types if 'y' in data[t]]
    num_nodes = {t: int(data[t].num_nodes) for t in data.node_types}
    features = {t: int(data[t].x.size(-1)) for t in data.node_types
                if 'x' in data[t]}
    if len(types) != 1:
        if not labelled:
            return HeteroSchema(list(data.node_types),
                                list(data.edge_types), None, features,
                                num_nodes, 0)
        raise SettingError('dataset', f"a HeteroData to classify needs labels "
                           f"'y' on exactly one node type, found them on "
                           f"{types or 'none'}")
    target = types[0]
    num_classes = check_classes(data[target].y, num_nodes[target], None,
                                f"node type {target!r}")
    return HeteroSchema(list(data.node_types), list(data.edge_types),
                        target, features, num_nodes, num_classes)


def directory_schema(path: Path, labelled: bool = True) -> HeteroSchema:
    r"""The schema of a heterogeneous dataset directory (read from its
    ``meta.json`` and array shapes; labels checked; without
    :obj:`labelled`, a directory without labels gets no target)."""
    try:
        dataset = open_dataset_dir(path, verify='none')
        num_classes = dataset.num_classes
    except DatasetFormatError as error:
        raise SettingError('dataset', str(error)) from None
    target = dataset.target
    num_nodes = dataset.num_nodes
    features = {t: int(a['x'].shape[-1]) if a['x'].dim() > 1 else 1
                for t, a in dataset.arrays.items() if 'x' in a}
    if target is None:
        if not labelled:
            return HeteroSchema(dataset.node_types, dataset.edge_types,
                                None, features, num_nodes, 0)
        raise SettingError('dataset', f"'{path}' names no labelled node "
                           f"type: a heterogeneous dataset to classify needs "
                           f"labels 'y' on exactly one node type")
    num_classes = check_classes(dataset.arrays[target].get('y'),
                                num_nodes[target], num_classes,
                                f"node type {target!r} of '{path}'")
    return HeteroSchema(dataset.node_types, dataset.edge_types, target,
                        features, num_nodes, num_classes)


def target_of(data: Any, schema: Optional[HeteroSchema]) -> Optional[str]:
    r"""The node type a loader over :obj:`data` draws seeds of: the
    labelled type of a ``HeteroData`` or of heterogeneous stores,
    :obj:`None` for a homogeneous graph."""
    kind = graph_input(data)
    if not kind.hetero:
        return None
    if not kind.stores:
        return hetero_schema(data).target
    return None if schema is None else schema.target
