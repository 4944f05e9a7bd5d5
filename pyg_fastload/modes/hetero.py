r"""What a model needs to know of a heterogeneous dataset
(:class:`HeteroSchema`): its node and edge types, the node type whose labels
it learns, each type's feature width or node count."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

from torch_geometric.data import HeteroData

from ..config import SettingError

__all__ = ['HeteroSchema', 'hetero_schema']


@dataclass(frozen=True)
class HeteroSchema:
    r"""The shape of a ``HeteroData`` a node classifier trains on.

    Args:
        node_types, edge_types: the graph's types (``data.metadata()``).
        target (str): the node type with labels ``y`` (the seeds' type).
        num_features (Dict[str, int]): feature width of every node type
            with features ``x``.
        num_nodes (Dict[str, int]): node count of every type (a model
            learns embeddings for types without features).
        num_classes (int): classes of the target's labels.
    """
    node_types: List[str]
    edge_types: List[Tuple[str, str, str]]
    target: str
    num_features: Dict[str, int]
    num_nodes: Dict[str, int]
    num_classes: int

    def metadata(self) -> Tuple[List[str], List[Tuple[str, str, str]]]:
        r"""PyG's ``(node_types, edge_types)`` (what ``to_hetero`` takes)."""
        return self.node_types, self.edge_types


def hetero_schema(data: HeteroData) -> HeteroSchema:
    r"""The schema of :obj:`data`: its one labelled node type is the
    target."""
    from .source import check_classes
    labelled = [t for t in data.node_types if 'y' in data[t]]
    if len(labelled) != 1:
        raise SettingError('dataset', f"a HeteroData to classify needs labels "
                           f"'y' on exactly one node type, found them on "
                           f"{labelled or 'none'}")
    target = labelled[0]
    store = data[target]
    num_nodes = {t: int(data[t].num_nodes) for t in data.node_types}
    num_classes = check_classes(store.y, num_nodes[target], None,
                                f"node type {target!r}")
    features = {t: int(data[t].x.size(-1)) for t in data.node_types
                if 'x' in data[t]}
    return HeteroSchema(list(data.node_types), list(data.edge_types),
                        target, features, num_nodes, num_classes)
