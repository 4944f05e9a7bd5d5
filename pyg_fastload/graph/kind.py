r"""What kind of graph this is, answered here and nowhere else: the
input of a loader or sampler (:func:`graph_input`, as PyG's
``DataType.from_data`` answers it for its loaders: a ``Data``, a
``HeteroData`` or a ``(FeatureStore, GraphStore)`` pair), a graph in
memory (:func:`is_data`), a topology (:func:`is_topology`), a sampler's
output (:func:`is_sampler_output`), and whether any of them is
heterogeneous (:func:`is_hetero`: several node or edge types).

A dataset directory's kind is the same :class:`GraphInput` (the stores
it opens into), read from the on-disk format by the layer that owns it:
:func:`pyg_fastload.io.dataset_dir_kind`. ``tests/
test_architecture_kind.py`` fails on a data-kind ``isinstance`` anywhere
else (a partition book answers its own kind:
:attr:`pyg_fastload.partition.PartitionBook.hetero`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput

from .hetero_topology import HeteroTopology
from .topology import CSCTopology

__all__ = ['GraphInput', 'graph_input', 'stores_of', 'is_hetero', 'is_data',
           'is_topology', 'is_sampler_output']


@dataclass(frozen=True)
class GraphInput:
    r"""The kind of a loader's or sampler's graph.

    Attributes:
        hetero (bool): several node or edge types (a ``HeteroData``, or
            stores whose relations are typed).
        stores (bool): a ``(FeatureStore, GraphStore)`` pair (a dataset
            directory opens into one), else a ``Data`` or ``HeteroData`` in
            memory.
    """
    hetero: bool
    stores: bool


def stores_of(data: Any) -> Optional[Tuple[FeatureStore, GraphStore]]:
    r"""``(feature_store, graph_store)`` when :obj:`data` is such a pair
    (a tuple or a list, as PyG takes), else :obj:`None`.

    Args:
        data: anything; a pair of a ``FeatureStore`` and a ``GraphStore`` is
            recognised.
    """
    if isinstance(data, (tuple, list)) and len(data) == 2 and \
            isinstance(data[0], FeatureStore) and \
            isinstance(data[1], GraphStore):
        return data[0], data[1]
    return None


def graph_input(data: Any, name: str = 'data') -> GraphInput:
    r"""The kind of :obj:`data`; anything else is refused with a
    ``TypeError`` naming the argument :obj:`name`.

    Args:
        data: a ``Data``, a ``HeteroData`` or a ``(FeatureStore, GraphStore)``
            pair.
        name (str): the argument's name, for the error.

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


def _kind_matches(hetero: bool, wanted: Optional[bool]) -> bool:
    return wanted is None or hetero == wanted


def is_data(obj: Any, hetero: Optional[bool] = None) -> bool:
    r"""Whether :obj:`obj` is a graph in memory: a ``Data`` or a
    ``HeteroData`` (a batch of either included); of that kind only where
    :obj:`hetero` is given.

    Args:
        obj: anything.
        hetero (bool, optional): :obj:`True`: a ``HeteroData`` only;
            :obj:`False`: a ``Data`` only; :obj:`None`: either.

    Example:
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload.graph import is_data
        >>> is_data(Data()), is_data(Data(), hetero=True)
        (True, False)
    """
    if isinstance(obj, HeteroData):
        return _kind_matches(True, hetero)
    return isinstance(obj, Data) and _kind_matches(False, hetero)


def is_topology(obj: Any, hetero: Optional[bool] = None) -> bool:
    r"""Whether :obj:`obj` is a :class:`CSCTopology` or a
    :class:`HeteroTopology`; of that kind only where :obj:`hetero` is
    given.

    Args:
        obj: anything.
        hetero (bool, optional): :obj:`True`: a :class:`HeteroTopology` only;
            :obj:`False`: a :class:`CSCTopology` only; :obj:`None`: either.

    Example:
        >>> import torch
        >>> from pyg_fastload.graph import CSCTopology, is_topology
        >>> topo = CSCTopology.from_edge_index(torch.tensor([[0], [1]]))
        >>> is_topology(topo), is_topology(topo, hetero=True)
        (True, False)
    """
    if isinstance(obj, HeteroTopology):
        return _kind_matches(True, hetero)
    return isinstance(obj, CSCTopology) and _kind_matches(False, hetero)


def is_sampler_output(obj: Any, hetero: Optional[bool] = None) -> bool:
    r"""Whether :obj:`obj` is a sampler's output: a ``SamplerOutput`` or
    a ``HeteroSamplerOutput``; of that kind only where :obj:`hetero` is
    given.

    Args:
        obj (Any): what a sampler or a ``filter_fn`` handed over.
        hetero (bool, optional): ``True`` asks for a
            ``HeteroSamplerOutput``, ``False`` for a ``SamplerOutput``,
            ``None`` for either.

    Example:
        >>> import torch
        >>> from torch_geometric.sampler import SamplerOutput
        >>> from pyg_fastload.graph import is_sampler_output
        >>> out = SamplerOutput(torch.arange(2), torch.tensor([0]),
        ...                     torch.tensor([1]), None)
        >>> is_sampler_output(out), is_sampler_output(out, hetero=True)
        (True, False)
    """
    if isinstance(obj, HeteroSamplerOutput):
        return _kind_matches(True, hetero)
    return isinstance(obj, SamplerOutput) and _kind_matches(False, hetero)


def is_hetero(graph: Any, name: str = 'data') -> bool:
    r"""Whether :obj:`graph` (a ``Data`` or ``HeteroData``, a
    ``(FeatureStore, GraphStore)`` pair or a topology) has several node or
    edge types; anything else is refused with a ``TypeError`` naming the
    argument :obj:`name`.

    Args:
        graph: a graph in any of the forms above.
        name (str): the argument's name, for the error.

    Example:
        >>> from torch_geometric.data import HeteroData
        >>> from pyg_fastload.graph import is_hetero
        >>> is_hetero(HeteroData())
        True
    """
    if is_topology(graph):
        return is_topology(graph, hetero=True)
    if is_data(graph) or stores_of(graph) is not None:
        return graph_input(graph).hetero
    raise TypeError(f"'{name}' must be a torch_geometric.data.Data, a "
                    f"HeteroData, a (FeatureStore, GraphStore) tuple, a "
                    f"CSCTopology or a HeteroTopology, got "
                    f"{type(graph).__name__}")
