r"""What kind of graph came in, answered once (:func:`graph_input`), as
PyG's ``DataType.from_data`` answers it for its loaders: a ``Data``, a
``HeteroData`` or a ``(FeatureStore, GraphStore)`` pair, and whether it is
heterogeneous (several node or edge types)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData

__all__ = ['GraphInput', 'graph_input', 'stores_of']


@dataclass(frozen=True)
class GraphInput:
    r"""The kind of a loader's or sampler's graph.

    Attributes:
        hetero (bool): several node or edge types (a ``HeteroData``, or
            stores whose relations are typed).
        stores (bool): a ``(FeatureStore, GraphStore)`` pair, else a
            ``Data`` or ``HeteroData`` in memory.
    """
    hetero: bool
    stores: bool


def stores_of(data: Any) -> Optional[Tuple[FeatureStore, GraphStore]]:
    r"""``(feature_store, graph_store)`` when :obj:`data` is such a pair
    (a tuple or a list, as PyG takes), else :obj:`None`."""
    if isinstance(data, (tuple, list)) and len(data) == 2 and \
            isinstance(data[0], FeatureStore) and \
            isinstance(data[1], GraphStore):
        return data[0], data[1]
    return None


def graph_input(data: Any, name: str = 'data') -> GraphInput:
    r"""The kind of :obj:`data`; anything else is refused with a
    ``TypeError`` naming the argument :obj:`name`.

    Example:
        >>> from torch_geometric.data import HeteroData
        >>> from pyg_fastload.graph import graph_input
        >>> graph_input(HeteroData())
        GraphInput(hetero=True, stores=False)
    """
    if isinstance(data, HeteroData):
        return GraphInput(hetero=True, stores=False)
    if isinstance(data, Data):
        return GraphInput(hetero=False, stores=False)
    stores = stores_of(data)
    if stores is None:
        raise TypeError(f"'{name}' must be a torch_geometric.data.Data, a "
                        f"HeteroData or a (FeatureStore, GraphStore) tuple, "
                        f"got {type(data).__name__}")
    typed = any(attr.edge_type is not None
                for attr in stores[1].get_all_edge_attrs())
    return GraphInput(hetero=typed, stores=True)
