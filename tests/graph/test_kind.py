r"""The kind of graph a loader gets is answered by one function, as PyG's
``DataType.from_data`` does: in memory or stores, typed or not."""
import pytest
import torch
from torch_geometric.data import Data

from pyg_fastload.caching import stores_from_data
from pyg_fastload.graph import GraphInput, graph_input, stores_of

from ..helpers import random_hetero_graph


def test_each_input_is_told_apart():
    data = Data(x=torch.randn(5, 2), edge_index=torch.tensor([[0, 1],
                                                              [1, 2]]))
    hetero = random_hetero_graph()
    assert graph_input(data) == GraphInput(hetero=False, stores=False)
    assert graph_input(hetero) == GraphInput(hetero=True, stores=False)
    pair = stores_from_data(data)
    assert graph_input(pair) == GraphInput(hetero=False, stores=True)
    assert graph_input(list(pair)) == GraphInput(hetero=False, stores=True)
    assert stores_of(list(pair)) == tuple(pair)
    typed = stores_from_data(hetero)
    assert graph_input(typed) == GraphInput(hetero=True, stores=True)
    assert stores_of(data) is None
    assert stores_of((pair[1], pair[0])) is None  # the order PyG takes


@pytest.mark.parametrize('bad', [None, (1, 2), [torch.zeros(2)], 'cora'])
def test_anything_else_is_refused_naming_the_argument(bad):
    with pytest.raises(TypeError, match=r"^'graph' must be a torch_geometric"
                       r"\.data\.Data, a HeteroData or a \(FeatureStore, "
                       r"GraphStore\) tuple, got "):
        graph_input(bad, 'graph')
